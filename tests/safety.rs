//! Safety of the sweeper under hostile conditions: writes paused (CLIENT PAUSE WRITE, FAILOVER),
//! out of memory (before and during a step), keys and databases changed under a running sweep
//! (DEL, RENAME, XTRIM, XGROUP DESTROY / DELCONSUMER, a DLQ replaced by a string, FLUSHALL, SWAPDB),
//! and hostile input (numbers at the i64 limits, 1 MB values, binary names, 10,000 policies, a PEL
//! of 1,000,000 entries).
//!
//! "While sweeping" means under a policy whose entries are stale as soon as they are 1 ms idle, with
//! a worker that keeps taking them from the inbox and never acknowledges (see [`busy`]): the sweep
//! moves the worker's entries back to the inbox on every tick when the change happens. Waits poll a
//! state or a progress counter (`reclaim_steps`, skipped ticks, passes), never a duration.

use reclaim_testkit::*;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// The server is up, answers PING, and no panic was caught in the module.
fn healthy(s: &mut Server, c: &mut Connection) {
    assert!(s.alive(), "redis-server died; log:\n{}", s.log());
    let pong: String = q(c, &["PING"]);
    assert_eq!(pong, "PONG");
    assert_eq!(reclaim_info(c, "panics"), 0, "log:\n{}", s.log());
}

