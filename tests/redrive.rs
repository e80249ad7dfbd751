//! `RECLAIM.REDRIVE`: dead-lettered entries go back to the group they failed in, for another
//! full set of `MAX-DELIVERIES` attempts, one step at a time from the timer: each entry is in the
//! DLQ or back in its group, never both and never neither, also across a restart from the AOF and
//! a promotion of a replica.

use reclaim_testkit::*;

use std::time::{Duration, Instant};

/// A stream `s` with group `g` (and the stream's policy: MAX-DELIVERIES 3, DLQ `s:dlq`,
/// MIN-IDLE `min_idle`, INTERVAL `interval`), holding `n` entries, every one of them
/// dead-lettered as delivered to `w` more than three times (`RETRYCOUNT 4`, then
/// `RECLAIM.SWEEP`). Returns their IDs.
fn dead_letters(
    c: &mut Connection,
    s: &str,
    n: usize,
    min_idle: i64,
    interval: &str,
) -> Vec<String> {
    let policy = format!("MIN-IDLE {min_idle} MAX-DELIVERIES 3 DLQ {s}:dlq INTERVAL {interval}");
    let ids = dead_letters_under(c, s, &policy, n);
    assert_eq!(xlen(c, format!("{s}:dlq")), n as i64);
    ids
}

/// A stream `st` with group `g` under the policy `opts` (which dead-letters at 3 deliveries),
/// holding `n` entries, every one of them dead-lettered as delivered to `w` more than three times
/// (`RETRYCOUNT 4`, then `RECLAIM.SWEEP` until the PEL is empty). Returns their IDs.
fn dead_letters_under(c: &mut Connection, st: &str, opts: &str, n: usize) -> Vec<String> {
    create_group(c, st.as_bytes(), b"g");
    set_policy_opts(c, st, "g", opts);
    let ids = add_numbered(c, st, n);
    deliver(c, st, "g", "w", None);
    for chunk in ids.chunks(500) {
        set_deliveries(c, st.as_bytes(), b"g", b"w", chunk, 4);
    }
    wait_for(10, "every entry dead-lettered", || {
        let _: Value = cmd("RECLAIM.SWEEP").arg(st).arg("g").query(c).ok()?;
        (pel_total(c, st, "g") == 0).then_some(())
    });
    ids
}

/// Every ID of `all` is exactly once either pending in (s, g) or in the DLQ.
fn assert_once(c: &mut Connection, s: &str, all: &[String]) {
    let (pel, dlq) = pel_and_dlq(c, s, "g", &format!("{s}:dlq"));
    assert_partition(&pel, &dlq, all);
}

/// Starts a second task, on `witness:dlq` (20 dead letters of stream `witness`), at RATE 10: an
/// entry every 100 ms. Its moves are the positive sign that the timer ran rounds of redrive steps
/// (every running task gets a step in each) for that long: a test that asserts that another task
/// did nothing waits for them, never for a duration.
fn start_witness(c: &mut Connection) {
    dead_letters(c, "witness", 20, 60000, HOUR);
    redrive(c, &["witness:dlq", "RATE", "10"]);
}

/// Waits until the witness task ([`start_witness`]) moved `n` more entries than now: `n` times
/// 100 ms of redrive rounds.
fn witness_moves(c: &mut Connection, n: i64) {
    let moved = |c: &mut Connection| int_field(&status_of(c, "witness:dlq"), "moved");
    let start = moved(c);
    wait_for(20, &format!("{n} more moves of the witness task"), || {
        (moved(c) >= start + n).then_some(())
    });
}

#[test]
fn a_redriven_entry_is_processed_once_more_with_its_count_started_again() {
    let s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"quiz", b"g");
    set_policy_opts(
        &mut c,
        "quiz",
        "g",
        "MIN-IDLE 100 MAX-DELIVERIES 3 DLQ quiz:dlq INTERVAL 20",
    );
    let id: String = q(&mut c, &["XADD", "quiz", "*", "question", "6x7"]);
    // A broken handler: three deliveries, never acknowledged; then the entry is dead-lettered.
    let mut deliveries = 0;
    wait_for(20, "the entry dead-lettered", || {
        if let Some(e) = readgroup(&mut c, "quiz", "g", "w", 1, Some(50)).first() {
            assert_eq!(e.0, id);
            deliveries += 1;
        }
        (xlen(&mut c, "quiz:dlq") == 1).then_some(())
    });
    assert_eq!(deliveries, 3);
    let dlq = xrange(&mut c, b"quiz:dlq");
    assert_eq!(entry_field(&dlq[0], "reclaim-deliveries"), b"3");
    // The fix is deployed: redrive.
    let task: i64 = redirect_int(redrive(&mut c, &["quiz:dlq"]));
    assert_eq!(task, 1);
    let st = wait_state(&mut c, "quiz:dlq", "done", 10);
    assert_eq!(int_field(&st, "moved"), 1);
    assert_eq!(int_field(&st, "skipped"), 0);
    assert_eq!(int_field(&st, "left"), 0);
    assert_eq!(xlen(&mut c, "quiz:dlq"), 0);
    // Back in the inbox with count 0: the next read is its first delivery of the new round.
    let p = pending(&mut c, "quiz", "g");
    assert_eq!(
        (p[0].id.as_str(), p[0].consumer.as_str(), p[0].count),
        (id.as_str(), "reclaim", 0)
    );
    let got = readgroup(&mut c, "quiz", "g", "fixed", 1, Some(1000));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, id);
    assert_eq!(got[0].1, vec![b"question".to_vec(), b"6x7".to_vec()]);
    let p = pending(&mut c, "quiz", "g");
    assert_eq!((p[0].consumer.as_str(), p[0].count), ("fixed", 1));
    assert_eq!(q::<i64>(&mut c, &["XACK", "quiz", "g", &id]), 1);
    assert_eq!(pel_total(&mut c, "quiz", "g"), 0);
    assert_eq!(xlen(&mut c, "quiz:dlq"), 0);
}

fn redirect_int(v: Value) -> i64 {
    redis::from_redis_value(v).expect("integer reply")
}

#[test]
fn only_the_group_it_failed_in_sees_it_again() {
    let s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"two", b"g");
    run(&mut c, &["XGROUP", "CREATE", "two", "audit", "$"]);
    set_policy_opts(
        &mut c,
        "two",
        "g",
        "MIN-IDLE 60000 MAX-DELIVERIES 3 DLQ two:dlq INTERVAL 3600000",
    );
    let id: String = q(&mut c, &["XADD", "two", "*", "k", "v"]);
    // The other group processed it once, successfully.
    deliver(&mut c, "two", "audit", "a", None);
    assert_eq!(q::<i64>(&mut c, &["XACK", "two", "audit", &id]), 1);
    let audit_before = run(&mut c, &["XINFO", "GROUPS", "two"]);
    // Group g failed it three times.
    deliver(&mut c, "two", "g", "w", None);
    set_deliveries(&mut c, b"two", b"g", b"w", std::slice::from_ref(&id), 4);
    run(&mut c, &["RECLAIM.SWEEP", "two", "g"]);
    assert_eq!(xlen(&mut c, "two:dlq"), 1);
    redrive(&mut c, &["two:dlq"]);
    wait_state(&mut c, "two:dlq", "done", 10);
    assert_eq!(
        pending(&mut c, "two", "g")
            .iter()
            .map(|p| (p.id.clone(), p.count))
            .collect::<Vec<_>>(),
        vec![(id.clone(), 0)]
    );
    // The other group: nothing new, nothing pending, its state untouched.
    let v: Value = run(
        &mut c,
        &["XREADGROUP", "GROUP", "audit", "a", "STREAMS", "two", ">"],
    );
    assert_eq!(v, Value::Nil);
    assert_eq!(pel_total(&mut c, "two", "audit"), 0);
    let after = run(&mut c, &["XINFO", "GROUPS", "two"]);
    let audit = |v: &Value| {
        items(v)
            .iter()
            .find(|g| str_field(g, "name") == "audit")
            .map(|g| (str_field(g, "last-delivered-id"), int_field(g, "pending")))
    };
    assert_eq!(audit(&after), audit(&audit_before));
    let got = readgroup(&mut c, "two", "g", "w2", 10, Some(1000));
    assert_eq!(
        got.iter().map(|e| e.0.clone()).collect::<Vec<_>>(),
        vec![id]
    );
}

