//! The delivery rule and `RECLAIM.READGROUP`: a delivery is a hand-over to worker code. The
//! sweep's moves into the inbox add none; an entry nobody tried is never dead-lettered; every
//! worker of a pool takes redeliveries with `RECLAIM.READGROUP`, each one counted, durably.

use reclaim_testkit::*;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The README's policy, shortened for a test: MIN-IDLE 300, MAX-DELIVERIES 3, INTERVAL 50.
fn readme_policy(c: &mut Connection, s: &str) {
    create_group(c, s.as_bytes(), b"workers");
    let dlq = format!("{s}:dlq");
    let p = PolicyView::new(300, 50).with_dlq(dlq.as_bytes(), 3);
    set_policy(c, s.as_bytes(), b"workers", &p);
}

/// A value shared by the test's worker threads.
type Shared<T> = Arc<Mutex<T>>;

#[test]
fn an_outage_of_every_reader_dead_letters_nothing() {
    let s = Server::new();
    let mut c = s.conn();
    readme_policy(&mut c, "orders");
    let ids = add_entries(&mut c, b"orders", "o", 5);
    // alice reads 5 and dies.
    read_group(&mut c, b"orders", b"workers", b"alice");
    // Ten times MIN-IDLE with nobody reading, and passes that saw them that stale: the entries
    // move to the inbox once and wait there, their count still 1; nothing reaches the DLQ.
    let nothing_delivered = |c: &mut Connection| {
        assert_eq!(xlen(c, "orders:dlq"), 0, "dead-lettered without a failure");
        for (id, (_, n)) in owners(c, "orders", "workers") {
            assert_eq!(n, 1, "{id}: a move is not a delivery");
        }
    };
    wait_for(20, "the entries idle for ten times MIN-IDLE", || {
        nothing_delivered(&mut c);
        let p = pending(&mut c, "orders", "workers");
        p.iter().all(|e| e.idle >= 3_000).then_some(())
    });
    wait_passes(&mut c, "orders", "workers", 2);
    nothing_delivered(&mut c);
    let now = owners(&mut c, "orders", "workers");
    assert!(
        ids.iter().all(|i| now[i] == ("reclaim".to_string(), 1)),
        "{now:?}"
    );
    assert_eq!(stat(&mut c, "orders", "workers", "inbox"), 5);
    assert_eq!(stat(&mut c, "orders", "workers", "claimed"), 5);
    assert_eq!(reclaim_info(&mut c, "inbox"), 5);
    // One read by any worker gets them, with their fields: their second delivery.
    let got = readgroup(&mut c, "orders", "workers", "bob", 10, None);
    assert_eq!(got.iter().map(|e| e.0.clone()).collect::<Vec<_>>(), ids);
    assert_eq!(got[0].1, vec![b"n".to_vec(), b"o-0".to_vec()]);
    let now = owners(&mut c, "orders", "workers");
    assert!(
        ids.iter().all(|i| now[i] == ("bob".to_string(), 2)),
        "{now:?}"
    );
    assert_eq!(stat(&mut c, "orders", "workers", "redelivered"), 5);
    assert_eq!(stat(&mut c, "orders", "workers", "inbox"), 0);
}

/// Four workers on `RECLAIM.READGROUP` whose handler fails on `poison`; returns the times and
/// workers of every handler run on it, once the poison entry is in the DLQ.
fn run_failing_pool(s: &Server, stream: &str) -> Vec<(Instant, String)> {
    let runs = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let (runs, stop) = (runs.clone(), stop.clone());
            let mut c = s.conn();
            let stream = stream.to_string();
            std::thread::spawn(move || {
                let name = format!("w{w}");
                while !stop.load(Ordering::Relaxed) {
                    for (id, fields) in readgroup(&mut c, &stream, "workers", &name, 1, Some(50)) {
                        if fields.iter().any(|f| f == b"poison") {
                            runs.lock().unwrap().push((Instant::now(), name.clone()));
                        } else {
                            let _: i64 = q(&mut c, &["XACK", &stream, "workers", &id]);
                        }
                    }
                }
            })
        })
        .collect();
    let mut c = s.conn();
    wait_for(30, "the poison entry in the DLQ", || {
        (xlen(&mut c, format!("{stream}:dlq")) == 1).then_some(())
    });
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().expect("worker");
    }
    let r = runs.lock().unwrap().clone();
    r
}

#[test]
fn the_handler_runs_exactly_max_deliveries_times() {
    let s = Server::new();
    let mut c = s.conn();
    readme_policy(&mut c, "jobs");
    add_entries(&mut c, b"jobs", "ok", 3);
    let poison: String = q(&mut c, &["XADD", "jobs", "*", "kind", "poison"]);
    add_entries(&mut c, b"jobs", "ok2", 3);
    let runs = run_failing_pool(&s, "jobs");
    assert_eq!(runs.len(), 3, "handler runs of the poison entry: {runs:?}");
    // Each attempt began only after the one before it had used its lease.
    for w in runs.windows(2) {
        assert!(w[1].0 - w[0].0 >= Duration::from_millis(250), "{runs:?}");
    }
    let dlq = xrange(&mut c, b"jobs:dlq");
    assert_eq!(dlq.len(), 1);
    assert_eq!(entry_field(&dlq[0], "reclaim-id"), poison.as_bytes());
    assert_eq!(entry_field(&dlq[0], "reclaim-deliveries"), b"3");
    assert_eq!(
        pel_total(&mut c, "jobs", "workers"),
        0,
        "everything else acknowledged"
    );
}

