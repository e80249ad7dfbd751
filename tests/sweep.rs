//! Sweep behaviour against a real server: moves into the claimant's inbox (a move is not a
//! delivery: the count stays), the inbox waiting for a reader, dead-letters, deletions, untouched
//! entries, cursor coverage across ticks, missing and wrong-type keys, skipped scans, and how sweep
//! effects reach replicas and the AOF; then `RECLAIM.SWEEP` and `RECLAIM.STATS` as commands: their
//! exact replies (RESP2; RESP3 in tests/policy.rs), every rejected input with its exact error, a
//! binary claimant, and the write access to the DLQ a sweep needs (ACL). Deliveries after a move
//! are made by a worker reading with RECLAIM.READGROUP (the kit's `take_inbox`), one each.
//!
//! Timing: the tests use the timer with small INTERVALs and poll with `wait_for` for a state or a
//! progress counter (passes, steps), never for a duration. Exact replies come from fixtures
//! (`XCLAIM ... IDLE ms RETRYCOUNT n JUSTID` sets idle and delivery count exactly) swept with
//! RECLAIM.SWEEP under a policy whose timer pass is an hour away (`quiet_policy`).

use reclaim_testkit::*;

/// A dead consumer's entries move to the claimant's inbox with their count unchanged (a move is
/// not a delivery), and wait there; a worker's read hands them over again: their second delivery.
/// One stream entry of an XREADGROUP reply: its ID and its fields.
type Entry = (String, Vec<Value>);

