//! The worker examples users copy, run as they are: `examples/worker.py` (the Python client's
//! `Worker`, clients/python) and `examples/worker.rs` (the `redis` crate), each a pool of two
//! worker processes on RECLAIM.READGROUP draining a stream with a poison entry;
//! `examples/steering_worker.py` (the `Worker` with `Retry` and `Permanent`), a pool of two that
//! keeps a long job with RECLAIM.EXTEND, gives a transient failure back with RECLAIM.NACK ... DELAY
//! and dead-letters a permanent one with RECLAIM.TERM; and redis-py reading RECLAIM.READGROUP's
//! reply with its XREADGROUP parser, in RESP2 and RESP3.
//!
//! The Python tests need python3 with redis-py 5 or later, from PyPI: they run in `make
//! test-python` (not `make test`, which needs no network), which installs redis-py into
//! `.cache/py` (`make py-deps`), which these tests put on PYTHONPATH. Without it they fail and say
//! so. The Python examples import the client from clients/python/src when it is not installed.
//! The Rust worker is the example binary `cargo test` builds beside the test binaries.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};

use reclaim_testkit::*;

const STREAM: &str = "orders";
const GROUP: &str = "workers";
const DLQ: &str = "orders:dlq";
/// The lease: long enough that no worker of the test loses an entry it is handling to another.
const MIN_IDLE: i64 = 1000;
const MAX_DELIVERIES: i64 = 3;
/// Workers stop after this long with nothing handed to them, far more than a redelivery takes
/// (MIN-IDLE plus one INTERVAL): the test waits for the drained state, then for them to stop.
const UNTIL_IDLE_MS: &str = "5000";

/// The `worker` example binary, built by `cargo test` (and `cargo build --examples`) in the
/// target directory of this test binary: `<target dir>/<profile>/examples/worker`.
fn rust_worker() -> Command {
    let exe = std::env::current_exe().expect("current_exe");
    let bin = exe
        .ancestors()
        .nth(2)
        .expect("the test binary is in <target dir>/<profile>/deps/")
        .join("examples/worker");
    assert!(
        bin.exists(),
        "{} not built: `cargo test` builds the examples (`cargo test --test examples` alone does \
         not: run `cargo build --release --examples` first)",
        bin.display()
    );
    Command::new(bin)
}

/// Worker processes, killed on drop.
struct Pool {
    workers: Vec<Worker>,
}