/// (id, owner, count) of the group's PEL, sorted.
fn pel(c: &mut Connection) -> Vec<PendRaw> {
    sorted(&pending_raw(c, b"jobs", b"workers"))
}

#[test]
fn counts_workers_saw_survive_a_restart_and_a_failover() {
    let mut p = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let r = p.replica(&[]);
    let mut c = p.conn();
    readme_policy(&mut c, "jobs");
    let ids = add_entries(&mut c, b"jobs", "j", 4);
    // Deliveries 1 (new) and 2 (redelivered after it went stale), by different workers.
    assert_eq!(readgroup(&mut c, "jobs", "workers", "w1", 4, None).len(), 4);
    wait_for(10, "the entries stale and moved to the inbox", || {
        (stat(&mut c, "jobs", "workers", "inbox") == 4).then_some(())
    });
    assert_eq!(readgroup(&mut c, "jobs", "workers", "w2", 2, None).len(), 2);
    // From now on nothing turns stale: the PEL stays as the workers left it.
    let p2 = PolicyView::new(600_000, 50).with_dlq(b"jobs:dlq", 3);
    set_policy(&mut c, b"jobs", b"workers", &p2);
    let before = pel(&mut c);
    let counts: Vec<(&[u8], i64)> = before.iter().map(|e| (e.1.as_slice(), e.2)).collect();
    assert_eq!(
        counts,
        vec![
            (&b"w2"[..], 2),
            (b"w2", 2),
            (b"reclaim", 1),
            (b"reclaim", 1)
        ],
        "{before:?}"
    );
    assert_eq!(before[0].0, ids[0]);
    replica_acked(&mut c);
    let mut rc = r.conn();
    assert_eq!(pel(&mut rc), before, "the replica's PEL");
    // Restart from the AOF.
    p.kill();
    p.restart();
    let mut c = p.conn();
    assert_eq!(pel(&mut c), before, "the PEL after a restart from the AOF");
    // The replica, promoted, has the counts the workers saw.
    drop(p);
    promote(&mut rc);
    assert_eq!(pel(&mut rc), before, "the promoted replica's PEL");
}

#[test]
fn workers_that_die_lose_nothing_and_never_share_a_lease() {
    const MIN_IDLE: u64 = 400;
    let s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"q", b"workers");
    let p = PolicyView::new(MIN_IDLE as i64, 50).with_dlq(b"q:dlq", 3);
    set_policy(&mut c, b"q", b"workers", &p);
    let mut pipe = redis::pipe();
    for i in 0..2000 {
        let kind = if i % 40 == 7 { "poison" } else { "ok" };
        pipe.cmd("XADD")
            .arg("q")
            .arg("*")
            .arg("kind")
            .arg(kind)
            .arg("i")
            .arg(i);
    }
    let ids: Vec<String> = pipe.query(&mut c).expect("XADD");
    // Every hand-over (time, consumer) and every successful XACK, by entry.
    let deliveries: Shared<HashMap<String, Vec<(Instant, String)>>> = Default::default();
    let acks: Arc<Mutex<HashMap<String, u32>>> = Default::default();
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let (deliveries, acks, stop) = (deliveries.clone(), acks.clone(), stop.clone());
            let s_port = s.port;
            std::thread::spawn(move || {
                let mut life = 0;
                let mut seed = 0x9e37_79b9_u64 + w;
                while !stop.load(Ordering::Relaxed) {
                    // A new process: a new connection and consumer name.
                    life += 1;
                    let name = format!("w{w}-{life}");
                    let client =
                        redis::Client::open(format!("redis://127.0.0.1:{s_port}/")).unwrap();
                    let mut c = client.get_connection().expect("connect");
                    loop {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        let got = readgroup(&mut c, "q", "workers", &name, 10, Some(50));
                        for (id, _) in &got {
                            deliveries
                                .lock()
                                .unwrap()
                                .entry(id.clone())
                                .or_default()
                                .push((Instant::now(), name.clone()));
                        }
                        // Dies mid-batch now and then (SIGKILL: no XACK, connection gone).
                        seed = seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        if !got.is_empty() && (seed >> 33) % 25 == 0 {
                            break;
                        }
                        for (id, fields) in got {
                            if fields.iter().any(|f| f == b"poison") {
                                continue;
                            }
                            let n: i64 = q(&mut c, &["XACK", "q", "workers", &id]);
                            if n == 1 {
                                *acks.lock().unwrap().entry(id).or_default() += 1;
                            }
                        }
                    }
                }
            })
        })
        .collect();
    wait_for(120, "every entry acknowledged or dead-lettered", || {
        let done = acks.lock().unwrap().len() as i64 + xlen(&mut c, "q:dlq");
        (pel_total(&mut c, "q", "workers") == 0 && done >= 2000).then_some(())
    });
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().expect("worker");
    }
    let dlq: Vec<String> = xrange(&mut c, b"q:dlq")
        .iter()
        .map(|e| String::from_utf8(entry_field(e, "reclaim-id")).unwrap())
        .collect();
    // Each entry acknowledged once or in the DLQ once, never both, never neither; every poison
    // entry in the DLQ (an ordinary one too when all three of its attempts died with a worker).
    let acks = acks.lock().unwrap();
    for (i, id) in ids.iter().enumerate() {
        let in_dlq = dlq.iter().filter(|d| *d == id).count();
        let acked = acks.get(id).copied().unwrap_or(0) as usize;
        assert_eq!(
            in_dlq + acked,
            1,
            "entry {id}: {in_dlq} in the DLQ, acknowledged {acked}"
        );
        if i % 40 == 7 {
            assert_eq!(in_dlq, 1, "poison entry {id}");
        }
    }
    // No entry went to a second worker while the first one's lease (MIN-IDLE) ran. Client-side
    // clocks read each hand-over a little after the server made it: allow 25 ms of that.
    let lease = Duration::from_millis(MIN_IDLE - 25);
    let deliveries = deliveries.lock().unwrap();
    let mut redelivered = 0;
    for (id, d) in deliveries.iter() {
        for w in d.windows(2) {
            redelivered += 1;
            assert!(
                w[1].0 - w[0].0 >= lease,
                "{id} handed to {} and {} too soon: {d:?}",
                w[0].1,
                w[1].1
            );
        }
        assert!(d.len() <= 3, "{id} delivered {} times", d.len());
    }
    assert!(redelivered > 0, "no worker died mid-batch");
}