/// A worker thread whose handler always fails: consumer `w` reads one stream of one database with
/// `RECLAIM.READGROUP ... COUNT 100` every millisecond and never acknowledges, until the worker is
/// dropped. Errors (the stream or group gone, `READONLY` on a replica) are ignored: it keeps
/// trying, as a real worker would.
struct Worker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    fn start(server: &Server, db: i64, stream: &str) -> Worker {
        let mut c = server.conn_db(db);
        let stream = stream.to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                let _: redis::RedisResult<Value> =
                    readgroup_cmd(&stream, "g", "w", 100, None).query(&mut c);
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        Worker {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Worker {
    /// Stops the thread and waits for it: no read of this worker runs after the drop.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A stream `s` in database `db` with group `g`, `n` entries (returned) read by consumer `dead`,
/// a policy whose entries are stale after 1 ms, and a [`Worker`] that keeps taking them from the
/// inbox: each entry it takes is stale 1 ms later and the sweep moves it back, so the sweeper writes
/// on every tick. The policy names a DLQ (`<s>:dlq`) but MAX-DELIVERIES is out of reach: a DLQ key
/// appears only if something is wrong. Returns, with the worker still running, once the sweep has
/// moved twice as many entries as there are.
fn busy(server: &Server, db: i64, s: &str, n: usize) -> (Worker, Vec<String>) {
    let mut c = server.conn_db(db);
    create_group(&mut c, s.as_bytes(), b"g");
    let ids = add_entries(&mut c, s.as_bytes(), "e", n);
    read_group(&mut c, s.as_bytes(), b"g", b"dead");
    let dlq = format!("{s}:dlq");
    set_policy_opts(
        &mut c,
        s,
        "g",
        &format!("MIN-IDLE 1 MAX-DELIVERIES 1000000000 DLQ {dlq} INTERVAL 1"),
    );
    let worker = Worker::start(server, db, s);
    wait_for(20, &format!("the sweeper busy on {s}"), || {
        (stat(&mut c, s, "g", "claimed") >= 2 * n as i64).then_some(())
    });
    (worker, ids)
}

/// A server of its own with [`busy`] on `stream` (`n` entries) in database 0, its connection, and
/// the running worker.
fn busy_server(stream: &str, n: usize) -> (Server, Connection, Worker) {
    let s = Server::new();
    let c = s.conn();
    let (w, _) = busy(&s, 0, stream, n);
    (s, c, w)
}

/// Waits (`what`) until group `g` of `jobs` holds exactly `moved`, moved once to the inbox of
/// `reclaim` (delivery count still 1), and `jobs:dlq` exactly the `poison` entries, moved from
/// consumer `dead` after 9 deliveries; the policy is still active. Returns the PEL and the DLQ
/// entries.
fn wait_moved_and_dead_lettered(
    c: &mut Connection,
    what: &str,
    moved: &[String],
    poison: &[String],
) -> (Vec<PendRaw>, Vec<Entry>) {
    let want: Vec<PendRaw> = moved
        .iter()
        .map(|id| (id.clone(), b"reclaim".to_vec(), 1))
        .collect();
    let dlq = wait_for(10, what, || {
        let (pel, d) = pel_and_dlq(c, "jobs", "g", "jobs:dlq");
        (pel == want && d.len() == poison.len()).then_some(d)
    });
    assert_eq!(sorted(&dlq_ids(&dlq)), sorted(poison));
    for e in &dlq {
        assert_eq!(entry_field(e, "reclaim-consumer"), b"dead");
        assert_eq!(entry_field(e, "reclaim-deliveries"), b"9");
    }
    assert_eq!(status(c, "jobs", "g"), "active");
    (want, dlq)
}

// ---------------------------------------------------------------------------------------------
// Paused writes: CLIENT PAUSE WRITE, FAILOVER
// ---------------------------------------------------------------------------------------------

/// CLIENT PAUSE 1500 WRITE on a primary with an AOF and a replica, with moves to the inbox and
/// dead-letter moves due during the pause: the server stays up, nothing is written during the pause (PEL, DLQ,
/// AOF files, replication offset unchanged; ticks counted as skipped), the sweep happens after it,
/// and the replica matches the primary.
/// The binary names of one case: stream, group, consumer, claimant, DLQ.
type Names = (
    &'static [u8],
    &'static [u8],
    &'static [u8],
    &'static [u8],
    &'static [u8],
);

/// Group `g` on stream `jobs` and its policy: MIN-IDLE `min_idle`, MAX-DELIVERIES 3, DLQ
/// `jobs:dlq`, INTERVAL 20.
fn jobs_policy(c: &mut Connection, min_idle: i64) {
    create_group(c, b"jobs", b"g");
    let opts = format!("MIN-IDLE {min_idle} MAX-DELIVERIES 3 DLQ jobs:dlq INTERVAL 20");
    set_policy_opts(c, "jobs", "g", &opts);
}

#[test]
fn client_pause_write_stops_sweeping_until_it_ends() {
    // appendfsync always: the AOF holds every write before its reply (with everysec a write can
    // be postponed while a background fsync runs, and land during the pause).
    let mut p = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let r = p.replica(&[]);
    let mut c = p.conn();
    let mut rc = r.conn();
    jobs_policy(&mut c, 200);
    let ids = add_entries(&mut c, b"jobs", "j", 6);
    let poison = ids[..2].to_vec();
    // Delivered to a consumer that dies; two of them over the limit already; the pause starts in
    // the same transaction, before any tick can see them.
    deliver_then_pause(&mut c, (b"jobs", b"g", b"dead"), &poison, 9, 1500);

    let before = pending_raw(&mut c, b"jobs", b"g");
    let steps = reclaim_info(&mut c, "steps");
    let offset = info_int(&mut c, "replication", "master_repl_offset");
    let aof = p.aof_files();
    assert_eq!(status(&mut c, "jobs", "g"), "client-paused");
    // Until every entry is due for a move (idle >= MIN-IDLE) and more ticks were skipped.
    wait_idle(&mut c, "jobs", "g", 200);
    wait_ticks_skipped(&mut c, "paused", 5);

    // Inside the pause (status "client-paused" before and after the reads): nothing was written.
    assert_eq!(status(&mut c, "jobs", "g"), "client-paused");
    let during = pending_raw(&mut c, b"jobs", b"g");
    let dlq_exists = exists(&mut c, "jobs:dlq");
    let steps_during = reclaim_info(&mut c, "steps");
    let offset_during = info_int(&mut c, "replication", "master_repl_offset");
    let aof_during = p.aof_files();
    healthy(&mut p, &mut c);
    assert_eq!(
        status(&mut c, "jobs", "g"),
        "client-paused",
        "still inside the pause"
    );
    assert_eq!(during, before, "PEL unchanged during the pause");
    assert!(!dlq_exists, "no DLQ written during the pause");
    assert_eq!(steps_during, steps, "no sweep step during the pause");
    assert_eq!(offset_during, offset, "nothing replicated during the pause");
    assert!(
        aof_during == aof,
        "nothing appended to the AOF during the pause"
    );

    // After the pause: moved and dead-lettered, once each.
    let (want, dlq) =
        wait_moved_and_dead_lettered(&mut c, "the sweep after the pause", &ids[2..], &poison);
    healthy(&mut p, &mut c);

    // The replica holds exactly the primary's result (it did none of it itself).
    replica_acked(&mut c);
    assert_eq!(pending_raw(&mut rc, b"jobs", b"g"), want);
    assert_eq!(xrange(&mut rc, b"jobs:dlq"), dlq);
    assert_eq!(reclaim_info(&mut rc, "steps"), 0);
}

/// FAILOVER TO the replica while the old primary sweeps (a busy stream, and dead-letter moves
/// coming due): no crash, the new primary continues the policies (moves, dead-letters), the old
/// primary, now a replica, stops sweeping, and no entry is dead-lettered twice.
#[test]
fn failover_hands_sweeping_to_the_new_primary() {
    let mut p = Server::start(&["--appendonly", "yes"]);
    let mut r = p.replica(&["--appendonly", "yes"]);
    let mut c = p.conn();
    let mut rc = r.conn();
    // Its worker keeps reading the old primary (READONLY once it is a replica).
    let (_old_worker, _) = busy(&p, 0, "busy", 300);
    jobs_policy(&mut c, 300);
    // A: dead-lettered by the old primary before the failover.
    let a = add_entries(&mut c, b"jobs", "a", 3);
    read_group(&mut c, b"jobs", b"g", b"dead");
    set_deliveries(&mut c, b"jobs", b"g", b"dead", &a, 9);
    wait_for(10, "A dead-lettered by the old primary", || {
        (xlen(&mut c, b"jobs:dlq") == 3).then_some(())
    });
    // B: at the limit, fresh: due for the DLQ 300 ms from now, around the failover.
    let b = add_entries(&mut c, b"jobs", "b", 6);
    read_group(&mut c, b"jobs", b"g", b"dead2");
    set_deliveries(&mut c, b"jobs", b"g", b"dead2", &b, 3);

    failover_to(&mut c, &r);
    healthy(&mut p, &mut c);
    healthy(&mut r, &mut rc);

    // C: new work on the new primary: moved to the inbox and taken by a failing worker twice
    // (count 1 -> 2 -> 3), then dead-lettered there.
    let cc = add_entries(&mut rc, b"jobs", "c", 4);
    read_group(&mut rc, b"jobs", b"g", b"dead3");
    for want in [2, 3] {
        let got = take_inbox(&mut rc, "jobs", "g", "reclaim", "w", 4);
        assert!(got.iter().all(|(_, n)| *n == want), "{got:?}");
    }
    let dlq = wait_for(15, "everything dead-lettered on the new primary", || {
        let (pel, d) = pel_and_dlq(&mut rc, "jobs", "g", "jobs:dlq");
        pel.is_empty().then_some(d)
    });
    let all: Vec<String> = a.iter().chain(&b).chain(&cc).cloned().collect();
    assert_partition(&[], &dlq, &all);
    assert_provenance(&dlq, |id| {
        if a.iter().any(|x| x == id) {
            ("dead", "9")
        } else if b.iter().any(|x| x == id) {
            ("dead2", "3")
        } else {
            ("w", "3")
        }
    });
    assert_eq!(status(&mut rc, "jobs", "g"), "active");
    // C was moved twice on the new primary, handed over twice, then dead-lettered there.
    assert_eq!(stat(&mut rc, "jobs", "g", "claimed"), 8);
    assert_eq!(stat(&mut rc, "jobs", "g", "redelivered"), 8);
    // The busy stream is swept by the new primary too, once its worker reads there.
    let _new_worker = Worker::start(&r, 0, "busy");
    let claimed = stat(&mut rc, "busy", "g", "claimed");
    wait_for(10, "the new primary sweeping the busy stream", || {
        (stat(&mut rc, "busy", "g", "claimed") > claimed).then_some(())
    });

    // The old primary is a replica now: it skips its ticks and runs no step.
    let steps = reclaim_info(&mut c, "steps");
    wait_ticks_skipped(&mut c, "replica", 5);
    assert_eq!(reclaim_info(&mut c, "steps"), steps);
    assert_eq!(status(&mut c, "jobs", "g"), "replica");
    replica_acked(&mut rc);
    assert_eq!(xrange(&mut c, b"jobs:dlq"), dlq);
    assert_eq!(pending_raw(&mut c, b"jobs", b"g"), vec![]);
    healthy(&mut p, &mut c);
    healthy(&mut r, &mut rc);
}

// ---------------------------------------------------------------------------------------------
// Out of memory
// ---------------------------------------------------------------------------------------------

/// maxmemory set just below used_memory (noeviction) after the policy is set, with moves to the
/// inbox and dead-letter moves due: nothing moves (no DLQ entry without its ack, no ack without its DLQ
/// entry), the ticks are counted as skipped, STATS says `oom`; with maxmemory 0 the moves happen.
#[test]
fn out_of_memory_leaves_over_delivered_entries_pending() {
    let mut s = Server::start(&["--maxmemory-policy", "noeviction"]);
    let mut c = s.conn();
    jobs_policy(&mut c, 100);
    let ids = add_entries(&mut c, b"jobs", "j", 5);
    let poison = ids[..3].to_vec();
    let used = info_int(&mut c, "memory", "used_memory");
    let limit = (used - 100 * 1024).to_string();
    let mut tx = redis::pipe();
    tx.atomic();
    tx.add_command(read_group_cmd(b"jobs", b"g", b"dead"))
        .ignore();
    tx.add_command(set_deliveries_cmd(b"jobs", b"g", b"dead", &poison, 9))
        .ignore();
    tx.cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg(&limit)
        .ignore();
    let () = tx.query(&mut c).expect("transaction");
    let before = pending_raw(&mut c, b"jobs", b"g");

    wait_idle(&mut c, "jobs", "g", 100);
    wait_ticks_skipped(&mut c, "oom", 5);
    assert_eq!(status(&mut c, "jobs", "g"), "oom");
    let (pel, dlq) = pel_and_dlq(&mut c, "jobs", "g", "jobs:dlq");
    assert_eq!(pel, before, "nothing moved or acked while out of memory");
    assert!(dlq.is_empty(), "nothing dead-lettered while out of memory");
    assert!(!exists(&mut c, "jobs:dlq"));
    // Clients get Redis's own refusal.
    let e = error_of(&mut c, cmd("RECLAIM.SWEEP").arg("jobs").arg("g"));
    assert!(e.starts_with("OOM "), "{e}");
    healthy(&mut s, &mut c);

    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
    wait_moved_and_dead_lettered(&mut c, "the moves once memory is back", &ids[3..], &poison);
    healthy(&mut s, &mut c);
}

/// Adds `n` entries with `body` to stream `big` (group `g`), delivered to consumer `dead` 9
/// times each: their IDs.
fn add_dead_big(c: &mut Connection, n: i64, body: &str) -> Vec<String> {
    let mut p = redis::pipe();
    for i in 0..n {
        p.cmd("XADD")
            .arg("big")
            .arg("*")
            .arg("n")
            .arg(i)
            .arg("body")
            .arg(body);
    }
    let ids: Vec<String> = p.query(c).unwrap();
    read_group(c, b"big", b"g", b"dead");
    set_deliveries(c, b"big", b"g", b"dead", &ids, 9);
    ids
}

/// Sets maxmemory 0 and waits until the timer has moved the rest of stream `big`: every entry of
/// `ids` dead-lettered exactly once, none pending. Returns the DLQ's entries.
fn memory_back_every_one_dead_lettered(c: &mut Connection, ids: &[String]) -> Vec<Entry> {
    let _: () = q(c, &["CONFIG", "SET", "maxmemory", "0"]);
    let dlq = wait_for(10, "every entry moved", || {
        let (pel, d) = pel_and_dlq(c, "big", "g", "big:dlq");
        pel.is_empty().then_some(d)
    });
    assert_partition(&[], &dlq, ids);
    assert_eq!(stat(c, "big", "g", "dead-lettered"), ids.len() as i64);
    dlq
}

/// Memory runs out in the middle of a pass: each dead-letter move appends a 64 KB entry, the limit
/// is 1.5 MB above used memory, and the policy is set and swept in one transaction (RECLAIM.SWEEP
/// starts under the limit, so only the module's live memory check can stop it). The moves stop at
/// the limit, each skipped move is counted in oom-skips, every entry is pending or dead-lettered,
/// never both; with maxmemory 0 the timer moves the rest, each entry exactly once.
#[test]
fn memory_running_out_during_a_sweep_stops_moves_cleanly() {
    const N: i64 = 60;
    let mut s = Server::start(&["--maxmemory-policy", "noeviction"]);
    let mut c = s.conn();
    create_group(&mut c, b"big", b"g");
    let body = "x".repeat(64 * 1024);
    let ids = add_dead_big(&mut c, N, &body);
    let used = info_int(&mut c, "memory", "used_memory");
    let limit = (used + 1536 * 1024).to_string();
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", &limit]);
    let sweep = set_and_sweep_big(&mut c);
    let moved = int_field(&sweep, "dead-lettered");
    assert!(0 < moved && moved < N, "stopped part-way: {sweep:?}");
    assert_eq!(int_field(&sweep, "claimed"), 0);
    // Every move after the limit was refused and counted (the timer may have tried again since).
    let skips = stat(&mut c, "big", "g", "oom-skips");
    assert!(skips >= N - moved, "oom-skips {skips}, moved {moved}");
    // The timer is refused too: either its ticks are skipped (memory above the limit) or its
    // step's moves are (the module's own copy of the next entry takes it over the limit).
    wait_for(10, "the timer refused at the limit", || {
        (reclaim_info(&mut c, "ticks_skipped_oom") > 0
            || stat(&mut c, "big", "g", "oom-skips") > skips)
            .then_some(())
    });
    let (pel, dlq) = pel_and_dlq(&mut c, "big", "g", "big:dlq");
    assert_partition(&pel, &dlq, &ids);
    assert!(
        dlq.len() as i64 >= moved && !pel.is_empty(),
        "{} moved, {} pending",
        dlq.len(),
        pel.len()
    );
    assert!(
        pel.iter().all(|e| e.1 == b"dead" && e.2 == 9),
        "untouched: {pel:?}"
    );
    let st = status(&mut c, "big", "g");
    assert!(st.starts_with("oom"), "{st}");
    healthy(&mut s, &mut c);

    let dlq = memory_back_every_one_dead_lettered(&mut c, &ids);
    for e in &dlq {
        assert_eq!(entry_field(e, "body"), body.as_bytes());
    }
    healthy(&mut s, &mut c);
}

/// Dead-letter moves are refused when memory is over the limit, as `XADD` would be, not when the
/// module's own copies of the next entries' bodies would take it there: maxmemory is 768 KB
/// above used memory and each move appends a 64 KB entry (a batch of 16 bodies is 1 MB), with a
/// replica and the AOF on. The sweep moves some entries, then stops; the policy says `oom` while
/// the moves wait. The replica and the AOF hold exactly what the primary kept, at the limit and
/// after maxmemory 0 lets the timer move the rest.
#[test]
fn dead_letter_moves_stop_where_xadd_would_refuse_them() {
    const N: i64 = 40;
    let mut s = Server::start(&[
        "--maxmemory-policy",
        "noeviction",
        "--appendonly",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ]);
    let r = s.replica(&[]);
    let (mut c, mut rc) = (s.conn(), r.conn());
    create_group(&mut c, b"big", b"g");
    let body = "x".repeat(64 * 1024);
    // Through a connection of its own, closed after: its buffers (2.5 MB each way) are freed.
    let ids = add_dead_big(&mut s.conn(), N, &body);
    replica_acked(&mut c);
    // Memory as maxmemory counts it (replica output and AOF buffers left out).
    let counted = info_int(&mut c, "memory", "used_memory")
        - info_int(&mut c, "memory", "mem_not_counted_for_evict");
    let limit = counted + 768 * 1024;
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]);
    let sweep = set_and_sweep_big(&mut c);
    let moved = int_field(&sweep, "dead-lettered");
    // A move takes about 160 KB until the command ends (the DLQ entry, and the body kept for
    // propagation): 768 KB hold 4 to 6. A check that counted the module's copies of a whole
    // batch's bodies would have moved none.
    assert!((3..N).contains(&moved), "{sweep:?}");
    assert!(stat(&mut c, "big", "g", "oom-skips") >= N - moved);
    assert!(status(&mut c, "big", "g").starts_with("oom"));
    // The policy's timer (INTERVAL 20) may move a few more once the MULTI's memory is freed.
    let (pel, dlq) = replica_agrees(&mut c, &mut rc, |c| pel_and_dlq(c, "big", "g", "big:dlq"));
    assert_partition(&pel, &dlq, &ids);
    assert!(!pel.is_empty(), "moves wait for memory");
    healthy(&mut s, &mut c);

    let dlq = memory_back_every_one_dead_lettered(&mut c, &ids);
    assert_eq!(status(&mut c, "big", "g"), "active");
    replica_acked(&mut c);
    assert_eq!(
        pel_and_dlq(&mut rc, "big", "g", "big:dlq"),
        (vec![], dlq.clone())
    );
    s.restart();
    let mut c = s.conn();
    assert_eq!(
        pel_and_dlq(&mut c, "big", "g", "big:dlq"),
        (vec![], dlq),
        "the AOF holds what the primary kept"
    );
    healthy(&mut s, &mut c);
}

// ---------------------------------------------------------------------------------------------
// Keys and databases changed while sweeping
// ---------------------------------------------------------------------------------------------

#[test]
fn stream_deleted_while_sweeping() {
    let (mut s, mut c, _worker) = busy_server("s", 500);
    let n: i64 = q(&mut c, &["DEL", "s"]);
    assert_eq!(n, 1);
    assert_eq!(status(&mut c, "s", "g"), "waiting: no stream s");
    wait_steps(&mut c, 5);
    assert_eq!(status(&mut c, "s", "g"), "waiting: no stream s");
    assert!(!exists(&mut c, "s"), "stream not recreated");
    assert!(!exists(&mut c, "s:dlq"), "no DLQ created");
    assert!(get_policy(&mut c, b"s", b"g").is_some(), "the policy stays");
    assert_eq!(reclaim_info(&mut c, "errors"), 0);
    healthy(&mut s, &mut c);
}

#[test]
fn stream_renamed_while_sweeping() {
    let (mut s, mut c, _worker) = busy_server("r1", 500);
    let pol = get_policy(&mut c, b"r1", b"g");
    let _: () = q(&mut c, &["RENAME", "r1", "r2"]);
    // The policy stays with the old name and waits for it; the renamed stream is left alone.
    assert_eq!(get_policy(&mut c, b"r1", b"g"), pol);
    assert_eq!(get_policy(&mut c, b"r2", b"g"), None);
    assert_eq!(
        error_of(&mut c, cmd("RECLAIM.STATS").arg("r2").arg("g")),
        "ERR no reclaim policy for this key and group"
    );
    let frozen = pending_raw(&mut c, b"r2", b"g");
    assert_eq!(frozen.len(), 500);
    wait_steps(&mut c, 5);
    assert_eq!(status(&mut c, "r1", "g"), "waiting: no stream r1");
    assert_eq!(pending_raw(&mut c, b"r2", b"g"), frozen, "r2 untouched");
    assert!(!exists(&mut c, "r1"));
    assert!(!exists(&mut c, "r1:dlq"));
    healthy(&mut s, &mut c);

    // Renamed back: sweeping resumes (the worker reads it again).
    let _: () = q(&mut c, &["RENAME", "r2", "r1"]);
    let claimed = stat(&mut c, "r1", "g", "claimed");
    wait_for(10, "sweeping resumed after renaming back", || {
        (stat(&mut c, "r1", "g", "claimed") >= claimed + 500).then_some(())
    });
    assert_eq!(status(&mut c, "r1", "g"), "active");
    healthy(&mut s, &mut c);
}

#[test]
fn stream_trimmed_to_nothing_while_sweeping() {
    let (mut s, mut c, _worker) = busy_server("t", 1000);
    assert_eq!(stat(&mut c, "t", "g", "deleted"), 0);
    let n: i64 = q(&mut c, &["XTRIM", "t", "MAXLEN", "0"]);
    assert_eq!(n, 1000);
    wait_for(10, "the PEL purged", || {
        (pel_total(&mut c, "t", "g") == 0).then_some(())
    });
    assert_eq!(stat(&mut c, "t", "g", "deleted"), 1000);
    assert_eq!(reclaim_info(&mut c, "deleted"), 1000);
    assert_eq!(stat(&mut c, "t", "g", "dead-lettered"), 0);
    assert!(!exists(&mut c, "t:dlq"));
    assert_eq!(xlen(&mut c, b"t"), 0);
    assert_eq!(status(&mut c, "t", "g"), "active");
    healthy(&mut s, &mut c);
}

#[test]
fn group_destroyed_while_sweeping() {
    let (mut s, mut c, _worker) = busy_server("d", 500);
    let n: i64 = q(&mut c, &["XGROUP", "DESTROY", "d", "g"]);
    assert_eq!(n, 1);
    assert_eq!(status(&mut c, "d", "g"), "waiting: no group g");
    wait_steps(&mut c, 5);
    assert_eq!(status(&mut c, "d", "g"), "waiting: no group g");
    let groups: Vec<Value> = q(&mut c, &["XINFO", "GROUPS", "d"]);
    assert!(groups.is_empty(), "group not recreated: {groups:?}");
    assert_eq!(xlen(&mut c, b"d"), 500);
    assert!(!exists(&mut c, "d:dlq"));
    assert_eq!(reclaim_info(&mut c, "errors"), 0);
    healthy(&mut s, &mut c);
}

#[test]
fn owner_deleted_while_sweeping() {
    let (mut s, mut c, worker) = busy_server("o", 500);
    // The claimant is deleted while the sweep moves the worker's entries into its inbox: its
    // entries vanish with it (the same transaction reads how many it had).
    let (inbox, n): (Vec<Value>, i64) = redis::pipe()
        .atomic()
        .cmd("XPENDING")
        .arg("o")
        .arg("g")
        .arg("-")
        .arg("+")
        .arg(1000)
        .arg("reclaim")
        .cmd("XGROUP")
        .arg("DELCONSUMER")
        .arg("o")
        .arg("g")
        .arg("reclaim")
        .query(&mut c)
        .expect("MULTI XPENDING XGROUP DELCONSUMER EXEC");
    assert_eq!(n, inbox.len() as i64);
    // The worker stops: the sweep moves what it held into the inbox again (recreating the
    // claimant), and deleting the claimant once more drops the rest. Each entry was in one place.
    drop(worker);
    let rest = wait_for(10, "the worker's entries moved to the inbox", || {
        let pel = pending_raw(&mut c, b"o", b"g");
        pel.iter().all(|e| e.1 == b"reclaim").then_some(pel.len())
    });
    assert_eq!(n + rest as i64, 500);
    let m: i64 = q(&mut c, &["XGROUP", "DELCONSUMER", "o", "g", "reclaim"]);
    assert_eq!(m, rest as i64);
    assert_eq!(pel_total(&mut c, "o", "g"), 0);
    wait_steps(&mut c, 5);
    assert_eq!(pel_total(&mut c, "o", "g"), 0);
    assert_eq!(status(&mut c, "o", "g"), "active");
    healthy(&mut s, &mut c);

    // New entries of another dead consumer are moved again.
    let more = add_entries(&mut c, b"o", "m", 5);
    read_group(&mut c, b"o", b"g", b"dead2");
    let _: i64 = q(&mut c, &["XGROUP", "DELCONSUMER", "o", "g", "dead"]);
    wait_for(10, "new entries moved after DELCONSUMER", || {
        let pel = pending_raw(&mut c, b"o", b"g");
        (pel.iter().map(|e| e.0.clone()).collect::<Vec<_>>() == more
            && pel.iter().all(|e| e.1 == b"reclaim"))
        .then_some(())
    });
    assert!(!exists(&mut c, "o:dlq"));
    healthy(&mut s, &mut c);
}

/// The DLQ is replaced by a string while entries are being dead-lettered (a failing worker takes
/// them again and again, each reaches its limit after 3 deliveries): the moves stop (no entry
/// acked without its append), STATS says so, the over-limit entry stays pending as it was; once the
/// key is free again every entry is dead-lettered exactly once.
#[test]
fn dlq_replaced_by_a_string_while_sweeping() {
    let mut s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"q", b"g");
    let mut ids = add_entries(&mut c, b"q", "e", 2000);
    read_group(&mut c, b"q", b"g", b"dead");
    set_policy_opts(
        &mut c,
        "q",
        "g",
        "MIN-IDLE 1 MAX-DELIVERIES 3 DLQ q:dlq INTERVAL 1",
    );
    let _worker = Worker::start(&s, 0, "q");
    wait_for(10, "dead-letter moves started", || {
        (xlen(&mut c, b"q:dlq") > 0).then_some(())
    });
    let poison = "9999999999999-0".to_string();
    let mut tx = redis::pipe();
    tx.atomic();
    tx.cmd("XRANGE").arg("q:dlq").arg("-").arg("+");
    tx.cmd("DEL").arg("q:dlq").ignore();
    tx.cmd("SET").arg("q:dlq").arg("x").ignore();
    tx.cmd("XADD")
        .arg("q")
        .arg(&poison)
        .arg("f")
        .arg("poison")
        .ignore();
    tx.add_command(read_group_cmd(b"q", b"g", b"dead2"))
        .ignore();
    tx.add_command(set_deliveries_cmd(
        b"q",
        b"g",
        b"dead2",
        std::slice::from_ref(&poison),
        9,
    ))
    .ignore();
    let (old_dlq,): (Vec<Entry>,) = tx.query(&mut c).expect("transaction");
    ids.push(poison.clone());

