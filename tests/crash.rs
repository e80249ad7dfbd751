//! Crash consistency under SIGKILL: a producer, worker threads that ack what they process and
//! sometimes die mid-batch, poison entries that are never acked, a recovery worker that reads the
//! claimant's history, and a redis-server (appendonly yes, appendfsync always) killed with SIGKILL
//! at random moments and restarted on the same directory while all of it runs.
//!
//! At the end every produced entry must be in exactly one place: acknowledged by a worker (its
//! log), or in the DLQ; nothing pending. The only entries allowed in neither are those whose XACK
//! was sent and whose reply was lost in a crash (the ack may have been applied). The figures are
//! printed (`cargo test --release --test crash -- --nocapture`).
//!
//! Randomness comes from a seeded xorshift generator; the seed is printed, and
//! `RECLAIM_CRASH_SEED=<seed>` replays the same choices (the timing of threads still varies).

use reclaim_testkit::*;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

const STREAM: &str = "jobs";
const GROUP: &str = "g";
const DLQ: &str = "jobs:dlq";
const CLAIMANT: &str = "reclaim";
/// Entries produced; entry `i` (1-based) has ID `i-0`.
const N: u64 = 2000;
/// One entry in `POISON_EVERY` is poison (2%).
const POISON_EVERY: u64 = 50;
const MAX_DELIVERIES: i64 = 3;
/// Worker slots (each one respawns its worker under a new consumer name when it dies).
const WORKERS: usize = 4;
/// At most this many worker deaths in a run.
const MAX_DEATHS: usize = 16;
/// The bound on any one wait of the test (reconnecting, draining).
const PATIENCE: Duration = Duration::from_secs(40);

// ---------------------------------------------------------------------------------------------
// A seeded PRNG (xorshift64*), so that a failing run can be replayed.
// ---------------------------------------------------------------------------------------------

struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        // xorshift needs a non-zero state; mix the seed so that nearby seeds differ.
        Rng((seed ^ 0x9E37_79B9_7F4A_7C15).max(1))
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// True with probability `num / den`.
    fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
}

fn seed() -> u64 {
    match std::env::var("RECLAIM_CRASH_SEED") {
        Ok(s) => s.parse().expect("RECLAIM_CRASH_SEED must be an integer"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1),
    }
}

// ---------------------------------------------------------------------------------------------
// What the clients saw
// ---------------------------------------------------------------------------------------------

/// The workers' logs, in memory. An ID goes into `acked` only after its XACK returned 1.
#[derive(Default)]
struct Ledger {
    /// (id, consumer): XACK returned 1.
    acked: Vec<(String, String)>,
    /// (id, consumer): XACK was sent and the connection broke before its reply: it may or may
    /// not have been applied.
    unsure: Vec<(String, String)>,
    /// IDs whose XACK returned 0 (no longer pending when acked).
    acked_zero: Vec<String>,
    /// Entries received by workers (`>` reads and history reads).
    received: u64,
    /// Entries received more than once (by any worker).
    seen: BTreeMap<String, u32>,
    /// Worker deaths (threads that stopped in the middle of a batch).
    deaths: u64,
    /// Connection losses seen by the clients.
    disconnects: u64,
}

/// One entry of an XREADGROUP reply: ID and fields (`None` when the entry was deleted).
type ReadEntry = (String, Option<Vec<(Vec<u8>, Vec<u8>)>>);

