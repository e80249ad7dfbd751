//! Workers that take deliveries with `RECLAIM.READGROUP`. The sweep only moves the entries of
//! consumers that went quiet into the claimant's inbox (a move is not a delivery); a worker's read
//! hands them to worker code again, one delivery each (`XCLAIM`: count + 1, idle 0), and
//! dead-letters instead an entry whose next delivery would pass `MAX-DELIVERIES`.

use redis::{cmd, Connection, Value};

use crate::streams::Entry;
use crate::wait::wait_for;

/// `RECLAIM.READGROUP GROUP g <consumer> COUNT n [BLOCK ms] STREAMS s >`: the entries of stream `s`
/// the worker got, redeliveries first (none on nil). Names are binary-safe.
pub fn readgroup(
    c: &mut Connection,
    s: impl AsRef<[u8]>,
    g: impl AsRef<[u8]>,
    consumer: impl AsRef<[u8]>,
    n: usize,
    block: Option<u64>,
) -> Vec<Entry> {
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
    let v: Value = k.query(c).expect("RECLAIM.READGROUP");
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
/// until it got each of them, one delivery each; returns what it got, in order. It must get
/// nothing else: the test has no new entries and no other stale entry the read could hand out
/// (an entry at its limit is dead-lettered by the read instead, and not returned).
pub fn take_inbox(
    c: &mut Connection,
    s: impl AsRef<[u8]>,
    g: impl AsRef<[u8]>,
    claimant: impl AsRef<[u8]>,
    worker: impl AsRef<[u8]>,
    n: usize,
) -> Vec<Entry> {
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
    let mut got: Vec<Entry> = Vec::new();
    wait_for(20, "the worker to get every inbox entry", || {
        got.extend(readgroup(c, s, g, worker, n - got.len(), None));
        (got.len() == n).then_some(())
    });
    let mut ids: Vec<String> = got.iter().map(|e| e.0.clone()).collect();
    ids.sort();
    let mut want = inbox.clone();
    want.sort();
    assert_eq!(ids, want, "the worker got exactly the inbox");
    got
}