#[test]
fn dead_consumer_entries_go_to_the_claimant_with_their_count() {
    let s = Server::new();
    let mut c = s.conn();
    run(
        &mut c,
        &["XGROUP", "CREATE", "orders", "workers", "$", "MKSTREAM"],
    );
    add_numbered(&mut c, "orders", 5);
    deliver(&mut c, "orders", "workers", "c1", None);
    // The consumer "dies": it never acknowledges.
    set_policy_opts(&mut c, "orders", "workers", "MIN-IDLE 200 INTERVAL 50");
    let p = wait_for(10, "all 5 entries moved to the inbox", || {
        let p = pending(&mut c, "orders", "workers");
        p.iter().all(|e| e.consumer == "reclaim").then_some(p)
    });
    assert_eq!(p.len(), 5);
    assert!(p.iter().all(|e| e.count == 1), "{p:?}");
    let st = stats(&mut c, "orders", "workers");
    assert_eq!(int_field(&st, "claimed"), 5, "{st:?}");
    assert_eq!(int_field(&st, "inbox"), 5, "{st:?}");
    // The inbox waits for a reader: passes move nothing again.
    wait_passes(&mut c, "orders", "workers", 3);
    assert_eq!(pending(&mut c, "orders", "workers").len(), 5);
    assert_eq!(stat(&mut c, "orders", "workers", "claimed"), 5);
    // A worker takes them: count 2, each.
    let got = take_inbox(&mut c, "orders", "workers", "reclaim", "w", 5);
    assert!(got.iter().all(|(_, n)| *n == 2), "{got:?}");
    assert_eq!(stat(&mut c, "orders", "workers", "redelivered"), 5);
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// `XGROUP CREATE s g 0 MKSTREAM`.
fn group(c: &mut Connection, s: &str, g: &str) {
    let _: () = q(c, &["XGROUP", "CREATE", s, g, "0", "MKSTREAM"]);
}

/// `XADD s id f v ...`.
fn add(c: &mut Connection, s: &str, id: &str, fields: &[(&str, &str)]) {
    let mut a = vec!["XADD", s, id];
    for (f, v) in fields {
        a.push(f);
        a.push(v);
    }
    let got: String = q(c, &a);
    assert_eq!(got, id);
}

/// Adds entries `from-0 ..= to-0` (field `n`, value the number), pipelined.
fn add_range(c: &mut Connection, s: &str, from: u64, to: u64) {
    let mut p = redis::pipe();
    for i in from..=to {
        p.cmd("XADD")
            .arg(s)
            .arg(format!("{i}-0"))
            .arg("n")
            .arg(i)
            .ignore();
    }
    let _: () = p.query(c).expect("XADD pipeline");
}

/// The IDs `from-0 ..= to-0`.
fn ids(from: u64, to: u64) -> Vec<String> {
    (from..=to).map(|i| format!("{i}-0")).collect()
}

/// A stream `s` whose group `g` (from the start) holds entries `1-0 ..= n-0`, every one delivered
/// once to consumer `c1`, which never acknowledges.
fn delivered_to_c1(c: &mut Connection, s: &str, g: &str, n: u64) {
    group(c, s, g);
    add_range(c, s, 1, n);
    deliver(c, s, g, "c1", None);
}

/// `XREADGROUP GROUP g consumer STREAMS s 0`: the consumer re-reads its own pending history (each
/// entry it still owns is delivered again: count + 1, idle reset, without going stale).
fn reread_history(c: &mut Connection, s: &str, g: &str, consumer: &str) {
    run(c, &["XREADGROUP", "GROUP", g, consumer, "STREAMS", s, "0"]);
}

/// [`set_pending`] for one ID: its owner, idle time and delivery count, exactly.
fn fix1(c: &mut Connection, s: &str, g: &str, owner: &str, id: &str, idle: i64, n: i64) {
    set_pending(c, (s, g), owner, &[id], idle, n);
}

fn one(id: &str, owner: &str, n: i64) -> (String, String, i64) {
    (id.to_string(), owner.to_string(), n)
}

/// Owned (field, value) pairs.
fn fields(f: &[(&str, &str)]) -> Vec<(String, String)> {
    f.iter()
        .map(|(f, v)| (f.to_string(), v.to_string()))
        .collect()
}

/// The fields a DLQ entry must hold: the original fields in order, then the provenance and the
/// reason (compare with [`without_moved_ms`] of the entry: its last field is the time it moved).
fn dlq_fields(
    original: &[(&str, &str)],
    stream: &str,
    group: &str,
    id: &str,
    consumer: &str,
    deliveries: i64,
) -> Vec<(String, String)> {
    let d = deliveries.to_string();
    let mut v = fields(original);
    for (f, x) in [
        ("reclaim-stream", stream),
        ("reclaim-group", group),
        ("reclaim-id", id),
        ("reclaim-consumer", consumer),
        ("reclaim-deliveries", d.as_str()),
        ("reclaim-reason", "max-deliveries"),
    ] {
        v.push((f.to_string(), x.to_string()));
    }
    v
}

// ---------------------------------------------------------------------------------------------
// Poison messages: dead-lettered exactly once, with their fields and provenance
// ---------------------------------------------------------------------------------------------

/// A handler that always fails and leaves the entry idle (it crashes): each time the entry goes
/// stale the sweep moves it to the inbox (no delivery), and the next worker takes it (+1), until
/// the count reaches MAX-DELIVERIES while stale; then the entry moves to the DLQ, once.
#[test]
fn failing_handler_that_goes_idle_is_dead_lettered_after_max_deliveries() {
    let s = Server::new();
    let mut c = s.conn();
    let body = [("zeta", "1"), ("job", "poison"), ("alpha", "2")];
    group(&mut c, "jobs", "g");
    add(&mut c, "jobs", "1-0", &body);
    deliver(&mut c, "jobs", "g", "c1", None);
    assert_eq!(pel_state(&mut c, "jobs", "g"), [one("1-0", "c1", 1)]);
    // c1 crashed: nobody ever acknowledges or re-reads 1-0.
    set_policy_opts(
        &mut c,
        "jobs",
        "g",
        "MIN-IDLE 100 MAX-DELIVERIES 3 DLQ jobs:dlq INTERVAL 50",
    );
    // Deliveries: c1 (1), moved, w1 (2), moved, w2 (3), then stale at the limit -> DLQ. Each
    // worker crashes too.
    for (w, n) in [("w1", 2), ("w2", 3)] {
        assert!(
            !exists(&mut c, "jobs:dlq"),
            "dead-lettered before 3 deliveries"
        );
        let got = take_inbox(&mut c, "jobs", "g", "reclaim", w, 1);
        assert_eq!(got, [("1-0".to_string(), n)]);
    }
    wait_for(20, "the poison entry in the DLQ", || {
        exists(&mut c, "jobs:dlq").then_some(())
    });
    let dlq = xrange_text(&mut c, "jobs:dlq");
    assert_eq!(dlq.len(), 1, "{dlq:?}");
    assert_eq!(
        without_moved_ms(&dlq[0].1),
        dlq_fields(&body, "jobs", "g", "1-0", "w2", 3),
        "DLQ entry fields"
    );
    assert_eq!(pel_total(&mut c, "jobs", "g"), 0);
    assert_eq!(
        xrange_text(&mut c, "jobs"),
        [("1-0".to_string(), fields(&body))],
        "the source entry stays in the stream"
    );
    let st = stats(&mut c, "jobs", "g");
    assert_eq!(int_field(&st, "claimed"), 2, "{st:?}");
    assert_eq!(int_field(&st, "redelivered"), 2, "{st:?}");
    assert_eq!(int_field(&st, "dead-lettered"), 1, "{st:?}");
    assert_eq!(int_field(&st, "deleted"), 0, "{st:?}");

    // Idempotence: more passes and an explicit sweep add nothing.
    wait_passes(&mut c, "jobs", "g", 5);
    assert_eq!(sweep(&mut c, "jobs", "g"), (0, 0, 0));
    assert_eq!(xrange_text(&mut c, "jobs:dlq"), dlq);
    assert_eq!(xlen(&mut c, "jobs"), 1);
    assert_eq!(int_field(&stats(&mut c, "jobs", "g"), "dead-lettered"), 1);
}

/// A handler that always fails and re-reads its history (`XREADGROUP ... 0`): the count rises on
/// every read while the entry never goes stale. Untouched up to the limit, dead-lettered as soon
/// as the count is above it, with the reading consumer as last owner.
#[test]
fn failing_handler_that_rereads_history_is_dead_lettered_above_max_deliveries() {
    let s = Server::new();
    let mut c = s.conn();
    let body = [("job", "poison"), ("attempt", "x")];
    group(&mut c, "h", "g");
    add(&mut c, "h", "1-0", &body);
    add(&mut c, "h", "2-0", &[("job", "fine")]);
    deliver(&mut c, "h", "g", "c1", Some(1));
    deliver(&mut c, "h", "g", "c2", Some(1));
    set_policy_opts(
        &mut c,
        "h",
        "g",
        "MIN-IDLE 60000 MAX-DELIVERIES 3 DLQ h:dlq INTERVAL 50",
    );
    reread_history(&mut c, "h", "g", "c1");
    reread_history(&mut c, "h", "g", "c1");
    // count 3 == MAX but the entry is being worked on (not stale): untouched.
    wait_passes(&mut c, "h", "g", 3);
    assert_eq!(
        pel_state(&mut c, "h", "g"),
        [one("1-0", "c1", 3), one("2-0", "c2", 1)]
    );
    assert!(!exists(&mut c, "h:dlq"));

    reread_history(&mut c, "h", "g", "c1"); // count 4 > 3, still not stale
    wait_for(20, "the re-read entry in the DLQ", || {
        exists(&mut c, "h:dlq").then_some(())
    });
    let dlq = xrange_text(&mut c, "h:dlq");
    assert_eq!(dlq.len(), 1, "{dlq:?}");
    assert_eq!(
        without_moved_ms(&dlq[0].1),
        dlq_fields(&body, "h", "g", "1-0", "c1", 4)
    );
    assert_eq!(
        pel_state(&mut c, "h", "g"),
        [one("2-0", "c2", 1)],
        "acknowledged; the other consumer's entry untouched"
    );
    assert_eq!(xlen(&mut c, "h"), 2, "the source entry stays in the stream");
    let st = stats(&mut c, "h", "g");
    assert_eq!(int_field(&st, "claimed"), 0, "{st:?}");
    assert_eq!(int_field(&st, "dead-lettered"), 1, "{st:?}");

    // The consumer's next history read finds nothing; further passes add nothing.
    let again: Vec<(String, Vec<Entry>)> = q(
        &mut c,
        &["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "h", "0"],
    );
    assert!(again.iter().all(|(_, e)| e.is_empty()), "{again:?}");
    wait_passes(&mut c, "h", "g", 5);
    assert_eq!(xrange_text(&mut c, "h:dlq"), dlq);
    assert_eq!(sweep(&mut c, "h", "g"), (0, 0, 0));
    assert_eq!(xlen(&mut c, "h:dlq"), 1);
}

// ---------------------------------------------------------------------------------------------
// Entries being worked on are never touched
// ---------------------------------------------------------------------------------------------

#[test]
fn entries_below_min_idle_are_never_touched() {
    let s = Server::new();
    let mut c = s.conn();
    delivered_to_c1(&mut c, "w", "g", 3);
    // 3-0 sits at the limit, but its consumer is still on it.
    fix1(&mut c, "w", "g", "c1", "3-0", 0, 3);
    set_policy_opts(
        &mut c,
        "w",
        "g",
        "MIN-IDLE 60000 MAX-DELIVERIES 3 DLQ w:dlq INTERVAL 50",
    );
    let before = pending(&mut c, "w", "g");
    wait_passes(&mut c, "w", "g", 4);
    let after = pending(&mut c, "w", "g");
    assert_eq!(after.len(), 3, "{after:?}");
    for (b, a) in before.iter().zip(&after) {
        assert_eq!((&a.id, &a.consumer, a.count), (&b.id, &b.consumer, b.count));
        assert!(a.idle > b.idle, "idle keeps growing: {b:?} -> {a:?}");
    }
    assert_eq!(
        pel_state(&mut c, "w", "g"),
        [
            one("1-0", "c1", 1),
            one("2-0", "c1", 1),
            one("3-0", "c1", 3)
        ]
    );
    assert!(!exists(&mut c, "w:dlq"));
    let st = stats(&mut c, "w", "g");
    assert_eq!(
        (
            int_field(&st, "claimed"),
            int_field(&st, "dead-lettered"),
            int_field(&st, "deleted")
        ),
        (0, 0, 0)
    );
}

// ---------------------------------------------------------------------------------------------
// The rules, one entry per case, through RECLAIM.SWEEP (exact replies)
// ---------------------------------------------------------------------------------------------

/// Each kind of entry (stale, at or over the delivery limit, stale or not, deleted, fresh, waiting
/// in the inbox) in one PEL, one sweep, separate counts.
#[test]
fn sweep_applies_each_rule_and_counts_separately() {
    let s = Server::new();
    let mut c = s.conn();
    group(&mut c, "t", "g");
    quiet_policy(
        &mut c,
        "t",
        "g",
        "MIN-IDLE 60000 MAX-DELIVERIES 3 DLQ t:dlq CLAIMANT reaper COUNT 3",
    );
    add_range(&mut c, "t", 1, 10);
    deliver(&mut c, "t", "g", "c1", None);
    fix1(&mut c, "t", "g", "c1", "1-0", 120_000, 1); // stale -> move (count stays 1)
    fix1(&mut c, "t", "g", "c1", "2-0", 120_000, 2); // stale, below the limit -> move (2)
    fix1(&mut c, "t", "g", "c1", "3-0", 120_000, 3); // stale at the limit -> DLQ
    fix1(&mut c, "t", "g", "c1", "4-0", 0, 3); // at the limit, not stale -> untouched
    fix1(&mut c, "t", "g", "c1", "5-0", 0, 4); // over the limit, not stale -> DLQ
    fix1(&mut c, "t", "g", "c1", "6-0", 120_000, 10); // over the limit but deleted -> deleted
    fix1(&mut c, "t", "g", "c1", "7-0", 60_000, 1); // idle == MIN-IDLE is stale -> move
    fix1(&mut c, "t", "g", "c1", "8-0", 0, 1); // fresh -> untouched
    fix1(&mut c, "t", "g", "reaper", "9-0", 120_000, 1); // in the inbox, stale -> waits
    fix1(&mut c, "t", "g", "reaper", "10-0", 120_000, 3); // in the inbox, stale at the limit -> DLQ
    let _: i64 = q(&mut c, &["XDEL", "t", "6-0"]);

    assert_eq!(sweep(&mut c, "t", "g"), (3, 3, 1));

    assert_eq!(
        pel_state(&mut c, "t", "g"),
        [
            one("1-0", "reaper", 1),
            one("2-0", "reaper", 2),
            one("4-0", "c1", 3),
            one("7-0", "reaper", 1),
            one("8-0", "c1", 1),
            one("9-0", "reaper", 1),
        ]
    );
    for p in pending(&mut c, "t", "g") {
        if p.id == "9-0" {
            assert!(p.idle >= 120_000, "waiting in the inbox, untouched: {p:?}");
        } else if p.consumer == "reaper" {
            assert!(p.idle < 60_000, "a move resets idle: {p:?}");
        }
    }
    let dlq = xrange_text(&mut c, "t:dlq");
    let got: Vec<Vec<(String, String)>> = dlq.iter().map(|(_, f)| without_moved_ms(f)).collect();
    assert_eq!(
        got,
        [
            dlq_fields(&[("n", "3")], "t", "g", "3-0", "c1", 3),
            dlq_fields(&[("n", "5")], "t", "g", "5-0", "c1", 4),
            dlq_fields(&[("n", "10")], "t", "g", "10-0", "reaper", 3),
        ]
    );
    assert_eq!(xlen(&mut c, "t"), 9, "only the XDEL removed a stream entry");

    // Only the inbox's 9-0 is stale, and it waits: a second sweep changes nothing.
    assert_eq!(sweep(&mut c, "t", "g"), (0, 0, 0));
    assert_eq!(xlen(&mut c, "t:dlq"), 3);
    let st = stats(&mut c, "t", "g");
    assert_eq!(int_field(&st, "claimed"), 3, "{st:?}");
    assert_eq!(int_field(&st, "dead-lettered"), 3, "{st:?}");
    assert_eq!(int_field(&st, "deleted"), 1, "{st:?}");
    assert_eq!(int_field(&st, "inbox"), 4, "{st:?}");
}

/// By the timer: deleted + stale + count above the limit -> removed from the PEL, never DLQ.
#[test]
fn deleted_entry_over_the_limit_is_dropped_not_dead_lettered() {
    let s = Server::new();
    let mut c = s.conn();
    delivered_to_c1(&mut c, "s1", "g1", 2);
    fix1(&mut c, "s1", "g1", "c1", "1-0", 120_000, 10);
    let _: i64 = q(&mut c, &["XDEL", "s1", "1-0"]);
    set_policy_opts(
        &mut c,
        "s1",
        "g1",
        "MIN-IDLE 60000 MAX-DELIVERIES 3 DLQ dlq1",
    );
    wait_for(10, "1-0 removed from the PEL", || {
        (pel_state(&mut c, "s1", "g1") == [one("2-0", "c1", 1)]).then_some(())
    });
    assert_eq!(xlen(&mut c, "dlq1"), 0);
    assert!(!exists(&mut c, "dlq1"));
    let st = stats(&mut c, "s1", "g1");
    assert_eq!(int_field(&st, "deleted"), 1, "{st:?}");
    assert_eq!(int_field(&st, "dead-lettered"), 0, "{st:?}");
    assert_eq!(int_field(&st, "claimed"), 0, "{st:?}");

    // The same through RECLAIM.SWEEP.
    group(&mut c, "s2", "g1");
    quiet_policy(
        &mut c,
        "s2",
        "g1",
        "MIN-IDLE 60000 MAX-DELIVERIES 3 DLQ dlq2",
    );
    add_range(&mut c, "s2", 1, 1);
    deliver(&mut c, "s2", "g1", "c1", None);
    fix1(&mut c, "s2", "g1", "c1", "1-0", 120_000, 10);
    let _: i64 = q(&mut c, &["XDEL", "s2", "1-0"]);
    assert_eq!(sweep(&mut c, "s2", "g1"), (0, 0, 1));
    assert_eq!(pel_total(&mut c, "s2", "g1"), 0);
    assert!(!exists(&mut c, "dlq2"));
}

/// A pending entry whose stream entry was deleted is purged from the PEL even while its
/// idle time is below MIN-IDLE (as XAUTOCLAIM does): its body is gone, history reads skip it and
/// never raise its count, so nothing else will ever clear it.
#[test]
fn deleted_entries_are_purged_without_waiting_for_min_idle() {
    let s = Server::new();
    let mut c = s.conn();
    delivered_to_c1(&mut c, "d", "g", 3);
    let _: i64 = q(&mut c, &["XDEL", "d", "1-0"]);
    let _: i64 = q(&mut c, &["XTRIM", "d", "MINID", "3"]); // removes 2-0
                                                           // A history read re-delivers 3-0 but skips the deleted ones: their counts stay 1.
    reread_history(&mut c, "d", "g", "c1");
    assert_eq!(
        pel_state(&mut c, "d", "g"),
        [
            one("1-0", "c1", 1),
            one("2-0", "c1", 1),
            one("3-0", "c1", 2)
        ]
    );
    set_policy_opts(
        &mut c,
        "d",
        "g",
        "MIN-IDLE 60000 MAX-DELIVERIES 3 DLQ d:dlq INTERVAL 50",
    );
    wait_for(10, "the deleted entries purged from the PEL", || {
        (pel_state(&mut c, "d", "g") == [one("3-0", "c1", 2)]).then_some(())
    });
    assert_eq!(int_field(&stats(&mut c, "d", "g"), "deleted"), 2);
    assert!(!exists(&mut c, "d:dlq"));
}

/// A big PEL whose stream was trimmed to nothing drains over many steps.
#[test]
fn fully_trimmed_pel_of_20000_drains_across_ticks() {
    let s = Server::new();
    let mut c = s.conn();
    delivered_to_c1(&mut c, "big", "g", 20_000);
    // Half of them are also over the delivery limit: deleted still wins over dead-lettering.
    set_pending(&mut c, ("big", "g"), "c1", &ids(1, 10_000), 120_000, 10);
    assert_eq!(pel_total(&mut c, "big", "g"), 20_000);
    let trimmed: i64 = q(&mut c, &["XTRIM", "big", "MAXLEN", "0"]);
    assert_eq!(trimmed, 20_000);
    set_policy_opts(
        &mut c,
        "big",
        "g",
        "MIN-IDLE 100 MAX-DELIVERIES 3 DLQ big:dlq INTERVAL 50",
    );
    wait_for(60, "the trimmed PEL drained", || {
        (pel_total(&mut c, "big", "g") == 0).then_some(())
    });
    let st = stats(&mut c, "big", "g");
    assert_eq!(int_field(&st, "deleted"), 20_000, "{st:?}");
    assert_eq!(int_field(&st, "claimed"), 0, "{st:?}");
    assert_eq!(int_field(&st, "dead-lettered"), 0, "{st:?}");
    assert!(!exists(&mut c, "big:dlq"));
    assert!(
        reclaim_info(&mut c, "steps") >= 200,
        "COUNT 100 bounds a step: 20000 entries need at least 200 steps"
    );
}

// ---------------------------------------------------------------------------------------------
// Coverage of a big PEL, cursor, starvation
// ---------------------------------------------------------------------------------------------

/// 3000 stale entries, COUNT 10: one pass covers all of them, each moved exactly once (3000
/// moves, counts unchanged), in bounded steps whose cursor carries over between ticks.
#[test]
fn pel_much_larger_than_count_is_covered_once_per_pass() {
    let s = Server::new();
    let mut c = s.conn();
    // One step per tick (the smallest budget), so a pass needs hundreds of ticks.
    let _: () = q(&mut c, &["CONFIG", "SET", "reclaim.tick-budget-us", "50"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "reclaim.tick-interval-ms", "1"]);
    delivered_to_c1(&mut c, "many", "g", 3000);
    set_pending(&mut c, ("many", "g"), "c1", &ids(1, 3000), 120_000, 1);
    let steps0 = reclaim_info(&mut c, "steps");
    set_policy_opts(
        &mut c,
        "many",
        "g",
        &format!("MIN-IDLE 60000 COUNT 10 INTERVAL {HOUR}"),
    );
    wait_for(60, "the first pass over 3000 entries", || {
        (stat(&mut c, "many", "g", "passes") >= 1).then_some(())
    });
    let p = pel_state(&mut c, "many", "g");
    assert_eq!(p.len(), 3000);
    let wrong: Vec<_> = p
        .iter()
        .filter(|(_, owner, n)| owner != "reclaim" || *n != 1)
        .collect();
    assert!(
        wrong.is_empty(),
        "not moved with the count unchanged: {:?}",
        &wrong[..wrong.len().min(5)]
    );
    let st = stats(&mut c, "many", "g");
    assert_eq!(int_field(&st, "claimed"), 3000, "{st:?}");
    assert_eq!(int_field(&st, "passes"), 1, "{st:?}");
    assert_eq!(
        str_field(&st, "cursor"),
        "0-0",
        "a finished pass restarts at the head"
    );
    assert!(
        reclaim_info(&mut c, "steps") - steps0 >= 300,
        "COUNT 10 bounds each step: 3000 entries need at least 300 steps"
    );
}

/// Fresh entries at the head of the PEL (10 x COUNT of them) never starve a stale one behind.
#[test]
fn stale_entry_behind_many_fresh_ones_is_reached() {
    let s = Server::new();
    let mut c = s.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "reclaim.tick-budget-us", "50"]);
    delivered_to_c1(&mut c, "st", "g", 101);
    fix1(&mut c, "st", "g", "c1", "101-0", 120_000, 1);
    set_policy_opts(&mut c, "st", "g", "MIN-IDLE 60000 COUNT 10 INTERVAL 50");
    wait_for(20, "101-0 moved", || {
        let p = pel_state(&mut c, "st", "g");
        (p.last() == Some(&one("101-0", "reclaim", 1))).then_some(p)
    });
    let p = pel_state(&mut c, "st", "g");
    assert_eq!(p.len(), 101);
    assert!(
        p[..100].iter().all(|(_, o, n)| o == "c1" && *n == 1),
        "the fresh head entries are untouched"
    );
    assert_eq!(int_field(&stats(&mut c, "st", "g"), "claimed"), 1);
}