/// The entries of an XREADGROUP reply on one stream (nil -> none).
fn read_entries(v: &Value) -> Vec<ReadEntry> {
    let Value::Array(streams) = v else {
        assert!(matches!(v, Value::Nil), "unexpected XREADGROUP reply {v:?}");
        return Vec::new();
    };
    let mut out = Vec::new();
    for s in streams {
        let Value::Array(kv) = s else {
            panic!("unexpected XREADGROUP stream {s:?}")
        };
        let Value::Array(items) = &kv[1] else {
            panic!("unexpected XREADGROUP entries {kv:?}")
        };
        for it in items {
            let Value::Array(e) = it else {
                panic!("unexpected XREADGROUP entry {it:?}")
            };
            let id = String::from_utf8(bytes_of(&e[0])).expect("ID");
            let fields = match &e[1] {
                Value::Array(f) => Some(
                    f.chunks(2)
                        .map(|c| (bytes_of(&c[0]), bytes_of(&c[1])))
                        .collect(),
                ),
                Value::Nil => None,
                other => panic!("unexpected fields {other:?}"),
            };
            out.push((id, fields));
        }
    }
    out
}

fn is_poison(fields: &[(Vec<u8>, Vec<u8>)]) -> bool {
    fields.iter().any(|(k, v)| k == b"poison" && v == b"1")
}

/// Whether an error means the command may not have run / the connection is gone (as opposed to
/// an error reply of a command that ran).
fn is_disconnect(e: &redis::RedisError) -> bool {
    e.code().is_none() || e.code() == Some("LOADING")
}

/// Connects to the server on `port`, retrying while it is down or loading, until `stop` is set
/// (then `None`). Panics after [`PATIENCE`].
fn connect(port: u16, stop: &AtomicBool) -> Option<Connection> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        if let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{port}/")) {
            if let Ok(mut con) = client.get_connection_with_timeout(Duration::from_secs(2)) {
                con.set_read_timeout(Some(Duration::from_secs(10))).ok();
                let pong: redis::RedisResult<String> = cmd("PING").query(&mut con);
                if pong.is_ok() {
                    return Some(con);
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "could not reconnect to port {port}"
        );
        thread::sleep(Duration::from_millis(20));
    }
}

/// After a broken connection: counts the disconnect in the ledger and connects again, as
/// [`connect`] does (`None` once `stop` is set).
fn reconnect(port: u16, stop: &AtomicBool, ledger: &Mutex<Ledger>) -> Option<Connection> {
    ledger.lock().unwrap().disconnects += 1;
    connect(port, stop)
}

/// What happened to one XACK.
enum Ack {
    Done,
    Lost,
}

/// Acks `id` for `consumer` and logs the outcome. `Ack::Lost` when the connection broke.
fn ack(con: &mut Connection, id: &str, consumer: &str, ledger: &Mutex<Ledger>) -> Ack {
    let r: redis::RedisResult<i64> = cmd("XACK").arg(STREAM).arg(GROUP).arg(id).query(con);
    let mut l = ledger.lock().unwrap();
    match r {
        Ok(1) => {
            l.acked.push((id.to_string(), consumer.to_string()));
            Ack::Done
        }
        Ok(0) => {
            l.acked_zero.push(id.to_string());
            Ack::Done
        }
        Ok(n) => panic!("XACK of one ID returned {n}"),
        Err(e) if e.code() == Some("LOADING") => {
            // Refused before running: certainly not applied.
            l.disconnects += 1;
            Ack::Lost
        }
        Err(e) if is_disconnect(&e) => {
            l.unsure.push((id.to_string(), consumer.to_string()));
            l.disconnects += 1;
            Ack::Lost
        }
        Err(e) => panic!("XACK {id}: {e}"),
    }
}

fn note_received(ledger: &Mutex<Ledger>, entries: &[ReadEntry]) {
    let mut l = ledger.lock().unwrap();
    l.received += entries.len() as u64;
    for (id, _) in entries {
        *l.seen.entry(id.clone()).or_default() += 1;
    }
}

// ---------------------------------------------------------------------------------------------
// The clients
// ---------------------------------------------------------------------------------------------

/// How a worker ended.
enum Exit {
    Stopped,
    Died,
}