#[test]
fn block_wakes_on_xadd_and_on_an_entry_turning_stale_and_times_out() {
    let s = Server::new();
    let mut c = s.conn();
    readme_policy(&mut c, "b");
    // Nothing: nil at the timeout.
    assert_eq!(
        readgroup(&mut c, "b", "workers", "w1", 1, Some(100)),
        Vec::<Entry>::new()
    );
    // An XADD wakes a blocked reader.
    let adder = add_once_a_reader_blocks(&s, "b");
    let got = readgroup(&mut c, "b", "workers", "w1", 1, Some(0));
    let id = adder.join().unwrap();
    assert_eq!(got, vec![(id.clone(), vec![b"f".to_vec(), b"v".to_vec()])]);
    // w1 holds it and goes quiet; w2 blocks and gets it once it turns stale (the sweep moves it
    // into the inbox and wakes the readers), as its second delivery.
    let mut c2 = s.conn();
    let got = readgroup(&mut c2, "b", "workers", "w2", 1, Some(10_000));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, id);
    assert_eq!(owners(&mut c, "b", "workers")[&id], ("w2".to_string(), 2));
    // While a reader blocks, the sweep keeps running and other clients are served.
    let passes = stat(&mut c, "b", "workers", "passes");
    let blocked =
        std::thread::spawn(move || readgroup(&mut c2, "b", "workers", "w3", 1, Some(400)));
    wait_for(10, "passes while a reader blocks", || {
        (stat(&mut c, "b", "workers", "passes") > passes + 2).then_some(())
    });
    let _: String = q(&mut c, &["PING"]);
    // w2's entry turns stale too: w3 gets it (third delivery), or nil if the timeout comes first.
    let third = blocked.join().unwrap();
    assert!(third.is_empty() || third[0].0 == id, "{third:?}");
    no_reader_blocked(&mut c);
}

/// A thread that appends `f v` to `key` once a reader blocks on the server; joins with the ID.
fn add_once_a_reader_blocks(s: &Server, key: &str) -> std::thread::JoinHandle<String> {
    let (port, key) = (s.port, key.to_string());
    std::thread::spawn(move || {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .unwrap()
            .get_connection()
            .unwrap();
        wait_for(10, "the reader to block", || {
            (reclaim_info(&mut c, "blocked_readers") == 1).then_some(())
        });
        q(&mut c, &["XADD", &key, "*", "f", "v"])
    })
}

/// Waits until `INFO reclaim` counts no blocked reader: the gauge drops when the server frees a
/// blocked client, which may come after the client has its reply.
fn no_reader_blocked(c: &mut Connection) {
    wait_for(10, "no reader blocked", || {
        (reclaim_info(c, "blocked_readers") == 0).then_some(())
    });
}