#[test]
fn rate_limits_the_moves_and_each_entry_moves_exactly_once() {
    let s = Server::new();
    let mut c = s.conn();
    let ids = dead_letters(&mut c, "r", 1000, 60000, HOUR);
    let ticks_before = tick_figures(&mut c);
    let t0 = Instant::now();
    redrive(&mut c, &["r:dlq", "RATE", "100"]);
    // A sample every 200 ms at most, for the report below.
    let mut samples: Vec<(Duration, i64, i64, i64)> = Vec::new();
    let st = wait_for(60, "the redrive done", || {
        let v = status_of(&mut c, "r:dlq");
        let due = samples
            .last()
            .is_none_or(|l| t0.elapsed() >= l.0 + Duration::from_millis(200));
        if due {
            let [.., round_us, over] = tick_figures(&mut c);
            samples.push((t0.elapsed(), int_field(&v, "moved"), round_us, over));
        }
        (str_field(&v, "state") == "done").then_some(v)
    });
    let took = t0.elapsed();
    eprintln!(
        "RATE 100 over 1000 entries took {:.2} s ({:.1} entries/s); over time (ms, moved, \
         redrive_max_round_us, redrive_rounds_over_budget): {:?}",
        took.as_secs_f64(),
        1000.0 / took.as_secs_f64(),
        samples
            .iter()
            .step_by(5)
            .chain(samples.last())
            .map(|(t, n, us, over)| (t.as_millis(), *n, *us, *over))
            .collect::<Vec<_>>()
    );
    // Reported, not asserted (tests never assert timing): whether a round of redrive steps ever
    // held the server past reclaim.tick-budget-us.
    let budget: Vec<String> = q(&mut c, &["CONFIG", "GET", "reclaim.tick-budget-us"]);
    eprintln!(
        "INFO reclaim (max_tick_us, max_tick_cpu_us, ticks_over_budget, redrive_max_round_us, \
         redrive_rounds_over_budget) with tick-budget-us {}: \
         before {:?}, after {:?}",
        budget.get(1).cloned().unwrap_or_default(),
        ticks_before,
        tick_figures(&mut c)
    );
    assert_eq!(int_field(&st, "moved"), 1000);
    assert_eq!(int_field(&st, "skipped"), 0);
    assert_eq!(int_field(&st, "rate"), 100);
    assert_eq!(xlen(&mut c, "r:dlq"), 0);
    let pel = pending_raw(&mut c, b"r", b"g");
    assert_eq!(pel.len(), 1000);
    assert!(
        pel.iter().all(|p| p.1 == b"reclaim" && p.2 == 0),
        "{:?}",
        &pel[..3]
    );
    assert_once(&mut c, "r", &ids);
}

/// `reclaim_max_tick_us`, `reclaim_max_tick_cpu_us` and `reclaim_ticks_over_budget` of
/// `INFO reclaim` (the longest tick, slice or round of redrive steps since load, and how many ran
/// past `reclaim.tick-budget-us`), then `reclaim_redrive_max_round_us` and
/// `reclaim_redrive_rounds_over_budget` (the same, of the rounds of redrive steps alone).
fn tick_figures(c: &mut Connection) -> [i64; 5] {
    [
        "max_tick_us",
        "max_tick_cpu_us",
        "ticks_over_budget",
        "redrive_max_round_us",
        "redrive_rounds_over_budget",
    ]
    .map(|f| reclaim_info(c, f))
}

/// A worker that reads with `RECLAIM.READGROUP` until `until` holds, acknowledging what it gets
/// when `fixed`; returns how many entries it got.
fn work_until(
    c: &mut Connection,
    s: &str,
    fixed: bool,
    until: impl Fn(&mut Connection) -> bool,
) -> usize {
    let mut got = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !until(c) {
        assert!(Instant::now() < deadline, "the worker waited too long");
        for (id, _) in readgroup(&mut *c, s, "g", "worker", 10, Some(20)) {
            got += 1;
            if fixed {
                let _: i64 = q(c, &["XACK", s, "g", &id]);
            }
        }
    }
    got
}

#[test]
fn canary_with_a_broken_handler_stops_and_leaves_the_rest() {
    let s = Server::new();
    let mut c = s.conn();
    let ids = dead_letters(&mut c, "cb", 10, 100, "20");
    redrive(&mut c, &["cb:dlq", "CANARY", "2", "WINDOW", "5000"]);
    // The handler is still broken: the two canaries fail three times and come back to the DLQ.
    let mut w = s.conn();
    work_until(&mut w, "cb", false, |c| {
        str_field(&status_of(c, "cb:dlq"), "state") == "canary-failed"
    });
    let st = status_of(&mut c, "cb:dlq");
    assert_eq!(int_field(&st, "moved"), 2);
    assert!(int_field(&st, "failed-again") >= 1, "{st:?}");
    assert_eq!(int_field(&st, "left"), 8);
    assert!(int_field(&st, "ended-ms") > 0);
    // The eight others never left the DLQ; the canaries are back in it (or about to be).
    wait_for(10, "both canaries dead-lettered again", || {
        (xlen(&mut c, "cb:dlq") == 10).then_some(())
    });
    assert_once(&mut c, "cb", &ids);
    let dlq = dlq_ids(&xrange(&mut c, b"cb:dlq"));
    assert_eq!(sorted(&dlq[..8]), ids[2..].to_vec());
    assert_eq!(sorted(&dlq[8..]), ids[..2].to_vec());
    // Nothing moves any more, through 300 ms of redrive rounds.
    start_witness(&mut c);
    witness_moves(&mut c, 4);
    assert_eq!(int_field(&status_of(&mut c, "cb:dlq"), "moved"), 2);
    // The moved set is gone with the task's end.
    assert!(!exists(&mut c, "reclaim:redrive-moved:{cb:dlq}:cb:dlq"));
}