// ---------------------------------------------------------------------------------------------
// Counting
// ---------------------------------------------------------------------------------------------

/// By the timer: count 2, stale, MAX 3 -> moved to the claimant with count 2 (a move adds no
/// delivery), not dead-lettered, and left alone afterwards in the inbox, even once stale; a
/// worker's read hands it over with count 3 (+1 exactly).
#[test]
fn a_move_adds_no_delivery_and_a_hand_over_exactly_one() {
    let s = Server::new();
    let mut c = s.conn();
    delivered_to_c1(&mut c, "s1", "g1", 1);
    fix1(&mut c, "s1", "g1", "c1", "1-0", 120_000, 2);
    set_policy_opts(
        &mut c,
        "s1",
        "g1",
        "MIN-IDLE 60000 MAX-DELIVERIES 3 DLQ dlq1 CLAIMANT reaper INTERVAL 50",
    );
    wait_for(10, "1-0 moved to reaper", || {
        (pel_state(&mut c, "s1", "g1") == [one("1-0", "reaper", 2)]).then_some(())
    });
    let p = pending(&mut c, "s1", "g1");
    assert!(p[0].idle < 60_000, "idle reset by the move: {p:?}");
    assert!(!exists(&mut c, "dlq1"));
    wait_passes(&mut c, "s1", "g1", 3);
    assert_eq!(pel_state(&mut c, "s1", "g1"), [one("1-0", "reaper", 2)]);
    // Stale in the inbox: it still waits for a reader.
    fix1(&mut c, "s1", "g1", "reaper", "1-0", 120_000, 2);
    wait_passes(&mut c, "s1", "g1", 3);
    assert_eq!(pel_state(&mut c, "s1", "g1"), [one("1-0", "reaper", 2)]);
    assert!(!exists(&mut c, "dlq1"));
    assert_eq!(int_field(&stats(&mut c, "s1", "g1"), "claimed"), 1);
    // The hand-over: exactly one delivery.
    let got = take_inbox(&mut c, "s1", "g1", "reaper", "w", 1);
    assert_eq!(got, [("1-0".to_string(), 3)]);
    assert_eq!(pel_state(&mut c, "s1", "g1"), [one("1-0", "w", 3)]);
    assert!(
        !exists(&mut c, "dlq1"),
        "the third attempt is still running"
    );
    let st = stats(&mut c, "s1", "g1");
    assert_eq!(int_field(&st, "claimed"), 1, "{st:?}");
    assert_eq!(int_field(&st, "redelivered"), 1, "{st:?}");
}

/// `XGROUP DESTROY` of another group of the stream does not make a policy forget the touches it
/// has not confirmed yet: 200 consumers' claims (past the tracking bound: one touch of
/// everyone), another group made and destroyed in the same pipeline, then a look counts the
/// overflow. (The destroy used to drop every policy's touches of the stream: seen as a flake of
/// tests/memory.rs on Valkey 8.1 and Redis 8.2.)
#[test]
fn destroying_another_group_keeps_a_policys_touches() {
    let s = Server::new();
    let mut c = s.conn();
    group(&mut c, "s", "g");
    add_range(&mut c, "s", 1, 1);
    deliver(&mut c, "s", "g", "seed", None);
    set_policy_opts(&mut c, "s", "g", "MIN-IDLE 600000 INTERVAL 3600000");
    // Its first pass (which may have run already: the next one is an hour away).
    wait_for(60, "the policy's first pass", || {
        (stat(&mut c, "s", "g", "passes") >= 1).then_some(())
    });
    let id = pending(&mut c, "s", "g")[0].id.clone();
    let mut p = redis::pipe();
    for i in 0..200 {
        p.cmd("XCLAIM")
            .arg(&["s", "g"])
            .arg(format!("pod-{i}"))
            .arg(0)
            .arg(&id)
            .arg("JUSTID")
            .ignore();
    }
    p.cmd("XCLAIM")
        .arg(&["s", "g", "seed", "0"])
        .arg(&id)
        .arg("JUSTID")
        .ignore();
    p.cmd("XGROUP").arg(&["CREATE", "s", "other", "0"]).ignore();
    p.cmd("XGROUP").arg(&["DESTROY", "s", "other"]).ignore();
    let _: () = p.query(&mut c).expect("claims and the other group");
    let _ = stats(&mut c, "s", "g");
    assert_eq!(reclaim_info(&mut c, "tracking_overflows"), 1);
}

/// A policy on (s, g1) never reads or changes the PEL of g2, even when g2's entries are stale
/// and over the limit.
#[test]
fn policy_of_one_group_never_touches_another_group() {
    let s = Server::new();
    let mut c = s.conn();
    group(&mut c, "s", "g1");
    group(&mut c, "s", "g2");
    add_range(&mut c, "s", 1, 4);
    deliver(&mut c, "s", "g1", "c1", None);
    deliver(&mut c, "s", "g2", "c1", None);
    let all = ids(1, 4);
    set_pending(&mut c, ("s", "g1"), "c1", &all, 120_000, 1);
    set_pending(&mut c, ("s", "g2"), "c1", &all[..2], 120_000, 1);
    set_pending(&mut c, ("s", "g2"), "c1", &all[2..], 120_000, 9);
    let g2_before = pending(&mut c, "s", "g2");
    set_policy_opts(
        &mut c,
        "s",
        "g1",
        "MIN-IDLE 60000 MAX-DELIVERIES 3 DLQ s:dlq INTERVAL 50",
    );
    wait_for(10, "g1's entries moved", || {
        let p = pel_state(&mut c, "s", "g1");
        p.iter()
            .all(|(_, o, n)| o == "reclaim" && *n == 1)
            .then_some(())
    });
    wait_passes(&mut c, "s", "g1", 3);
    let g2_after = pending(&mut c, "s", "g2");
    assert_eq!(g2_after.len(), 4);
    for (b, a) in g2_before.iter().zip(&g2_after) {
        assert_eq!((&a.id, &a.consumer, a.count), (&b.id, &b.consumer, b.count));
        assert!(a.idle >= b.idle, "g2 idle not reset: {b:?} -> {a:?}");
    }
    assert!(
        !exists(&mut c, "s:dlq"),
        "g2's over-limit entries are not g1's business"
    );
    assert_eq!(xlen(&mut c, "s"), 4);
}

