//! Streams and consumer groups: groups, entries, deliveries, the PEL.

use redis::{cmd, Connection, Value};

/// A stream name with a NUL, non-UTF-8 bytes and CRLF: binary safety end to end.
pub const BIN_STREAM: &[u8] = b"bin\x00\xff\r\nstream";
/// A group name with a NUL and a non-UTF-8 byte.
pub const BIN_GROUP: &[u8] = b"g\x00\xfe";

/// One pending entry as XPENDING reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pend {
    pub id: String,
    pub consumer: String,
    pub idle: i64,
    pub count: i64,
}

/// `XPENDING key group - + 1000000` as a list.
pub fn pending(con: &mut Connection, key: &str, group: &str) -> Vec<Pend> {
    let v: Vec<(String, String, i64, i64)> = xpending_all(key.as_bytes(), group.as_bytes())
        .query(con)
        .expect("XPENDING");
    v.into_iter()
        .map(|(id, consumer, idle, count)| Pend {
            id,
            consumer,
            idle,
            count,
        })
        .collect()
}

/// One pending entry, binary-safe: (id, owner, delivery count). Idle time left out: it differs
/// between servers and restarts.
pub type PendRaw = (String, Vec<u8>, i64);

/// `XPENDING key group - + 1000000` as (id, owner, count), binary-safe.
pub fn pending_raw(con: &mut Connection, key: &[u8], group: &[u8]) -> Vec<PendRaw> {
    let v: Vec<(String, Vec<u8>, i64, i64)> =
        xpending_all(key, group).query(con).expect("XPENDING");
    v.into_iter().map(|(id, c, _idle, n)| (id, c, n)).collect()
}

/// The command `XPENDING key group - + 1000000` (the extended form: every pending entry).
fn xpending_all(key: &[u8], group: &[u8]) -> redis::Cmd {
    let mut c = cmd("XPENDING");
    c.arg(key).arg(group).arg("-").arg("+").arg(1_000_000);
    c
}

/// One stream entry: (id, [field, value, ...]).
pub type Entry = (String, Vec<Vec<u8>>);

/// `XRANGE key - +`.
pub fn xrange(con: &mut Connection, key: &[u8]) -> Vec<Entry> {
    cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .query(con)
        .expect("XRANGE")
}

/// The value of `field` in a stream entry's field list.
pub fn entry_field(e: &Entry, field: &str) -> Vec<u8> {
    e.1.chunks(2)
        .find(|c| c[0] == field.as_bytes())
        .map(|c| c[1].clone())
        .unwrap_or_else(|| panic!("no field {field} in entry {e:?}"))
}

/// `XLEN key` (a `&str`, `&[u8]` or byte-string key).
pub fn xlen(con: &mut Connection, key: impl redis::ToRedisArgs) -> i64 {
    cmd("XLEN").arg(key).query(con).expect("XLEN")
}

/// `XGROUP CREATE key group $ MKSTREAM`.
pub fn create_group(con: &mut Connection, key: &[u8], group: &[u8]) {
    let _: () = cmd("XGROUP")
        .arg("CREATE")
        .arg(key)
        .arg(group)
        .arg("$")
        .arg("MKSTREAM")
        .query(con)
        .expect("XGROUP CREATE");
}

/// Appends `n` entries `n <tag>-<i>` to `key` (one pipeline); returns their IDs.
pub fn add_entries(con: &mut Connection, key: &[u8], tag: &str, n: usize) -> Vec<String> {
    let mut p = redis::pipe();
    for i in 0..n {
        p.cmd("XADD")
            .arg(key)
            .arg("*")
            .arg("n")
            .arg(format!("{tag}-{i}"));
    }
    p.query(con).expect("XADD pipeline")
}

/// The command `XREADGROUP GROUP group consumer COUNT 100000 STREAMS key >`.
pub fn read_group_cmd(key: &[u8], group: &[u8], consumer: &[u8]) -> redis::Cmd {
    let mut c = cmd("XREADGROUP");
    c.arg("GROUP")
        .arg(group)
        .arg(consumer)
        .arg("COUNT")
        .arg(100_000)
        .arg("STREAMS")
        .arg(key)
        .arg(">");
    c
}

/// `consumer` reads every new entry of `key` in `group` (and, in these tests, never acks).
pub fn read_group(con: &mut Connection, key: &[u8], group: &[u8], consumer: &[u8]) {
    let _: Value = read_group_cmd(key, group, consumer)
        .query(con)
        .expect("XREADGROUP");
}

/// The command that sets the delivery count of pending `ids` to `count` without changing the
/// owner (`XCLAIM key group owner 0 ids... RETRYCOUNT count JUSTID`).
pub fn set_deliveries_cmd(
    key: &[u8],
    group: &[u8],
    owner: &[u8],
    ids: &[String],
    count: i64,
) -> redis::Cmd {
    let mut c = cmd("XCLAIM");
    c.arg(key)
        .arg(group)
        .arg(owner)
        .arg(0)
        .arg(ids)
        .arg("RETRYCOUNT")
        .arg(count)
        .arg("JUSTID");
    c
}

/// Runs [`set_deliveries_cmd`].
pub fn set_deliveries(
    con: &mut Connection,
    key: &[u8],
    group: &[u8],
    owner: &[u8],
    ids: &[String],
    count: i64,
) {
    let v: Vec<String> = set_deliveries_cmd(key, group, owner, ids, count)
        .query(con)
        .expect("XCLAIM");
    assert_eq!(v.len(), ids.len(), "XCLAIM claimed {v:?} of {ids:?}");
}