#[test]
fn canary_with_a_fixed_handler_completes() {
    let s = Server::new();
    let mut c = s.conn();
    let ids = dead_letters(&mut c, "cf", 10, 100, "20");
    redrive(&mut c, &["cf:dlq", "CANARY", "2", "WINDOW", "1000"]);
    let st = wait_state(&mut c, "cf:dlq", "canary", 10);
    assert_eq!(int_field(&st, "moved"), 2);
    assert!(int_field(&st, "canary-until-ms") > 0);
    let mut w = s.conn();
    let got = work_until(&mut w, "cf", true, |c| {
        str_field(&status_of(c, "cf:dlq"), "state") == "done" && pel_total(c, "cf", "g") == 0
    });
    assert_eq!(got, 10);
    let st = status_of(&mut c, "cf:dlq");
    assert_eq!(int_field(&st, "moved"), 10);
    assert_eq!(int_field(&st, "failed-again"), 0);
    assert_eq!(xlen(&mut c, "cf:dlq"), 0);
    assert_eq!(ids.len(), 10);
}

#[test]
fn errors_one_task_per_dlq_and_cancel() {
    let s = Server::new();
    let mut c = s.conn();
    dead_letters(&mut c, "e", 50, 60000, HOUR);
    let err = redrive_err;
    assert_eq!(err(&mut c, &["nope"]), "ERR no such DLQ key");
    run(&mut c, &["SET", "str", "x"]);
    assert_eq!(err(&mut c, &["str"]), WRONGTYPE_DLQ);
    assert_eq!(
        err(&mut c, &["e:dlq", "FOO", "1"]),
        "ERR unknown option 'FOO'"
    );
    assert_eq!(
        err(&mut c, &["e:dlq", "RATE", "0"]),
        "ERR RATE must be an integer from 1 to 1000000000"
    );
    assert_eq!(
        err(&mut c, &["e:dlq", "COUNT", "1", "COUNT", "2"]),
        "ERR option COUNT given more than once"
    );
    assert_eq!(
        err(&mut c, &["e:dlq", "CANARY", "2"]),
        "ERR CANARY k and WINDOW ms go together"
    );
    assert_eq!(err(&mut c, &["e:dlq", "SOURCE", "e", "other"]), NO_POLICY);
    // A hand-written value under a DLQ's task key.
    run(&mut c, &["XADD", "x", "*", "k", "v"]);
    run(&mut c, &["SET", "reclaim:redrive:{x}:x", "mine"]);
    let taken = "ERR the redrive key of this DLQ holds a value that is not a redrive task";
    assert_eq!(err(&mut c, &["x"]), taken);
    assert_eq!(err(&mut c, &["STATUS", "x"]), taken);
    assert_eq!(err(&mut c, &["CANCEL", "x"]), taken);
    assert_eq!(status_of(&mut c, "e:dlq"), Value::Nil);
    assert_eq!(redirect_int(redrive(&mut c, &["CANCEL", "e:dlq"])), 0);
    // A slow task; a second one is refused while it runs.
    assert_eq!(redirect_int(redrive(&mut c, &["e:dlq", "RATE", "5"])), 1);
    assert_eq!(
        err(&mut c, &["e:dlq"]),
        "ERR a redrive of this DLQ is running already (RECLAIM.REDRIVE CANCEL dlq cancels it)"
    );
    wait_for(10, "a few moves", || {
        (int_field(&status_of(&mut c, "e:dlq"), "moved") >= 2).then_some(())
    });
    assert_eq!(redirect_int(redrive(&mut c, &["CANCEL", "e:dlq"])), 1);
    let st = status_of(&mut c, "e:dlq");
    assert_eq!(str_field(&st, "state"), "canceled");
    let moved = int_field(&st, "moved");
    // A task at RATE 5 would have moved two or three more in half a second of redrive rounds.
    start_witness(&mut c);
    witness_moves(&mut c, 6);
    assert_eq!(int_field(&status_of(&mut c, "e:dlq"), "moved"), moved);
    assert_eq!(xlen(&mut c, "e:dlq"), 50 - moved);
    assert_eq!(pel_total(&mut c, "e", "g"), moved);
    // A new task after it, with the next id; COUNT bounds it.
    assert_eq!(redirect_int(redrive(&mut c, &["e:dlq", "COUNT", "5"])), 2);
    let st = wait_state(&mut c, "e:dlq", "done", 10);
    assert_eq!(int_field(&st, "moved"), 5);
    assert_eq!(xlen(&mut c, "e:dlq"), 45 - moved);
    // The task's key is a plain hash in the DLQ's slot.
    let state: String = q(&mut c, &["HGET", "reclaim:redrive:{e:dlq}:e:dlq", "state"]);
    assert_eq!(state, "done");
}

#[test]
fn source_trimmed_entries_and_other_streams() {
    let s = Server::new();
    let mut c = s.conn();
    // Two streams dead-letter into one DLQ.
    let a = shared_dead_letters(&mut c, "a", "shared:dlq", 4);
    let b = shared_dead_letters(&mut c, "b", "shared:dlq", 4);
    assert_eq!(xlen(&mut c, "shared:dlq"), 8);
    // Two of a's entries were trimmed from a since: they stay in the DLQ, counted as skipped.
    run(&mut c, &["XDEL", "a", &a[0], &a[1]]);
    redrive(&mut c, &["shared:dlq", "SOURCE", "a", "g"]);
    let st = wait_state(&mut c, "shared:dlq", "done", 10);
    assert_eq!(int_field(&st, "moved"), 2);
    assert_eq!(int_field(&st, "skipped"), 2);
    assert_eq!(
        field(&st, "source"),
        Value::Array(vec![
            Value::BulkString(b"a".to_vec()),
            Value::BulkString(b"g".to_vec())
        ])
    );
    let left = dlq_ids(&xrange(&mut c, b"shared:dlq"));
    let mut expect = vec![a[0].clone(), a[1].clone()];
    expect.extend(b.iter().cloned());
    assert_eq!(sorted(&left), sorted(&expect));
    assert_eq!(
        sorted(
            &pending(&mut c, "a", "g")
                .iter()
                .map(|p| p.id.clone())
                .collect::<Vec<_>>()
        ),
        a[2..].to_vec()
    );
    assert_eq!(pel_total(&mut c, "b", "g"), 0);
}

/// Starts a task of 200 entries at RATE 50 on the server of `c` and waits until it moved some:
/// the IDs.
fn start_slow_task(c: &mut Connection) -> Vec<String> {
    start_task_at(c, "50")
}

/// Starts a task of 200 entries at RATE `rate` on the server of `c` and waits until it moved
/// some: the IDs.
fn start_task_at(c: &mut Connection, rate: &str) -> Vec<String> {
    let ids = dead_letters(c, "p", 200, 60000, HOUR);
    redrive(c, &["p:dlq", "RATE", rate]);
    wait_for(20, "some moves", || {
        (int_field(&status_of(c, "p:dlq"), "moved") >= 20).then_some(())
    });
    ids
}

/// On the server that goes on after an interruption: the task was not over, every entry is in the
/// DLQ or back in its group exactly once, and the task completes. (moved then, moved in all).
fn resumes(c: &mut Connection, ids: &[String]) -> (i64, i64) {
    let at = int_field(&status_of(c, "p:dlq"), "moved");
    assert!(at < 200, "the task was over before the interruption");
    assert_once(c, "p", ids);
    let st = wait_state(c, "p:dlq", "done", 30);
    assert_eq!(int_field(&st, "moved"), 200);
    assert_eq!(int_field(&st, "skipped"), 0);
    assert_eq!(xlen(c, "p:dlq"), 0);
    assert_once(c, "p", ids);
    (at, int_field(&st, "moved"))
}