#[test]
fn a_deleted_stream_or_destroyed_group_ends_the_wait_with_xreadgroups_errors() {
    let s = Server::new();
    let mut c = s.conn();
    for (what, want) in [
        ("DEL", "UNBLOCKED the stream key no longer exists"),
        (
            "DESTROY",
            "NOGROUP the consumer group this client was blocked on no longer exists",
        ),
    ] {
        readme_policy(&mut c, "d");
        let port = s.port;
        let reader = std::thread::spawn(move || {
            let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
                .unwrap()
                .get_connection()
                .unwrap();
            error_of(
                &mut c,
                cmd("RECLAIM.READGROUP")
                    .arg(&["GROUP", "workers", "r", "BLOCK", "0", "STREAMS", "d", ">"]),
            )
        });
        wait_for(10, "the reader to block", || {
            (reclaim_info(&mut c, "blocked_readers") == 1).then_some(())
        });
        if what == "DEL" {
            let _: i64 = q(&mut c, &["DEL", "d"]);
        } else {
            let _: i64 = q(&mut c, &["XGROUP", "DESTROY", "d", "workers"]);
        }
        assert_eq!(reader.join().unwrap(), want, "after {what}");
        no_reader_blocked(&mut c);
        let _: i64 = q(&mut c, &["DEL", "d"]);
    }
}

#[test]
fn block_in_multi_is_ignored_and_in_a_script_refused() {
    let s = Server::new();
    let mut c = s.conn();
    readme_policy(&mut c, "m");
    let v: Value = redis::pipe()
        .atomic()
        .cmd("RECLAIM.READGROUP")
        .arg(&["GROUP", "workers", "w", "BLOCK", "0", "STREAMS", "m", ">"])
        .query(&mut c)
        .expect("MULTI/EXEC");
    assert_eq!(v, Value::Array(vec![Value::Nil]));
    let e = error_of(
        &mut c,
        cmd("EVAL")
            .arg("return redis.call('RECLAIM.READGROUP','GROUP','workers','w','BLOCK','10','STREAMS','m','>')")
            .arg(0),
    );
    assert!(
        e.contains("RECLAIM.READGROUP command is not allowed with BLOCK option from scripts"),
        "{e}"
    );
}

#[test]
fn replies_have_xreadgroups_shape_in_resp2_and_resp3() {
    let s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"r", b"plain");
    create_group(&mut c, b"r", b"reclaim");
    set_policy(&mut c, b"r", b"reclaim", &PolicyView::new(60_000, 100));
    add_entries(&mut c, b"r", "x", 3);
    for resp3 in [false, true] {
        let mut c = if resp3 { s.conn3() } else { s.conn() };
        let args = |cmd_name: &str, group: &str| {
            let mut k = cmd(cmd_name);
            k.arg(&["GROUP", group, "c", "COUNT", "2", "STREAMS", "r", ">"]);
            k
        };
        let want: Value = args("XREADGROUP", "plain").query(&mut c).unwrap();
        let got: Value = args("RECLAIM.READGROUP", "reclaim").query(&mut c).unwrap();
        assert_eq!(got, want, "resp3 {resp3}");
        assert_ne!(want, Value::Nil);
    }
    // Nothing left for either: nil both ways.
    let read = |c: &mut Connection, cmd_name: &str, group: &str| {
        run(c, &[cmd_name, "GROUP", group, "c", "STREAMS", "r", ">"])
    };
    read(&mut c, "XREADGROUP", "plain");
    read(&mut c, "RECLAIM.READGROUP", "reclaim");
    let want = read(&mut c, "XREADGROUP", "plain");
    let got = read(&mut c, "RECLAIM.READGROUP", "reclaim");
    assert_eq!((got, want), (Value::Nil, Value::Nil));
}

#[test]
fn a_stream_without_a_policy_reads_as_xreadgroup() {
    let s = Server::new();
    let mut c = s.conn();
    for g in [b"a".as_slice(), b"b"] {
        create_group(&mut c, b"np", g);
    }
    add_entries(&mut c, b"np", "e", 3);
    let want: Value = q(
        &mut c,
        &["XREADGROUP", "GROUP", "a", "c", "STREAMS", "np", ">"],
    );
    let got: Value = q(
        &mut c,
        &["RECLAIM.READGROUP", "GROUP", "b", "c", "STREAMS", "np", ">"],
    );
    assert_eq!(got, want);
    // Two streams in one call, one with a policy: both answered, in order.
    readme_policy(&mut c, "wp");
    add_entries(&mut c, b"wp", "w", 1);
    create_group(&mut c, b"np2", b"workers");
    add_entries(&mut c, b"np2", "n", 1);
    let v: Value = q(
        &mut c,
        &[
            "RECLAIM.READGROUP",
            "GROUP",
            "workers",
            "c",
            "STREAMS",
            "wp",
            "np2",
            ">",
            ">",
        ],
    );
    let keys: Vec<(String, Vec<Entry>)> = redis::from_redis_value(v).unwrap();
    assert_eq!(
        keys.iter().map(|k| k.0.as_str()).collect::<Vec<_>>(),
        ["wp", "np2"]
    );
}

