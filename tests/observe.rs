//! What an operator sees from outside: the `INFO reclaim` section (its totals and its per-policy
//! lines), the keyspace events the module fires on a stream's key, the `reclaim-tick` LATENCY
//! event and the ticks over budget, and `RECLAIM.HEALTH`.

use reclaim_testkit::*;

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::Duration;

/// The line of `INFO reclaim` of the policy of (`stream` as escaped, `group`).
fn line_of(c: &mut Connection, stream: &str, group: &str) -> BTreeMap<String, String> {
    policy_lines(c)
        .into_iter()
        .find(|l| l["stream"] == stream && l["group"] == group)
        .unwrap_or_else(|| panic!("no line for ({stream}, {group}): {:?}", policy_lines(c)))
}

/// An integer field of a policy line.
fn num(l: &BTreeMap<String, String>, f: &str) -> i64 {
    l.get(f)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{f} in {l:?}"))
}

/// The fields of every per-policy line, in order.
const LINE_FIELDS: [&str; 17] = [
    "db",
    "stream",
    "group",
    "pending",
    "inbox",
    "claimed",
    "dead_lettered",
    "deleted",
    "oldest_pending_ms",
    "status",
    "consumers",
    "max_consumer_pending",
    "redelivered",
    "errors",
    "passes",
    "last_pass_ms",
    "evicted_keys",
];

#[test]
fn info_has_a_line_per_policy_with_what_the_passes_saw() {
    let s = Server::new();
    let mut c = s.conn();
    // A group whose three entries a crashed worker holds for 400 ms, and two that w2 has just
    // read; and a policy whose key is binary.
    create_group(&mut c, b"a", b"g");
    let w1 = add_entries(&mut c, b"a", "x", 3);
    read_group(&mut c, b"a", b"g", b"w1");
    // Idle for two minutes as far as the PEL knows (the count stays 1); and added 400 ms ago.
    set_pending(&mut c, ("a", "g"), "w1", &w1, 120_000, 1);
    wait_age(&mut c, &w1[0], 400);
    add_entries(&mut c, b"a", "y", 2);
    read_group(&mut c, b"a", b"g", b"w2");
    let odd: &[u8] = b"o\xff:1,x y";
    set_policy(&mut c, odd, b"g=1", &PolicyView::new(1000, 50));
    // One pass (the next is an hour away): w1's three move to the inbox, w2's stay.
    quiet_policy(&mut c, "a", "g", "MIN-IDLE 60000");
    let lines = policy_lines(&mut c);
    assert_eq!(lines.len(), 2, "{lines:?}");
    // Ordered by db, stream, group; names escaped (`%XX` for `%,=:`, spaces, control
    // characters and bytes that are not UTF-8).
    assert_eq!(lines[0]["stream"], "a");
    assert_eq!(lines[1]["stream"], "o%FF%3A1%2Cx%20y");
    assert_eq!(lines[1]["group"], "g%3D1");
    for l in &lines {
        let keys: Vec<&str> = l.keys().map(String::as_str).collect();
        let mut want: Vec<&str> = LINE_FIELDS.to_vec();
        want.sort();
        assert_eq!(keys, want, "{l:?}");
    }
    let a = &lines[0];
    assert_eq!(a["db"], "0");
    assert_eq!(num(a, "claimed"), 3);
    assert_eq!(num(a, "pending"), 5);
    assert_eq!(num(a, "inbox"), 3);
    assert_eq!(num(a, "consumers"), 1, "w2 (the inbox is not counted)");
    assert_eq!(num(a, "max_consumer_pending"), 2);
    assert_eq!(a["status"], "active");
    assert!(num(a, "passes") >= 1 && num(a, "last_pass_ms") > 0, "{a:?}");
    // The oldest pending entry's age when the pass read the PEL.
    assert!(num(a, "oldest_pending_ms") >= 400, "{a:?}");
    // The binary one has no stream yet: waiting for it, its name escaped as in `stream=`.
    assert_eq!(
        lines[1]["status"], "waiting: no stream o%FF%3A1%2Cx%20y",
        "{:?}",
        lines[1]
    );
    assert_eq!(num(&lines[1], "pending"), 0);
    // Still in order once policies come and go.
    set_policy_opts(&mut c, "0first", "g", "MIN-IDLE 1000");
    let streams: Vec<String> = policy_lines(&mut c)
        .into_iter()
        .map(|l| l["stream"].clone())
        .collect();
    assert_eq!(streams, ["0first", "a", "o%FF%3A1%2Cx%20y"]);
    policy_del_reply(&mut c, b"0first", b"g");
    let streams: Vec<String> = policy_lines(&mut c)
        .into_iter()
        .map(|l| l["stream"].clone())
        .collect();
    assert_eq!(streams, ["a", "o%FF%3A1%2Cx%20y"]);
    // The totals stay in `# reclaim`, and the lines are in `INFO reclaim` too.
    assert_eq!(reclaim_info(&mut c, "policies"), 2, "after the DEL");
    let all: String = cmd("INFO").arg("reclaim").query(&mut c).unwrap();
    assert!(
        all.contains("\r\nreclaim_policy_1:db=0,stream=o%FF"),
        "{all}"
    );
}