    let errors = stat(&mut c, "q", "g", "errors");
    wait_for(10, "the DLQ problem counted", || {
        (stat(&mut c, "q", "g", "errors") > errors).then_some(())
    });
    let passes = stat(&mut c, "q", "g", "passes");
    wait_for(10, "more passes", || {
        (stat(&mut c, "q", "g", "passes") >= passes + 3).then_some(())
    });
    assert_eq!(
        status(&mut c, "q", "g"),
        "error: DLQ key holds the wrong kind of value"
    );
    let pel = pending_raw(&mut c, b"q", b"g");
    assert!(
        pel.contains(&(poison.clone(), b"dead2".to_vec(), 9)),
        "the poison entry stays pending as it was: {pel:?}"
    );
    assert_partition(&pel, &old_dlq, &ids);
    let v: String = q(&mut c, &["GET", "q:dlq"]);
    assert_eq!(v, "x");
    healthy(&mut s, &mut c);

    let _: i64 = q(&mut c, &["DEL", "q:dlq"]);
    let new_dlq = wait_for(10, "everything dead-lettered once the key is free", || {
        let (pel, d) = pel_and_dlq(&mut c, "q", "g", "q:dlq");
        pel.is_empty().then_some(d)
    });
    let both: Vec<Entry> = old_dlq.iter().chain(&new_dlq).cloned().collect();
    assert_partition(&[], &both, &ids);
    let e = new_dlq
        .iter()
        .find(|e| entry_field(e, "reclaim-id") == poison.as_bytes())
        .expect("poison entry in the DLQ");
    assert_eq!(entry_field(e, "reclaim-deliveries"), b"9");
    assert_eq!(entry_field(e, "f"), b"poison");
    assert_eq!(status(&mut c, "q", "g"), "active");
    healthy(&mut s, &mut c);
}