#[test]
fn an_entry_at_its_limit_is_dead_lettered_not_handed_over() {
    let s = Server::new();
    let mut c = s.conn();
    readme_policy(&mut c, "l");
    let ids = add_entries(&mut c, b"l", "e", 2);
    read_group(&mut c, b"l", b"workers", b"alice");
    // The first has had its three attempts; both sit in the inbox.
    set_deliveries(&mut c, b"l", b"workers", b"reclaim", &ids[..1], 3);
    set_deliveries(&mut c, b"l", b"workers", b"reclaim", &ids[1..], 1);
    let got = readgroup(&mut c, "l", "workers", "bob", 10, None);
    assert_eq!(
        got.iter().map(|e| e.0.clone()).collect::<Vec<_>>(),
        vec![ids[1].clone()]
    );
    let dlq = xrange(&mut c, b"l:dlq");
    assert_eq!(dlq.len(), 1);
    assert_eq!(entry_field(&dlq[0], "reclaim-id"), ids[0].as_bytes());
    assert_eq!(entry_field(&dlq[0], "reclaim-deliveries"), b"3");
    assert_eq!(owners(&mut c, "l", "workers").len(), 1);
    assert_eq!(stat(&mut c, "l", "workers", "dead-lettered"), 1);
}

#[test]
fn a_deleted_entry_is_purged_and_counted_never_returned_without_fields() {
    let s = Server::new();
    let mut c = s.conn();
    readme_policy(&mut c, "x");
    let ids = add_entries(&mut c, b"x", "e", 3);
    read_group(&mut c, b"x", b"workers", b"alice");
    set_deliveries(&mut c, b"x", b"workers", b"reclaim", &ids, 1);
    let _: i64 = q(&mut c, &["XDEL", "x", &ids[1]]);
    let got = readgroup(&mut c, "x", "workers", "bob", 10, None);
    assert_eq!(
        got.iter().map(|e| e.0.clone()).collect::<Vec<_>>(),
        vec![ids[0].clone(), ids[2].clone()]
    );
    assert!(got.iter().all(|e| !e.1.is_empty()));
    assert_eq!(owners(&mut c, "x", "workers").len(), 2);
    assert_eq!(stat(&mut c, "x", "workers", "deleted"), 1);
}

#[test]
fn errors_are_xreadgroups() {
    let s = Server::new();
    let mut c = s.conn();
    readme_policy(&mut c, "e");
    let _: () = q(&mut c, &["SET", "str", "x"]);
    let both = |c: &mut Connection, args: &[&str]| {
        let mine = error_of(c, cmd("RECLAIM.READGROUP").arg(args));
        let theirs = error_of(c, cmd("XREADGROUP").arg(args));
        (mine, theirs)
    };
    let (m, t) = both(&mut c, &["GROUP", "nope", "c", "STREAMS", "e", ">"]);
    assert_eq!(m, t);
    assert_eq!(
        m,
        "NOGROUP No such key 'e' or consumer group 'nope' in XREADGROUP with GROUP option"
    );
    let (m, t) = both(
        &mut c,
        &["GROUP", "workers", "c", "STREAMS", "missing", ">"],
    );
    assert_eq!(m, t);
    let (m, t) = both(&mut c, &["GROUP", "workers", "c", "STREAMS", "str", ">"]);
    assert_eq!(
        (m.as_str(), t.as_str()),
        (
            "WRONGTYPE Operation against a key holding the wrong kind of value",
            "WRONGTYPE Operation against a key holding the wrong kind of value"
        )
    );
    for (args, want) in [
        (&["GROUP", "workers", "c", "STREAMS", "e", "0"][..], "ERR RECLAIM.READGROUP reads with the ID '>' only: read a consumer's own history with XREADGROUP"),
        (&["GROUP", "workers", "c", "STREAMS", "e", "e", ">"][..], "ERR Unbalanced RECLAIM.READGROUP list of streams: for each stream key the ID '>' must be specified."),
        (&["GROUP", "workers", "c", "NOACK", "STREAMS", "e", ">"][..], "ERR RECLAIM.READGROUP does not take NOACK: entries read without a PEL entry cannot be redelivered (use XREADGROUP)"),
        (&["COUNT", "1", "BLOCK", "1", "STREAMS", "e", ">"][..], "ERR Missing GROUP option for RECLAIM.READGROUP"),
        (&["GROUP", "workers", "c", "COUNT", "x", "STREAMS", "e", ">"][..], "ERR value is not an integer or out of range"),
        (&["GROUP", "workers", "c", "BLOCK", "-1", "STREAMS", "e", ">"][..], "ERR timeout is negative"),
        (&["GROUP", "workers", "c", "FOO", "STREAMS", "e", ">"][..], "ERR syntax error"),
    ] {
        assert_eq!(error_of(&mut c, cmd("RECLAIM.READGROUP").arg(args)), want, "{args:?}");
    }
    // Keys: the streams, as XREADGROUP's.
    let keys: Vec<String> = q(
        &mut c,
        &[
            "COMMAND",
            "GETKEYS",
            "RECLAIM.READGROUP",
            "GROUP",
            "g",
            "c",
            "COUNT",
            "1",
            "STREAMS",
            "a",
            "b",
            ">",
            ">",
        ],
    );
    assert_eq!(keys, ["a", "b"]);
}

