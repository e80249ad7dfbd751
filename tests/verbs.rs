//! Workers steer their own entries: `RECLAIM.EXTEND` (a long job keeps its lease), `RECLAIM.NACK
//! [DELAY]` (give it back now or later), `RECLAIM.TERM` (never retry), and the policy options
//! `BACKOFF` (redeliveries slow down) and `LIVENESS` (no stealing from a consumer that is alive).

use reclaim_testkit::*;

use std::time::{Duration, Instant};

/// A policy on stream `s`, group `g`, DLQ `s:dlq`: MIN-IDLE `min_idle`, MAX-DELIVERIES 10,
/// INTERVAL 50 and `extra` options.
fn policy(c: &mut Connection, s: &str, min_idle: i64, extra: &str) {
    create_group(c, s.as_bytes(), b"g");
    let opts = format!("MIN-IDLE {min_idle} MAX-DELIVERIES 10 DLQ {s}:dlq INTERVAL 50 {extra}");
    set_policy_opts(c, s, "g", opts.trim());
}

/// (owner, delivery count) of entry `id` of group `g`, or `None` when it is not pending.
fn owner(c: &mut Connection, s: &str, id: &str) -> Option<(String, i64)> {
    owners(c, s, "g").remove(id)
}

/// `RECLAIM.<verb> s g consumer ids... [extra...]` as a reply.
fn verb(
    c: &mut Connection,
    name: &str,
    s: &str,
    consumer: &str,
    ids: &[&str],
    extra: &[&str],
) -> Value {
    let mut k = cmd(&format!("RECLAIM.{name}"));
    k.arg(s).arg("g").arg(consumer).arg(ids).arg(extra);
    k.query(c).unwrap_or_else(|e| panic!("RECLAIM.{name}: {e}"))
}

/// Worker `w` takes one entry with `RECLAIM.READGROUP`: its ID (None when nothing came).
fn take(c: &mut Connection, s: &str, w: &str, block: u64) -> Option<String> {
    readgroup(c, s, "g", w, 1, Some(block))
        .into_iter()
        .next()
        .map(|e| e.0)
}

#[test]
fn extend_keeps_a_long_job_and_a_lost_one_stays_lost() {
    let s = Server::new();
    let mut c = s.conn();
    policy(&mut c, "e", 1000, "");
    let id: String = q(&mut c, &["XADD", "e", "*", "job", "long"]);
    assert_eq!(take(&mut c, "e", "w1", 100).as_deref(), Some(id.as_str()));
    // Sixty passes (three times MIN-IDLE at INTERVAL 50), renewing after each: the entry never
    // moves (a renewal comes a pass, some 50 ms, after the last: 950 ms of margin).
    for _ in 0..60 {
        let renewed: Vec<String> =
            redis::from_redis_value(verb(&mut c, "EXTEND", "e", "w1", &[&id], &[])).unwrap();
        assert_eq!(renewed, std::slice::from_ref(&id));
        assert_eq!(owner(&mut c, "e", &id), Some(("w1".into(), 1)));
        wait_passes(&mut c, "e", "g", 1);
    }
    assert_eq!(stat(&mut c, "e", "g", "claimed"), 0);
    // The worker stops renewing: the entry is redelivered once, to another worker.
    let mut c2 = s.conn();
    let got = wait_for(10, "the redelivery", || take(&mut c2, "e", "w2", 100));
    assert_eq!(got, id);
    assert_eq!(owner(&mut c, "e", &id), Some(("w2".into(), 2)));
    // w1 lost it: EXTEND renews nothing and changes nothing.
    let renewed: Vec<String> =
        redis::from_redis_value(verb(&mut c, "EXTEND", "e", "w1", &[&id, "99-0"], &[])).unwrap();
    assert_eq!(renewed, Vec::<String>::new());
    assert_eq!(owner(&mut c, "e", &id), Some(("w2".into(), 2)));
}