#[test]
fn flushall_while_sweeping() {
    let mut s = Server::new();
    let mut c0 = s.conn_db(0);
    let mut c3 = s.conn_db(3);
    let (_w0, _) = busy(&s, 0, "f", 500);
    let (_w3, _) = busy(&s, 3, "f3", 500);
    assert_eq!(reclaim_info(&mut c0, "policies"), 2);
    let _: () = q(&mut c0, &["FLUSHALL"]);
    assert_eq!(get_policy(&mut c0, b"f", b"g"), None);
    assert_eq!(get_policy(&mut c3, b"f3", b"g"), None);
    wait_for(10, "reclaim_policies 0", || {
        (reclaim_info(&mut c0, "policies") == 0).then_some(())
    });
    // The timer keeps running (a probe policy steps) and recreates nothing.
    set_policy_opts(&mut c0, "probe", "g", "INTERVAL 1");
    wait_steps(&mut c0, 5);
    let keys: Vec<String> = q(&mut c0, &["KEYS", "*"]);
    assert_eq!(keys, ["reclaim:policy:{probe}:probe"]);
    let n: i64 = q(&mut c3, &["DBSIZE"]);
    assert_eq!(n, 0);
    assert_eq!(reclaim_info(&mut c0, "policies"), 1);
    healthy(&mut s, &mut c0);
}