/// A plain consumer-group worker: reads new entries, "processes" them (poison ones fail and are
/// never acked), acks each one. With some probability it dies in the middle of a batch (returns
/// without acking the rest). On a broken connection it reconnects under the same name and
/// abandons the batch in hand (those entries stay in its PEL).
fn worker(
    port: u16,
    name: &str,
    seed: u64,
    stop: &AtomicBool,
    deaths: &AtomicUsize,
    ledger: &Mutex<Ledger>,
) -> Exit {
    let mut rng = Rng::new(seed);
    let Some(mut con) = connect(port, stop) else {
        return Exit::Stopped;
    };
    loop {
        if stop.load(Ordering::Relaxed) {
            return Exit::Stopped;
        }
        let count = 1 + rng.below(16);
        let r: redis::RedisResult<Value> = cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg(name)
            .arg("COUNT")
            .arg(count)
            .arg("BLOCK")
            .arg(100)
            .arg("STREAMS")
            .arg(STREAM)
            .arg(">")
            .query(&mut con);
        let entries = match r {
            Ok(v) => read_entries(&v),
            Err(e) if is_disconnect(&e) => {
                let Some(c) = reconnect(port, stop, ledger) else {
                    return Exit::Stopped;
                };
                con = c;
                continue;
            }
            Err(e) => panic!("{name}: XREADGROUP: {e}"),
        };
        note_received(ledger, &entries);
        let dies = !entries.is_empty()
            && rng.chance(1, 30)
            && deaths
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |d| {
                    (d < MAX_DEATHS).then_some(d + 1)
                })
                .is_ok();
        let upto = if dies {
            rng.below(entries.len() as u64) as usize
        } else {
            entries.len()
        };
        for (id, fields) in &entries[..upto] {
            let Some(f) = fields else { continue };
            if is_poison(f) {
                continue; // the handler fails every time: never acked
            }
            if let Ack::Lost = ack(&mut con, id, name, ledger) {
                match connect(port, stop) {
                    Some(c) => con = c,
                    None => return Exit::Stopped,
                }
                break;
            }
        }
        if dies {
            ledger.lock().unwrap().deaths += 1;
            return Exit::Died;
        }
    }
}

/// The recovery worker: pages through the claimant's history (`XREADGROUP ... reclaim ... <id>`,
/// from 0), acks the non-poison entries, and starts again from 0 when it reaches the end.
fn recovery(port: u16, stop: &AtomicBool, ledger: &Mutex<Ledger>) {
    let Some(mut con) = connect(port, stop) else {
        return;
    };
    let mut from = "0".to_string();
    while !stop.load(Ordering::Relaxed) {
        let r: redis::RedisResult<Value> = cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg(CLAIMANT)
            .arg("COUNT")
            .arg(50)
            .arg("STREAMS")
            .arg(STREAM)
            .arg(&from)
            .query(&mut con);
        let entries = match r {
            Ok(v) => read_entries(&v),
            Err(e) if is_disconnect(&e) => {
                let Some(c) = reconnect(port, stop, ledger) else {
                    return;
                };
                con = c;
                from = "0".to_string();
                continue;
            }
            Err(e) => panic!("recovery: XREADGROUP: {e}"),
        };
        if entries.is_empty() {
            from = "0".to_string();
            // An idle poll loop of the worker, not a wait of the test.
            thread::sleep(Duration::from_millis(20));
            continue;
        }
        note_received(ledger, &entries);
        from = entries.last().unwrap().0.clone();
        for (id, fields) in &entries {
            let Some(f) = fields else { continue };
            if is_poison(f) {
                continue;
            }
            if let Ack::Lost = ack(&mut con, id, CLAIMANT, ledger) {
                match connect(port, stop) {
                    Some(c) => con = c,
                    None => return,
                }
                from = "0".to_string();
                break;
            }
        }
    }
}