/// MAX-DELIVERIES 0: never dead-letter, whatever the count; stale entries are still moved (count
/// unchanged) and handed over again (+1).
#[test]
fn max_deliveries_0_never_dead_letters() {
    let s = Server::new();
    let mut c = s.conn();
    delivered_to_c1(&mut c, "m", "g", 3);
    fix1(&mut c, "m", "g", "c1", "1-0", 120_000, 1_000_000);
    fix1(&mut c, "m", "g", "c1", "2-0", 0, 1_000_000);
    set_policy_opts(
        &mut c,
        "m",
        "g",
        "MIN-IDLE 60000 MAX-DELIVERIES 0 INTERVAL 50",
    );
    wait_for(10, "stale entries moved", || {
        let p = pel_state(&mut c, "m", "g");
        (p[0].1 == "reclaim").then_some(())
    });
    wait_passes(&mut c, "m", "g", 3);
    assert_eq!(
        pel_state(&mut c, "m", "g"),
        [
            one("1-0", "reclaim", 1_000_000),
            one("2-0", "c1", 1_000_000),
            one("3-0", "c1", 1),
        ]
    );
    let got = take_inbox(&mut c, "m", "g", "reclaim", "w", 1);
    assert_eq!(
        got,
        [("1-0".to_string(), 1_000_001)],
        "handed over, not dead-lettered"
    );
    let st = stats(&mut c, "m", "g");
    assert_eq!(int_field(&st, "claimed"), 1, "{st:?}");
    assert_eq!(int_field(&st, "redelivered"), 1, "{st:?}");
    assert_eq!(int_field(&st, "dead-lettered"), 0, "{st:?}");
    let keys: Vec<String> = q(&mut c, &["KEYS", "*"]);
    let mut keys: Vec<&str> = keys
        .iter()
        .map(|k| k.as_str())
        .filter(|k| !k.starts_with("reclaim:policy:"))
        .collect();
    keys.sort();
    assert_eq!(keys, ["m"], "no DLQ or other key was written");
}

// ---------------------------------------------------------------------------------------------
// Missing and wrong keys
// ---------------------------------------------------------------------------------------------

/// A policy set before its stream and group exist waits without creating
/// anything, starts when the group appears, survives DEL of the stream and XGROUP DESTROY, and
/// resumes from the head when they come back.
#[test]
fn policy_waits_for_missing_stream_and_group() {
    let s = Server::new();
    let mut c = s.conn();
    set_policy_opts(
        &mut c,
        "late",
        "g",
        "MIN-IDLE 60000 MAX-DELIVERIES 3 DLQ late:dlq INTERVAL 50",
    );
    assert_eq!(status(&mut c, "late", "g"), "waiting: no stream late");
    assert_eq!(sweep(&mut c, "late", "g"), (0, 0, 0));
    wait_steps(&mut c, 3);
    assert!(!exists(&mut c, "late"), "no stream created");
    assert!(!exists(&mut c, "late:dlq"), "no DLQ created");
    assert_eq!(status(&mut c, "late", "g"), "waiting: no stream late");

    // A plain XADD makes the stream, without the group.
    add(&mut c, "late", "1-0", &[("f", "v")]);
    assert_eq!(status(&mut c, "late", "g"), "waiting: no group g");
    assert_eq!(sweep(&mut c, "late", "g"), (0, 0, 0));
    wait_steps(&mut c, 3);
    let groups: Vec<Value> = q(&mut c, &["XINFO", "GROUPS", "late"]);
    assert!(groups.is_empty(), "no group created: {groups:?}");
    assert!(!exists(&mut c, "late:dlq"));

    // The group appears and a consumer dies holding an entry: sweeping starts.
    let _: () = q(&mut c, &["XGROUP", "CREATE", "late", "g", "0"]);
    deliver(&mut c, "late", "g", "c1", None);
    fix1(&mut c, "late", "g", "c1", "1-0", 120_000, 1);
    wait_for(10, "1-0 moved", || {
        (pel_state(&mut c, "late", "g") == [one("1-0", "reclaim", 1)]).then_some(())
    });
    assert_eq!(status(&mut c, "late", "g"), "active");

    // The stream is deleted mid-life: no crash, waiting again, nothing recreated.
    let _: i64 = q(&mut c, &["DEL", "late"]);
    wait_steps(&mut c, 3);
    let pong: String = q(&mut c, &["PING"]);
    assert_eq!(pong, "PONG");
    assert_eq!(status(&mut c, "late", "g"), "waiting: no stream late");
    assert_eq!(str_field(&stats(&mut c, "late", "g"), "cursor"), "0-0");
    assert!(!exists(&mut c, "late"));
    assert!(!exists(&mut c, "late:dlq"));

    // Back with MKSTREAM: the policy resumes from the head of the new PEL.
    group(&mut c, "late", "g");
    add(&mut c, "late", "7-0", &[("f", "v")]);
    deliver(&mut c, "late", "g", "c2", None);
    fix1(&mut c, "late", "g", "c2", "7-0", 120_000, 1);
    wait_for(10, "7-0 moved after the stream came back", || {
        (pel_state(&mut c, "late", "g") == [one("7-0", "reclaim", 1)]).then_some(())
    });

    // The group is destroyed and recreated: waiting, then resumes.
    let _: i64 = q(&mut c, &["XGROUP", "DESTROY", "late", "g"]);
    assert_eq!(status(&mut c, "late", "g"), "waiting: no group g");
    wait_steps(&mut c, 3);
    let _: () = q(&mut c, &["XGROUP", "CREATE", "late", "g", "0"]);
    deliver(&mut c, "late", "g", "c3", None);
    fix1(&mut c, "late", "g", "c3", "7-0", 120_000, 1);
    wait_for(10, "7-0 moved after the group came back", || {
        (pel_state(&mut c, "late", "g") == [one("7-0", "reclaim", 1)]).then_some(())
    });
    assert!(!exists(&mut c, "late:dlq"));
    assert!(
        s.log().lines().filter(|l| l.contains("late")).count() < 5,
        "no log line per tick"
    );
}

/// A stream key of the wrong type is reported, counted as an error, and does not stop
/// other policies from being swept.
#[test]
fn wrong_type_stream_is_reported_and_others_still_swept() {
    let s = Server::new();
    let mut c = s.conn();
    set_policy_opts(&mut c, "bad", "g", "MIN-IDLE 60000 INTERVAL 50");
    let _: () = q(&mut c, &["SET", "bad", "x"]);
    delivered_to_c1(&mut c, "good", "g", 2);
    set_pending(&mut c, ("good", "g"), "c1", &ids(1, 2), 120_000, 1);
    set_policy_opts(&mut c, "good", "g", "MIN-IDLE 60000 INTERVAL 50");
    wait_for(10, "good's entries moved", || {
        (pel_state(&mut c, "good", "g") == [one("1-0", "reclaim", 1), one("2-0", "reclaim", 1)])
            .then_some(())
    });
    wait_for(10, "an error counted for bad", || {
        (stat(&mut c, "bad", "g", "errors") >= 1).then_some(())
    });
    assert_eq!(
        status(&mut c, "bad", "g"),
        "error: stream key holds the wrong kind of value"
    );
    assert_eq!(
        error_of(&mut c, cmd("RECLAIM.SWEEP").arg("bad").arg("g")),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );
    let v: String = q(&mut c, &["GET", "bad"]);
    assert_eq!(v, "x");
}