#[test]
fn swapdb_while_sweeping() {
    let mut s = Server::new();
    let mut c0 = s.conn_db(0);
    let mut c1 = s.conn_db(1);
    let _: () = q(&mut c1, &["SET", "other", "x"]);
    // Its worker keeps reading db 0, where the stream is no more after the swap.
    let (w0, ids) = busy(&s, 0, "w", 500);
    let pol = get_policy(&mut c0, b"w", b"g");
    let _: () = q(&mut c0, &["SWAPDB", "0", "1"]);
    assert_eq!(get_policy(&mut c1, b"w", b"g"), pol);
    assert_eq!(get_policy(&mut c0, b"w", b"g"), None);
    // Sweeping continues in db 1, where a worker reads now; db 0 only holds what was in db 1.
    let w1 = Worker::start(&s, 1, "w");
    let claimed = stat(&mut c1, "w", "g", "claimed");
    wait_for(10, "sweeping continues in db 1", || {
        (stat(&mut c1, "w", "g", "claimed") >= claimed + 500).then_some(())
    });
    drop(w0);
    drop(w1);
    wait_steps(&mut c1, 5);
    let keys: Vec<String> = q(&mut c0, &["KEYS", "*"]);
    assert_eq!(keys, ["other"]);
    // With the workers gone, the sweep moves everything they held to the inbox.
    let pel = wait_for(10, "every entry in the inbox", || {
        let pel = pending_raw(&mut c1, b"w", b"g");
        pel.iter().all(|e| e.1 == b"reclaim").then_some(pel)
    });
    assert_eq!(pel.iter().map(|e| e.0.clone()).collect::<Vec<_>>(), ids);
    assert_eq!(status(&mut c1, "w", "g"), "active");
    assert_eq!(
        error_of(&mut c0, cmd("RECLAIM.STATS").arg("w").arg("g")),
        "ERR no reclaim policy for this key and group"
    );
    healthy(&mut s, &mut c0);
}