/// One worker process and the lines of its stdout, collected as they come.
struct Worker {
    name: String,
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Pool {
    /// Starts `names.len()` workers: `command()` plus the example's common arguments.
    fn start(port: u16, names: &[&str], command: impl Fn() -> Command) -> Pool {
        let mut workers = Vec::new();
        for name in names {
            let mut c = command();
            c.args([
                "--port",
                &port.to_string(),
                "--stream",
                STREAM,
                "--group",
                GROUP,
            ])
            .args(["--consumer", name, "--until-idle", UNTIL_IDLE_MS])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
            let mut child = c.spawn().expect("start the worker");
            let lines: Arc<Mutex<Vec<String>>> = Arc::default();
            let out = child.stdout.take().unwrap();
            let sink = lines.clone();
            std::thread::spawn(move || {
                for l in BufReader::new(out).lines().map_while(Result::ok) {
                    sink.lock().unwrap().push(l);
                }
            });
            workers.push(Worker {
                name: name.to_string(),
                child,
                lines,
            });
        }
        Pool { workers }
    }

    /// Every line the workers printed so far, each with its worker's name.
    fn lines(&self) -> Vec<(String, String)> {
        let mut all = Vec::new();
        for w in &self.workers {
            for l in w.lines.lock().unwrap().iter() {
                all.push((w.name.clone(), l.clone()));
            }
        }
        all
    }

    /// How many times each ID appears after `word` (`ok` or `failed`) in the workers' output.
    fn count(&self, word: &str) -> BTreeMap<String, usize> {
        let mut n = BTreeMap::new();
        for (_, l) in self.lines() {
            let mut w = l.split_whitespace();
            if w.next() == Some(word) {
                let id = w.next().unwrap_or("").trim_end_matches(':').to_string();
                *n.entry(id).or_default() += 1;
            }
        }
        n
    }

    /// Waits for every worker to stop by itself (`--until-idle`) and checks it exited with 0.
    fn wait_stopped(&mut self) {
        for Worker { name, child, .. } in &mut self.workers {
            let status = wait_for(
                30,
                &format!("worker {name} to stop by itself (--until-idle)"),
                || child.try_wait().expect("try_wait"),
            );
            assert!(status.success(), "worker {name} exited with {status}");
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        for Worker { child, .. } in &mut self.workers {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A pool of two workers started by `command` drains a stream with a poison entry: every good entry
/// acknowledged exactly once, the poison entry's handler run MAX-DELIVERIES times and the entry in
/// the DLQ once with `reclaim-deliveries` MAX-DELIVERIES, nothing pending.
fn drains_with_poison(command: impl Fn() -> Command) {
    let server = Server::new();
    let mut con = server.conn();
    create_group(&mut con, STREAM.as_bytes(), GROUP.as_bytes());
    let policy = PolicyView::new(MIN_IDLE, 100).with_dlq(DLQ.as_bytes(), MAX_DELIVERIES);
    set_policy(&mut con, STREAM.as_bytes(), GROUP.as_bytes(), &policy);

    // Entries waiting before the workers start, the poison entry among them.
    let mut good = add_entries(&mut con, STREAM.as_bytes(), "before", 5);
    let poison: String = q(&mut con, &["XADD", STREAM, "*", "n", "bad", "poison", "1"]);
    good.extend(add_entries(&mut con, STREAM.as_bytes(), "before", 5));
    let mut pool = Pool::start(server.port, &["w1", "w2"], &command);
    wait_for(30, "the workers to acknowledge the first entries", || {
        let ok = pool.count("ok");
        good.iter().all(|id| ok.contains_key(id)).then_some(())
    });
    // Entries written while the workers wait in BLOCK.
    good.extend(add_entries(&mut con, STREAM.as_bytes(), "later", 10));

    wait_for(
        60,
        "every good entry acknowledged, the poison entry dead-lettered, nothing pending",
        || {
            let ok = pool.count("ok");
            let done = good.iter().all(|id| ok.contains_key(id))
                && pel_total(&mut con, STREAM, GROUP) == 0
                && xlen(&mut con, DLQ) == 1;
            done.then_some(())
        },
    );
    pool.wait_stopped();

    let ok = pool.count("ok");
    let failed = pool.count("failed");
    let output = pool.lines();
    for id in &good {
        assert_eq!(
            ok.get(id),
            Some(&1),
            "{id} acknowledged once; worker output: {output:?}"
        );
    }
    assert_eq!(
        ok.len(),
        good.len(),
        "only the good entries acknowledged: {ok:?}"
    );
    assert_eq!(
        failed,
        BTreeMap::from([(poison.clone(), MAX_DELIVERIES as usize)]),
        "the poison entry's handler ran MAX-DELIVERIES times, and nothing else failed"
    );
    let dlq = xrange(&mut con, DLQ.as_bytes());
    assert_eq!(dlq.len(), 1, "{dlq:?}");
    assert_eq!(entry_field(&dlq[0], "reclaim-id"), poison.as_bytes());
    assert_eq!(entry_field(&dlq[0], "poison"), b"1");
    assert_eq!(
        entry_field(&dlq[0], "reclaim-deliveries"),
        MAX_DELIVERIES.to_string().as_bytes()
    );
    assert_eq!(pel_total(&mut con, STREAM, GROUP), 0);
    let st = stats(&mut con, STREAM, GROUP);
    assert_eq!(int_field(&st, "dead-lettered"), 1, "{st:?}");
    assert!(
        int_field(&st, "redelivered") >= MAX_DELIVERIES - 1,
        "{st:?}"
    );
    assert_eq!(int_field(&st, "inbox"), 0, "{st:?}");
}

#[test]
#[ignore = "needs redis-py from PyPI: make test-python"]
fn python_worker_drains_a_stream_with_a_poison_entry() {
    let script = project_dir().join("examples/worker.py");
    drains_with_poison(|| {
        let mut c = python();
        c.arg(&script);
        c
    });
}

#[test]
fn rust_worker_drains_a_stream_with_a_poison_entry() {
    drains_with_poison(rust_worker);
}

/// The steering test's stream: group, a policy with `BACKOFF`, and its jobs: a long one (three
/// times `MIN-IDLE`), a flaky one and a bad one; their IDs.
fn steering_jobs(con: &mut Connection) -> [String; 3] {
    create_group(con, STREAM.as_bytes(), GROUP.as_bytes());
    let opts = format!(
        "MIN-IDLE {MIN_IDLE} MAX-DELIVERIES {MAX_DELIVERIES} DLQ {DLQ} INTERVAL 100 \
         BACKOFF EXPONENTIAL 8000"
    );
    set_policy_opts(con, STREAM, GROUP, &opts);
    let job_ms = (3 * MIN_IDLE).to_string();
    [
        &["job", "long", "ms", &job_ms][..],
        &["job", "flaky", "flaky", "1"],
        &["job", "bad", "bad", "v0:{"],
    ]
    .map(|fields| q(con, &[&["XADD", STREAM, "*"][..], fields].concat()))
}

/// A pool of two `examples/steering_worker.py` on a policy with `BACKOFF`, given a job that runs
/// three times `MIN-IDLE`, a transient failure, a permanent one and three ordinary entries: the
/// long job stays with the worker that took it (its heartbeat's `RECLAIM.EXTEND`) and is
/// acknowledged on its first delivery, never seen by the other worker nor handed over again; the
/// transient failure is given back with `RECLAIM.NACK ... DELAY` and acknowledged on its second
/// delivery; the permanent one is in the DLQ once, at once, with its
/// reason and `reclaim-deliveries` 1; nothing pending, nothing lost.
#[test]
#[ignore = "needs redis-py from PyPI: make test-python"]
fn python_steering_worker_extends_nacks_and_terms() {
    let server = Server::new();
    let mut con = server.conn();
    let [long, flaky, bad] = steering_jobs(&mut con);
    let good = add_entries(&mut con, STREAM.as_bytes(), "good", 3);
    let script = project_dir().join("examples/steering_worker.py");
    let mut pool = Pool::start(server.port, &["w1", "w2"], || {
        let mut c = python();
        c.arg(&script).args(["--retry-delay-ms", "300"]);
        c
    });
    wait_for(
        60,
        "the long, flaky and good entries acknowledged, the bad one dead-lettered, nothing pending",
        || {
            let ok = pool.count("ok");
            let done = [&long, &flaky]
                .into_iter()
                .chain(&good)
                .all(|id| ok.contains_key(id))
                && pel_total(&mut con, STREAM, GROUP) == 0
                && xlen(&mut con, DLQ) == 1;
            done.then_some(())
        },
    );
    pool.wait_stopped();

    // What the workers printed about each entry: (worker, line), in the order printed.
    let lines = pool.lines();
    for (w, l) in &lines {
        println!("{w}: {l}");
    }
    let about = |id: &str| -> Vec<(String, String)> {
        lines
            .iter()
            .filter(|(_, l)| {
                l.split_whitespace().nth(1).map(|w| w.trim_end_matches(':')) == Some(id)
            })
            .cloned()
            .collect()
    };
    let said = |id: &str| -> Vec<String> { about(id).into_iter().map(|(_, l)| l).collect() };
    assert!(
        lines
            .iter()
            .all(|(_, l)| !l.starts_with("lost") && !l.starts_with("failed")),
        "no entry lost or failed: {lines:?}"
    );
    // The long job: one delivery, to one worker, acknowledged (the count read before the work).
    assert_eq!(said(&long), [format!("ok {long} delivery 1")], "{lines:?}");
    // The transient failure: given back on its first delivery, acknowledged on its second.
    assert_eq!(
        said(&flaky),
        [
            format!("nack {flaky} delivery 1: upstream timed out"),
            format!("ok {flaky} delivery 2"),
        ],
        "{lines:?}"
    );
    // The permanent failure: dead-lettered on its first delivery, never retried.
    assert_eq!(
        said(&bad),
        [format!("term {bad} delivery 1: cannot parse 'v0:{{'")],
        "{lines:?}"
    );
    for id in &good {
        assert_eq!(said(id), [format!("ok {id} delivery 1")], "{lines:?}");
    }
    assert_dead_lettered_by_term(&mut con, &bad, &about(&bad)[0].0);
}

/// The DLQ holds `bad` alone, dead-lettered by `termed_by`'s `RECLAIM.TERM` on its first
/// delivery with its reason; nothing pending; the flaky entry's retry the one hand-over.
fn assert_dead_lettered_by_term(con: &mut Connection, bad: &str, termed_by: &str) {
    let dlq = xrange(con, DLQ.as_bytes());
    assert_eq!(dlq.len(), 1, "{dlq:?}");
    assert_eq!(entry_field(&dlq[0], "reclaim-id"), bad.as_bytes());
    assert_eq!(entry_field(&dlq[0], "bad"), b"v0:{");
    assert_eq!(
        entry_field(&dlq[0], "reclaim-reason"),
        b"cannot parse 'v0:{'"
    );
    assert_eq!(entry_field(&dlq[0], "reclaim-deliveries"), b"1");
    assert_eq!(
        entry_field(&dlq[0], "reclaim-consumer"),
        termed_by.as_bytes()
    );
    assert_eq!(pel_total(con, STREAM, GROUP), 0);
    let st = stats(con, STREAM, GROUP);
    // The one hand-over after a first delivery is the flaky entry's retry: the long job was never
    // handed to anyone again.
    assert_eq!(int_field(&st, "redelivered"), 1, "{st:?}");
    assert_eq!(int_field(&st, "dead-lettered"), 1, "{st:?}");
    assert_eq!(int_field(&st, "inbox"), 0, "{st:?}");
}

/// The streams, groups and policies of [`redis_py_parses_readgroup_as_xreadgroup`].
fn parity_streams(con: &mut Connection, protocols: &[&str]) {
    for s in ["s1", "s2"] {
        for p in protocols {
            create_group(con, s.as_bytes(), format!("plain-{p}").as_bytes());
            create_group(con, s.as_bytes(), format!("reclaim-{p}").as_bytes());
        }
    }
    run(con, &["XADD", "s1", "*", "item", "book", "qty", "1"]);
    run(con, &["XADD", "s1", "*", "item", "pen"]);
    run(
        con,
        &["XADD", "s2", "*", "item", "ink", "note", "h\u{e9}llo"],
    );
    run(con, &["XADD", "s1", "*", "item", "cup"]);
    run(con, &["XADD", "s2", "*", "item", "map"]);
    // In each reclaim group a consumer took the two oldest entries of s1 and went quiet: with a
    // MIN-IDLE of 1 ms the sweep moves them to the inbox; then a MIN-IDLE of a minute keeps
    // everything else where it is while Python reads.
    let quick = PolicyView::new(1, 10);
    for p in protocols {
        let g = format!("reclaim-{p}");
        deliver(con, "s1", &g, "gone", Some(2));
        set_policy(con, b"s1", g.as_bytes(), &quick);
        set_policy(con, b"s2", g.as_bytes(), &quick);
    }
    wait_for(
        10,
        "the quiet consumer's entries in each reclaim group's inbox",
        || {
            protocols
                .iter()
                .all(|p| {
                    let pel = pending(con, "s1", &format!("reclaim-{p}"));
                    pel.len() == 2 && pel.iter().all(|e| e.consumer == "reclaim" && e.count == 1)
                })
                .then_some(())
        },
    );
    let slow = PolicyView::new(60_000, 10_000);
    for p in protocols {
        let g = format!("reclaim-{p}");
        set_policy(con, b"s1", g.as_bytes(), &slow);
        set_policy(con, b"s2", g.as_bytes(), &slow);
    }
}

/// Streams s1 and s2 with the same 3 and 2 entries in the groups plain-P (no policy, nothing read)
/// and reclaim-P (a policy; the two oldest entries of s1 in the claimant's inbox) for each protocol
/// P of the Python side; then `tests/python/readgroup_parity.py` reads plain-P with XREADGROUP and
/// reclaim-P with RECLAIM.READGROUP and compares what redis-py makes of the two replies.
#[test]
#[ignore = "needs redis-py from PyPI: make test-python"]
fn redis_py_parses_readgroup_as_xreadgroup() {
    let server = Server::new();
    let mut con = server.conn();
    let protocols = ["2", "3", "default"];
    parity_streams(&mut con, &protocols);

    let out = python()
        .arg(project_dir().join("tests/python/readgroup_parity.py"))
        .arg(server.port.to_string())
        .output()
        .expect("run python3");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && stdout.trim_end().ends_with("OK"),
        "readgroup_parity.py: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    println!("{stdout}");

    // The reclaim groups' reads were real redeliveries (the inbox, counted) and new entries.
    for p in protocols {
        let g = format!("reclaim-{p}");
        let pel = pending(&mut con, "s1", &g);
        let counts: Vec<(String, i64)> =
            pel.iter().map(|e| (e.consumer.clone(), e.count)).collect();
        assert_eq!(
            counts,
            [
                ("c".to_string(), 2),
                ("c".to_string(), 2),
                ("c".to_string(), 1)
            ],
            "{g}: {pel:?}"
        );
        assert_eq!(
            int_field(&stats(&mut con, "s1", &g), "redelivered"),
            2,
            "{g}"
        );
    }
}