#[test]
fn a_dlq_of_the_wrong_type_shows_as_error() {
    let s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"e", b"g");
    set_policy_opts(
        &mut c,
        "e",
        "g",
        "MIN-IDLE 50 MAX-DELIVERIES 1 DLQ e:dlq INTERVAL 50",
    );
    run(&mut c, &["SET", "e:dlq", "not a stream"]);
    add_entries(&mut c, b"e", "x", 1);
    read_group(&mut c, b"e", b"g", b"w1");
    wait_for(10, "status error", || {
        (line_of(&mut c, "e", "g")["status"] == "error").then_some(())
    });
    run(&mut c, &["DEL", "e:dlq"]);
    wait_for(10, "status active again", || {
        let l = line_of(&mut c, "e", "g");
        (l["status"] == "active" && num(&l, "dead_lettered") == 1).then_some(())
    });
}

/// Waits for event `ev` on `key` (other events are skipped); panics with what came instead.
fn expect_event(rx: &mpsc::Receiver<(String, String)>, key: &str, ev: &str) {
    events_until(rx, key, ev);
}

/// Waits for event `ev` on `key`: the (key, event) pairs that came before it. Panics with them
/// when it does not come.
fn events_until(
    rx: &mpsc::Receiver<(String, String)>,
    key: &str,
    ev: &str,
) -> Vec<(String, String)> {
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(10 * slowdown());
    while std::time::Instant::now() < deadline {
        if let Ok((k, e)) = rx.recv_timeout(Duration::from_millis(100)) {
            if k == key && e == ev {
                return seen;
            }
            seen.push((k, e));
        }
    }
    panic!("no {ev} on {key}; saw {seen:?}");
}

