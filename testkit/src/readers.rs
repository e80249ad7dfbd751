//! Workers that take deliveries with `RECLAIM.READGROUP`. The sweep only moves the entries of
//! consumers that went quiet into the claimant's inbox (a move is not a delivery); a worker's read
//! hands them to worker code again, one delivery each (`XCLAIM`: count + 1, idle 0), and
//! dead-letters instead an entry whose next delivery would pass `MAX-DELIVERIES`.

use redis::{cmd, Connection, Value};

use crate::streams::Entry;
use crate::wait::wait_for;

/// The command `RECLAIM.READGROUP GROUP g <consumer> COUNT n [BLOCK ms] STREAMS s >`.
pub fn readgroup_cmd(
    s: impl AsRef<[u8]>,
    g: impl AsRef<[u8]>,
    consumer: impl AsRef<[u8]>,
    n: usize,
    block: Option<u64>,
) -> redis::Cmd {
    let mut k = cmd("RECLAIM.READGROUP");
    k.arg("GROUP")
        .arg(g.as_ref())
        .arg(consumer.as_ref())
        .arg("COUNT")
        .arg(n);
    if let Some(ms) = block {
        k.arg("BLOCK").arg(ms);
    }
    k.arg("STREAMS").arg(s.as_ref()).arg(">");
    k
}

/// Runs [`readgroup_cmd`]: the entries of stream `s` the worker got, redeliveries first (none on
/// nil). Names are binary-safe.
pub fn readgroup(
    c: &mut Connection,
    s: impl AsRef<[u8]>,
    g: impl AsRef<[u8]>,
    consumer: impl AsRef<[u8]>,
    n: usize,
    block: Option<u64>,
) -> Vec<Entry> {
    let v: Value = readgroup_cmd(s, g, consumer, n, block)
        .query(c)
        .expect("RECLAIM.READGROUP");
    entries_of(&v)
}

/// The entries of a one-stream `XREADGROUP`-shaped reply (RESP2 array or RESP3 map; nil: none).
pub fn entries_of(v: &Value) -> Vec<Entry> {
    let streams: Vec<(Vec<u8>, Vec<Entry>)> = match v {
        Value::Nil => return Vec::new(),
        Value::Map(m) => m
            .iter()
            .map(|(k, e)| {
                (
                    redis::from_redis_value(k.clone()).expect("key"),
                    redis::from_redis_value(e.clone()).expect("entries"),
                )
            })
            .collect(),
        v => redis::from_redis_value(v.clone()).expect("XREADGROUP shape"),
    };
    assert!(streams.len() <= 1, "{streams:?}");
    streams.into_iter().flat_map(|(_, e)| e).collect()
}

/// The IDs of the entries waiting in `claimant`'s inbox (`XPENDING s g - + 1000000 claimant`).
pub fn inbox_ids(
    c: &mut Connection,
    s: impl AsRef<[u8]>,
    g: impl AsRef<[u8]>,
    claimant: impl AsRef<[u8]>,
) -> Vec<String> {
    let v: Vec<(String, Vec<u8>, i64, i64)> = cmd("XPENDING")
        .arg(s.as_ref())
        .arg(g.as_ref())
        .arg("-")
        .arg("+")
        .arg(1_000_000)
        .arg(claimant.as_ref())
        .query(c)
        .expect("XPENDING of the claimant");
    v.into_iter().map(|(id, ..)| id).collect()
}

/// A worker whose handler fails (it never acknowledges) takes the inbox: waits until `n` entries
/// wait in `claimant`'s inbox (the sweep moved them there), then reads with `RECLAIM.READGROUP`
/// until it got each of them, one delivery each. Returns (ID, delivery count) of each entry it
/// got, in order, the count read in the same transaction as the hand-over (so it is exact even if
/// the entry goes stale right after). It must get nothing else: the test has no new entries and no
/// other stale entry the read could hand out (an entry at its limit is dead-lettered by the read
/// instead, and not returned).
pub fn take_inbox(
    c: &mut Connection,
    s: impl AsRef<[u8]>,
    g: impl AsRef<[u8]>,
    claimant: impl AsRef<[u8]>,
    worker: impl AsRef<[u8]>,
    n: usize,
) -> Vec<(String, i64)> {
    let (s, g, claimant, worker) = (s.as_ref(), g.as_ref(), claimant.as_ref(), worker.as_ref());
    let inbox = wait_for(20, &format!("{n} entries in the inbox"), || {
        let ids = inbox_ids(c, s, g, claimant);
        (ids.len() >= n).then_some(ids)
    });
    assert_eq!(
        inbox.len(),
        n,
        "the inbox holds exactly the entries to take"
    );
    let mut got: Vec<(String, i64)> = Vec::new();
    wait_for(20, "the worker to get every inbox entry", || {
        let mut tx = redis::pipe();
        tx.atomic()
            .add_command(readgroup_cmd(s, g, worker, n - got.len(), None))
            .cmd("XPENDING")
            .arg(s)
            .arg(g)
            .arg("-")
            .arg("+")
            .arg(1_000_000)
            .arg(worker);
        type Reply = (Value, Vec<(String, Vec<u8>, i64, i64)>);
        let (v, mine): Reply = tx.query(c).expect("MULTI RECLAIM.READGROUP XPENDING EXEC");
        for (id, _) in entries_of(&v) {
            let n = mine
                .iter()
                .find(|p| p.0 == id)
                .unwrap_or_else(|| panic!("{id} was handed over but is not the worker's"))
                .3;
            got.push((id, n));
        }
        (got.len() == n).then_some(())
    });
    let mut ids: Vec<String> = got.iter().map(|e| e.0.clone()).collect();
    ids.sort();
    let mut want = inbox.clone();
    want.sort();
    assert_eq!(ids, want, "the worker got exactly the inbox");
    got
}