// ---------------------------------------------------------------------------------------------
// Hostile input
// ---------------------------------------------------------------------------------------------

#[test]
fn numbers_at_the_i64_limits() {
    const MAX: &str = "9223372036854775807";
    const MIN: &str = "-9223372036854775808";
    const OVER: &str = "9223372036854775808";
    let mut s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"n", b"g");
    let ids = add_entries(&mut c, b"n", "e", 2);
    read_group(&mut c, b"n", b"g", b"dead");
    set_deliveries(&mut c, b"n", b"g", b"dead", &ids[..1], i64::MAX);

    set_policy_opts(
        &mut c,
        "n",
        "g",
        &format!("MIN-IDLE {MAX} MAX-DELIVERIES {MAX} DLQ n:dlq INTERVAL {MAX}"),
    );
    let got = get_policy(&mut c, b"n", b"g").unwrap();
    assert_eq!(
        (got.min_idle, got.max_deliveries, got.interval),
        (i64::MAX, i64::MAX, i64::MAX)
    );
    for (opt, msg) in [
        ("MIN-IDLE", "ERR MIN-IDLE must be a positive integer (ms)"),
        ("INTERVAL", "ERR INTERVAL must be a positive integer (ms)"),
        (
            "MAX-DELIVERIES",
            "ERR MAX-DELIVERIES must be a non-negative integer",
        ),
        ("COUNT", "ERR COUNT must be an integer from 1 to 10000"),
    ] {
        for v in [MIN, OVER] {
            let mut k = cmd("RECLAIM.POLICY");
            k.arg("SET").arg("n").arg("g").arg(opt).arg(v);
            assert_eq!(error_of(&mut c, &k), msg, "{opt} {v}");
        }
    }
    let mut k = cmd("RECLAIM.POLICY");
    k.arg("SET").arg("n").arg("g").arg("COUNT").arg(MAX);
    assert_eq!(
        error_of(&mut c, &k),
        "ERR COUNT must be an integer from 1 to 10000"
    );
    let mut k = cmd("RECLAIM.SWEEP");
    k.arg("n").arg("g").arg("LIMIT").arg(OVER);
    assert_eq!(error_of(&mut c, &k), "ERR LIMIT must be a positive integer");
    // The rejected SETs left the policy as it was.
    assert_eq!(get_policy(&mut c, b"n", b"g"), Some(got));

    // Nothing is ever stale; count 2^63-1 is at the limit but not stale: untouched. The timer's
    // first pass runs, RECLAIM.SWEEP makes a second one, and the timer's next pass is 2^63-1 ms
    // away: a probe policy shows the timer stepping meanwhile.
    wait_for(10, "the first pass", || {
        (stat(&mut c, "n", "g", "passes") >= 1).then_some(())
    });
    let v: Value = q(&mut c, &["RECLAIM.SWEEP", "n", "g", "LIMIT", MAX]);
    assert_eq!(
        (
            int_field(&v, "claimed"),
            int_field(&v, "dead-lettered"),
            int_field(&v, "deleted")
        ),
        (0, 0, 0)
    );
    let before = vec![
        (ids[0].clone(), b"dead".to_vec(), i64::MAX),
        (ids[1].clone(), b"dead".to_vec(), 1),
    ];
    assert_eq!(pending_raw(&mut c, b"n", b"g"), before);
    assert_eq!(stat(&mut c, "n", "g", "passes"), 2);
    set_policy_opts(&mut c, "probe", "g", "INTERVAL 1");
    wait_steps(&mut c, 5);
    assert_eq!(
        stat(&mut c, "n", "g", "passes"),
        2,
        "no timer pass before 2^63-1 ms"
    );
    assert_eq!(pending_raw(&mut c, b"n", b"g"), before);

    // MIN-IDLE 1: the entry at count 2^63-1 is stale at the limit and is dead-lettered with that
    // count; the other is moved to the inbox, its count unchanged.
    set_policy_opts(
        &mut c,
        "n",
        "g",
        &format!("MIN-IDLE 1 MAX-DELIVERIES {MAX} DLQ n:dlq INTERVAL {MAX}"),
    );
    wait_for(10, "the pass at MIN-IDLE 1", || {
        (stat(&mut c, "n", "g", "passes") >= 3).then_some(())
    });
    assert_eq!(
        pending_raw(&mut c, b"n", b"g"),
        vec![(ids[1].clone(), b"reclaim".to_vec(), 1)]
    );
    let dlq = xrange(&mut c, b"n:dlq");
    assert_eq!(dlq.len(), 1);
    assert_eq!(entry_field(&dlq[0], "reclaim-id"), ids[0].as_bytes());
    assert_eq!(entry_field(&dlq[0], "reclaim-deliveries"), MAX.as_bytes());
    healthy(&mut s, &mut c);
}