/// The producer: `XADD jobs i-0 n i [poison 1]` for i in 1..=N, in pipelines of 20. After a broken
/// connection it reconnects and resumes after the stream's last entry. Returns the number of
/// reconnections. Checks that every write the server confirmed survived the crashes.
fn producer(port: u16, poison: &BTreeSet<u64>, stop: &AtomicBool) -> u64 {
    let mut con = connect(port, stop).expect("producer connects");
    let mut next = 1u64;
    let mut confirmed = 0u64;
    let mut reconnects = 0;
    while next <= N {
        let last = (next + 19).min(N);
        let mut p = redis::pipe();
        for i in next..=last {
            let c = p
                .cmd("XADD")
                .arg(STREAM)
                .arg(format!("{i}-0"))
                .arg("n")
                .arg(i);
            if poison.contains(&i) {
                c.arg("poison").arg(1);
            }
            c.ignore();
        }
        match p.query::<()>(&mut con) {
            Ok(()) => {
                confirmed = last;
                next = last + 1;
                // Spread production over the time the server is being killed.
                thread::sleep(Duration::from_millis(15));
            }
            Err(e) if is_disconnect(&e) => {
                reconnects += 1;
                con = connect(port, stop).expect("producer reconnects");
                let top: Vec<(String, Value)> = cmd("XREVRANGE")
                    .arg(STREAM)
                    .arg("+")
                    .arg("-")
                    .arg("COUNT")
                    .arg(1)
                    .query(&mut con)
                    .expect("XREVRANGE");
                let have = top
                    .first()
                    .map(|(id, _)| id.trim_end_matches("-0").parse::<u64>().expect("ID"))
                    .unwrap_or(0);
                assert!(
                    have >= confirmed,
                    "XADD {confirmed}-0 was confirmed (appendfsync always) but the stream ends \
                     at {have}-0 after the restart"
                );
                next = have + 1;
            }
            Err(e) => panic!("producer: {e}"),
        }
    }
    reconnects
}

// ---------------------------------------------------------------------------------------------
// Checks on the server's state
// ---------------------------------------------------------------------------------------------

/// One DLQ entry: (its source ID, its delivery count, its original fields).
struct Dead {
    id: String,
    deliveries: i64,
    fields: Vec<(Vec<u8>, Vec<u8>)>,
}

/// The DLQ entries `entries` (`XRANGE` of the DLQ), parsed.
fn dead_of(entries: &[Entry]) -> Vec<Dead> {
    entries
        .iter()
        .map(|e| {
            let id = String::from_utf8(entry_field(e, "reclaim-id")).expect("reclaim-id");
            let deliveries = String::from_utf8(entry_field(e, "reclaim-deliveries"))
                .unwrap()
                .parse()
                .expect("reclaim-deliveries");
            assert_eq!(entry_field(e, "reclaim-stream"), STREAM.as_bytes());
            assert_eq!(entry_field(e, "reclaim-group"), GROUP.as_bytes());
            let fields =
                e.1.chunks(2)
                    .filter(|c| !c[0].starts_with(b"reclaim-"))
                    .map(|c| (c[0].clone(), c[1].clone()))
                    .collect();
            Dead {
                id,
                deliveries,
                fields,
            }
        })
        .collect()
}

/// The invariants that hold at any moment: no ID in the DLQ twice, no DLQ entry whose source is
/// still pending (an append without its ack) ([`assert_disjoint`]), no ID acked by a worker still
/// pending or in the DLQ.
fn check_partition(pel: &[PendRaw], dlq: &[Dead], acked: &BTreeSet<String>, when: &str) {
    let dead: Vec<String> = dlq.iter().map(|d| d.id.clone()).collect();
    assert_disjoint(
        pel.iter().map(|p| p.0.as_str()),
        &dead,
        &format!("{when}: "),
    );
    let pending: BTreeSet<&str> = pel.iter().map(|p| p.0.as_str()).collect();
    for d in &dead {
        assert!(
            !acked.contains(d),
            "{when}: {d} was acked by a worker (XACK returned 1) and is in the DLQ too"
        );
    }
    for id in acked {
        assert!(
            !pending.contains(id.as_str()),
            "{when}: {id} was acked by a worker (XACK returned 1, fsynced) but is pending again"
        );
    }
}