#[test]
fn a_reader_that_may_not_write_the_dlq_is_refused_and_nothing_changes() {
    let s = Server::new();
    let mut c = s.conn();
    readme_policy(&mut c, "acl");
    let ids = add_entries(&mut c, b"acl", "e", 2);
    read_group(&mut c, b"acl", b"workers", b"alice");
    set_deliveries(&mut c, b"acl", b"workers", b"reclaim", &ids, 3);
    let _: () = q(
        &mut c,
        &["ACL", "SETUSER", "worker", "on", "nopass", "+@all", "~acl"],
    );
    let mut w = s.conn();
    let _: () = q(&mut w, &["AUTH", "worker", "x"]);
    let before = owners(&mut c, "acl", "workers");
    let e = error_of(
        &mut w,
        cmd("RECLAIM.READGROUP").arg(&["GROUP", "workers", "w", "STREAMS", "acl", ">"]),
    );
    assert_eq!(e, NOPERM_DLQ);
    assert_eq!(owners(&mut c, "acl", "workers"), before);
    assert_eq!(xlen(&mut c, "acl:dlq"), 0);
}

/// A backlog of 50,000 stale entries of a consumer that died drains through one worker reading
/// `COUNT 100 BLOCK 5000` without a pause: no call returns nil, and none waits (the module counts
/// the reads that found nothing and blocked in `reclaim_reads_blocked`). Every entry comes once,
/// as its second delivery.
#[test]
fn a_backlog_drains_without_an_empty_read_or_a_wait() {
    const N: usize = 50_000;
    let s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"big", b"g");
    let mut p = redis::pipe();
    for i in 0..N {
        p.cmd("XADD").arg("big").arg("*").arg("n").arg(i).ignore();
    }
    let _: () = p.query(&mut c).unwrap();
    read_group(&mut c, b"big", b"g", b"dead");
    set_policy_opts(&mut c, "big", "g", "MIN-IDLE 1000");
    // One XREADGROUP delivered them all at once: once one is stale, every one is.
    wait_for(20, "the backlog to turn stale", || {
        let v: Vec<Value> = q(
            &mut c,
            &["XPENDING", "big", "g", "IDLE", "1000", "-", "+", "1"],
        );
        (!v.is_empty()).then_some(())
    });
    let blocked = reclaim_info(&mut c, "reads_blocked");
    let mut seen = std::collections::HashSet::new();
    let mut calls = 0;
    while seen.len() < N {
        let got = readgroup(&mut c, "big", "g", "w", 100, Some(5000));
        calls += 1;
        assert!(
            !got.is_empty(),
            "call {calls} returned nil after {} entries",
            seen.len()
        );
        for (id, _) in got {
            assert!(seen.insert(id.clone()), "{id} handed over twice");
        }
    }
    assert_eq!(
        reclaim_info(&mut c, "reads_blocked"),
        blocked,
        "a read waited"
    );
    // Every entry is the worker's now, delivered twice.
    let summary: Vec<Value> = q(&mut c, &["XPENDING", "big", "g"]);
    assert_eq!(summary[0], Value::Int(N as i64));
    let twice: Vec<Value> = q(&mut c, &["XPENDING", "big", "g", "-", "+", "10", "w"]);
    for e in twice {
        assert_eq!(items(&e)[3], Value::Int(2), "{e:?}");
    }
}

/// One entry of a `DELIVERY-METADATA` reply: id, fields, ms since its last delivery, count.
type MetaEntry = (String, Vec<Vec<u8>>, i64, i64);

/// The streams of a `RECLAIM.READGROUP ... DELIVERY-METADATA` reply (RESP2 array of pairs or
/// RESP3 map; nil: none), each entry checked to be `[id, fields, integer, integer]`.
fn meta_reply(v: &Value) -> Vec<(String, Vec<MetaEntry>)> {
    let pairs: Vec<(Value, Value)> = match v {
        Value::Nil => return Vec::new(),
        Value::Map(m) => m.clone(),
        Value::Array(a) => a
            .iter()
            .map(|p| match p {
                Value::Array(kv) if kv.len() == 2 => (kv[0].clone(), kv[1].clone()),
                other => panic!("not a [key, entries] pair: {other:?}"),
            })
            .collect(),
        other => panic!("not XREADGROUP's shape: {other:?}"),
    };
    pairs
        .into_iter()
        .map(|(k, entries)| {
            let key: String = redis::from_redis_value(k).unwrap();
            let Value::Array(entries) = entries else {
                panic!("entries: {entries:?}")
            };
            let entries = entries
                .into_iter()
                .map(|e| match e {
                    Value::Array(e) => match &e[..] {
                        [id, fields, Value::Int(idle), Value::Int(count)] => (
                            redis::from_redis_value(id.clone()).unwrap(),
                            redis::from_redis_value(fields.clone()).unwrap(),
                            *idle,
                            *count,
                        ),
                        other => panic!("not [id, fields, idle, count]: {other:?}"),
                    },
                    other => panic!("entry: {other:?}"),
                })
                .collect();
            (key, entries)
        })
        .collect()
}