/// The DLQ key holds a string: the over-limit entry stays pending exactly as it was (no XACK),
/// the problem is reported and counted, other entries are still moved; once the key is fixed, the
/// entry is dead-lettered.
#[test]
fn dlq_of_the_wrong_type_leaves_the_entry_pending() {
    let s = Server::new();
    let mut c = s.conn();
    group(&mut c, "s1", "g1");
    set_policy_opts(
        &mut c,
        "s1",
        "g1",
        "MIN-IDLE 60000 MAX-DELIVERIES 3 DLQ dlq1 INTERVAL 50",
    );
    let _: () = q(&mut c, &["SET", "dlq1", "x"]);
    add(&mut c, "s1", "1-0", &[("f", "poison")]);
    add(&mut c, "s1", "2-0", &[("f", "ok")]);
    deliver(&mut c, "s1", "g1", "c1", None);
    fix1(&mut c, "s1", "g1", "c1", "1-0", 120_000, 5);
    fix1(&mut c, "s1", "g1", "c1", "2-0", 120_000, 1);
    wait_for(10, "2-0 moved despite the DLQ problem", || {
        (pel_state(&mut c, "s1", "g1") == [one("1-0", "c1", 5), one("2-0", "reclaim", 1)])
            .then_some(())
    });
    wait_passes(&mut c, "s1", "g1", 3);
    let p = pending(&mut c, "s1", "g1");
    assert_eq!(
        (p[0].id.as_str(), p[0].consumer.as_str(), p[0].count),
        ("1-0", "c1", 5)
    );
    assert!(p[0].idle >= 120_000, "1-0 was not redelivered: {p:?}");
    assert_eq!(
        status(&mut c, "s1", "g1"),
        "error: DLQ key holds the wrong kind of value"
    );
    let st = stats(&mut c, "s1", "g1");
    assert_eq!(int_field(&st, "dead-lettered"), 0, "{st:?}");
    let errors = int_field(&st, "errors");
    assert_eq!(
        error_of(&mut c, cmd("RECLAIM.SWEEP").arg("s1").arg("g1")),
        "WRONGTYPE the DLQ key holds the wrong kind of value (it must be a stream)"
    );
    let v: String = q(&mut c, &["GET", "dlq1"]);
    assert_eq!(v, "x");

    let _: i64 = q(&mut c, &["DEL", "dlq1"]);
    wait_for(10, "1-0 dead-lettered once the DLQ key is free", || {
        (pel_state(&mut c, "s1", "g1") == [one("2-0", "reclaim", 1)]).then_some(())
    });
    let dlq = xrange_text(&mut c, "dlq1");
    assert_eq!(dlq.len(), 1);
    assert_eq!(
        without_moved_ms(&dlq[0].1),
        dlq_fields(&[("f", "poison")], "s1", "g1", "1-0", "c1", 5)
    );
    assert_eq!(status(&mut c, "s1", "g1"), "active");
    // Each pass that could not append to the DLQ counts as an error.
    assert!(
        errors >= 1,
        "the failed DLQ appends are counted in `errors`: {st:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// RECLAIM.SWEEP LIMIT
// ---------------------------------------------------------------------------------------------

#[test]
fn sweep_limit_handles_at_most_n_entries() {
    let s = Server::new();
    let mut c = s.conn();
    group(&mut c, "l", "g");
    quiet_policy(&mut c, "l", "g", "MIN-IDLE 60000 COUNT 5");
    add_range(&mut c, "l", 1, 25);
    deliver(&mut c, "l", "g", "c1", None);
    set_pending(&mut c, ("l", "g"), "c1", &ids(1, 25), 120_000, 1);

    assert_eq!(sweep_limit(&mut c, "l", "g", 7), (7, 0, 0));
    let p = pel_state(&mut c, "l", "g");
    assert!(
        p[..7].iter().all(|(_, o, n)| o == "reclaim" && *n == 1),
        "{p:?}"
    );
    assert!(p[7..].iter().all(|(_, o, n)| o == "c1" && *n == 1), "{p:?}");

    // The rest in one unlimited sweep; the first 7 wait in the inbox and stay as they are.
    assert_eq!(sweep_limit(&mut c, "l", "g", 1000), (18, 0, 0));
    let p = pel_state(&mut c, "l", "g");
    assert!(p.iter().all(|(_, o, n)| o == "reclaim" && *n == 1), "{p:?}");

    // Deleted entries count against the limit too.
    set_pending(&mut c, ("l", "g"), "c1", &ids(1, 25), 120_000, 1);
    let _: i64 = q(&mut c, &["XTRIM", "l", "MAXLEN", "0"]);
    assert_eq!(sweep_limit(&mut c, "l", "g", 10), (0, 0, 10));
    assert_eq!(pel_total(&mut c, "l", "g"), 15);
    assert_eq!(sweep_limit(&mut c, "l", "g", 10), (0, 0, 10));
    assert_eq!(sweep(&mut c, "l", "g"), (0, 0, 5));
    assert_eq!(pel_total(&mut c, "l", "g"), 0);
    let st = stats(&mut c, "l", "g");
    assert_eq!(int_field(&st, "claimed"), 25, "{st:?}");
    assert_eq!(int_field(&st, "deleted"), 25, "{st:?}");

    // Zeros while the group is missing.
    let _: i64 = q(&mut c, &["XGROUP", "DESTROY", "l", "g"]);
    assert_eq!(sweep_limit(&mut c, "l", "g", 3), (0, 0, 0));
}

// ---------------------------------------------------------------------------------------------
// Replication and AOF of sweep effects
// ---------------------------------------------------------------------------------------------

/// A sweep's effects reach the replica and the AOF exactly (owners, counts,
/// DLQ entries with their IDs); the replica's own timer never sweeps.
#[test]
fn sweep_effects_replicate_and_survive_restart() {
    let mut s = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let r = s.replica(&[]);
    let mut c = s.conn();
    let mut rc = r.conn();
    group(&mut c, "s1", "g1");
    add(&mut c, "s1", "1-0", &[("f", "a")]);
    add(&mut c, "s1", "2-0", &[("f", "poison")]);
    add(&mut c, "s1", "3-0", &[("f", "c")]);
    add(&mut c, "s1", "4-0", &[("f", "gone")]);
    deliver(&mut c, "s1", "g1", "c1", None);
    fix1(&mut c, "s1", "g1", "c1", "1-0", 120_000, 1); // moved, count unchanged
    fix1(&mut c, "s1", "g1", "c1", "2-0", 120_000, 4); // dead-lettered
    fix1(&mut c, "s1", "g1", "c1", "4-0", 120_000, 1); // deleted
    let _: i64 = q(&mut c, &["XDEL", "s1", "4-0"]);
    set_policy_opts(
        &mut c,
        "s1",
        "g1",
        "MIN-IDLE 60000 MAX-DELIVERIES 3 DLQ dlq1 INTERVAL 50",
    );
    let want = [one("1-0", "reclaim", 1), one("3-0", "c1", 1)];
    wait_for(10, "the primary swept", || {
        (pel_state(&mut c, "s1", "g1") == want && exists(&mut c, "dlq1")).then_some(())
    });
    let dlq = xrange_text(&mut c, "dlq1");
    assert_eq!(dlq.len(), 1);
    assert_eq!(
        without_moved_ms(&dlq[0].1),
        dlq_fields(&[("f", "poison")], "s1", "g1", "2-0", "c1", 4)
    );
    replica_acked(&mut c);
    assert_eq!(pel_state(&mut rc, "s1", "g1"), want, "replica PEL");
    assert_eq!(xrange_text(&mut rc, "dlq1"), dlq, "replica DLQ");
    assert_eq!(xlen(&mut rc, "s1"), 3);

    // The replica knows the policy but never sweeps by itself.
    wait_for(10, "the replica's timer skipping", || {
        (reclaim_info(&mut rc, "ticks_skipped_replica") > 0).then_some(())
    });
    assert_eq!(reclaim_info(&mut rc, "claimed"), 0);
    assert_eq!(reclaim_info(&mut rc, "dead_lettered"), 0);
    assert_eq!(reclaim_info(&mut rc, "deleted"), 0);
    assert_eq!(reclaim_info(&mut rc, "steps"), 0);

    // Restart the primary from its AOF: the same PEL, DLQ and policy.
    drop(c);
    s.shutdown();
    s.restart();
    let mut c = s.conn();
    assert_eq!(pel_state(&mut c, "s1", "g1"), want, "PEL after AOF reload");
    assert_eq!(xrange_text(&mut c, "dlq1"), dlq, "DLQ after AOF reload");
    let pol = run(&mut c, &["RECLAIM.POLICY", "GET", "s1", "g1"]);
    assert_eq!(int_field(&pol, "max-deliveries"), 3);
    assert_eq!(str_field(&pol, "dlq"), "dlq1");
    // And it keeps sweeping with the same rules: nothing left to do.
    wait_passes(&mut c, "s1", "g1", 2);
    assert_eq!(pel_state(&mut c, "s1", "g1"), want);
    assert_eq!(xlen(&mut c, "dlq1"), 1);
}

/// A policy that never dead-letters scans ID windows for stale entries (`XPENDING ... IDLE`)
/// instead of paging every pending entry: stale entries scattered through a large fresh PEL are
/// all moved, the fresh ones are untouched, and trimmed fresh entries are purged.
#[test]
fn windowed_scan_finds_scattered_stale_entries_and_purges_trimmed_ones() {
    let s = Server::new();
    let mut c = s.conn();
    delivered_to_c1(&mut c, "w", "g", 20_000);
    // Every 997th entry is stale; everything else stays fresh (idle far below MIN-IDLE).
    let stale: Vec<String> = (1..=20_000u64)
        .filter(|i| i % 997 == 0)
        .map(|i| format!("{i}-0"))
        .collect();
    set_pending(&mut c, ("w", "g"), "c1", &stale, 600_000, 1);
    // Trim the first 100 entries away: they are fresh, but gone from the stream.
    run(&mut c, &["XTRIM", "w", "MINID", "101"]);
    quiet_policy(&mut c, "w", "g", "MIN-IDLE 300000 COUNT 10");
    let pel = pel_state(&mut c, "w", "g");
    assert_eq!(pel.len(), 20_000 - 100);
    for (id, owner, n) in &pel {
        if stale.contains(id) {
            assert_eq!((owner.as_str(), *n), ("reclaim", 1), "{id}");
        } else {
            assert_eq!((owner.as_str(), *n), ("c1", 1), "{id}");
        }
    }
    assert_eq!(
        try_stat(&mut c, "w", "g", "claimed"),
        Some(stale.len() as i64)
    );
    assert_eq!(try_stat(&mut c, "w", "g", "deleted"), Some(100));
    assert!(!exists(&mut c, "w:dlq"));
}

/// A policy key renamed to another stream's policy key name becomes that stream's policy: GET,
/// STATS and the sweeper all follow the new name.
#[test]
fn renamed_policy_key_follows_its_new_name() {
    let s = Server::new();
    let mut c = s.conn();
    set_policy_opts(&mut c, "a", "g", "MIN-IDLE 100000 INTERVAL 50");
    delivered_to_c1(&mut c, "b", "g", 3);
    set_pending(&mut c, ("b", "g"), "c1", &ids(1, 3), 200_000, 1);
    run(
        &mut c,
        &["RENAME", "reclaim:policy:{a}:a", "reclaim:policy:{b}:b"],
    );
    let got: Value = q(&mut c, &["RECLAIM.POLICY", "GET", "a", "g"]);
    assert_eq!(got, Value::Nil);
    wait_for(10, "b's entries moved under the renamed policy", || {
        pel_state(&mut c, "b", "g")
            .iter()
            .all(|e| e.1 == "reclaim" && e.2 == 1)
            .then_some(())
    });
    assert_eq!(try_stat(&mut c, "b", "g", "claimed"), Some(3));
    // The value now names b: an AOF rewrite or a restart keeps it as b's policy.
    let list: Vec<Value> = q(&mut c, &["RECLAIM.POLICY", "LIST"]);
    assert_eq!(list.len(), 1);
    assert_eq!(str_field(&list[0], "key"), "b", "{list:?}");
}

// ---------------------------------------------------------------------------------------------
// Skipped scans: a pass does not look for stale entries before one can exist
// ---------------------------------------------------------------------------------------------

/// Entries that only age (nobody touches them) are moved once stale, although the passes in
/// between skipped their scans.
#[test]
fn aging_entries_are_claimed_although_scans_were_skipped() {
    let s = Server::new();
    let mut c = s.conn();
    delivered_to_c1(&mut c, "a", "g", 50);
    let delivered = server_ms(&mut c);
    // 1.5 s (times the slowdown under valgrind): the scans below must run before it passes.
    let min_idle = 1500 * slowdown();
    set_policy_opts(
        &mut c,
        "a",
        "g",
        &format!("MIN-IDLE {min_idle} INTERVAL 50"),
    );
    wait_scans_skipped(&mut c, "a", "g", 2);
    // The first scan saw nothing idle for half of MIN-IDLE: nothing can be stale before its start
    // + MIN-IDLE / 2, and the module says so.
    let horizon = stat(&mut c, "a", "g", "stale-not-before");
    assert!(horizon > delivered, "{horizon} vs {delivered}");
    assert_eq!(try_stat(&mut c, "a", "g", "claimed"), Some(0));
    wait_for(20, "all 50 entries moved once stale", || {
        (try_stat(&mut c, "a", "g", "claimed") == Some(50)).then_some(())
    });
    let pel = pel_state(&mut c, "a", "g");
    assert_eq!(pel.len(), 50);
    assert!(
        pel.iter().all(|(_, o, n)| o == "reclaim" && *n == 1),
        "{pel:?}"
    );
    assert_eq!(
        try_stat(&mut c, "a", "g", "full-passes"),
        Some(0),
        "MAX-DELIVERIES 0"
    );
    assert!(reclaim_info(&mut c, "scans_skipped") >= 2);
}

/// A client's `XCLAIM ... IDLE` (from a connection or from a script) can make an entry stale at
/// once: the skip ends and the next pass moves it.
#[test]
fn client_xclaim_with_idle_ends_a_skip() {
    let s = Server::new();
    let mut c = s.conn();
    delivered_to_c1(&mut c, "x", "g", 3);
    set_policy_opts(&mut c, "x", "g", "MIN-IDLE 600000 INTERVAL 50");
    wait_scans_skipped(&mut c, "x", "g", 2);
    assert!(stat(&mut c, "x", "g", "stale-not-before") > server_ms(&mut c) + 200_000);

    // The XCLAIM and STATS in one MULTI/EXEC: a pass right after the XCLAIM would move 1-0 and
    // learn a new horizon from the fresh 2-0 and 3-0.
    let (_, st): (Value, Value) = redis::pipe()
        .atomic()
        .cmd("XCLAIM")
        .arg(&[
            "x",
            "g",
            "c1",
            "0",
            "1-0",
            "IDLE",
            "700000",
            "RETRYCOUNT",
            "1",
            "JUSTID",
        ])
        .cmd("RECLAIM.STATS")
        .arg(&["x", "g"])
        .query(&mut c)
        .expect("XCLAIM and STATS");
    assert_eq!(int_field(&st, "stale-not-before"), 0);
    wait_for(20, "the entry made stale by XCLAIM IDLE moved", || {
        (try_stat(&mut c, "x", "g", "claimed") == Some(1)).then_some(())
    });

    wait_scans_skipped(&mut c, "x", "g", 1);
    let _: Value = q(
        &mut c,
        &[
            "EVAL",
            "return redis.call('XCLAIM', KEYS[1], 'g', 'c1', 0, '2-0', 'IDLE', 700000, 'JUSTID')",
            "1",
            "x",
        ],
    );
    wait_for(20, "the entry made stale from a script moved", || {
        (try_stat(&mut c, "x", "g", "claimed") == Some(2)).then_some(())
    });
    assert_eq!(
        pel_state(&mut c, "x", "g"),
        [
            one("1-0", "reclaim", 1),
            one("2-0", "reclaim", 1),
            one("3-0", "c1", 1)
        ]
    );
}

/// Stream `k` with one entry `1-0` (`job poison`) delivered once to `c1`, and a policy
/// `MIN-IDLE 600000 MAX-DELIVERIES 2 DLQ <k>:dlq INTERVAL 50`: nothing is stale for 10 minutes.
fn poison_under_max_2(c: &mut Connection, k: &str) {
    group(c, k, "g");
    add(c, k, "1-0", &[("job", "poison")]);
    deliver(c, k, "g", "c1", None);
    let dlq = format!("{k}:dlq");
    set_policy_opts(
        c,
        k,
        "g",
        &format!("MIN-IDLE 600000 MAX-DELIVERIES 2 DLQ {dlq} INTERVAL 50"),
    );
}

/// Waits until [`poison_under_max_2`]'s entry, delivered 3 times, is in the DLQ and acknowledged.
fn wait_poison_dead_lettered(c: &mut Connection, k: &str) {
    let dlq = format!("{k}:dlq");
    wait_for(20, "the over-delivered entry in the DLQ", || {
        (xlen(c, &dlq) == 1).then_some(())
    });
    assert_eq!(
        without_moved_ms(&xrange_text(c, &dlq)[0].1),
        dlq_fields(&[("job", "poison")], k, "g", "1-0", "c1", 3)
    );
    assert_eq!(pel_total(c, k, "g"), 0);
}

/// With MAX-DELIVERIES, the first pass pages every entry; later passes skip or scan; a history
/// read from a script is seen, so the next pass pages the reading consumer's entries and
/// dead-letters the one over the limit while it is fresh.
#[test]
fn history_read_from_a_script_brings_back_a_full_pass() {
    let s = Server::new();
    let mut c = s.conn();
    poison_under_max_2(&mut c, "f");
    wait_scans_skipped(&mut c, "f", "g", 2);
    assert_eq!(try_stat(&mut c, "f", "g", "full-passes"), Some(1));
    assert_eq!(try_stat(&mut c, "f", "g", "consumer-checks"), Some(0));
    let reread = "return redis.call('XREADGROUP', 'GROUP', 'g', 'c1', 'STREAMS', KEYS[1], '0')";
    let _: Value = q(&mut c, &["EVAL", reread, "1", "f"]);
    let _: Value = q(&mut c, &["EVAL", reread, "1", "f"]); // count 3 > 2, fresh
    wait_poison_dead_lettered(&mut c, "f");
    // Found by paging c1's own entries, not the whole PEL again.
    assert!(stat(&mut c, "f", "g", "consumer-checks") >= 1);
    assert_eq!(try_stat(&mut c, "f", "g", "full-passes"), Some(1));
}

/// Passes that skip their scan still purge entries trimmed from the stream.
#[test]
fn skipped_scans_still_purge_trimmed_entries() {
    let s = Server::new();
    let mut c = s.conn();
    delivered_to_c1(&mut c, "t", "g", 20);
    set_policy_opts(&mut c, "t", "g", "MIN-IDLE 600000 INTERVAL 50");
    wait_scans_skipped(&mut c, "t", "g", 2);
    run(&mut c, &["XTRIM", "t", "MINID", "11"]);
    wait_for(20, "the 10 trimmed entries purged", || {
        (try_stat(&mut c, "t", "g", "deleted") == Some(10)).then_some(())
    });
    assert_eq!(pel_total(&mut c, "t", "g"), 10);
    assert_eq!(try_stat(&mut c, "t", "g", "claimed"), Some(0));
    assert!(stat(&mut c, "t", "g", "stale-not-before") > 0);
}

/// A stream renamed over a policy's stream brings a PEL the module never saw: the skip ends.
#[test]
fn stream_renamed_over_a_policy_stream_is_scanned_at_once() {
    let s = Server::new();
    let mut c = s.conn();
    delivered_to_c1(&mut c, "r", "g", 3);
    set_policy_opts(&mut c, "r", "g", "MIN-IDLE 600000 INTERVAL 50");
    wait_scans_skipped(&mut c, "r", "g", 2);
    // Another stream with a stale entry in the same group: made before the policy could see it.
    group(&mut c, "other", "g");
    add_range(&mut c, "other", 1, 2);
    deliver(&mut c, "other", "g", "c9", None);
    fix1(&mut c, "other", "g", "c9", "2-0", 700_000, 1);
    run(&mut c, &["RENAME", "other", "r"]);
    wait_for(20, "the renamed stream's stale entry moved", || {
        (try_stat(&mut c, "r", "g", "claimed") == Some(1)).then_some(())
    });
    assert_eq!(
        pel_state(&mut c, "r", "g"),
        [one("1-0", "c9", 1), one("2-0", "reclaim", 1)]
    );
}

/// A history read queued in MULTI passes the command filter when it is queued; the check of the
/// consumer's entries may complete before EXEC runs it. EXEC makes the touch again, so the next
/// pass checks again and finds the count over the limit while the entry is fresh.
#[test]
fn history_read_inside_multi_is_seen_at_exec() {
    let s = Server::new();
    let mut c = s.conn();
    poison_under_max_2(&mut c, "m");
    wait_scans_skipped(&mut c, "m", "g", 1);
    let checks = stat(&mut c, "m", "g", "consumer-checks");
    let mut tx = s.conn();
    let _: () = q(&mut tx, &["MULTI"]);
    for _ in 0..2 {
        let queued: String = q(
            &mut tx,
            &["XREADGROUP", "GROUP", "g", "c1", "STREAMS", "m", "0"],
        );
        assert_eq!(queued, "QUEUED");
    }
    // Queued, not run: the touches the filter saw change nothing before EXEC (a pass goes by).
    wait_scans_skipped(&mut c, "m", "g", 2);
    assert_eq!(stat(&mut c, "m", "g", "consumer-checks"), checks);
    assert_eq!(pel_state(&mut c, "m", "g"), [one("1-0", "c1", 1)]);
    let _: Value = q(&mut tx, &["EXEC"]); // count 3 > 2, fresh
    wait_poison_dead_lettered(&mut c, "m");
}

/// The README's recovery worker reads the claimant's history in a loop. That touches only the
/// claimant's entries: passes check them, and go on skipping their scans of everyone else's.
#[test]
fn recovery_worker_history_reads_cost_a_consumer_check_not_a_full_pass() {
    let s = Server::new();
    let mut c = s.conn();
    delivered_to_c1(&mut c, "w", "g", 1000);
    set_policy_opts(
        &mut c,
        "w",
        "g",
        "MIN-IDLE 600000 MAX-DELIVERIES 3 DLQ w:dlq INTERVAL 50",
    );
    wait_scans_skipped(&mut c, "w", "g", 1);
    let skipped = stat(&mut c, "w", "g", "scans-skipped");
    for _ in 0..3 {
        // Read first: the check may run right after the touch.
        let checks = stat(&mut c, "w", "g", "consumer-checks");
        reread_history(&mut c, "w", "g", "reclaim");
        wait_for(20, "a check of the claimant's entries", || {
            (stat(&mut c, "w", "g", "consumer-checks") > checks).then_some(())
        });
    }
    wait_scans_skipped(&mut c, "w", "g", 1);
    assert_eq!(try_stat(&mut c, "w", "g", "full-passes"), Some(1));
    assert!(stat(&mut c, "w", "g", "scans-skipped") >= skipped + 4);
    assert!(stat(&mut c, "w", "g", "stale-not-before") > server_ms(&mut c));
    assert_eq!(pel_total(&mut c, "w", "g"), 1000);
}

/// A policy key deleted, expired or moved away by hand stops counting at once.
#[test]
fn policy_key_removed_by_hand_is_forgotten_at_once() {
    let s = Server::new();
    let mut c = s.conn();
    for k in ["pa", "pb", "pc"] {
        group(&mut c, k, "g");
        set_policy_opts(&mut c, k, "g", &format!("INTERVAL {HOUR}"));
    }
    assert_eq!(reclaim_info(&mut c, "policies"), 3);
    let keys: Vec<String> = q(&mut c, &["KEYS", "reclaim:policy:*"]);
    let key_of = |k: &str| -> String {
        keys.iter()
            .find(|p| p.ends_with(&format!(":{k}")))
            .cloned()
            .unwrap_or_else(|| panic!("no policy key for {k} in {keys:?}"))
    };
    let _: i64 = q(&mut c, &["DEL", &key_of("pa")]);
    assert_eq!(reclaim_info(&mut c, "policies"), 2);
    let _: i64 = q(&mut c, &["MOVE", &key_of("pb"), "1"]);
    assert_eq!(
        reclaim_info(&mut c, "policies"),
        2,
        "pb's policy now lives in db 1"
    );
    let _: i64 = q(&mut c, &["PEXPIRE", &key_of("pc"), "1"]);
    wait_for(20, "the expired policy forgotten", || {
        (reclaim_info(&mut c, "policies") == 1).then_some(())
    });
    assert!(try_stat(&mut c, "pa", "g", "passes").is_none());
    assert!(try_stat(&mut c, "pc", "g", "passes").is_none());
}

/// `MOVE` and `COPY ... DB` leave the caller in its own database. Valkey 8.1 selects the event's
/// database on the calling client for a module's keyspace callback and does not restore it
/// (valkey-io/valkey#1819, fixed by #4024): the module selects the caller's database again.
#[test]
fn move_and_copy_leave_the_caller_in_its_database() {
    let s = Server::new();
    let mut c = s.conn();
    let db = |c: &mut Connection| -> String {
        let info: String = q(c, &["CLIENT", "INFO"]);
        info.split(' ')
            .find_map(|f| f.strip_prefix("db="))
            .unwrap_or_default()
            .to_string()
    };
    let _: () = q(&mut c, &["SET", "plain", "1"]);
    let _: i64 = q(&mut c, &["MOVE", "plain", "1"]);
    assert_eq!(db(&mut c), "0");
    let _: () = q(&mut c, &["SET", "plain2", "1"]);
    let _: i64 = q(&mut c, &["COPY", "plain2", "copied", "DB", "2"]);
    assert_eq!(db(&mut c), "0");
    // A policy key, which the module's handler follows into its new database.
    group(&mut c, "mv", "g");
    set_policy_opts(&mut c, "mv", "g", &format!("INTERVAL {HOUR}"));
    let keys: Vec<String> = q(&mut c, &["KEYS", "reclaim:policy:*"]);
    let _: i64 = q(&mut c, &["MOVE", &keys[0], "4"]);
    assert_eq!(db(&mut c), "0");
    let _: () = q(&mut c, &["SELECT", "5"]);
    let _: () = q(&mut c, &["SET", "x", "1"]);
    let _: i64 = q(&mut c, &["MOVE", "x", "0"]);
    assert_eq!(db(&mut c), "5");
}

// ---------------------------------------------------------------------------------------------
// RECLAIM.SWEEP and RECLAIM.STATS: replies, rejected input, binary names, ACL
// ---------------------------------------------------------------------------------------------

#[test]
fn sweep_and_stats_replies_resp2() {
    let s = Server::new();
    let mut c = s.conn();
    // A policy on a stream that does not exist yet: SWEEP does nothing.
    set_policy_args(&mut c, b"s", b"g", &words("MIN-IDLE 1 INTERVAL 100000"));
    assert_eq!(
        run(&mut c, &["RECLAIM.SWEEP", "s", "g"]),
        Value::Array(vec![
            bs(b"claimed"),
            Value::Int(0),
            bs(b"dead-lettered"),
            Value::Int(0),
            bs(b"deleted"),
            Value::Int(0),
            bs(b"dlq-trimmed"),
            Value::Int(0),
            bs(b"tombstones"),
            Value::Int(0),
        ])
    );
    assert_eq!(
        str_field(&stats(&mut c, "s", "g"), "status"),
        "waiting: no stream s"
    );

    // The group exists, nothing pending: the timer's first pass completes.
    create_group(&mut c, b"s", b"g");
    wait_for(10, "the first timer pass", || {
        (int_field(&stats(&mut c, "s", "g"), "passes") >= 1).then_some(())
    });
    assert_eq!(str_field(&stats(&mut c, "s", "g"), "status"), "active");
    // Two entries pending for c1; the next timer pass is 100 s away, so only SWEEP claims them.
    add_numbered(&mut c, "s", 2);
    deliver(&mut c, "s", "g", "c1", None);
    let mut claimed = 0;
    wait_for(10, "RECLAIM.SWEEP to claim both entries", || {
        let r = run(&mut c, &["RECLAIM.SWEEP", "s", "g", "LIMIT", "100"]);
        assert_eq!(int_field(&r, "dead-lettered"), 0);
        assert_eq!(int_field(&r, "deleted"), 0);
        claimed += int_field(&r, "claimed");
        (claimed == 2).then_some(())
    });
    let p = pending(&mut c, "s", "g");
    assert_eq!(p.len(), 2);
    assert!(
        p.iter().all(|e| e.consumer == "reclaim" && e.count == 1),
        "moved into the inbox, a move is not a delivery: {p:?}"
    );
    let st = stats(&mut c, "s", "g");
    assert_eq!(int_field(&st, "claimed"), 2);
    assert_eq!(int_field(&st, "inbox"), 2, "{st:?}");
    assert_eq!(int_field(&st, "redelivered"), 0, "{st:?}");
    assert_eq!(int_field(&st, "errors"), 0);
    assert_eq!(reclaim_info(&mut c, "claimed"), 2);
    let names: Vec<String> = pairs(&st).into_iter().map(|(k, _)| k).collect();
    assert_eq!(names, STATS_FIELDS);
}

#[test]
fn sweep_and_stats_rejections() {
    let s = Server::new();
    let mut c = s.conn();
    // No policy.
    assert_eq!(
        error_of(&mut c, &bin_cmd("RECLAIM.SWEEP", &words("s g"))),
        NO_POLICY
    );
    assert_eq!(
        error_of(&mut c, &bin_cmd("RECLAIM.STATS", &words("s g"))),
        NO_POLICY
    );
    assert_eq!(
        error_of(&mut c, &bin_cmd("RECLAIM.SWEEP", &words("s g LIMIT 5"))),
        NO_POLICY
    );
    set_policy_args(&mut c, b"s", b"g", &[]);
    // Another group of the same stream has no policy.
    assert_eq!(
        error_of(&mut c, &bin_cmd("RECLAIM.SWEEP", &words("s h"))),
        NO_POLICY
    );
    assert_eq!(
        error_of(&mut c, &bin_cmd("RECLAIM.STATS", &words("s h"))),
        NO_POLICY
    );

    const LIMIT: &str = "ERR LIMIT must be a positive integer";
    let mut cases: Vec<(Vec<&[u8]>, &str)> = Vec::new();
    // Values separated by `|`: empty ones and ones with spaces among them.
    for v in "0|-1|-0|abc|+1| 1|1 |1.5||007|9223372036854775808"
        .split('|')
        .map(str::as_bytes)
    {
        cases.push((args![b"LIMIT", v], LIMIT));
        cases.push((args![b"limit", v], LIMIT));
    }
    cases.extend([
        (words("LIMIT"), "ERR option LIMIT needs a value"),
        (
            words("LIMIT 1 LIMIT 2"),
            "ERR option LIMIT given more than once",
        ),
        (words("FOO 1"), "ERR unknown option 'FOO'"),
        (words("COUNT 1"), "ERR unknown option 'COUNT'"),
        (words("LIMIT 1 X"), "ERR unknown option 'X'"),
    ]);
    for (opts, want) in &cases {
        let mut a: Vec<&[u8]> = words("s g");
        a.extend_from_slice(opts);
        assert_eq!(
            error_of(&mut c, &bin_cmd("RECLAIM.SWEEP", &a)),
            *want,
            "{opts:?}"
        );
    }
    // LIMIT at the top of the range is accepted.
    let r = run(
        &mut c,
        &["RECLAIM.SWEEP", "s", "g", "LIMIT", "9223372036854775807"],
    );
    assert_eq!(int_field(&r, "claimed"), 0);
    assert_eq!(
        policy_reply(&mut c, b"s", b"g"),
        PolicyView::defaults().reply_on(b"s", false)
    );

    // The stream key turned into a string after the policy was set.
    let _: () = cmd("SET").arg("s").arg("x").query(&mut c).unwrap();
    assert_eq!(
        error_of(&mut c, &bin_cmd("RECLAIM.SWEEP", &words("s g"))),
        WRONGTYPE
    );
    // The DLQ key turned into a string after the policy was set.
    create_group(&mut c, b"t", b"g");
    set_policy_args(&mut c, b"t", b"g", &words("DLQ t:dlq MAX-DELIVERIES 1"));
    let _: () = cmd("SET").arg("t:dlq").arg("x").query(&mut c).unwrap();
    assert_eq!(
        error_of(&mut c, &bin_cmd("RECLAIM.SWEEP", &words("t g"))),
        WRONGTYPE_DLQ
    );
}

#[test]
fn sweep_claims_for_a_binary_claimant() {
    let s = Server::new();
    let mut c = s.conn();
    let key: &[u8] = b"st\x00r\xffe\r\nam x";
    let group: &[u8] = b"gr\x00\xff\r\n p";
    let claimant: &[u8] = b"cl\x00\xffai\r\nm nt";
    create_group(&mut c, key, group);
    let ids = add_entries(&mut c, key, "n", 3);
    read_group(&mut c, key, group, b"c1");
    // Make the entries stale now (JUSTID keeps their count at 1), and let only the first pass run.
    let mut xc = cmd("XCLAIM");
    xc.arg(key).arg(group).arg("c1").arg(0);
    for id in &ids {
        xc.arg(id);
    }
    let _: Value = xc
        .arg("IDLE")
        .arg(200_000)
        .arg("JUSTID")
        .query(&mut c)
        .unwrap();
    set_policy_args(
        &mut c,
        key,
        group,
        &[
            b"MIN-IDLE",
            b"100000",
            b"INTERVAL",
            b"3600000",
            b"CLAIMANT",
            claimant,
        ],
    );
    let p = wait_for(10, "the binary claimant to own every entry", || {
        let p = pending_raw(&mut c, key, group);
        p.iter().all(|e| e.1 == claimant).then_some(p)
    });
    assert_eq!(
        p,
        ids.iter()
            .map(|id| (id.clone(), claimant.to_vec(), 1))
            .collect::<Vec<_>>(),
        "moved, count unchanged"
    );
    let st = reply_of(&mut c, &bin_cmd("RECLAIM.STATS", &[key, group]));
    assert_eq!(int_field(&st, "claimed"), 3);
    assert_eq!(
        int_field(&st, "inbox"),
        3,
        "the binary claimant's inbox: {st:?}"
    );
    assert_eq!(int_field(&st, "errors"), 0);
    assert_eq!(reclaim_info(&mut c, "claimed"), 3);
    // XINFO CONSUMERS shows the binary consumer by its exact name.
    let consumers: Vec<Value> = bin_cmd("XINFO", &[b"CONSUMERS", key, group])
        .query(&mut c)
        .unwrap();
    let names: Vec<Value> = consumers
        .iter()
        .map(|v| {
            pairs(v)
                .into_iter()
                .find(|(k, _)| k == "name")
                .expect("consumer name")
                .1
        })
        .collect();
    assert!(names.contains(&bs(claimant)), "{names:?}");
}

#[test]
fn acl_sweep_needs_write_access_to_the_dlq() {
    let s = Server::new();
    let mut admin = s.conn();
    create_group(&mut admin, b"w:s", b"g");
    // Entries delivered once are dead-lettered as soon as they are stale.
    set_policy_args(
        &mut admin,
        b"w:s",
        b"g",
        &words("MIN-IDLE 1 DLQ d:dlq MAX-DELIVERIES 1 INTERVAL 100000"),
    );
    set_policy_args(&mut admin, b"w:s", b"nodlq", &words("INTERVAL 100000"));
    // The timer's first pass (empty PEL) is done; the next one is 100 s away.
    wait_for(10, "the first timer pass", || {
        (int_field(&stats(&mut admin, "w:s", "g"), "passes") >= 1).then_some(())
    });
    let _: String = q(&mut admin, &["XADD", "w:s", "*", "n", "1"]);
    deliver(&mut admin, "w:s", "g", "c1", None);

    acl_setuser(&mut admin, &["w", "on", "nopass", "~w:*", "+@all"]);
    acl_setuser(
        &mut admin,
        &["wr", "on", "nopass", "~w:*", "%R~d:*", "+@all"],
    );
    acl_setuser(
        &mut admin,
        &["ww", "on", "nopass", "~w:*", "%W~d:*", "+@all"],
    );
    let mut w = s.conn_as("w");
    let mut wr = s.conn_as("wr");
    let mut ww = s.conn_as("ww");
    for con in [&mut w, &mut wr] {
        assert_eq!(
            error_of(con, &bin_cmd("RECLAIM.SWEEP", &words("w:s g"))),
            NOPERM_DLQ
        );
        assert_eq!(
            error_of(con, &bin_cmd("RECLAIM.SWEEP", &words("w:s g LIMIT 1"))),
            NOPERM_DLQ
        );
        // A policy without a DLQ sweeps fine, and STATS needs no DLQ access.
        let r = reply_of(con, &bin_cmd("RECLAIM.SWEEP", &words("w:s nodlq")));
        assert_eq!(int_field(&r, "dead-lettered"), 0);
        let _ = reply_of(con, &bin_cmd("RECLAIM.STATS", &words("w:s g")));
    }
    // The refused sweeps did not touch the PEL or the DLQ.
    let p = pending_raw(&mut admin, b"w:s", b"g");
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].1, b"c1".to_vec());
    let n: i64 = cmd("XLEN").arg("d:dlq").query(&mut admin).unwrap();
    assert_eq!(n, 0);
    assert_eq!(
        int_field(&stats(&mut admin, "w:s", "g"), "dead-lettered"),
        0
    );

    // Write-only access to the DLQ is enough.
    let mut dead = 0;
    wait_for(10, "a sweep by `ww` to dead-letter the entry", || {
        let r = run(&mut ww, &["RECLAIM.SWEEP", "w:s", "g"]);
        dead += int_field(&r, "dead-lettered");
        (dead == 1).then_some(())
    });
    assert_eq!(pending_raw(&mut admin, b"w:s", b"g"), vec![]);
    let n: i64 = cmd("XLEN").arg("d:dlq").query(&mut admin).unwrap();
    assert_eq!(n, 1);
}