#[test]
fn a_task_resumes_after_a_restart_from_the_aof() {
    let mut s = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let ids = start_slow_task(&mut s.conn());
    s.kill();
    s.restart();
    let (at, moved) = resumes(&mut s.conn(), &ids);
    eprintln!("restart from the AOF at {at} moved; {moved} in all");
}

#[test]
fn a_promoted_replica_continues_the_task() {
    let mut p = Server::new();
    let r = p.replica(&[]);
    let ids = start_slow_task(&mut p.conn());
    let mut rc = r.conn();
    // The replica reports on the task once the start reached it, and never moves anything itself.
    let st = wait_for(20, "the task on the replica", || {
        let v = status_of(&mut rc, "p:dlq");
        (v != Value::Nil).then_some(v)
    });
    assert_eq!(str_field(&st, "state"), "running");
    assert_eq!(
        error_of(&mut rc, cmd("RECLAIM.REDRIVE").arg("p:dlq")),
        READONLY
    );
    assert_eq!(
        error_of(&mut rc, cmd("RECLAIM.REDRIVE").arg("CANCEL").arg("p:dlq")),
        READONLY
    );
    p.kill();
    promote(&mut rc);
    let (at, moved) = resumes(&mut rc, &ids);
    eprintln!("promotion at {at} moved; {moved} in all");
}

/// The coordinated `FAILOVER TO` the replica in the middle of a task: the new primary continues
/// it to `done`, the old primary, now a replica, skips its ticks and moves nothing, and every
/// entry is exactly once in the DLQ or back in its group on both servers.
#[test]
fn a_failover_hands_the_task_to_the_new_primary() {
    let mut p = Server::new();
    let mut r = p.replica(&[]);
    let mut c = p.conn();
    let mut rc = r.conn();
    // RATE 20: 10 s for 200 entries, so the failover happens in the middle.
    let ids = start_task_at(&mut c, "20");
    failover_to(&mut c, &r);
    assert!(p.alive() && r.alive());
    // The old primary refuses to start or cancel a task now.
    assert_eq!(
        error_of(&mut c, cmd("RECLAIM.REDRIVE").arg("CANCEL").arg("p:dlq")),
        READONLY
    );
    let (at, moved) = resumes(&mut rc, &ids);
    eprintln!("FAILOVER at {at} moved; {moved} in all");
    // The old primary skips its ticks as a replica, and holds exactly what the new one wrote.
    let skipped = reclaim_info(&mut c, "ticks_skipped_replica");
    wait_for(10, "ticks skipped on the old primary", || {
        (reclaim_info(&mut c, "ticks_skipped_replica") >= skipped + 5).then_some(())
    });
    replica_acked(&mut rc);
    assert_eq!(
        pending_raw(&mut c, b"p", b"g"),
        pending_raw(&mut rc, b"p", b"g")
    );
    assert_eq!(xrange(&mut c, b"p:dlq"), xrange(&mut rc, b"p:dlq"));
    assert_once(&mut c, "p", &ids);
    assert_eq!(status_of(&mut c, "p:dlq"), status_of(&mut rc, "p:dlq"));
    assert_eq!(str_field(&status_of(&mut c, "p:dlq"), "state"), "done");
    assert_eq!(reclaim_info(&mut c, "panics"), 0);
    assert_eq!(reclaim_info(&mut rc, "panics"), 0);
}

/// Without SOURCE, a task may write the PEL of the stream of every policy whose DLQ is this DLQ:
/// the caller must be allowed to write all of them (checked when the task starts). With them, the
/// task moves their entries back, and leaves an entry naming a policy with another DLQ.
#[test]
fn without_source_the_caller_must_write_every_stream_of_the_dlq() {
    let s = Server::new();
    let mut c = s.conn();
    // Two streams dead-letter into dlq:shared; a third into its own DLQ.
    let all: Vec<Vec<String>> = [
        ("s1", "dlq:shared"),
        ("s2", "dlq:shared"),
        ("other", "dlq:other"),
    ]
    .into_iter()
    .map(|(st, dlq)| shared_dead_letters(&mut c, st, dlq, 3))
    .collect();
    assert_eq!(xlen(&mut c, "dlq:shared"), 6);
    // An entry of `other` written into dlq:shared by hand, as if dead-lettered there.
    let forged: String = q(
        &mut c,
        &[
            "XADD",
            "dlq:shared",
            "*",
            "reclaim-stream",
            "other",
            "reclaim-group",
            "g",
            "reclaim-id",
            &all[2][0],
        ],
    );
    let noperm = "NOPERM this user has no permissions to run XCLAIM on the streams of the policies that use this DLQ (use SOURCE key group)";
    for (user, keys) in [
        ("dlqonly", vec!["~dlq*"]),
        ("one", vec!["~dlq*", "~s1"]),
        ("both", vec!["~dlq*", "~s1", "~s2"]),
    ] {
        acl_setuser(
            &mut c,
            &[&[user, "on", "nopass", "+@all"][..], &keys].concat(),
        );
    }
    for user in ["dlqonly", "one"] {
        let mut u = s.conn_as(user);
        assert_eq!(
            error_of(&mut u, cmd("RECLAIM.REDRIVE").arg("dlq:shared")),
            noperm,
            "{user}"
        );
        // SOURCE of a stream it may not write: the server refuses the declared key.
        let e = error_of(
            &mut u,
            cmd("RECLAIM.REDRIVE").arg(&["dlq:shared", "SOURCE", "s2", "g"]),
        );
        assert!(e.starts_with("NOPERM"), "{user}: {e}");
        // Nothing was written.
        assert_eq!(status_of(&mut c, "dlq:shared"), Value::Nil);
        assert_eq!(xlen(&mut c, "dlq:shared"), 7);
    }
    // With SOURCE of its own stream, "one" may redrive that stream's entries.
    let mut one = s.conn_as("one");
    redrive(&mut one, &["dlq:shared", "SOURCE", "s1", "g"]);
    let st = wait_state(&mut one, "dlq:shared", "done", 10);
    assert_eq!(int_field(&st, "moved"), 3);
    assert_eq!(pel_total(&mut c, "s1", "g"), 3);
    // "both" may write every stream whose policy uses dlq:shared (not `other`, whose policy uses
    // dlq:other): the task moves s2's entries back and leaves the entry naming `other`.
    let mut both = s.conn_as("both");
    redrive(&mut both, &["dlq:shared"]);
    let st = wait_state(&mut both, "dlq:shared", "done", 10);
    assert_eq!(int_field(&st, "moved"), 3);
    assert_eq!(int_field(&st, "skipped"), 1);
    let left = xrange(&mut c, b"dlq:shared");
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].0, forged);
    assert_eq!(dlq_ids(&left), vec![all[2][0].clone()]);
    assert_eq!(pel_total(&mut c, "s2", "g"), 3);
    assert_eq!(pel_total(&mut c, "other", "g"), 0);
    assert_eq!(xlen(&mut c, "dlq:other"), 3);
    // A DLQ no policy uses: nothing to check.
    run(&mut c, &["XADD", "dlq:loose", "*", "f", "v"]);
    let mut only = s.conn_as("dlqonly");
    redrive(&mut only, &["dlq:loose"]);
    let st = wait_state(&mut only, "dlq:loose", "done", 10);
    assert_eq!(int_field(&st, "skipped"), 1);
}