/// `RECLAIM.READGROUP GROUP g <consumer> [COUNT n] [BLOCK ms] DELIVERY-METADATA STREAMS keys >...`.
fn read_meta(
    c: &mut Connection,
    consumer: &str,
    count: usize,
    block: Option<u64>,
    keys: &[&str],
) -> Value {
    let mut k = cmd("RECLAIM.READGROUP");
    k.arg(&["GROUP", "workers", consumer]);
    if count > 0 {
        k.arg("COUNT").arg(count);
    }
    if let Some(ms) = block {
        k.arg("BLOCK").arg(ms);
    }
    k.arg("DELIVERY-METADATA").arg("STREAMS").arg(keys);
    for _ in keys {
        k.arg(">");
    }
    k.query(c).expect("RECLAIM.READGROUP ... DELIVERY-METADATA")
}

/// The README's policy with a pass every 10 minutes, once its first pass is over: the sweep
/// does not move an entry a test made stale while the test reads it.
fn quiet_policy(c: &mut Connection, s: &str) {
    create_group(c, s.as_bytes(), b"workers");
    let opts = format!("MIN-IDLE 300 MAX-DELIVERIES 3 DLQ {s}:dlq INTERVAL 600000");
    set_policy_opts(c, s, "workers", &opts);
    wait_for(10, "the policy's first pass", || {
        (stat(c, s, "workers", "passes") >= 1).then_some(())
    });
}

fn fv(f: &str, v: &str) -> Vec<Vec<u8>> {
    vec![f.as_bytes().to_vec(), v.as_bytes().to_vec()]
}

#[test]
fn delivery_metadata_gives_each_entry_its_idle_time_and_count_in_resp2_and_resp3() {
    let s = Server::new();
    for resp3 in [false, true] {
        let mut c = if resp3 { s.conn3() } else { s.conn() };
        let key = if resp3 { "m3" } else { "m2" };
        quiet_policy(&mut c, key);
        let a: String = q(&mut c, &["XADD", key, "*", "f", "a"]);
        let b: String = q(&mut c, &["XADD", key, "*", "f", "b"]);
        // New entries: 0 and 0, as Redis 8.4's XREADGROUP ... CLAIM replies them.
        let got = meta_reply(&read_meta(&mut c, "w1", 1, None, &[key]));
        assert_eq!(
            got,
            vec![(key.to_string(), vec![(a.clone(), fv("f", "a"), 0, 0)])]
        );
        assert_eq!(owners(&mut c, key, "workers")[&a], ("w1".to_string(), 1));
        // w1's entry, made idle 5 s after two deliveries by a client's XCLAIM (no delivery
        // added with JUSTID): handed to w2 with the PEL's idle time and count before this
        // delivery; then b, new.
        let _: Value = run(
            &mut c,
            &[
                "XCLAIM",
                key,
                "workers",
                "w1",
                "0",
                &a,
                "IDLE",
                "5000",
                "RETRYCOUNT",
                "2",
                "JUSTID",
            ],
        );
        let t = Instant::now();
        let got = meta_reply(&read_meta(&mut c, "w2", 10, None, &[key]));
        let waited = t.elapsed().as_millis() as i64;
        assert_eq!(got.len(), 1, "{got:?}");
        let entries = &got[0].1;
        assert_eq!(entries.len(), 2, "{entries:?}");
        let (id, fields, idle, count) = &entries[0];
        assert_eq!((id, fields, *count), (&a, &fv("f", "a"), 2));
        assert!((5000..=5000 + waited + 50).contains(idle), "idle {idle}");
        assert_eq!(entries[1], (b.clone(), fv("f", "b"), 0, 0));
        // The PEL counts this delivery: what a worker's next read would say of it.
        let o = owners(&mut c, key, "workers");
        assert_eq!(
            (&o[&a], &o[&b]),
            (&("w2".to_string(), 3), &("w2".to_string(), 1))
        );
        // Nothing left: nil, as without the option.
        assert_eq!(read_meta(&mut c, "w2", 10, None, &[key]), Value::Nil);
        // A NACKed entry comes back from the inbox with its idle since the NACK, its count kept.
        let _: i64 = q(&mut c, &["RECLAIM.NACK", key, "workers", "w2", &b]);
        let got = meta_reply(&read_meta(&mut c, "w3", 10, None, &[key]));
        let (id, _, idle, count) = &got[0].1[0];
        assert_eq!((id, *count), (&b, 1));
        assert!((0..1000).contains(idle), "idle {idle}");
    }
}