/// xorshift64 bytes: every byte value, no pattern.
fn noise(len: usize, mut x: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

#[test]
fn one_megabyte_values_are_dead_lettered_intact() {
    let mut s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"m", b"g");
    let a = noise(1 << 20, 1);
    let b = noise(1 << 20, 2);
    let name = noise(1000, 3);
    let id: String = cmd("XADD")
        .arg("m")
        .arg("*")
        .arg("small")
        .arg("1")
        .arg(&a)
        .arg(&b)
        .arg(&name)
        .arg(&a)
        .query(&mut c)
        .unwrap();
    read_group(&mut c, b"m", b"g", b"dead");
    set_policy_opts(
        &mut c,
        "m",
        "g",
        "MIN-IDLE 100 MAX-DELIVERIES 1 DLQ m:dlq INTERVAL 20",
    );
    let dlq = wait_for(10, "the 1 MB entry dead-lettered", || {
        let (pel, d) = pel_and_dlq(&mut c, "m", "g", "m:dlq");
        (pel.is_empty() && !d.is_empty()).then_some(d)
    });
    assert_eq!(dlq.len(), 1);
    let want: Vec<Vec<u8>> = vec![
        b"small".to_vec(),
        b"1".to_vec(),
        a.clone(),
        b.clone(),
        name.clone(),
        a.clone(),
        b"reclaim-stream".to_vec(),
        b"m".to_vec(),
        b"reclaim-group".to_vec(),
        b"g".to_vec(),
        b"reclaim-id".to_vec(),
        id.clone().into_bytes(),
        b"reclaim-consumer".to_vec(),
        b"dead".to_vec(),
        b"reclaim-deliveries".to_vec(),
        b"1".to_vec(),
        b"reclaim-reason".to_vec(),
        b"max-deliveries".to_vec(),
    ];
    assert!(
        without_moved_ms_raw(&dlq[0].1) == want,
        "the DLQ entry holds the bytes exactly"
    );
    // The source entry is intact too.
    let src = xrange(&mut c, b"m");
    assert!(src[0].1[..6] == want[..6]);
    healthy(&mut s, &mut c);
}

/// Binary, non-UTF-8 names (NUL, CR LF, 0xff, braces) for key, group, consumer, claimant, worker,
/// DLQ and fields, through move, hand-over by a failing worker, move, hand-over and dead-letter.
#[test]
fn binary_names_through_a_full_dead_letter_move() {
    let mut s = Server::new();
    let mut c = s.conn();
    let cases: [Names; 2] = [
        (
            b"s{\xff\x00}\r\n",
            b"g\x00\xfe\r\n",
            b"c\xff\x00 \r\n",
            b"cl\xfe\x00\n",
            b"dlq\x00\xff{\xff\x00}",
        ),
        (b"a}\xc3\x28\x00", b"\xff", b"\x00", b"\r\n", b"}\x80"),
    ];
    let fields: Vec<Vec<u8>> = vec![
        b"f\x00\xff".to_vec(),
        b"v\r\n\x00\xfe".to_vec(),
        b"\xc3\x28".to_vec(),
        vec![],
    ];
    let mut ids = Vec::new();
    for (stream, group, consumer, claimant, dlq) in cases {
        create_group(&mut c, stream, group);
        let id: String = cmd("XADD")
            .arg(stream)
            .arg("*")
            .arg(&fields)
            .query(&mut c)
            .unwrap();
        read_group(&mut c, stream, group, consumer);
        let p = PolicyView::new(100, 20)
            .with_dlq(dlq, 3)
            .with_claimant(claimant);
        set_policy(&mut c, stream, group, &p);
        assert_eq!(get_policy(&mut c, stream, group), Some(p));
        ids.push(id);
    }
    let workers: [&[u8]; 2] = [b"w\xff\x00 \r\n", b"\xfe\x00w"];
    for (i, (stream, group, _consumer, claimant, dlq)) in cases.iter().enumerate() {
        for want in [2, 3] {
            let got = take_inbox(&mut c, stream, group, claimant, workers[i], 1);
            assert_eq!(got, [(ids[i].clone(), want)], "case {i}");
        }
        let d = wait_for(
            10,
            "moved and handed over twice, then dead-lettered",
            || {
                let d = xrange(&mut c, dlq);
                (pending_raw(&mut c, stream, group).is_empty() && !d.is_empty()).then_some(d)
            },
        );
        assert_eq!(d.len(), 1);
        let mut want = fields.clone();
        for (k, v) in [
            (&b"reclaim-stream"[..], *stream),
            (b"reclaim-group", *group),
            (b"reclaim-id", ids[i].as_bytes()),
            (b"reclaim-consumer", workers[i]),
            (b"reclaim-deliveries", b"3"),
            (b"reclaim-reason", b"max-deliveries"),
        ] {
            want.push(k.to_vec());
            want.push(v.to_vec());
        }
        assert_eq!(without_moved_ms_raw(&d[0].1), want, "case {i}");
        let st: Value = cmd("RECLAIM.STATS")
            .arg(*stream)
            .arg(*group)
            .query(&mut c)
            .unwrap();
        assert_eq!(int_field(&st, "claimed"), 2, "case {i}: {st:?}");
        assert_eq!(int_field(&st, "redelivered"), 2, "case {i}: {st:?}");
        assert_eq!(int_field(&st, "dead-lettered"), 1, "case {i}: {st:?}");
    }
    let listed: BTreeSet<(Vec<u8>, Vec<u8>)> = list_policies(&mut c)
        .into_iter()
        .map(|(s, g, _)| (s, g))
        .collect();
    let want: BTreeSet<(Vec<u8>, Vec<u8>)> = cases
        .iter()
        .map(|(s, g, ..)| (s.to_vec(), g.to_vec()))
        .collect();
    assert_eq!(listed, want);
    healthy(&mut s, &mut c);
}

