//! The dead-letter invariant: every entry a test produced is pending or in the DLQ, never both,
//! never twice in the DLQ, never neither.

use std::collections::BTreeSet;

use redis::Connection;

use crate::streams::{entry_field, Entry, PendRaw};

/// A sorted copy.
pub fn sorted<T: Ord + Clone>(v: &[T]) -> Vec<T> {
    let mut v = v.to_vec();
    v.sort();
    v
}

/// The `reclaim-id` (source ID) of each DLQ entry, in DLQ order.
pub fn dlq_ids(dlq: &[Entry]) -> Vec<String> {
    dlq.iter()
        .map(|e| String::from_utf8(entry_field(e, "reclaim-id")).unwrap())
        .collect()
}

/// No ID twice in the DLQ (`dead`), and none both in the DLQ and pending (a DLQ append without
/// its XACK). `when` prefixes the messages.
pub fn assert_disjoint<'a>(
    pending: impl IntoIterator<Item = &'a str>,
    dead: &[String],
    when: &str,
) {
    let pending: BTreeSet<&str> = pending.into_iter().collect();
    let mut in_dlq = BTreeSet::new();
    for d in dead {
        assert!(in_dlq.insert(d.as_str()), "{when}{d} is in the DLQ twice");
        assert!(
            !pending.contains(d.as_str()),
            "{when}{d} is in the DLQ and still pending (a DLQ append without its XACK)"
        );
    }
}

/// Every ID of `all` is either pending or in the DLQ, never both, never twice in the DLQ, and
/// nothing else is in either.
pub fn assert_partition(pel: &[PendRaw], dlq: &[Entry], all: &[String]) {
    let dead = dlq_ids(dlq);
    assert_disjoint(pel.iter().map(|p| p.0.as_str()), &dead, "");
    let both: Vec<String> = pel.iter().map(|p| p.0.clone()).chain(dead).collect();
    assert_eq!(
        sorted(&both),
        sorted(all),
        "every entry is pending or dead-lettered (an XACK without its DLQ append loses it)"
    );
}

/// Checks where each DLQ entry came from: `provenance(source ID)` names the consumer it was moved
/// from and its delivery count then (`reclaim-consumer`, `reclaim-deliveries`).
pub fn assert_provenance(dlq: &[Entry], provenance: impl Fn(&str) -> (&'static str, &'static str)) {
    for e in dlq {
        let id = String::from_utf8(entry_field(e, "reclaim-id")).unwrap();
        let (consumer, n) = provenance(&id);
        assert_eq!(
            entry_field(e, "reclaim-consumer"),
            consumer.as_bytes(),
            "{e:?}"
        );
        assert_eq!(entry_field(e, "reclaim-deliveries"), n.as_bytes(), "{e:?}");
    }
}

/// The PEL of (s, g) and the entries of `dlq`, read atomically by a read-only script (it runs
/// where MULTI would be refused: Redis 7.0 rejects queuing commands while out of memory).
pub fn pel_and_dlq(c: &mut Connection, s: &str, g: &str, dlq: &str) -> (Vec<PendRaw>, Vec<Entry>) {
    type Reply = (Vec<(String, Vec<u8>, i64, i64)>, Vec<Entry>);
    let (pel, d): Reply = redis::cmd("EVAL")
        .arg(
            "return {redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1000000), \
             redis.call('XRANGE', KEYS[2], '-', '+')}",
        )
        .arg(2)
        .arg(s)
        .arg(dlq)
        .arg(g)
        .query(c)
        .expect("EVAL XPENDING XRANGE");
    (pel.into_iter().map(|(i, o, _, n)| (i, o, n)).collect(), d)
}

/// Checks that a DLQ entry's field list (as text pairs) ends with `reclaim-moved-ms` holding a
/// recent wall-clock time (ms since the epoch, within the last hour), and returns the list
/// without it: the rest can be compared exactly.
pub fn without_moved_ms(fields: &[(String, String)]) -> Vec<(String, String)> {
    let (last, rest) = fields.split_last().expect("an empty DLQ entry");
    assert_eq!(last.0, "reclaim-moved-ms", "{fields:?}");
    assert_recent_ms(last.1.as_bytes());
    rest.to_vec()
}

/// [`without_moved_ms`] for a flat, binary field list (`[field, value, ...]`).
pub fn without_moved_ms_raw(flat: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let n = flat.len();
    assert!(n >= 2 && flat[n - 2] == b"reclaim-moved-ms", "{flat:?}");
    assert_recent_ms(&flat[n - 1]);
    flat[..n - 2].to_vec()
}

fn assert_recent_ms(v: &[u8]) {
    let ms: i64 = std::str::from_utf8(v)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("reclaim-moved-ms is not a number: {v:?}"));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    assert!(
        ms <= now + 1000 && ms > now - 3_600_000,
        "reclaim-moved-ms {ms} is not a recent time (now {now})"
    );
}

/// `RECLAIM.REDRIVE <args...>` as a reply (panics on an error reply).
pub fn redrive(c: &mut Connection, args: &[&str]) -> redis::Value {
    let mut k = redis::cmd("RECLAIM.REDRIVE");
    k.arg(args);
    k.query(c)
        .unwrap_or_else(|e| panic!("RECLAIM.REDRIVE {args:?}: {e}"))
}

/// `RECLAIM.REDRIVE STATUS dlq`.
pub fn status_of(c: &mut Connection, dlq: &str) -> redis::Value {
    redrive(c, &["STATUS", dlq])
}

/// Waits until the redrive task of `dlq` reaches `state`; its STATUS then.
pub fn wait_state(c: &mut Connection, dlq: &str, state: &str, secs: u64) -> redis::Value {
    crate::wait::wait_for(secs, &format!("redrive of {dlq} in state {state}"), || {
        let v = status_of(c, dlq);
        (v != redis::Value::Nil && crate::replies::str_field(&v, "state") == state).then_some(v)
    })
}