#[test]
fn nack_gives_back_now_or_after_the_delay_with_the_count_unchanged() {
    let s = Server::new();
    let mut c = s.conn();
    policy(&mut c, "n", 1000, "");
    let a: String = q(&mut c, &["XADD", "n", "*", "job", "a"]);
    let b: String = q(&mut c, &["XADD", "n", "*", "job", "b"]);
    let got = readgroup(&mut c, "n", "g", "w1", 2, None);
    assert_eq!(got.len(), 2);
    // A delay over the maximum is refused, naming the entry's due idle; nothing changes (delays
    // longer than the lease: tests/delays.rs).
    let e = error_of(
        &mut c,
        cmd("RECLAIM.NACK").arg(&["n", "g", "w1", &a, "DELAY", "2592000001"]),
    );
    assert_eq!(
        e,
        "ERR DELAY 2592000001 is longer than 1000, the idle (ms) after which the entry is due, and than 2592000000 (30 days), the longest delay"
    );
    assert_eq!(owner(&mut c, "n", &a), Some(("w1".into(), 1)));
    // Another consumer's NACK releases nothing.
    assert_eq!(verb(&mut c, "NACK", "n", "w9", &[&a], &[]), Value::Int(0));
    // NACK now: the next read takes it, its second delivery (the failed attempt counted once).
    assert_eq!(verb(&mut c, "NACK", "n", "w1", &[&a], &[]), Value::Int(1));
    assert_eq!(owner(&mut c, "n", &a), Some(("reclaim".into(), 1)));
    assert_eq!(take(&mut c, "n", "w2", 0).as_deref(), Some(a.as_str()));
    assert_eq!(owner(&mut c, "n", &a), Some(("w2".into(), 2)));
    // NACK with DELAY 400: not redelivered before 400 ms, redelivered after.
    let t0 = Instant::now();
    assert_eq!(
        verb(&mut c, "NACK", "n", "w1", &[&b], &["DELAY", "400"]),
        Value::Int(1)
    );
    assert_eq!(owner(&mut c, "n", &b), Some(("reclaim:delayed".into(), 1)));
    let mut c2 = s.conn();
    let got = wait_for(10, "the delayed entry", || take(&mut c2, "n", "w3", 100));
    assert_eq!(got, b);
    assert!(
        t0.elapsed() >= Duration::from_millis(400),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(owner(&mut c, "n", &b), Some(("w3".into(), 2)));
}

#[test]
fn term_dead_letters_at_once_with_its_reason_in_one_transaction() {
    let mut p = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let r = p.replica(&[]);
    let mut c = p.conn();
    policy(&mut c, "t", 60_000, "");
    let a: String = q(&mut c, &["XADD", "t", "*", "job", "bad"]);
    let b: String = q(&mut c, &["XADD", "t", "*", "job", "worse"]);
    assert_eq!(readgroup(&mut c, "t", "g", "w1", 2, None).len(), 2);
    assert_eq!(verb(&mut c, "TERM", "t", "w2", &[&a], &[]), Value::Int(0));
    assert_eq!(verb(&mut c, "TERM", "t", "w1", &[&a], &[]), Value::Int(1));
    assert_eq!(
        verb(
            &mut c,
            "TERM",
            "t",
            "w1",
            &[&b],
            &["REASON", "schema v1 rejected"]
        ),
        Value::Int(1)
    );
    let dlq = xrange_text(&mut c, "t:dlq");
    let reasons: Vec<(String, String)> = dlq
        .iter()
        .map(|(_, f)| {
            let get = |k: &str| f.iter().find(|x| x.0 == k).map(|x| x.1.clone()).unwrap();
            (get("reclaim-id"), get("reclaim-reason"))
        })
        .collect();
    assert_eq!(
        reasons,
        [
            (a.clone(), "term".into()),
            (b.clone(), "schema v1 rejected".into())
        ]
    );
    for (_, f) in &dlq {
        let _ = without_moved_ms(f);
    }
    assert_eq!(pel_total(&mut c, "t", "g"), 0);
    assert_eq!(stat(&mut c, "t", "g", "dead-lettered"), 2);
    // The AOF holds each TERM as one MULTI/EXEC: XADD to the DLQ, then XACK.
    let cmds: Vec<Vec<Vec<u8>>> = p
        .aof_manifest_files()
        .iter()
        .filter(|f| f.1 == "i")
        .flat_map(|f| parse_aof(&f.2))
        .collect();
    let names: Vec<String> = cmds
        .iter()
        .map(|c| String::from_utf8_lossy(&c[0]).to_uppercase())
        .filter(|n| ["MULTI", "XADD", "XACK", "EXEC"].contains(&n.as_str()))
        .collect();
    let want: Vec<&str> = ["MULTI", "XADD", "XACK", "EXEC"].repeat(2);
    assert_eq!(names[names.len() - 8..], want[..], "{names:?}");
    // The replica has the same DLQ and PEL.
    replica_acked(&mut c);
    let mut rc = r.conn();
    assert_eq!(xrange(&mut rc, b"t:dlq"), xrange(&mut c, b"t:dlq"));
    assert_eq!(pel_total(&mut rc, "t", "g"), 0);
    // Without a DLQ TERM is refused.
    set_policy_opts(&mut c, "t", "g", "MIN-IDLE 1000");
    let e = error_of(&mut c, cmd("RECLAIM.TERM").arg(&["t", "g", "w1", &a]));
    assert_eq!(e, "ERR the policy of this key and group has no DLQ");
    p.kill();
}

#[test]
fn verbs_refuse_a_missing_policy_and_bad_ids() {
    let s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"x", b"g");
    for v in ["EXTEND", "NACK", "TERM"] {
        let e = error_of(
            &mut c,
            cmd(&format!("RECLAIM.{v}")).arg(&["x", "g", "w", "1-0"]),
        );
        assert_eq!(e, "ERR no reclaim policy for this key and group", "{v}");
    }
    policy(&mut c, "y", 1000, "");
    for v in ["EXTEND", "NACK", "TERM"] {
        let e = error_of(
            &mut c,
            cmd(&format!("RECLAIM.{v}")).arg(&["y", "g", "w", "not-an-id"]),
        );
        assert_eq!(
            e, "ERR Invalid stream ID specified as stream command argument",
            "{v}"
        );
    }
    let e = error_of(
        &mut c,
        cmd("RECLAIM.NACK").arg(&["y", "g", "w", "1-0", "DELAY", "-1"]),
    );
    assert_eq!(
        e,
        "ERR DELAY must be an integer from 0 to 2592000000 (ms, 30 days)"
    );
    let e = error_of(
        &mut c,
        cmd("RECLAIM.NACK").arg(&["y", "g", "w", "1-0", "DELAY"]),
    );
    assert_eq!(e, "ERR option DELAY needs a value");
    let e = error_of(
        &mut c,
        cmd("RECLAIM.TERM").arg(&["y", "g", "w", "1-0", "REASON", "a", "REASON", "b"]),
    );
    assert_eq!(e, "ERR option REASON given more than once");
    // The policy outlives its stream: XPENDING's own errors come back, nothing is written.
    let _: () = cmd("DEL").arg("y").query(&mut c).unwrap();
    for v in ["EXTEND", "NACK", "TERM"] {
        let e = error_of(
            &mut c,
            cmd(&format!("RECLAIM.{v}")).arg(&["y", "g", "w", "1-0"]),
        );
        assert_eq!(e, "NOGROUP No such key 'y' or consumer group 'g'", "{v}");
    }
    let _: () = cmd("SET").arg("y").arg("text").query(&mut c).unwrap();
    for v in ["EXTEND", "NACK", "TERM"] {
        let e = error_of(
            &mut c,
            cmd(&format!("RECLAIM.{v}")).arg(&["y", "g", "w", "1-0"]),
        );
        assert_eq!(
            e, "WRONGTYPE Operation against a key holding the wrong kind of value",
            "{v}"
        );
    }
    let keys: Vec<String> = cmd("KEYS").arg("y*").query(&mut c).unwrap();
    assert_eq!(keys, vec!["y".to_string()], "no DLQ was created");
}