/// 10,000 policies, all due every millisecond (their streams do not exist, except ten that have a
/// dead consumer's entries): LIST returns them all, the server answers PING, and the ten streams
/// are swept.
#[test]
fn ten_thousand_policies() {
    let mut s = Server::new();
    let mut c = s.conn();
    let mut live = Vec::new();
    for i in (0..10_000).step_by(1000) {
        let k = format!("p:{i:05}");
        create_group(&mut c, k.as_bytes(), b"g");
        add_entries(&mut c, k.as_bytes(), "e", 3);
        read_group(&mut c, k.as_bytes(), b"g", b"dead");
        live.push(k);
    }
    let mut p = redis::pipe();
    for i in 0..10_000 {
        p.cmd("RECLAIM.POLICY")
            .arg("SET")
            .arg(format!("p:{i:05}"))
            .arg("g")
            .arg("MIN-IDLE")
            .arg(100)
            .arg("INTERVAL")
            .arg(1)
            .ignore();
    }
    let () = p.query(&mut c).expect("10,000 RECLAIM.POLICY SET");
    assert_eq!(reclaim_info(&mut c, "policies"), 10_000);
    let t = Instant::now();
    let list = list_policies(&mut c);
    let list_ms = t.elapsed().as_millis();
    assert_eq!(list.len(), 10_000);
    assert_eq!(list[0].0, b"p:00000");
    assert_eq!(list[9_999].0, b"p:09999");
    for k in &live {
        wait_for(20, &format!("{k} swept among 10,000 policies"), || {
            let pel = pending_raw(&mut c, k.as_bytes(), b"g");
            pel.iter().all(|e| e.1 == b"reclaim").then_some(())
        });
    }
    wait_steps(&mut c, 20_000);
    let t = Instant::now();
    let pong: String = q(&mut c, &["PING"]);
    let ping_us = t.elapsed().as_micros();
    assert_eq!(pong, "PONG");
    println!(
        "10,000 policies: LIST in {list_ms} ms, PING round trip {ping_us} µs while sweeping; \
         reclaim_max_tick_us {}, slices {}",
        reclaim_info(&mut c, "max_tick_us"),
        reclaim_info(&mut c, "slices")
    );
    healthy(&mut s, &mut c);
}

/// A PEL of 1,000,000 entries (built with EVAL loops of XADD and one XREADGROUP COUNT 1000000):
/// every entry is claimed by the timer. The time it took is printed, not asserted.
#[test]
fn a_million_pending_entries_are_all_claimed() {
    const N: i64 = 1_000_000;
    let mut s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"big", b"g");
    let t = Instant::now();
    for _ in 0..10 {
        let _: i64 = cmd("EVAL")
            .arg("for i = 1, tonumber(ARGV[1]) do redis.call('XADD', KEYS[1], '*', 'n', i) end return 1")
            .arg(1)
            .arg("big")
            .arg(N / 10)
            .query(&mut c)
            .expect("EVAL XADD");
    }
    let read: i64 = cmd("EVAL")
        .arg("local r = redis.call('XREADGROUP', 'GROUP', 'g', 'dead', 'COUNT', ARGV[1], 'STREAMS', KEYS[1], '>') return #r[1][2]")
        .arg(1)
        .arg("big")
        .arg(N)
        .query(&mut c)
        .expect("EVAL XREADGROUP");
    assert_eq!(read, N);
    assert_eq!(pel_total(&mut c, "big", "g"), N);
    let build = t.elapsed();

    let t = Instant::now();
    set_policy_opts(&mut c, "big", "g", "MIN-IDLE 10 INTERVAL 60000");
    let mut max_ping = Duration::ZERO;
    wait_for(120, "1,000,000 entries claimed", || {
        let p = Instant::now();
        let consumers: Vec<Value> = cmd("XINFO")
            .arg("CONSUMERS")
            .arg("big")
            .arg("g")
            .query(&mut c)
            .ok()?;
        max_ping = max_ping.max(p.elapsed());
        let owned = |name: &str| {
            consumers
                .iter()
                .find(|v| str_field(v, "name") == name)
                .map_or(0, |v| int_field(v, "pending"))
        };
        (owned("reclaim") == N && owned("dead") == 0).then_some(())
    });
    let took = t.elapsed();
    // The pass ends one step after the last claims (a short page); the next is a minute away.
    wait_for(20, "the pass to complete", || {
        (stat(&mut c, "big", "g", "passes") >= 1).then_some(())
    });
    assert_eq!(stat(&mut c, "big", "g", "passes"), 1);
    assert_eq!(stat(&mut c, "big", "g", "claimed"), N);
    println!(
        "1,000,000 pending entries: built in {:.1} s; all claimed in {:.1} s ({} steps, {} ticks, \
         {} event-loop slices, longest tick/slice {} µs, slowest XINFO round trip meanwhile {} ms)",
        build.as_secs_f64(),
        took.as_secs_f64(),
        reclaim_info(&mut c, "steps"),
        reclaim_info(&mut c, "ticks"),
        reclaim_info(&mut c, "slices"),
        reclaim_info(&mut c, "max_tick_us"),
        max_ping.as_millis()
    );
    healthy(&mut s, &mut c);
}

/// In one transaction, the dead-letter policy of stream `big` (group `g`: `MIN-IDLE 100
/// MAX-DELIVERIES 3 DLQ big:dlq INTERVAL 20`) and a `RECLAIM.SWEEP` of it: the sweep's reply.
fn set_and_sweep_big(c: &mut Connection) -> Value {
    let (sweep,): (Value,) = redis::pipe()
        .atomic()
        .cmd("RECLAIM.POLICY")
        .arg("SET")
        .arg("big")
        .arg("g")
        .arg("MIN-IDLE")
        .arg(100)
        .arg("MAX-DELIVERIES")
        .arg(3)
        .arg("DLQ")
        .arg("big:dlq")
        .arg("INTERVAL")
        .arg(20)
        .ignore()
        .cmd("RECLAIM.SWEEP")
        .arg("big")
        .arg("g")
        .query(c)
        .expect("MULTI RECLAIM.POLICY SET, RECLAIM.SWEEP");
    sweep
}