/// The consumers of (s, g), by name, with (pending, idle ms) as `XINFO CONSUMERS` lists them.
fn consumers(
    c: &mut Connection,
    s: &str,
    g: &str,
) -> std::collections::BTreeMap<String, (i64, i64)> {
    let v: Vec<std::collections::HashMap<String, Value>> = q(c, &["XINFO", "CONSUMERS", s, g]);
    v.into_iter()
        .map(|m| {
            let int = |k: &str| match &m[k] {
                Value::Int(n) => *n,
                other => panic!("{k}: {other:?}"),
            };
            let name: String = redis::from_redis_value(m["name"].clone()).unwrap();
            (name, (int("pending"), int("idle")))
        })
        .collect()
}

#[test]
fn forget_idle_deletes_idle_consumers_without_pending_entries_everywhere() {
    let s = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let replica = s.replica(&[]);
    let mut c = s.conn();
    create_group(&mut c, b"f", b"g");
    let ids = add_entries(&mut c, b"f", "x", 2);
    // busy keeps an entry pending; gone acknowledged its own; the module's own two exist too.
    let _: Value = run(
        &mut c,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "busy",
            "COUNT",
            "1",
            "STREAMS",
            "f",
            ">",
        ],
    );
    let _: Value = run(
        &mut c,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "gone",
            "COUNT",
            "1",
            "STREAMS",
            "f",
            ">",
        ],
    );
    let _: i64 = q(&mut c, &["XACK", "f", "g", &ids[1]]);
    for own in ["reclaim", "reclaim:delayed"] {
        let _: i64 = q(&mut c, &["XGROUP", "CREATECONSUMER", "f", "g", own]);
    }
    // Nothing is ever stale: the pass only forgets.
    set_policy_opts(
        &mut c,
        "f",
        "g",
        "MIN-IDLE 3600000 INTERVAL 50 FORGET-IDLE 400",
    );
    let get: Vec<Value> = q(&mut c, &["RECLAIM.POLICY", "GET", "f", "g"]);
    let at = get
        .iter()
        .position(|v| *v == Value::BulkString(b"forget-idle".to_vec()));
    assert_eq!(get[at.expect("forget-idle in GET") + 1], Value::Int(400));
    // Within one pass once it has: a pass that starts after that deletes it.
    wait_for(10, "gone idle for FORGET-IDLE", || {
        consumers(&mut c, "f", "g")
            .get("gone")
            .map_or(true, |g| g.1 >= 400)
            .then_some(())
    });
    wait_passes(&mut c, "f", "g", 2);
    let left = consumers(&mut c, "f", "g");
    assert_eq!(
        left.keys().collect::<Vec<_>>(),
        ["busy", "reclaim", "reclaim:delayed"],
        "{left:?}"
    );
    assert_eq!(left["busy"].0, 1);
    // More passes: busy (pending) and the module's own stay, however idle.
    wait_passes(&mut c, "f", "g", 3);
    assert_eq!(consumers(&mut c, "f", "g").len(), 3);
    assert_eq!(stat(&mut c, "f", "g", "consumers-forgotten"), 1);
    assert_eq!(reclaim_info(&mut c, "consumers_forgotten"), 1);
    // The replica and the AOF delete it too, as XGROUP DELCONSUMER.
    let mut rc = replica.conn();
    wait_for(10, "the deletion on the replica", || {
        let on_replica = consumers(&mut rc, "f", "g");
        (on_replica.keys().collect::<Vec<_>>() == ["busy", "reclaim", "reclaim:delayed"])
            .then_some(())
    });
    let deleted: Vec<Vec<Vec<u8>>> = s
        .aof_manifest_files()
        .iter()
        .filter(|f| f.1 == "i")
        .flat_map(|f| parse_aof(&f.2))
        .filter(|c| is_cmd(c, "XGROUP") && c[1].eq_ignore_ascii_case(b"DELCONSUMER"))
        .collect();
    assert_eq!(deleted.len(), 1, "{deleted:?}");
    assert_eq!(
        deleted[0][2..],
        [b"f".to_vec(), b"g".to_vec(), b"gone".to_vec()]
    );
}