/// How much earlier than its step a delivery may seem to come: delivery times are read from the
/// server in whole ms (an idle of 1000 ms may be 999.x ms of real time, and `TIME` is truncated
/// to the ms), so two of them may each be off by up to a ms.
const OBSERVED_SLACK: Duration = Duration::from_millis(3);

/// Whether `waits` are each at least their step (ms) of `due`, within [`OBSERVED_SLACK`].
fn no_earlier_than(waits: &[Duration], due: &[u64]) -> bool {
    waits
        .iter()
        .zip(due)
        .all(|(w, d)| *w + OBSERVED_SLACK >= Duration::from_millis(*d))
}

/// One row of `XPENDING key group start end count`: ID, consumer, idle ms, delivery count.
type PendingRow = (String, String, u64, u64);

/// Times between the deliveries of a poison entry to a worker that always fails, `n` deliveries,
/// by the server's clock: each delivery's time is the server's `TIME` less the entry's idle
/// (`XPENDING`), read together right after it, so a client that sees a delivery late does not
/// shorten the next wait.
fn waits_between_deliveries(s: &Server, stream: &str, n: usize) -> Vec<Duration> {
    let mut c = s.conn();
    let _: String = q(&mut c, &["XADD", stream, "*", "job", "poison"]);
    let mut times = Vec::new();
    while times.len() < n {
        let got = wait_for(30, "the next delivery", || take(&mut c, stream, "w", 50));
        assert!(!got.is_empty());
        let ((sec, us), pel): ((u64, u64), Vec<PendingRow>) = redis::pipe()
            .atomic()
            .cmd("TIME")
            .cmd("XPENDING")
            .arg(&[stream, "g", "-", "+", "1"])
            .query(&mut c)
            .expect("TIME and XPENDING");
        let idle = pel.first().map(|p| p.2).expect("the entry is pending");
        times.push(Duration::from_micros(sec * 1_000_000 + us) - Duration::from_millis(idle));
    }
    times.windows(2).map(|w| w[1] - w[0]).collect()
}