/// Every step moves entries back only where the user who started the task may write now: a
/// policy given the DLQ after the start (or an ACL narrowed during the task), or the user
/// deleted, stop the task as `denied` and leave the rest in the DLQ.
#[test]
fn each_step_checks_the_starting_users_permissions() {
    let s = Server::new();
    let mut c = s.conn();
    // s1's entries, then s2's, dead-lettered into dlq:shared; then s2's policy moves to another
    // DLQ. User "ops" may write s1 and the DLQ, not s2: enough to start a task on dlq:shared.
    let s1 = shared_dead_letters(&mut c, "s1", "dlq:shared", 3);
    let s2 = shared_dead_letters(&mut c, "s2", "dlq:shared", 2);
    shared_policy(&mut c, "s2", "dlq:elsewhere");
    acl_setuser(
        &mut c,
        &["ops", "on", "nopass", "+@all", "~dlq*", "~s1", "~reclaim:*"],
    );
    let mut ops = s.conn_as("ops");
    // A canary window holds the task after its first entry, so the test can act mid-task.
    redrive(&mut ops, &["dlq:shared", "CANARY", "1", "WINDOW", "1000"]);
    let st = wait_state(&mut ops, "dlq:shared", "canary", 10);
    assert_eq!(str_field(&st, "user"), "ops");
    assert_eq!(int_field(&st, "moved"), 1);
    // s2's policy uses dlq:shared again: its entries would go back to s2, which ops may not write.
    shared_policy(&mut c, "s2", "dlq:shared");
    let st = wait_state(&mut ops, "dlq:shared", "denied", 10);
    assert_eq!(int_field(&st, "moved"), 3);
    assert!(int_field(&st, "ended-ms") > 0);
    assert_eq!(pel_total(&mut c, "s1", "g"), s1.len() as i64);
    assert_eq!(pel_total(&mut c, "s2", "g"), 0);
    let mut left = dlq_ids(&xrange(&mut c, b"dlq:shared"));
    left.sort();
    assert_eq!(left, s2);

    // The user deleted while its task waits: the next step stops the task.
    let s3 = shared_dead_letters(&mut c, "s3", "dlq:three", 2);
    acl_setuser(&mut c, &["gone", "on", "nopass", "+@all", "~*"]);
    let mut gone = s.conn_as("gone");
    redrive(&mut gone, &["dlq:three", "CANARY", "1", "WINDOW", "1000"]);
    drop(gone);
    wait_state(&mut c, "dlq:three", "canary", 10);
    run(&mut c, &["ACL", "DELUSER", "gone"]);
    let st = wait_state(&mut c, "dlq:three", "denied", 10);
    assert_eq!(int_field(&st, "moved"), 1);
    assert_eq!(pel_total(&mut c, "s3", "g"), 1);
    assert_eq!(dlq_ids(&xrange(&mut c, b"dlq:three")), s3[1..].to_vec());

    // A user turned off, or no longer allowed the command, stops its task too. The log says why.
    for (i, revoke) in [&["off"][..], &["-@all"][..]].into_iter().enumerate() {
        let (st_name, dlq) = (format!("s{}", 4 + i), format!("dlq:{}", 4 + i));
        shared_dead_letters(&mut c, &st_name, &dlq, 2);
        acl_setuser(&mut c, &["eve", "on", "nopass", "+@all", "~*"]);
        let mut eve = s.conn_as("eve");
        redrive(&mut eve, &[&dlq, "CANARY", "1", "WINDOW", "1000"]);
        drop(eve);
        wait_state(&mut c, &dlq, "canary", 10);
        acl_setuser(&mut c, &[&["eve"][..], revoke].concat());
        let st = wait_state(&mut c, &dlq, "denied", 10);
        assert_eq!(int_field(&st, "moved"), 1, "{revoke:?}");
        assert_eq!(xlen(&mut c, &dlq), 1, "{revoke:?}");
        run(&mut c, &["ACL", "DELUSER", "eve"]);
    }
    let log = s.log();
    for why in [
        "RECLAIM.REDRIVE of 'dlq:shared' stopped (denied): user 'ops' may not run XCLAIM on the stream 's2' an entry goes back to",
        "RECLAIM.REDRIVE of 'dlq:three' stopped (denied): user 'gone' is gone from this server",
        "RECLAIM.REDRIVE of 'dlq:4' stopped (denied): user 'eve' is off",
        "RECLAIM.REDRIVE of 'dlq:5' stopped (denied): user 'eve' may no longer run RECLAIM.REDRIVE on the DLQ",
    ] {
        assert!(log.contains(why), "{why}");
    }
}

/// `MIN-IDLE 60000 MAX-DELIVERIES 3 DLQ <dlq> INTERVAL 3600000`: a policy that dead-letters into
/// `dlq` and leaves the rest to RECLAIM.SWEEP.
fn into(dlq: &str) -> String {
    format!("MIN-IDLE 60000 MAX-DELIVERIES 3 DLQ {dlq} INTERVAL 3600000")
}

/// `RECLAIM.POLICY SET st g` [`into`] `dlq`.
fn shared_policy(c: &mut Connection, st: &str, dlq: &str) {
    set_policy_opts(c, st, "g", &into(dlq));
}

/// A stream `st` (group g, policy [`into`] `dlq`) with `n` entries, all dead-lettered into `dlq`
/// by sweeps. Returns their IDs.
fn shared_dead_letters(c: &mut Connection, st: &str, dlq: &str, n: usize) -> Vec<String> {
    dead_letters_under(c, st, &into(dlq), n)
}

#[test]
fn each_step_reaches_the_aof_and_the_replica_in_one_transaction() {
    let s = Server::start(&["--appendonly", "yes", "--aof-use-rdb-preamble", "yes"]);
    let r = s.replica(&[]);
    let mut c = s.conn();
    let ids = dead_letters(&mut c, "t", 40, 60000, HOUR);
    redrive(&mut c, &["t:dlq", "RATE", "200"]);
    wait_state(&mut c, "t:dlq", "done", 20);
    // The replica holds the same PEL, DLQ and task, and never ran a step itself.
    replica_acked(&mut c);
    let mut rc = r.conn();
    assert_eq!(
        pel_and_dlq(&mut rc, "t", "g", "t:dlq"),
        pel_and_dlq(&mut c, "t", "g", "t:dlq")
    );
    let task = |c: &mut Connection| -> Vec<(String, String)> {
        let mut h: Vec<(String, String)> = q(c, &["HGETALL", "reclaim:redrive:{t:dlq}:t:dlq"]);
        h.sort();
        h
    };
    assert_eq!(task(&mut rc), task(&mut c));
    // In the AOF every XCLAIM that creates a PEL entry with count 0 sits in a MULTI/EXEC with
    // the XDEL of its DLQ entry and the task's HSET.
    // (XREADGROUP's deliveries to `w` are XCLAIMs with FORCE too: a move back is the one to the
    // claimant.)
    let is_move = |c: &[Vec<u8>]| is_cmd(c, "XCLAIM") && c[3] == b"reclaim";
    let mut claims = Vec::new();
    let (mut tx, mut in_tx) = (Vec::<Vec<Vec<u8>>>::new(), false);
    for (name, data) in s.aof_files() {
        if !name.ends_with(".incr.aof") {
            continue;
        }
        for c in parse_aof(&data) {
            if is_cmd(&c, "MULTI") {
                (tx, in_tx) = (Vec::new(), true);
            } else if is_cmd(&c, "EXEC") {
                let moved: Vec<String> = tx
                    .iter()
                    .filter(|c| is_move(c))
                    .map(|c| String::from_utf8(c[5].clone()).unwrap())
                    .collect();
                if !moved.is_empty() {
                    for x in tx.iter().filter(|c| is_move(c)) {
                        let at = x.iter().position(|w| w == b"RETRYCOUNT").unwrap();
                        assert_eq!(x[at + 1], b"0", "{x:?}");
                        assert!(x.iter().any(|w| w == b"FORCE"), "{x:?}");
                    }
                    let xdels = tx.iter().filter(|c| is_cmd(c, "XDEL") && c[1] == b"t:dlq");
                    assert_eq!(xdels.count(), moved.len(), "{tx:?}");
                    assert!(tx.iter().any(|c| is_cmd(c, "HSET")), "{tx:?}");
                    claims.extend(moved);
                }
                in_tx = false;
            } else if in_tx {
                tx.push(c);
            } else {
                assert!(!is_move(&c), "a move outside a transaction: {c:?}");
            }
        }
    }
    assert_eq!(sorted(&claims), sorted(&ids));
}