#[test]
fn forget_idle_is_checked_as_xgroup_delconsumer_and_bad_values_change_nothing() {
    let s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"f", b"g");
    let _: () = q(
        &mut c,
        &[
            "ACL",
            "SETUSER",
            "u",
            "on",
            "nopass",
            "~*",
            "+@all",
            "-xgroup|delconsumer",
        ],
    );
    let mut u = s.conn();
    let _: () = q(&mut u, &["AUTH", "u", "x"]);
    assert_eq!(
        set_policy_err(&mut u, b"f", b"g", &[b"FORGET-IDLE", b"1000"]),
        "NOPERM this user has no permissions to run XGROUP on the stream key"
    );
    set_policy_opts(&mut u, "f", "g", "FORGET-IDLE 0");
    for (v, want) in [
        ("-1", "ERR FORGET-IDLE must be a non-negative integer (ms)"),
        ("1.5", "ERR FORGET-IDLE must be a non-negative integer (ms)"),
        (
            "99999999999999999999",
            "ERR FORGET-IDLE must be a non-negative integer (ms)",
        ),
    ] {
        assert_eq!(
            set_policy_err(&mut c, b"f", b"g", &[b"FORGET-IDLE", v.as_bytes()]),
            want
        );
    }
    let get: Vec<Value> = q(&mut c, &["RECLAIM.POLICY", "GET", "f", "g"]);
    let at = get
        .iter()
        .position(|v| *v == Value::BulkString(b"forget-idle".to_vec()));
    assert_eq!(get[at.unwrap() + 1], Value::Int(0));
}