#[test]
fn keyspace_events_announce_what_the_module_did() {
    let s = Server::new();
    let mut c = s.conn();
    // `t`: the stream class, as for Redis's own xadd/xclaim events.
    run(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Kt"]);
    let rx = listen(&s);
    create_group(&mut c, b"ev", b"g");
    set_policy_opts(
        &mut c,
        "ev",
        "g",
        "MIN-IDLE 100 MAX-DELIVERIES 2 DLQ ev:dlq INTERVAL 50",
    );
    // Moved to the claimant.
    let e1 = add_entries(&mut c, b"ev", "x", 1);
    read_group(&mut c, b"ev", b"g", b"w1");
    expect_event(&rx, "ev", "reclaim-claim");
    // Handed from the inbox by RECLAIM.READGROUP (its second delivery).
    let got = readgroup(&mut c, "ev", "g", "w2", 1, None);
    assert_eq!(got.first().map(|e| e.0.clone()), Some(e1[0].clone()));
    expect_event(&rx, "ev", "reclaim-deliver");
    // Stale at MAX-DELIVERIES: dead-lettered (the DLQ gets Redis's own xadd, first).
    expect_event(&rx, "ev:dlq", "xadd");
    expect_event(&rx, "ev", "reclaim-deadletter");
    // A pending entry deleted from the stream: purged from the PEL.
    let e2 = add_entries(&mut c, b"ev", "y", 1);
    read_group(&mut c, b"ev", b"g", b"w1");
    run(&mut c, &["XDEL", "ev", &e2[0]]);
    expect_event(&rx, "ev", "reclaim-purge");
    // The DLQ turns into a string: the policy goes to error, and back to active once it is gone.
    run(&mut c, &["DEL", "ev:dlq"]);
    run(&mut c, &["SET", "ev:dlq", "x"]);
    let e3 = add_entries(&mut c, b"ev", "z", 1);
    read_group(&mut c, b"ev", b"g", b"w1");
    set_deliveries(&mut c, b"ev", b"g", b"w1", &e3, 2);
    expect_event(&rx, "ev", "reclaim-error");
    run(&mut c, &["DEL", "ev:dlq"]);
    expect_event(&rx, "ev", "reclaim-active");
    // A missing stream: waiting.
    run(&mut c, &["DEL", "ev"]);
    expect_event(&rx, "ev", "reclaim-waiting");
}

#[test]
fn no_events_without_the_stream_class() {
    let s = Server::new();
    let mut c = s.conn();
    // Keyspace notifications on, but not the stream class: only the generic `del` arrives.
    run(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Kg"]);
    let rx = listen(&s);
    create_group(&mut c, b"q", b"g");
    set_policy_opts(&mut c, "q", "g", "MIN-IDLE 50 INTERVAL 50");
    add_entries(&mut c, b"q", "x", 1);
    read_group(&mut c, b"q", b"g", b"w1");
    wait_for(10, "claimed", || {
        (stat(&mut c, "q", "g", "claimed") == 1).then_some(())
    });
    run(&mut c, &["DEL", "q"]);
    expect_event(&rx, "q", "del");
    let rest: Vec<(String, String)> = rx.try_iter().collect();
    assert!(rest.is_empty(), "{rest:?}");
}

#[test]
fn slow_ticks_show_in_latency_and_over_budget() {
    // A budget of 100 ms and a backlog of 20,000 stale entries: ticks of more than 1 ms.
    let s = Server::start(&[
        "--latency-monitor-threshold",
        "1",
        "--reclaim.tick-budget-us",
        "100000",
    ]);
    let mut c = s.conn();
    create_group(&mut c, b"big", b"g");
    let _: i64 = cmd("EVAL")
        .arg(
            "for i = 1, 20000 do redis.call('XADD', KEYS[1], '*', 'n', i) end \
             redis.call('XREADGROUP', 'GROUP', 'g', 'w1', 'STREAMS', KEYS[1], '>') return 1",
        )
        .arg(1)
        .arg("big")
        .query(&mut c)
        .expect("EVAL");
    set_policy_opts(&mut c, "big", "g", "MIN-IDLE 1 COUNT 1000 INTERVAL 50");
    wait_for(20, "every entry claimed", || {
        (stat(&mut c, "big", "g", "claimed") == 20_000).then_some(())
    });
    let latest: Vec<Value> = q(&mut c, &["LATENCY", "LATEST"]);
    let names: Vec<String> = latest
        .iter()
        .filter_map(|e| items(e).first().and_then(text))
        .collect();
    assert!(names.iter().any(|n| n == "reclaim-tick"), "{names:?}");
    let history: Vec<Value> = q(&mut c, &["LATENCY", "HISTORY", "reclaim-tick"]);
    assert!(!history.is_empty());
    let doctor: String = q(&mut c, &["LATENCY", "DOCTOR"]);
    assert!(doctor.contains("reclaim-tick"), "{doctor}");
    // Over a budget of 50 µs, ticks that do work run over.
    let before = reclaim_info(&mut c, "ticks_over_budget");
    run(&mut c, &["CONFIG", "SET", "reclaim.tick-budget-us", "50"]);
    for _ in 0..2000 {
        let _: String = q(&mut c, &["XADD", "big", "*", "n", "1"]);
    }
    read_group(&mut c, b"big", b"g", b"w1");
    wait_for(20, "a tick over budget", || {
        (reclaim_info(&mut c, "ticks_over_budget") > before).then_some(())
    });
}

#[test]
fn keyspace_events_announce_policy_state_changes() {
    let s = Server::new();
    let mut c = s.conn();
    run(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Kt"]);
    let rx = listen(&s);
    create_group(&mut c, b"st", b"g");
    set_policy_opts(
        &mut c,
        "st",
        "g",
        "MIN-IDLE 100 MAX-DELIVERIES 1 DLQ st:dlq INTERVAL 50 STORM 2 600000",
    );
    // Three poison entries (delivered once, MAX-DELIVERIES 1): the third would be over STORM 2.
    add_entries(&mut c, b"st", "x", 3);
    read_group(&mut c, b"st", b"g", b"w1");
    expect_event(&rx, "st", "reclaim-storm");
    assert_eq!(line_of(&mut c, "st", "g")["status"], "storm");
    assert_eq!(xlen(&mut c, "st:dlq"), 2);
    // Resumed: the breaker closes for a window and the third goes too.
    run(&mut c, &["RECLAIM.POLICY", "RESUME", "st", "g"]);
    expect_event(&rx, "st", "reclaim-resumed");
    expect_event(&rx, "st", "reclaim-deadletter");
    assert_eq!(xlen(&mut c, "st:dlq"), 3);
    // Paused and resumed by hand.
    run(&mut c, &["RECLAIM.POLICY", "PAUSE", "st", "g"]);
    expect_event(&rx, "st", "reclaim-paused");
    assert_eq!(line_of(&mut c, "st", "g")["status"], "paused");
    run(&mut c, &["RECLAIM.POLICY", "RESUME", "st", "g"]);
    expect_event(&rx, "st", "reclaim-resumed");
    assert_eq!(line_of(&mut c, "st", "g")["status"], "active");
    // The breaker opened by hand; a PAUSE that changes nothing fires nothing.
    run(&mut c, &["RECLAIM.POLICY", "PAUSE", "st", "g", "STORM"]);
    expect_event(&rx, "st", "reclaim-storm");
    run(&mut c, &["RECLAIM.POLICY", "PAUSE", "st", "g", "STORM"]);
    run(&mut c, &["RECLAIM.POLICY", "PAUSE", "st", "g"]);
    expect_event(&rx, "st", "reclaim-paused");
    // Nothing more on `st`: through passes of another policy (the timer ran), up to an event
    // fired after all of the above.
    create_group(&mut c, b"witness", b"g");
    set_policy_opts(&mut c, "witness", "g", "INTERVAL 50");
    wait_passes(&mut c, "witness", "g", 4);
    run(&mut c, &["XADD", "marker", "*", "f", "v"]);
    let rest: Vec<(String, String)> = events_until(&rx, "marker", "xadd")
        .into_iter()
        .filter(|(k, _)| k == "st")
        .collect();
    assert!(rest.is_empty(), "{rest:?}");
}

/// `RECLAIM.HEALTH stream group`.
fn health(c: &mut Connection, stream: &str, group: &str) -> Value {
    run(c, &["RECLAIM.HEALTH", stream, group])
}

#[test]
fn health_shows_the_group_and_when_each_figure_was_taken() {
    let s = Server::new();
    let mut c = s.conn();
    let replica = s.replica(&[]);
    let mut rc = replica.conn();
    // Same error as RECLAIM.STATS, on the primary and on a replica.
    for con in [&mut c, &mut rc] {
        assert_eq!(
            error_of(con, cmd("RECLAIM.HEALTH").arg("h").arg("g")),
            NO_POLICY
        );
        assert_eq!(
            error_of(con, cmd("RECLAIM.STATS").arg("h").arg("g")),
            NO_POLICY
        );
    }
    // Five entries a crashed worker holds, two of them at their last delivery.
    create_group(&mut c, b"h", b"g");
    // The policy's one timer pass first, on the empty group: what follows is left to SWEEP.
    quiet_policy(&mut c, "h", "g", "MIN-IDLE 200 MAX-DELIVERIES 3 DLQ h:dlq");
    let ids = add_entries(&mut c, b"h", "x", 5);
    read_group(&mut c, b"h", b"g", b"w1");
    set_deliveries(&mut c, b"h", b"g", b"w1", &ids[..2], 3);
    wait_idle(&mut c, "h", "g", 250);
    // One that w2 has just read: not stale.
    add_entries(&mut c, b"h", "y", 1);
    read_group(&mut c, b"h", b"g", b"w2");
    let before = server_ms(&mut c);
    let swept = run(&mut c, &["RECLAIM.SWEEP", "h", "g"]);
    assert_eq!(int_field(&swept, "claimed"), 3);
    assert_eq!(int_field(&swept, "dead-lettered"), 2);

    let h = health(&mut c, "h", "g");
    let now = int_field(&h, "now-ms");
    assert!(now >= before, "{h:?}");
    // Read now: three in the claimant's inbox, one with w2.
    let live = field(&h, "live");
    assert_eq!(int_field(&live, "pending"), 4, "{live:?}");
    assert_eq!(int_field(&live, "inbox"), 3, "{live:?}");
    assert_eq!(
        int_field(&live, "consumers"),
        1,
        "w2 (the inbox is not counted)"
    );
    assert_eq!(int_field(&live, "max-consumer-pending"), 1, "{live:?}");
    let holders: Vec<(String, i64)> = redis::from_redis_value(field(&live, "by-consumer")).unwrap();
    assert_eq!(
        holders,
        [("reclaim".to_string(), 3), ("w2".to_string(), 1)],
        "{live:?}"
    );
    assert!(int_field(&live, "oldest-pending-age-ms") >= 0, "{live:?}");
    // At the end of the sweep's pass.
    let last = field(&h, "last-pass");
    let at = int_field(&last, "taken-at-ms");
    assert!(before <= at && at <= now, "{last:?}");
    assert_eq!(int_field(&last, "pending"), 4, "{last:?}");
    assert_eq!(int_field(&last, "inbox"), 3, "{last:?}");
    assert_eq!(int_field(&last, "consumers"), 1, "{last:?}");
    // The PEL at the end of the last passes: empty after the first, 4 after the sweep.
    let sizes: Vec<(i64, i64)> = redis::from_redis_value(field(&h, "pel-sizes")).unwrap();
    let counts: Vec<i64> = sizes.iter().map(|s| s.1).collect();
    assert_eq!(counts, [0, 4], "{sizes:?}");
    assert_eq!(sizes[1].0, at, "{sizes:?}");
    assert_eq!(int_field(&h, "pel-change"), 4);
    // Delivery counts as the sweep read them: four delivered once, two three times.
    let d = field(&h, "deliveries");
    let tally_at = int_field(&d, "taken-at-ms");
    assert!(before <= tally_at && tally_at <= now, "{d:?}");
    assert_eq!(str_field(&d, "pass"), "full");
    assert_eq!(int_field(&d, "entries"), 6);
    let buckets: Vec<(String, i64)> = redis::from_redis_value(field(&d, "buckets")).unwrap();
    assert_eq!(
        buckets,
        [
            ("1".to_string(), 4),
            ("2".to_string(), 0),
            ("3".to_string(), 2),
            ("above".to_string(), 0)
        ]
    );
    assert!(int_field(&d, "most-idle-ms") >= 250, "{d:?}");
    let seen_at = int_field(&d, "most-idle-seen-at-ms");
    assert!(before <= seen_at && seen_at <= tally_at, "{d:?}");
    let dl = field(&h, "dead-letters");
    for f in ["dlq-length", "last-minute", "last-hour", "total"] {
        assert_eq!(int_field(&dl, f), 2, "{f}: {dl:?}");
    }
    assert_eq!(str_field(&h, "status"), "active");

    // A replica answers from what it holds: the PEL now, the DLQ; no pass ran there.
    replica_acked(&mut c);
    let rh = health(&mut rc, "h", "g");
    assert_eq!(int_field(&field(&rh, "live"), "pending"), 4, "{rh:?}");
    assert_eq!(
        int_field(&field(&rh, "last-pass"), "taken-at-ms"),
        0,
        "{rh:?}"
    );
    assert_eq!(field(&rh, "pel-change"), Value::Nil, "{rh:?}");
    assert_eq!(
        int_field(&field(&rh, "dead-letters"), "dlq-length"),
        2,
        "{rh:?}"
    );
    // Without its stream: nothing read now.
    run(&mut c, &["DEL", "h"]);
    assert_eq!(field(&health(&mut c, "h", "g"), "live"), Value::Nil);
    // Another type under the stream's name: WRONGTYPE, as RECLAIM.SIMULATE and RECLAIM.SWEEP
    // answer (RECLAIM.STATS keeps answering, its status says it); the value stays.
    run(&mut c, &["SET", "h", "junk"]);
    let wrongtype = "WRONGTYPE Operation against a key holding the wrong kind of value";
    assert_eq!(
        error_of(&mut c, cmd("RECLAIM.HEALTH").arg("h").arg("g")),
        wrongtype
    );
    assert_eq!(
        error_of(&mut c, cmd("RECLAIM.SIMULATE").arg("h").arg("g")),
        wrongtype
    );
    assert_eq!(q::<String>(&mut c, &["GET", "h"]), "junk");
    assert_eq!(q::<String>(&mut c, &["TYPE", "h"]), "string");
}

#[test]
fn replicas_show_the_stored_state_in_info() {
    let s = Server::new();
    let mut c = s.conn();
    set_policy_opts(&mut c, "r1", "g", "MIN-IDLE 1000");
    set_policy_opts(&mut c, "r2", "g", "MIN-IDLE 1000");
    run(&mut c, &["RECLAIM.POLICY", "PAUSE", "r1", "g"]);
    run(&mut c, &["RECLAIM.POLICY", "PAUSE", "r2", "g", "STORM"]);
    // A replica that starts now gets the states with the RDB of its full sync.
    let replica = s.replica(&[]);
    let mut rc = replica.conn();
    wait_for(20, "the policies on the replica", || {
        (policy_lines(&mut rc).len() == 2).then_some(())
    });
    assert_eq!(line_of(&mut rc, "r1", "g")["status"], "paused");
    assert_eq!(line_of(&mut rc, "r2", "g")["status"], "storm");
    // And the changes through the replication stream.
    run(&mut c, &["RECLAIM.POLICY", "RESUME", "r1", "g"]);
    wait_for(20, "r1 resumed on the replica", || {
        (line_of(&mut rc, "r1", "g")["status"] == "active").then_some(())
    });
    run(&mut c, &["RECLAIM.POLICY", "PAUSE", "r1", "g"]);
    wait_for(20, "r1 paused on the replica", || {
        (line_of(&mut rc, "r1", "g")["status"] == "paused").then_some(())
    });
}

/// `reclaim.enabled no` shows from outside: `reclaim_enabled:0` in `INFO reclaim`, `disabled` on
/// every policy's line and in `RECLAIM.HEALTH` (and `RECLAIM.STATS`), until it is `yes` again.
#[test]
fn reclaim_enabled_no_shows_in_info_and_health() {
    let s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"a", b"g");
    set_policy(&mut c, b"a", b"g", &PolicyView::new(1000, 50));
    create_group(&mut c, b"b", b"g");
    set_policy(&mut c, b"b", b"g", &PolicyView::new(1000, 50));
    assert_eq!(reclaim_info(&mut c, "enabled"), 1);
    assert_eq!(line_of(&mut c, "a", "g")["status"], "active");

    run(&mut c, &["CONFIG", "SET", "reclaim.enabled", "no"]);
    assert_eq!(reclaim_info(&mut c, "enabled"), 0);
    for k in ["a", "b"] {
        assert_eq!(line_of(&mut c, k, "g")["status"], "disabled", "{k}");
        assert_eq!(
            str_field(&health(&mut c, k, "g"), "status"),
            "disabled",
            "{k}"
        );
        assert_eq!(status(&mut c, k, "g"), "disabled", "{k}");
    }

    run(&mut c, &["CONFIG", "SET", "reclaim.enabled", "yes"]);
    assert_eq!(reclaim_info(&mut c, "enabled"), 1);
    assert_eq!(line_of(&mut c, "a", "g")["status"], "active");
    assert_eq!(str_field(&health(&mut c, "a", "g"), "status"), "active");
}

// ---------------------------------------------------------------------------------------------
// The INFO reclaim section
// ---------------------------------------------------------------------------------------------

#[test]
fn info_section() {
    let s = Server::new();
    let mut c = s.conn();
    let text: String = cmd("INFO").arg("reclaim").query(&mut c).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines[0].trim(), "# reclaim", "{text}");
    for f in [
        "reclaim_policies",
        "reclaim_inbox",
        "reclaim_tracked_consumers",
        "reclaim_used_memory",
        "reclaim_blocked_readers",
        "reclaim_ticks",
        "reclaim_ticks_skipped_replica",
        "reclaim_ticks_skipped_loading",
        "reclaim_ticks_skipped_paused",
        "reclaim_ticks_skipped_oom",
        "reclaim_ticks_skipped_cluster_down",
        "reclaim_steps",
        "reclaim_passes",
        "reclaim_claimed",
        "reclaim_redelivered",
        "reclaim_dead_lettered",
        "reclaim_deleted",
        "reclaim_oom_skips",
        "reclaim_errors",
        "reclaim_dlq_trimmed",
        "reclaim_tombstones",
        "reclaim_last_tick_us",
        "reclaim_max_tick_us",
        "reclaim_panics",
    ] {
        let _ = info_int(&mut c, "reclaim", f);
    }
    // Every line of the section is `reclaim_<name>:<integer>`; the per-policy lines follow in
    // their own section (tests/observe.rs).
    let totals: Vec<&&str> = lines[1..]
        .iter()
        .take_while(|l| !l.starts_with('#'))
        .collect();
    assert_eq!(
        lines.get(totals.len() + 1).map(|l| l.trim()),
        Some("# reclaim_policies"),
        "{text}"
    );
    // One text field: the `maxmemory-policy` the eviction risk was judged under.
    for l in totals {
        let (k, v) = l.split_once(':').unwrap_or_else(|| panic!("line {l:?}"));
        assert!(k.starts_with("reclaim_"), "{l:?}");
        if k == "reclaim_maxmemory_policy" {
            assert_eq!(v.trim(), "noeviction", "{l:?}");
            continue;
        }
        assert!(v.trim().parse::<u64>().is_ok(), "{l:?}");
    }
    assert_eq!(reclaim_info(&mut c, "eviction_risk"), 0);
    assert_eq!(reclaim_info(&mut c, "evicted_keys"), 0);
    // The section is part of `INFO everything` too.
    let all: String = cmd("INFO").arg("everything").query(&mut c).unwrap();
    assert!(
        all.contains("# reclaim\r\n"),
        "INFO everything lacks # reclaim"
    );

    assert_eq!(reclaim_info(&mut c, "policies"), 0);
    assert_eq!(reclaim_info(&mut c, "claimed"), 0);
    assert_eq!(reclaim_info(&mut c, "redelivered"), 0);
    assert_eq!(reclaim_info(&mut c, "inbox"), 0);
    assert_eq!(reclaim_info(&mut c, "dead_lettered"), 0);
    assert_eq!(reclaim_info(&mut c, "deleted"), 0);
    assert_eq!(reclaim_info(&mut c, "ticks_skipped_replica"), 0);

    set_policy_args(&mut c, b"a", b"g", &[]);
    set_policy_args(&mut c, b"a", b"h", &[]);
    set_policy_args(&mut c, b"b", b"g", &[]);
    assert_eq!(reclaim_info(&mut c, "policies"), 3);
    // Replacing is not adding.
    set_policy_args(&mut c, b"a", b"g", &words("COUNT 5"));
    assert_eq!(reclaim_info(&mut c, "policies"), 3);
    // A rejected SET adds nothing.
    let _ = set_policy_err(&mut c, b"z", b"g", &words("COUNT 0"));
    assert_eq!(reclaim_info(&mut c, "policies"), 3);
    // Policies of every database count.
    let mut c1 = s.conn();
    let _: () = cmd("SELECT").arg(1).query(&mut c1).unwrap();
    set_policy_args(&mut c1, b"a", b"g", &[]);
    assert_eq!(reclaim_info(&mut c, "policies"), 4);
    assert_eq!(policy_del_reply(&mut c, b"a", b"h"), Value::Int(1));
    assert_eq!(reclaim_info(&mut c, "policies"), 3);
    assert_eq!(policy_del_reply(&mut c, b"a", b"h"), Value::Int(0));
    assert_eq!(reclaim_info(&mut c, "policies"), 3);
    // FLUSHDB forgets the policies of its database.
    let _: () = cmd("FLUSHDB").query(&mut c1).unwrap();
    assert_eq!(reclaim_info(&mut c, "policies"), 2);
    let _: () = cmd("FLUSHALL").query(&mut c).unwrap();
    assert_eq!(reclaim_info(&mut c, "policies"), 0);
    assert_eq!(policy_list_reply(&mut c), Value::Array(vec![]));
    assert_eq!(reclaim_info(&mut c, "panics"), 0);
}