/// Sets `stop` when dropped, so that the client threads end also when the test panics.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

#[test]
fn sigkill_during_processing_loses_nothing_and_duplicates_nothing() {
    let seed = seed();
    println!("crash test seed: {seed} (replay with RECLAIM_CRASH_SEED={seed})");
    let mut rng = Rng::new(seed);

    let mut s = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let port = s.port;
    let mut c = s.conn();
    create_group(&mut c, STREAM.as_bytes(), GROUP.as_bytes());
    let _: () = cmd("RECLAIM.POLICY")
        .arg("SET")
        .arg(STREAM)
        .arg(GROUP)
        .arg("MIN-IDLE")
        .arg(200)
        .arg("MAX-DELIVERIES")
        .arg(MAX_DELIVERIES)
        .arg("DLQ")
        .arg(DLQ)
        .arg("INTERVAL")
        .arg(50)
        .query(&mut c)
        .expect("RECLAIM.POLICY SET");
    drop(c);

    // Exactly 2% poison, at random positions.
    let mut poison = BTreeSet::new();
    while poison.len() < (N / POISON_EVERY) as usize {
        poison.insert(1 + rng.below(N));
    }
    let poison = Arc::new(poison);

    let stop = Arc::new(AtomicBool::new(false));
    let _stop_guard = StopOnDrop(stop.clone());
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let deaths = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();

    let prod: JoinHandle<u64> = {
        let (poison, stop) = (poison.clone(), stop.clone());
        thread::spawn(move || producer(port, &poison, &stop))
    };
    let mut clients: Vec<JoinHandle<()>> = Vec::new();
    for slot in 0..WORKERS {
        let (stop, deaths, ledger) = (stop.clone(), deaths.clone(), ledger.clone());
        let wseed = rng.next();
        clients.push(thread::spawn(move || {
            let mut r = Rng::new(wseed);
            for generation in 0.. {
                let name = format!("w{slot}.{generation}");
                match worker(port, &name, r.next(), &stop, &deaths, &ledger) {
                    Exit::Stopped => return,
                    Exit::Died => continue, // a new process, a new consumer name
                }
            }
        }));
    }
    {
        let (stop, ledger) = (stop.clone(), ledger.clone());
        clients.push(thread::spawn(move || recovery(port, &stop, &ledger)));
    }

    // SIGKILL the server 3 or 4 times at random moments while entries are produced and consumed.
    let kills = 3 + rng.below(2) as usize;
    let mut at: Vec<u64> = Vec::new();
    while at.len() < kills {
        let t = 200 + rng.below(2600);
        if at.iter().all(|&x| x.abs_diff(t) >= 250) {
            at.push(t);
        }
    }
    at.sort();
    let mut restarts_ms = Vec::new();
    for (k, &ms) in at.iter().enumerate() {
        let when = t0 + Duration::from_millis(ms);
        if let Some(d) = when.checked_duration_since(Instant::now()) {
            thread::sleep(d); // the moment of the crash, not a wait for a result
        }
        let acked_before: BTreeSet<String> = ledger
            .lock()
            .unwrap()
            .acked
            .iter()
            .map(|a| a.0.clone())
            .collect();
        s.kill();
        let r0 = Instant::now();
        s.restart();
        restarts_ms.push(r0.elapsed().as_millis());
        let mut c = s.conn();
        let (pel, dlq) = pel_and_dlq(&mut c, STREAM, GROUP, DLQ);
        check_partition(
            &pel,
            &dead_of(&dlq),
            &acked_before,
            &format!("after kill {} at {ms} ms", k + 1),
        );
    }

    // Everything produced, then drained: nothing pending and every entry delivered.
    let producer_reconnects = prod.join().expect("producer thread");
    let mut c = s.conn();
    let last = format!("{N}-0");
    wait_for(
        PATIENCE.as_secs(),
        "the group to drain (XPENDING 0)",
        || {
            let summary: Vec<Value> = cmd("XPENDING").arg(STREAM).arg(GROUP).query(&mut c).ok()?;
            let total: i64 = redis::from_redis_value(summary[0].clone()).ok()?;
            let groups: Vec<Value> = cmd("XINFO").arg("GROUPS").arg(STREAM).query(&mut c).ok()?;
            let delivered = str_field(&groups[0], "last-delivered-id");
            (total == 0 && delivered == last).then_some(())
        },
    );
    stop.store(true, Ordering::Relaxed);
    for h in clients {
        h.join().expect("client thread");
    }
    let elapsed = t0.elapsed();

    // The final state, and the same state again after one more SIGKILL.
    let (pel, dlq_raw) = pel_and_dlq(&mut c, STREAM, GROUP, DLQ);
    drop(c);
    s.kill();
    s.restart();
    let mut c = s.conn();
    assert_eq!(
        pel_and_dlq(&mut c, STREAM, GROUP, DLQ),
        (pel.clone(), dlq_raw.clone()),
        "state after a last SIGKILL"
    );
    assert!(pel.is_empty(), "pending at the end: {pel:?}");
    let stream = xrange(&mut c, STREAM.as_bytes());
    let produced: Vec<String> = (1..=N).map(|i| format!("{i}-0")).collect();
    assert_eq!(
        stream.iter().map(|e| e.0.clone()).collect::<Vec<_>>(),
        produced,
        "the stream holds exactly the produced entries"
    );

    let ledger = Arc::try_unwrap(ledger)
        .ok()
        .expect("all clients joined")
        .into_inner()
        .unwrap();
    let dlq = dead_of(&dlq_raw);

    // Where each produced ID ended.
    let mut acked: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (id, who) in &ledger.acked {
        acked.entry(id.as_str()).or_default().push(who.as_str());
    }
    let mut dead: BTreeMap<&str, Vec<&Dead>> = BTreeMap::new();
    for d in &dlq {
        dead.entry(d.id.as_str()).or_default().push(d);
    }
    let unsure: BTreeSet<&str> = ledger.unsure.iter().map(|u| u.0.as_str()).collect();
    let produced_set: BTreeSet<&str> = produced.iter().map(|s| s.as_str()).collect();
    for id in acked.keys().chain(dead.keys()) {
        assert!(produced_set.contains(id), "{id} was never produced");
    }

    let duplicated: Vec<String> = produced
        .iter()
        .filter_map(|id| {
            let a = acked.get(id.as_str()).map_or(0, |v| v.len());
            let d = dead.get(id.as_str()).map_or(0, |v| v.len());
            (a + d > 1).then(|| {
                format!(
                    "{id}: acked by {:?}, {d} time(s) in the DLQ",
                    acked.get(id.as_str())
                )
            })
        })
        .collect();
    let missing: Vec<&str> = produced
        .iter()
        .map(|s| s.as_str())
        .filter(|id| !acked.contains_key(id) && !dead.contains_key(id))
        .collect();
    let ack_reply_lost: Vec<&str> = missing
        .iter()
        .copied()
        .filter(|id| unsure.contains(id))
        .collect();
    let lost: Vec<&str> = missing
        .iter()
        .copied()
        .filter(|id| !unsure.contains(id))
        .collect();

    let poison_ids: BTreeSet<String> = poison.iter().map(|i| format!("{i}-0")).collect();
    let mut poison_dead = 0;
    let mut limit_dead = Vec::new();
    let mut undercounted = Vec::new();
    for (id, ds) in &dead {
        let d = ds[0];
        let n: u64 = id.trim_end_matches("-0").parse().unwrap();
        // The original fields, intact and in order.
        let mut want = vec![(b"n".to_vec(), n.to_string().into_bytes())];
        if poison_ids.contains(*id) {
            want.push((b"poison".to_vec(), b"1".to_vec()));
            poison_dead += 1;
        } else {
            limit_dead.push(format!("{id} ({} deliveries)", d.deliveries));
        }
        assert_eq!(d.fields, want, "fields of DLQ entry {id}");
        // Nothing is dead-lettered before its delivery count reached MAX-DELIVERIES.
        assert!(
            d.deliveries >= MAX_DELIVERIES,
            "{id} dead-lettered after only {} deliveries",
            d.deliveries
        );
        // Redis (7.0) raises the delivery count of a history read (`XREADGROUP ... 0`) in memory
        // only: it is neither written to the AOF nor replicated, so a SIGKILL can take the count
        // below the deliveries clients saw. Counted, not asserted.
        let received = ledger.seen.get(*id).copied().unwrap_or(0) as i64;
        if received > d.deliveries {
            undercounted.push(format!(
                "{id} (received {received}, moved at count {})",
                d.deliveries
            ));
        }
    }
    for id in &poison_ids {
        assert!(
            !acked.contains_key(id.as_str()),
            "poison entry {id} acked by {:?}",
            acked[id.as_str()]
        );
        assert_eq!(
            dead.get(id.as_str()).map_or(0, |v| v.len()),
            1,
            "poison entry {id} is in the DLQ exactly once"
        );
    }
    let redelivered = ledger.seen.values().filter(|&&n| n > 1).count();

    println!("crash test figures (seed {seed}):");
    println!(
        "  produced:                 {N} ({} poison)",
        poison_ids.len()
    );
    println!(
        "  server SIGKILLs:          {} at {at:?} ms (restart + AOF load: {restarts_ms:?} ms), plus one after the drain",
        at.len()
    );
    println!(
        "  worker deaths:            {} (mid-batch); client disconnects: {}; producer reconnects: {producer_reconnects}",
        ledger.deaths, ledger.disconnects
    );
    println!(
        "  processed (acked, logged): {} ({} by the recovery worker)",
        acked.len(),
        acked.values().filter(|v| v.contains(&CLAIMANT)).count()
    );
    println!(
        "  acked, reply lost in a crash: {} (in no log, not in the DLQ, not pending: their XACK was sent when the server died)",
        ack_reply_lost.len()
    );
    println!(
        "  dead-lettered:            {} ({poison_dead} poison + {} non-poison that hit MAX-DELIVERIES {MAX_DELIVERIES} through crashes/deaths: {limit_dead:?})",
        dlq.len(),
        limit_dead.len()
    );
    println!(
        "  DLQ entries received more often than their count says (history-read counts lost in a \
         SIGKILL): {} {undercounted:?}",
        undercounted.len()
    );
    println!("  pending:                  {}", pel.len());
    println!("  lost:                     {}", lost.len());
    println!("  duplicated:               {}", duplicated.len());
    println!(
        "  redelivered (received more than once): {redelivered}; XACK returned 0: {}; entries received: {}",
        ledger.acked_zero.len(),
        ledger.received
    );
    println!("  run time:                 {:.1} s", elapsed.as_secs_f64());

    assert!(duplicated.is_empty(), "duplicated: {duplicated:?}");
    assert!(
        lost.is_empty(),
        "lost (in no log, not in the DLQ, not pending, and no XACK of theirs was in flight at a \
         crash): {lost:?}"
    );
    assert_eq!(
        acked.len() + dlq.len() + ack_reply_lost.len(),
        N as usize,
        "every produced entry is in exactly one place"
    );
    // Counters restart with the server; the log (appended across restarts) keeps every panic.
    let log = s.log();
    assert!(
        !log.contains("reclaim: internal error"),
        "a panic was caught in the module; log:\n{log}"
    );
}