#[test]
fn binary_names_in_another_database() {
    let s = Server::new();
    let mut c = s.conn_db(3);
    let dlq: &[u8] = b"dl\x00q\xff";
    create_group(&mut c, BIN_STREAM, BIN_GROUP);
    let mut set = cmd("RECLAIM.POLICY");
    set.arg("SET")
        .arg(BIN_STREAM)
        .arg(BIN_GROUP)
        .arg("MAX-DELIVERIES")
        .arg(3)
        .arg("DLQ")
        .arg(dlq)
        .arg("INTERVAL")
        .arg(HOUR);
    let _: Value = set.query(&mut c).unwrap();
    let ids = add_entries(&mut c, BIN_STREAM, "b", 3);
    let _: Value = read_group_cmd(BIN_STREAM, BIN_GROUP, b"w\x00")
        .query(&mut c)
        .unwrap();
    set_deliveries(&mut c, BIN_STREAM, BIN_GROUP, b"w\x00", &ids, 4);
    let _: Value = cmd("RECLAIM.SWEEP")
        .arg(BIN_STREAM)
        .arg(BIN_GROUP)
        .query(&mut c)
        .unwrap();
    assert_eq!(xlen(&mut c, dlq), 3);
    let id: i64 = cmd("RECLAIM.REDRIVE")
        .arg(dlq)
        .arg("SOURCE")
        .arg(BIN_STREAM)
        .arg(BIN_GROUP)
        .query(&mut c)
        .unwrap();
    assert_eq!(id, 1);
    let st = wait_for(10, "the redrive done", || {
        let v: Value = cmd("RECLAIM.REDRIVE")
            .arg("STATUS")
            .arg(dlq)
            .query(&mut c)
            .unwrap();
        (str_field(&v, "state") == "done").then_some(v)
    });
    assert_eq!(int_field(&st, "moved"), 3);
    assert_eq!(xlen(&mut c, dlq), 0);
    let pel = pending_raw(&mut c, BIN_STREAM, BIN_GROUP);
    assert_eq!(
        pel,
        ids.iter()
            .map(|i| (i.clone(), b"reclaim".to_vec(), 0))
            .collect::<Vec<_>>()
    );
    // Database 0 holds nothing of it.
    let mut c0 = s.conn();
    assert_eq!(
        cmd("RECLAIM.REDRIVE")
            .arg("STATUS")
            .arg(dlq)
            .query::<Value>(&mut c0)
            .unwrap(),
        Value::Nil
    );
}

#[test]
fn a_task_waits_while_writes_are_paused() {
    let s = Server::start(&["--appendonly", "yes"]);
    let _r = s.replica(&[]);
    let mut c = s.conn();
    let ids = dead_letters(&mut c, "cp", 100, 60000, HOUR);
    redrive(&mut c, &["cp:dlq", "RATE", "20"]);
    wait_for(10, "some moves", || {
        (int_field(&status_of(&mut c, "cp:dlq"), "moved") >= 2).then_some(())
    });
    // During CLIENT PAUSE WRITE the timer writes nothing (a timer write then would crash Redis
    // 7.0 with AOF or replicas), and RECLAIM.REDRIVE itself waits (may-replicate).
    let mut admin = s.conn();
    run(&mut admin, &["CLIENT", "PAUSE", "20000", "WRITE"]);
    wait_ticks_skipped(&mut admin, "paused", 3);
    // (Plain reads: EVAL would wait for the pause's end.)
    let dlq = xrange(&mut admin, b"cp:dlq");
    let pel = pending_raw(&mut admin, b"cp", b"g");
    wait_ticks_skipped(&mut admin, "paused", 10);
    assert_eq!(xrange(&mut admin, b"cp:dlq"), dlq);
    assert_eq!(pending_raw(&mut admin, b"cp", b"g"), pel);
    assert!(pel.len() < 100);
    run(&mut admin, &["CLIENT", "UNPAUSE"]);
    let st = wait_state(&mut c, "cp:dlq", "done", 30);
    assert_eq!(int_field(&st, "moved"), 100);
    assert_once(&mut c, "cp", &ids);
}

#[test]
fn tasks_of_two_dlqs_run_side_by_side() {
    let s = Server::new();
    let mut c = s.conn();
    let a = dead_letters(&mut c, "da", 300, 60000, HOUR);
    let b = dead_letters(&mut c, "db", 300, 60000, HOUR);
    assert_eq!(redirect_int(redrive(&mut c, &["da:dlq"])), 1);
    assert_eq!(
        redirect_int(redrive(&mut c, &["db:dlq", "COUNT", "100"])),
        1
    );
    let st = wait_state(&mut c, "da:dlq", "done", 20);
    assert_eq!(int_field(&st, "moved"), 300);
    let st = wait_state(&mut c, "db:dlq", "done", 20);
    assert_eq!(int_field(&st, "moved"), 100);
    assert_eq!(int_field(&st, "left"), 200);
    assert_once(&mut c, "da", &a);
    assert_once(&mut c, "db", &b);
    assert_eq!(pel_total(&mut c, "db", "g"), 100);
}