#[test]
fn delivery_metadata_with_block_several_streams_and_no_policy() {
    let s = Server::new();
    let mut c = s.conn();
    quiet_policy(&mut c, "{t}p");
    create_group(&mut c, b"{t}plain", b"workers");
    // BLOCK, woken by an XADD: the new entry with 0 0.
    let adder = add_once_a_reader_blocks(&s, "{t}p");
    let got = meta_reply(&read_meta(&mut c, "w1", 1, Some(0), &["{t}p"]));
    let id = adder.join().unwrap();
    assert_eq!(
        got,
        vec![("{t}p".to_string(), vec![(id.clone(), fv("f", "v"), 0, 0)])]
    );
    no_reader_blocked(&mut c);
    // BLOCK that times out: nil.
    assert_eq!(read_meta(&mut c, "w1", 1, Some(50), &["{t}p"]), Value::Nil);
    // Two streams, one under a policy with a redelivery due, one without a policy.
    let _: Value = run(
        &mut c,
        &[
            "XCLAIM", "{t}p", "workers", "w1", "0", &id, "IDLE", "4000", "JUSTID",
        ],
    );
    let n: String = q(&mut c, &["XADD", "{t}plain", "*", "g", "h"]);
    for resp3 in [false, true] {
        let mut c = if resp3 { s.conn3() } else { s.conn() };
        let got = meta_reply(&read_meta(&mut c, "w2", 0, None, &["{t}p", "{t}plain"]));
        if resp3 {
            // Both read by the RESP2 round: nothing left.
            assert!(got.is_empty(), "{got:?}");
            continue;
        }
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].0, "{t}p");
        let (rid, _, idle, count) = &got[0].1[0];
        assert_eq!((rid, *count), (&id, 1));
        assert!(*idle >= 4000, "idle {idle}");
        assert_eq!(
            got[1],
            (
                "{t}plain".to_string(),
                vec![(n.clone(), fv("g", "h"), 0, 0)]
            )
        );
    }
    // A stream without a policy alone, in RESP3: 0 0 too.
    let mut c3 = s.conn3();
    let m: String = q(&mut c3, &["XADD", "{t}plain", "*", "x", "y"]);
    let got = meta_reply(&read_meta(&mut c3, "w2", 0, None, &["{t}plain"]));
    assert_eq!(
        got,
        vec![("{t}plain".to_string(), vec![(m, fv("x", "y"), 0, 0)])]
    );
}

#[test]
fn delivery_metadata_errors_are_xreadgroups() {
    let s = Server::new();
    let mut c = s.conn();
    readme_policy(&mut c, "e");
    let _: () = q(&mut c, &["SET", "str", "x"]);
    let _: String = q(&mut c, &["XADD", "e", "*", "f", "v"]);
    // The errors of the read without the option, the same with it (one stream and several).
    for args in [
        &["GROUP", "nope", "c", "STREAMS", "e", ">"][..],
        &["GROUP", "workers", "c", "STREAMS", "missing", ">"],
        &["GROUP", "workers", "c", "STREAMS", "str", ">"],
        &["GROUP", "nope", "c", "STREAMS", "e", "e", ">", ">"],
        &["GROUP", "workers", "c", "NOACK", "STREAMS", "e", ">"],
        &["GROUP", "workers", "c", "COUNT", "x", "STREAMS", "e", ">"],
        &["GROUP", "workers", "c", "STREAMS", "e", "0"],
    ] {
        let plain = error_of(&mut c, cmd("RECLAIM.READGROUP").arg(args));
        let mut with: Vec<&str> = vec!["DELIVERY-METADATA"];
        with.extend_from_slice(args);
        let meta = error_of(&mut c, cmd("RECLAIM.READGROUP").arg(&with));
        assert_eq!(meta, plain, "{args:?}");
    }
    assert_eq!(
        error_of(
            &mut c,
            cmd("RECLAIM.READGROUP").arg(&[
                "DELIVERY-METADATA",
                "GROUP",
                "nope",
                "c",
                "STREAMS",
                "e",
                ">"
            ])
        ),
        "NOGROUP No such key 'e' or consumer group 'nope' in XREADGROUP with GROUP option"
    );
    // The option takes no value.
    assert_eq!(
        error_of(
            &mut c,
            cmd("RECLAIM.READGROUP").arg(&[
                "GROUP",
                "workers",
                "c",
                "DELIVERY-METADATA",
                "1",
                "STREAMS",
                "e",
                ">"
            ])
        ),
        "ERR syntax error"
    );
    // Nothing was read by the refused calls.
    assert!(owners(&mut c, "e", "workers").is_empty());
    // Keys: the streams, as without the option.
    let argv =
        "COMMAND GETKEYS RECLAIM.READGROUP GROUP g c DELIVERY-METADATA COUNT 1 STREAMS a b > >";
    let keys: Vec<String> = q(&mut c, &argv.split(' ').collect::<Vec<_>>());
    assert_eq!(keys, ["a", "b"]);
}