#[test]
fn backoff_spaces_redeliveries() {
    let s = Server::new();
    let mut c = s.conn();
    // EXPONENTIAL: 200, 400, 800, then capped at 1000.
    policy(&mut c, "x", 200, "BACKOFF EXPONENTIAL 1000");
    let waits = waits_between_deliveries(&s, "x", 5);
    eprintln!("EXPONENTIAL waits: {waits:?}");
    assert!(no_earlier_than(&waits, &[200, 400, 800, 1000]), "{waits:?}");
    assert!(waits[1] > waits[0] && waits[2] > waits[1], "{waits:?}");
    // LIST: 300, then 700 repeating.
    policy(&mut c, "l", 100, "BACKOFF LIST 300 700");
    let waits = waits_between_deliveries(&s, "l", 4);
    eprintln!("LIST waits: {waits:?}");
    assert!(no_earlier_than(&waits, &[300, 700, 700]), "{waits:?}");
    // GET shows it.
    let p = get_policy(&mut c, b"l", b"g").unwrap();
    assert_eq!(p.backoff, b"LIST 300 700");
}

#[test]
fn liveness_keeps_a_live_workers_slow_entry_and_frees_a_dead_ones() {
    let s = Server::new();
    let mut c = s.conn();
    policy(&mut c, "v", 300, "LIVENESS 1000");
    let slow: String = q(&mut c, &["XADD", "v", "*", "job", "slow"]);
    let orphan: String = q(&mut c, &["XADD", "v", "*", "job", "orphan"]);
    // One worker takes the slow job and keeps reading (nothing new comes) while it runs; the
    // other takes the second job and dies.
    assert_eq!(
        take(&mut c, "v", "alive", 50).as_deref(),
        Some(slow.as_str())
    );
    let mut d = s.conn();
    assert_eq!(
        take(&mut d, "v", "dead", 50).as_deref(),
        Some(orphan.as_str())
    );
    drop(d);
    let t0 = Instant::now();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let stop = stop.clone();
        let mut c = s.conn();
        std::thread::spawn(move || {
            let mut got = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                got.extend(take(&mut c, "v", "alive", 100));
            }
            got
        })
    };
    // The dead worker's entry moves once it has been quiet for LIVENESS, not at MIN-IDLE, and the
    // live worker, reading, takes it (its second delivery).
    wait_for(10, "the dead worker's entry redelivered", || {
        (owner(&mut c, "v", &orphan) == Some(("alive".into(), 2))).then_some(())
    });
    assert!(
        t0.elapsed() >= Duration::from_millis(1000),
        "{:?}",
        t0.elapsed()
    );
    // The live worker keeps its slow entry, past MIN-IDLE five times over, through passes that
    // saw it that stale.
    wait_for(10, "the slow entry idle for five times MIN-IDLE", || {
        let p = pending(&mut c, "v", "g").into_iter().find(|p| p.id == slow);
        let p = p.expect("the slow entry is pending");
        assert_eq!((p.consumer.as_str(), p.count), ("alive", 1));
        (p.idle >= 1500).then_some(())
    });
    wait_passes(&mut c, "v", "g", 2);
    assert_eq!(owner(&mut c, "v", &slow), Some(("alive".into(), 1)));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(reader.join().expect("the live reader"), [orphan]);
}