#[test]
fn forget_idle_deletes_at_most_100_consumers_per_pass() {
    let s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"many", b"g");
    // The timer's first pass, then none for 10 minutes: RECLAIM.SWEEP runs the passes.
    set_policy_opts(&mut c, "many", "g", "INTERVAL 600000 FORGET-IDLE 300");
    wait_for(10, "the policy's first pass", || {
        (stat(&mut c, "many", "g", "passes") >= 1).then_some(())
    });
    let mut p = redis::pipe();
    for i in 0..150 {
        p.cmd("XGROUP")
            .arg(&["CREATECONSUMER", "many", "g"])
            .arg(format!("pod-{i}"));
    }
    let _: Vec<i64> = p.query(&mut c).unwrap();
    wait_for(10, "every consumer idle for FORGET-IDLE", || {
        consumers(&mut c, "many", "g")
            .values()
            .all(|(_, idle)| *idle >= 300)
            .then_some(())
    });
    let _: Value = run(&mut c, &["RECLAIM.SWEEP", "many", "g"]);
    assert_eq!(consumers(&mut c, "many", "g").len(), 50);
    assert_eq!(stat(&mut c, "many", "g", "consumers-forgotten"), 100);
    let _: Value = run(&mut c, &["RECLAIM.SWEEP", "many", "g"]);
    assert!(consumers(&mut c, "many", "g").is_empty());
    assert_eq!(stat(&mut c, "many", "g", "consumers-forgotten"), 150);
}
