//! Redis Cluster under topology changes, as a team runs it: 3 primaries + 3 replicas (AOF on,
//! `cluster-node-timeout 2000`), six streams with policies (stream, DLQ and policy in one slot by
//! hash tag), redis-py `RedisCluster` producers and workers on `RECLAIM.READGROUP` with 2% poison
//! entries (tests/python/cluster_workers.py), and, under that load, two `redis-cli --cluster
//! reshard` moves of a stream's slot, a `CLUSTER FAILOVER`, and a primary killed with SIGKILL.
//!
//! Asserted from the workers' own log and the cluster's final state: every entry whose XADD was
//! acknowledged is handled (acknowledged by a worker, or, for a poison entry, in its DLQ exactly
//! once); no entry is handed to a handler more than MAX-DELIVERIES times; every stream a change
//! touched is served again within 2 s + the node timeout; and no redirect or cluster error
//! (MOVED, ASK, TRYAGAIN, CROSSSLOT, CLUSTERDOWN, or a plain error about a non-local key, a
//! read-only replica or a cluster that is down) reaches the worker code: the client handles them.
//!
//! Needs python3 with redis-py 5 or later in `.cache/py` (`make py-deps`); `#[ignore]`d, run by
//! `make test-cluster` (on the system redis-server and on Redis 8.2). The figures it measures are
//! printed (run with `--nocapture` to see them).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::{Child, ChildStdin, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reclaim_testkit::*;

const GROUP: &str = "g";
const MAX_DELIVERIES: usize = 3;
const NODE_TIMEOUT_MS: u64 = 2000;
/// What "served again" may take after a topology change: 2 s + the node timeout.
const SERVED_AGAIN_MS: i64 = 2000 + NODE_TIMEOUT_MS as i64;

fn epoch_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The producers and workers (one Python process), killed on drop.
struct Workers {
    child: Child,
    stdin: Option<ChildStdin>,
    log: std::path::PathBuf,
}

impl Workers {
    fn start(seeds: &[String], streams: &[String], log: std::path::PathBuf) -> Workers {
        let mut child = python()
            .arg(project_dir().join("tests/python/cluster_workers.py"))
            .args(["--seeds", &seeds.join(",")])
            .args(["--streams", &streams.join(",")])
            .args(["--group", GROUP, "--consumers", "2", "--rate", "20"])
            .args(["--poison-every", "50", "--block", "500"])
            .arg("--log")
            .arg(&log)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start tests/python/cluster_workers.py");
        let stdin = child.stdin.take();
        Workers { child, stdin, log }
    }

    fn say(&mut self, line: &str) {
        if let Some(s) = self.stdin.as_mut() {
            let _ = writeln!(s, "{line}");
            let _ = s.flush();
        }
    }