/// Creates `group` on `key` (with the stream) unless it exists already.
pub fn ensure_group(con: &mut Connection, key: &[u8], group: &[u8]) {
    let r: redis::RedisResult<()> = cmd("XGROUP")
        .arg("CREATE")
        .arg(key)
        .arg(group)
        .arg("$")
        .arg("MKSTREAM")
        .query(con);
    if let Err(e) = r {
        assert_eq!(e.code(), Some("BUSYGROUP"), "XGROUP CREATE: {e}");
    }
}

/// The number of pending entries of a group (XPENDING summary form).
pub fn pel_total(c: &mut Connection, s: &str, g: &str) -> i64 {
    let v: Vec<Value> = crate::words::q(c, &["XPENDING", s, g]);
    redis::from_redis_value(v[0].clone()).unwrap()
}

/// One stream entry as text: ID and its field/value pairs in stored order.
pub type TextEntry = (String, Vec<(String, String)>);

/// `XRANGE k - +` as text, fields in their stored order.
pub fn xrange_text(c: &mut Connection, k: &str) -> Vec<TextEntry> {
    let raw: Vec<(String, Vec<String>)> = crate::words::q(c, &["XRANGE", k, "-", "+"]);
    raw.into_iter()
        .map(|(id, flat)| {
            assert_eq!(flat.len() % 2, 0, "odd field list in {k} {id}: {flat:?}");
            let f = flat
                .chunks(2)
                .map(|p| (p[0].clone(), p[1].clone()))
                .collect();
            (id, f)
        })
        .collect()
}

/// In one MULTI/EXEC: `consumer` reads every new entry of `key` in `group`, the delivery count of
/// `over` becomes `count`, and writes are paused for `pause_ms` (`CLIENT PAUSE ms WRITE`), so no
/// timer tick sees the entries before the pause.
pub fn deliver_then_pause(
    con: &mut Connection,
    (key, group, consumer): (&[u8], &[u8], &[u8]),
    over: &[String],
    count: i64,
    pause_ms: u64,
) {
    let mut tx = redis::pipe();
    tx.atomic();
    tx.add_command(read_group_cmd(key, group, consumer))
        .ignore();
    tx.add_command(set_deliveries_cmd(key, group, consumer, over, count))
        .ignore();
    tx.cmd("CLIENT")
        .arg("PAUSE")
        .arg(pause_ms)
        .arg("WRITE")
        .ignore();
    let () = tx.query(con).expect("transaction");
}

/// Sets owner, idle time and delivery count of the pending `ids` of (s, g) exactly
/// (`XCLAIM s g owner 0 ids... IDLE idle RETRYCOUNT n JUSTID`): a deterministic PEL.
pub fn set_pending(
    c: &mut Connection,
    (s, g): (&str, &str),
    owner: &str,
    ids: &[impl AsRef<str>],
    idle: i64,
    n: i64,
) {
    let (idle, n) = (idle.to_string(), n.to_string());
    let mut a = vec!["XCLAIM", s, g, owner, "0"];
    a.extend(ids.iter().map(|i| i.as_ref()));
    a.extend_from_slice(&["IDLE", &idle, "RETRYCOUNT", &n, "JUSTID"]);
    let got: Vec<String> = crate::words::q(c, &a);
    assert_eq!(
        got.len(),
        ids.len(),
        "XCLAIM claimed {got:?} of {} IDs",
        ids.len()
    );
}

/// (id, owner, count) of every pending entry of (s, g), in ID order: what a sweep may change,
/// without the clock.
pub fn pel_state(c: &mut Connection, s: &str, g: &str) -> Vec<(String, String, i64)> {
    pending(c, s, g)
        .into_iter()
        .map(|p| (p.id, p.consumer, p.count))
        .collect()
}

/// id -> (owner, count) of every pending entry of (s, g).
pub fn owners(
    c: &mut Connection,
    s: &str,
    g: &str,
) -> std::collections::BTreeMap<String, (String, i64)> {
    pending(c, s, g)
        .into_iter()
        .map(|p| (p.id, (p.consumer, p.count)))
        .collect()
}

/// Waits until every pending entry of (s, g) has been idle for at least `ms` (the PEL's clock):
/// for a test that needs entries stale, without a sleep.
pub fn wait_idle(c: &mut Connection, s: &str, g: &str, ms: i64) {
    crate::wait::wait_for(
        20,
        &format!("every entry of ({s}, {g}) idle for {ms} ms"),
        || pending(c, s, g).iter().all(|e| e.idle >= ms).then_some(()),
    );
}

/// Waits until the entry `id` (its ID's ms part: when `XADD ... *` added it) is at least `ms`
/// old by the server's clock.
pub fn wait_age(c: &mut Connection, id: &str, ms: i64) {
    let added: i64 = id
        .split('-')
        .next()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("not a stream ID: {id}"));
    crate::wait::wait_for(20, &format!("entry {id} {ms} ms old"), || {
        (crate::replies::server_ms(c) >= added + ms).then_some(())
    });
}

/// (owner, delivery count) of entry `id` in the PEL of (s, g), or `None` when it is not pending.
pub fn pending_of(c: &mut Connection, s: &str, g: &str, id: &str) -> Option<(String, i64)> {
    owners(c, s, g).remove(id)
}