#[test]
fn in_redis_cluster_the_task_lives_in_the_dlqs_slot() {
    let s = Server::start(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
    ]);
    let mut c = s.conn();
    run(&mut c, &["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]);
    wait_for(20, "cluster_state:ok", || {
        let info: String = q(&mut c, &["CLUSTER", "INFO"]);
        info.contains("cluster_state:ok").then_some(())
    });
    create_group(&mut c, b"{o}:in", b"g");
    set_policy_opts(
        &mut c,
        "{o}:in",
        "g",
        "MAX-DELIVERIES 3 DLQ {o}:dlq INTERVAL 3600000",
    );
    let ids = add_numbered(&mut c, "{o}:in", 5);
    deliver(&mut c, "{o}:in", "g", "w", None);
    set_deliveries(&mut c, b"{o}:in", b"g", b"w", &ids, 4);
    run(&mut c, &["RECLAIM.SWEEP", "{o}:in", "g"]);
    assert_eq!(xlen(&mut c, "{o}:dlq"), 5);
    // SOURCE in another slot: the server refuses it (the keys come from the getkeys callback).
    let e = error_of(
        &mut c,
        cmd("RECLAIM.REDRIVE").arg(&["{o}:dlq", "SOURCE", "other", "g"]),
    );
    assert!(e.starts_with("CROSSSLOT"), "{e}");
    redrive(&mut c, &["{o}:dlq", "SOURCE", "{o}:in", "g"]);
    let st = wait_state(&mut c, "{o}:dlq", "done", 10);
    assert_eq!(int_field(&st, "moved"), 5);
    let slot = |c: &mut Connection, k: &str| -> i64 { q(c, &["CLUSTER", "KEYSLOT", k]) };
    assert_eq!(
        slot(&mut c, "reclaim:redrive:{o}:{o}:dlq"),
        slot(&mut c, "{o}:dlq")
    );
    assert!(exists(&mut c, "reclaim:redrive:{o}:{o}:dlq"));
    assert_eq!(pel_total(&mut c, "{o}:in", "g"), 5);
}

/// The error of `RECLAIM.REDRIVE <args...>`.
fn redrive_err(c: &mut Connection, args: &[&str]) -> String {
    let mut k = cmd("RECLAIM.REDRIVE");
    k.arg(args);
    error_of(c, &k)
}

const SOURCE_MODULE_KEY: &str = "ERR the SOURCE key is a key the module keeps for itself (reclaim:policy:..., reclaim:redrive:..., reclaim:redrive-moved:...)";
const MOVED_TAKEN: &str =
    "ERR the redrive-moved key of this DLQ holds a value that is not a set of redriven entries";

#[test]
fn the_modules_own_keys_are_never_a_dlq_nor_deleted() {
    let s = Server::new();
    let mut c = s.conn();
    // The trial's steps: a policy whose DLQ would be x's moved set is refused...
    create_group(&mut c, b"q2", b"g");
    let mut set = cmd("RECLAIM.POLICY");
    set.arg(&[
        "SET",
        "q2",
        "g",
        "MIN-IDLE",
        "1",
        "MAX-DELIVERIES",
        "1",
        "DLQ",
        "reclaim:redrive-moved:{x}:x",
        "INTERVAL",
        "10",
    ]);
    assert_eq!(error_of(&mut c, &set), DLQ_IS_MODULE_KEY);
    assert_eq!(
        run(&mut c, &["RECLAIM.POLICY", "GET", "q2", "g"]),
        Value::Nil
    );
    // ...and a stream someone wrote there by hand is neither a DLQ REDRIVE takes, nor a SOURCE,
    // nor deleted by a redrive of x.
    let moved = "reclaim:redrive-moved:{x}:x";
    let dead: String = q(&mut c, &["XADD", moved, "*", "a", "b"]);
    run(&mut c, &["XADD", "x", "*", "a", "b"]);
    assert_eq!(redrive_err(&mut c, &[moved]), DLQ_IS_MODULE_KEY);
    assert_eq!(
        redrive_err(&mut c, &["reclaim:redrive:{x}:x"]),
        DLQ_IS_MODULE_KEY
    );
    assert_eq!(
        redrive_err(&mut c, &["reclaim:policy:{x}:x", "COUNT", "1"]),
        DLQ_IS_MODULE_KEY
    );
    assert_eq!(
        redrive_err(&mut c, &["x", "SOURCE", moved, "g"]),
        SOURCE_MODULE_KEY
    );
    assert_eq!(redrive_err(&mut c, &["x"]), MOVED_TAKEN);
    let kept: Vec<String> = xrange(&mut c, moved.as_bytes())
        .into_iter()
        .map(|e| e.0)
        .collect();
    assert_eq!(kept, vec![dead]);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "reclaim:redrive:{x}:x"]), 0);
    assert_eq!(status_of(&mut c, "x"), Value::Nil);
    // Any other type there: the same, and the value stays.
    run(&mut c, &["XADD", "y", "*", "a", "b"]);
    run(&mut c, &["SET", "reclaim:redrive-moved:{y}:y", "junk"]);
    assert_eq!(redrive_err(&mut c, &["y"]), MOVED_TAKEN);
    assert_eq!(
        q::<String>(&mut c, &["GET", "reclaim:redrive-moved:{y}:y"]),
        "junk"
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "reclaim:redrive:{y}:y"]), 0);
}

#[test]
fn a_running_task_never_deletes_a_value_written_over_its_moved_set() {
    let s = Server::new();
    let mut c = s.conn();
    let ids = dead_letters(&mut c, "m", 20, 60000, HOUR);
    assert_eq!(redirect_int(redrive(&mut c, &["m:dlq", "RATE", "2"])), 1);
    // Someone writes a string over the task's moved set while it runs.
    let moved_key = "reclaim:redrive-moved:{m:dlq}:m:dlq";
    run(&mut c, &["SET", moved_key, "junk"]);
    let moved = int_field(&status_of(&mut c, "m:dlq"), "moved");
    // RATE 2 would move an entry every half second: the task waits instead, through 1.5 s of
    // redrive rounds.
    start_witness(&mut c);
    witness_moves(&mut c, 16);
    let st = status_of(&mut c, "m:dlq");
    assert_eq!(str_field(&st, "state"), "running");
    assert_eq!(int_field(&st, "moved"), moved);
    assert_eq!(q::<String>(&mut c, &["GET", moved_key]), "junk");
    // CANCEL ends it and leaves the value alone.
    assert_eq!(redirect_int(redrive(&mut c, &["CANCEL", "m:dlq"])), 1);
    assert_eq!(q::<String>(&mut c, &["GET", moved_key]), "junk");
    assert_eq!(str_field(&status_of(&mut c, "m:dlq"), "state"), "canceled");
    assert_once(&mut c, "m", &ids);
}

#[test]
fn a_work_stream_is_never_redriven_as_a_dlq() {
    let s = Server::new();
    let mut c = s.conn();
    let ids = dead_letters(&mut c, "w", 3, 60000, HOUR);
    // Work pending in w: two new entries delivered to a worker.
    let work = add_numbered(&mut c, "w", 2);
    deliver(&mut c, "w", "g", "busy", None);
    let pel = |c: &mut Connection| -> Vec<(String, String, i64)> {
        pending(c, "w", "g")
            .into_iter()
            .map(|p| (p.id, p.consumer, p.count))
            .collect()
    };
    let pel_before = pel(&mut c);
    assert_eq!(pel_before.len(), 2);
    assert_eq!(
        redrive_err(&mut c, &["w", "SOURCE", "w", "g"]),
        "ERR the DLQ key must differ from the SOURCE key"
    );
    let work_stream =
        "ERR the DLQ key is the stream of a reclaim policy (a work stream, not a DLQ)";
    assert_eq!(redrive_err(&mut c, &["w"]), work_stream);
    assert_eq!(redrive_err(&mut c, &["w", "COUNT", "1"]), work_stream);
    // A stream of another policy as SOURCE: the DLQ w is still a work stream.
    create_group(&mut c, b"other", b"g");
    set_policy_opts(&mut c, "other", "g", "MIN-IDLE 60000 DLQ w:dlq");
    assert_eq!(
        redrive_err(&mut c, &["w", "SOURCE", "other", "g"]),
        work_stream
    );
    // Nothing changed: w's entries, its PEL, the DLQ; no task.
    assert_eq!(xlen(&mut c, "w"), 5);
    assert_eq!(pel(&mut c), pel_before);
    assert_eq!(xlen(&mut c, "w:dlq"), 3);
    assert_eq!(status_of(&mut c, "w"), Value::Nil);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "reclaim:redrive:{w}:w"]), 0);
    // The real DLQ still redrives.
    redrive(&mut c, &["w:dlq"]);
    let st = wait_state(&mut c, "w:dlq", "done", 10);
    assert_eq!(int_field(&st, "moved"), 3);
    assert_eq!(pel_total(&mut c, "w", "g"), 5);
    let _ = (ids, work);
}