    fn events(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Stops everything and waits for the process (killed after 30 s).
    fn stop(&mut self) {
        self.say("stop");
        self.stdin = None;
        wait_for(30, "the workers to stop", || {
            matches!(self.child.try_wait(), Ok(Some(_))).then_some(())
        });
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A topology change: when the operator acted (`start`), when the topology had changed (`end`:
/// the slot handed over, the replica a primary), both in ms since the epoch, and the streams it
/// moved.
#[derive(Debug)]
struct Change {
    what: String,
    start: i64,
    end: i64,
    streams: Vec<String>,
}

fn s(v: &serde_json::Value, k: &str) -> String {
    v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string()
}

fn i(v: &serde_json::Value, k: &str) -> i64 {
    v.get(k).and_then(|x| x.as_i64()).unwrap_or(0)
}

/// An error that a cluster client handles and the worker code should never see.
fn is_cluster_error(msg: &str) -> bool {
    const SIGNS: [&str; 9] = [
        "MOVED",
        "ASK",
        "TRYAGAIN",
        "CROSSSLOT",
        "CLUSTERDOWN",
        "non local key",
        "read only replica",
        "cluster is down",
        "Hash slot",
    ];
    SIGNS.iter().any(|x| msg.contains(x))
}

/// How a change kept a stream from being served, from its sorted delivery times `times`:
/// `(outage, after)`, the longest time without a delivery from `c.start` until the first delivery
/// after `c.end`, and the time from `c.end` to that delivery. `None` when it was never served
/// after the change.
fn unserved_ms(times: &[i64], c: &Change) -> Option<(i64, i64)> {
    let first_after = *times.iter().find(|&&t| t > c.end)?;
    let mut prev = c.start;
    let mut longest = 0;
    for &t in times
        .iter()
        .filter(|&&t| t > c.start)
        .take_while(|&&t| t <= first_after)
    {
        longest = longest.max(t - prev);
        prev = t;
    }
    Some((longest, first_after - c.end))
}

/// The six streams of the scenario, two per primary (`pa`, `pb`, `pc`), each with its group and
/// a policy (DLQ in its slot): `(name, stream)`. The first of A's and of C's is in its primary's
/// lowest slot: the one `redis-cli --cluster reshard --cluster-slots 1` moves.
fn six_streams(cl: &Cluster, [pa, pb, pc]: [usize; 3]) -> Vec<(&'static str, String)> {
    let low = |n: usize| cl.lowest_slot(n);
    let slots = [
        ("a1", low(pa)),
        ("a2", low(pa) + 700),
        ("b1", low(pb) + 300),
        ("b2", low(pb) + 900),
        ("c1", low(pc)),
        ("c2", low(pc) + 500),
    ];
    let streams: Vec<(&str, String)> = slots
        .iter()
        .map(|(name, slot)| (*name, format!("{}jobs", tag_for_slot(name, *slot))))
        .collect();
    for (_, st) in &streams {
        let mut c = cl.conn(cl.owner(key_slot(st.as_bytes())));
        let _: () = cmd("XGROUP")
            .arg("CREATE")
            .arg(st)
            .arg(GROUP)
            .arg("$")
            .arg("MKSTREAM")
            .query(&mut c)
            .expect("XGROUP CREATE");
        let _: () = cmd("RECLAIM.POLICY")
            .arg("SET")
            .arg(st)
            .arg(GROUP)
            .arg("MIN-IDLE")
            .arg(3000)
            .arg("MAX-DELIVERIES")
            .arg(MAX_DELIVERIES)
            .arg("DLQ")
            .arg(dlq_of(st))
            .arg("INTERVAL")
            .arg(500)
            .query(&mut c)
            .expect("RECLAIM.POLICY SET");
    }
    streams
}

/// The DLQ of stream `st`, in its slot.
fn dlq_of(st: &str) -> String {
    st.replace("jobs", "dlq")
}

/// A connection to the primary that serves `key` now.
fn owner_conn(cl: &Cluster, key: &str) -> Connection {
    cl.conn(cl.owner(key_slot(key.as_bytes())))
}

/// Under the workers' load (3 s between changes): two reshards (A's lowest slot, stream a1, to B;
/// C's, stream c1, to A), a `CLUSTER FAILOVER` of B and a SIGKILL of B's new primary.
fn topology_changes(
    cl: &mut Cluster,
    streams: &[(&str, String)],
    [pa, pb, pc]: [usize; 3],
) -> Vec<Change> {
    let load = || std::thread::sleep(Duration::from_secs(3));
    let stream_of = |name: &str| {
        let st = streams.iter().find(|x| x.0 == name).expect("a stream");
        st.1.clone()
    };
    // The streams node `n` serves now.
    let served_by = |cl: &Cluster, n: usize| -> Vec<String> {
        streams
            .iter()
            .map(|(_, st)| st.clone())
            .filter(|st| cl.owner(key_slot(st.as_bytes())) == n)
            .collect()
    };
    load();
    let mut changes = Vec::new();
    for (what, from, to, name) in [
        ("reshard a1 A->B", pa, pb, "a1"),
        ("reshard c1 C->A", pc, pa, "c1"),
    ] {
        let start = epoch_ms();
        cl.reshard(from, to, 1);
        changes.push(Change {
            what: what.into(),
            start,
            end: epoch_ms(),
            streams: vec![stream_of(name)],
        });
        assert_eq!(cl.owner(key_slot(stream_of(name).as_bytes())), to);
        cl.wait_ok(30);
        load();
    }
    // CLUSTER FAILOVER of B (now serving b1, b2 and a1) to its replica.
    let rb = cl.replicas_of(pb)[0];
    let moved = served_by(cl, pb);
    let start = epoch_ms();
    cl.failover(rb);
    changes.push(Change {
        what: "CLUSTER FAILOVER B".into(),
        start,
        end: epoch_ms(),
        streams: moved,
    });
    cl.wait_replicas_synced(30);
    load();
    // SIGKILL of the new primary of B's slots: its replica (B, demoted by the failover) takes
    // over after the node timeout.
    let moved = served_by(cl, rb);
    let start = epoch_ms();
    cl.kill(rb);
    cl.wait_promoted(pb, 60);
    changes.push(Change {
        what: "SIGKILL of B's primary".into(),
        start,
        end: epoch_ms(),
        streams: moved,
    });
    cl.wait_primary(pb, 60);
    load();
    changes
}

/// Stops the producers, waits until every stream is drained (nothing pending, the group has
/// read up to the last entry), then stops the workers.
fn drain(cl: &Cluster, w: &mut Workers, streams: &[String]) {
    w.say("stop-producers");
    wait_for(30, "the producers to stop", || {
        w.events()
            .iter()
            .any(|e| s(e, "ev") == "producers-stopped")
            .then_some(())
    });
    let backlog = || -> Vec<(String, i64, bool)> {
        streams
            .iter()
            .map(|st| {
                let (pending, read_all) = drain_state(&mut owner_conn(cl, st), st);
                (st.clone(), pending, read_all)
            })
            .filter(|(_, p, all)| *p != 0 || !all)
            .collect()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(90 * slowdown());
    loop {
        let left = backlog();
        if left.is_empty() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not drained after 90 s (stream, pending, read to the end): {left:?}\n{}\n{}",
            summary(&w.events()),
            cl.logs_tail(15)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    w.stop();
}

/// What the workers' log says: what was added (acknowledged XADDs, poison or not), handed to
/// handlers (runs per entry, delivery times per stream), acknowledged, and the errors that
/// reached the worker code.
#[derive(Default)]
struct Tally {
    poison: BTreeMap<(String, String), bool>,
    runs: BTreeMap<(String, String), usize>,
    acked: BTreeSet<(String, String)>,
    times: BTreeMap<String, Vec<i64>>,
    errors: BTreeMap<String, usize>,
    cluster_errors: Vec<String>,
}

fn tally(events: &[serde_json::Value]) -> Tally {
    let mut t = Tally::default();
    for e in events {
        let key = (s(e, "s"), s(e, "id"));
        match s(e, "ev").as_str() {
            "add" => {
                t.poison.insert(key, i(e, "poison") == 1);
            }
            "deliver" => {
                *t.runs.entry(key.clone()).or_default() += 1;
                t.times.entry(key.0).or_default().push(i(e, "t"));
            }
            "ack" => {
                t.acked.insert(key);
            }
            "error" => {
                let msg = s(e, "msg");
                let kind = if msg.starts_with("UNBLOCKED") {
                    "UNBLOCKED".to_string()
                } else {
                    s(e, "type")
                };
                *t.errors
                    .entry(format!("{} {kind}", s(e, "who")))
                    .or_default() += 1;
                if is_cluster_error(&msg) {
                    t.cluster_errors.push(e.to_string());
                }
            }
            _ => {}
        }
    }
    t
}

/// How many times each (stream, entry ID) is in its stream's DLQ.
fn dead_letters(cl: &Cluster, streams: &[String]) -> BTreeMap<(String, String), usize> {
    let mut dead: BTreeMap<(String, String), usize> = BTreeMap::new();
    for st in streams {
        let dlq = dlq_of(st);
        let entries: redis::Value = cmd("XRANGE")
            .arg(&dlq)
            .arg("-")
            .arg("+")
            .query(&mut owner_conn(cl, &dlq))
            .expect("XRANGE dlq");
        for e in items(&entries) {
            let fields = pairs(&items(e)[1]);
            let id = fields
                .iter()
                .find(|(k, _)| k == "reclaim-id")
                .map(|(_, v)| text(v).unwrap_or_default())
                .unwrap_or_default();
            *dead.entry((st.clone(), id)).or_default() += 1;
        }
    }
    dead
}

/// Nothing acknowledged lost: every normal entry acknowledged by a worker, every poison entry in
/// its stream's DLQ exactly once; no handler ran more than MAX-DELIVERIES times on an entry; no
/// cluster error reached the worker code.
fn assert_nothing_lost(t: &Tally, dead: &BTreeMap<(String, String), usize>) {
    assert!(t.poison.values().any(|p| *p), "no poison entry was added");
    for (key, &is_poison) in &t.poison {
        if is_poison {
            assert_eq!(
                dead.get(key),
                Some(&1),
                "poison entry {key:?} in its DLQ once"
            );
        } else {
            assert!(t.acked.contains(key), "entry {key:?} never acknowledged");
            assert!(
                !dead.contains_key(key),
                "normal entry {key:?} dead-lettered"
            );
        }
    }
    let worst = t.runs.iter().max_by_key(|(_, n)| **n);
    if let Some((key, n)) = worst {
        assert!(*n <= MAX_DELIVERIES, "{key:?} handled {n} times");
    }
    assert!(
        t.cluster_errors.is_empty(),
        "cluster errors reached the workers: {:#?}",
        t.cluster_errors
    );
}

/// Every stream a change moved was served again within 2 s + the node timeout of the change
/// (the slot handed over, the replica promoted), and was not left unserved longer than the
/// change took plus that.
fn assert_served_again(changes: &[Change], times: &BTreeMap<String, Vec<i64>>) {
    let mut late = Vec::new();
    for c in changes {
        for st in &c.streams {
            let t = times.get(st).cloned().unwrap_or_default();
            let took = c.end - c.start;
            let gap = unserved_ms(&t, c);
            eprintln!(
                "  {} (changed after {took} ms): {st} {}",
                c.what,
                gap.map_or("never served again".into(), |(outage, after)| format!(
                    "served again {after} ms after the change, unserved for {outage} ms"
                ))
            );
            let ok = gap.is_some_and(|(outage, after)| {
                after <= SERVED_AGAIN_MS && outage <= took + SERVED_AGAIN_MS
            });
            if !ok {
                late.push((c.what.clone(), st.clone(), gap));
            }
        }
    }
    assert!(
        late.is_empty(),
        "streams not served again within {SERVED_AGAIN_MS} ms: {late:?}"
    );
}

#[test]
#[ignore = "a 6-node cluster with redis-py workers: make test-cluster"]
fn workers_follow_reshards_a_failover_and_a_killed_primary() {
    let mut cl = Cluster::start(3, 1, NODE_TIMEOUT_MS, &[]);
    let p = cl.primaries();
    assert_eq!(p.len(), 3, "{:?}", cl.topology());
    let primaries = [p[0], p[1], p[2]];
    let named = six_streams(&cl, primaries);
    let streams: Vec<String> = named.iter().map(|(_, st)| st.clone()).collect();

    let dir = tempfile::tempdir().expect("tempdir");
    let mut w = Workers::start(&cl.addrs(), &streams, dir.path().join("events.jsonl"));
    wait_for(60, "a first delivery on every stream", || {
        let served: BTreeSet<String> = w
            .events()
            .iter()
            .filter(|e| s(e, "ev") == "deliver")
            .map(|e| s(e, "s"))
            .collect();
        (served.len() == streams.len()).then_some(())
    });
    let changes = topology_changes(&mut cl, &named, primaries);
    drain(&cl, &mut w, &streams);
    let t = tally(&w.events());
    let dead = dead_letters(&cl, &streams);
    eprintln!(
        "cluster chaos on {}: {} entries added ({} poison), {} handler runs, {} dead-lettered; errors that reached workers: {:?}",
        server_binary(),
        t.poison.len(),
        t.poison.values().filter(|p| **p).count(),
        t.runs.values().sum::<usize>(),
        dead.len(),
        t.errors
    );
    assert_nothing_lost(&t, &dead);
    assert_served_again(&changes, &t.times);
    drop(cl);
}

/// Per stream, how many events of each kind the workers logged, and the last errors: for a
/// failure's message.
fn summary(events: &[serde_json::Value]) -> String {
    let mut kinds: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut last_errors: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in events {
        *kinds.entry((s(e, "s"), s(e, "ev"))).or_default() += 1;
        if s(e, "ev") == "error" {
            let v = last_errors.entry(s(e, "s")).or_default();
            v.push(format!(
                "{} {} {}: {}",
                i(e, "t"),
                s(e, "who"),
                s(e, "type"),
                s(e, "msg")
            ));
            if v.len() > 4 {
                v.remove(0);
            }
        }
    }
    format!("events: {kinds:?}\nlast errors: {last_errors:#?}")
}

/// The group's pending count on `st` and whether it has read up to the stream's last entry
/// (`XINFO GROUPS` last-delivered-id = `XINFO STREAM` last-generated-id; `lag` may be unknown
/// after a failover).
fn drain_state(c: &mut Connection, st: &str) -> (i64, bool) {
    let groups: redis::Value = cmd("XINFO")
        .arg("GROUPS")
        .arg(st)
        .query(c)
        .unwrap_or(redis::Value::Nil);
    let Some(g) = items(&groups)
        .iter()
        .find(|g| str_field(g, "name") == GROUP)
    else {
        return (-1, false);
    };
    let info: redis::Value = cmd("XINFO")
        .arg("STREAM")
        .arg(st)
        .query(c)
        .unwrap_or(redis::Value::Nil);
    let last = match &info {
        redis::Value::Array(_) | redis::Value::Map(_) => str_field(&info, "last-generated-id"),
        _ => String::new(),
    };
    (
        int_field(g, "pending"),
        str_field(g, "last-delivered-id") == last,
    )
}