#[test]
fn a_record_of_an_entry_the_group_never_read_is_skipped() {
    let s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"h", b"g");
    set_policy_opts(
        &mut c,
        "h",
        "g",
        "MIN-IDLE 60000 MAX-DELIVERIES 3 DLQ h:dlq INTERVAL 3600000",
    );
    let ids = add_numbered(&mut c, "h", 2);
    // The group read the first entry only (its last-delivered ID), and acknowledged it.
    deliver(&mut c, "h", "g", "w", Some(1));
    assert_eq!(q::<i64>(&mut c, &["XACK", "h", "g", &ids[0]]), 1);
    // Hand-written DLQ records of both entries.
    for id in &ids {
        run(
            &mut c,
            &[
                "XADD",
                "h:dlq",
                "*",
                "reclaim-stream",
                "h",
                "reclaim-group",
                "g",
                "reclaim-id",
                id,
            ],
        );
    }
    let records = dlq_ids(&xrange(&mut c, b"h:dlq"));
    redrive(&mut c, &["h:dlq"]);
    let st = wait_state(&mut c, "h:dlq", "done", 10);
    assert_eq!(int_field(&st, "moved"), 1);
    assert_eq!(int_field(&st, "skipped"), 1);
    // Only the entry the group had read is pending again; the other's record stays in the DLQ.
    let p = pending(&mut c, "h", "g");
    assert_eq!(p.len(), 1);
    assert_eq!((p[0].id.as_str(), p[0].count), (ids[0].as_str(), 0));
    assert_eq!(dlq_ids(&xrange(&mut c, b"h:dlq")), vec![records[1].clone()]);
    // The entry the group never read is delivered once, as new, by the next read.
    let got = readgroup(&mut c, "h", "g", "w2", 10, None);
    let got: Vec<&str> = got.iter().map(|e| e.0.as_str()).collect();
    assert!(got.contains(&ids[1].as_str()), "{got:?}");
}

#[test]
fn ids_move_back_only_the_selected_entries() {
    let s = Server::new();
    let mut c = s.conn();
    let a = shared_dead_letters(&mut c, "a", "shared:dlq", 4);
    let b = shared_dead_letters(&mut c, "b", "shared:dlq", 4);
    let dlq = xrange(&mut c, b"shared:dlq");
    let did = |i: usize| dlq[i].0.clone();
    let err = redrive_err;
    assert_eq!(
        err(&mut c, &["shared:dlq", "IDS", "0", "1-0"]),
        "ERR IDS must be an integer from 1 to 1000"
    );
    assert_eq!(
        err(&mut c, &["shared:dlq", "IDS", "1001", "1-0"]),
        "ERR IDS must be an integer from 1 to 1000"
    );
    assert_eq!(
        err(&mut c, &["shared:dlq", "IDS", "2", "1-0"]),
        "ERR IDS n needs n entry IDs"
    );
    assert_eq!(
        err(&mut c, &["shared:dlq", "IDS", "1", "x-1"]),
        "ERR Invalid stream ID specified as stream command argument"
    );
    assert_eq!(
        err(&mut c, &["shared:dlq", "IDS"]),
        "ERR option IDS needs a value"
    );
    // The same checks as without IDS: a user who may not write the streams is refused.
    acl_setuser(&mut c, &["dlqonly", "on", "nopass", "+@all", "~shared*"]);
    let mut u = s.conn_as("dlqonly");
    assert_eq!(
        error_of(
            &mut u,
            cmd("RECLAIM.REDRIVE").arg(&["shared:dlq", "IDS", "1", &did(0)])
        ),
        "NOPERM this user has no permissions to run XCLAIM on the streams of the policies that use this DLQ (use SOURCE key group)"
    );
    // The getkeys callback reads past the IDs to SOURCE's key.
    let keys: Vec<String> = q(
        &mut c,
        &[
            "COMMAND",
            "GETKEYS",
            "RECLAIM.REDRIVE",
            "shared:dlq",
            "IDS",
            "1",
            "1-0",
            "SOURCE",
            "a",
            "g",
        ],
    );
    assert_eq!(keys, ["shared:dlq", "a"]);
    // Two of a's entries (one given twice), one of b's, and an ID not in the DLQ (skipped).
    let args = [
        "shared:dlq",
        "IDS",
        "5",
        &did(0),
        &did(5),
        "1-1",
        &did(1),
        &did(0),
        "RATE",
        "100",
    ];
    assert_eq!(redirect_int(redrive(&mut c, &args)), 1);
    let st = wait_state(&mut c, "shared:dlq", "done", 10);
    let figures = ["ids", "total", "examined", "moved", "skipped", "left"];
    let got: Vec<i64> = figures.iter().map(|f| int_field(&st, f)).collect();
    assert_eq!(got, [4, 4, 4, 3, 1, 0]);
    assert_eq!(xlen(&mut c, "shared:dlq"), 5);
    let pel = |c: &mut Connection, st: &str| -> Vec<String> {
        sorted(
            &pending(c, st, "g")
                .iter()
                .map(|p| p.id.clone())
                .collect::<Vec<_>>(),
        )
    };
    assert_eq!(pel(&mut c, "a"), sorted(&[a[0].clone(), a[1].clone()]));
    assert_eq!(pel(&mut c, "b"), [b[1].clone()]);
    let left = dlq_ids(&xrange(&mut c, b"shared:dlq"));
    let mut expect = vec![
        a[2].clone(),
        a[3].clone(),
        b[0].clone(),
        b[2].clone(),
        b[3].clone(),
    ];
    expect.sort();
    assert_eq!(sorted(&left), expect);
    // With SOURCE: an entry of another source is passed over (neither moved nor skipped).
    let args = [
        "shared:dlq",
        "IDS",
        "2",
        &did(6),
        &did(2),
        "SOURCE",
        "a",
        "g",
    ];
    assert_eq!(redirect_int(redrive(&mut c, &args)), 2);
    let st = wait_state(&mut c, "shared:dlq", "done", 10);
    let got: Vec<i64> = figures.iter().map(|f| int_field(&st, f)).collect();
    assert_eq!(got, [2, 2, 2, 1, 0, 0]);
    assert_eq!(xlen(&mut c, "shared:dlq"), 4);
    assert_eq!(pel(&mut c, "a").len(), 3);
    assert_eq!(pel(&mut c, "b").len(), 1);
}
