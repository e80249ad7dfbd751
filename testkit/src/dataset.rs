//! A server's whole dataset, key by key, in a form two servers can be compared in: what a
//! restart, a reload or a sync must keep. Each key is read as its type's commands see it (not
//! its `DUMP` bytes, whose encodings may differ between two servers holding the same data); a
//! key of a module type is kept as its `DUMP` payload (the module's own serialization).
//!
//! Left out on purpose, because Redis itself does not keep them across a restart or a sync:
//! idle and delivery times, consumers' seen/active times, a stream's radix-tree layout, the exact
//! TTL (only whether the key has one is kept).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use redis::{cmd, Connection, Value};

/// One key's content, normalized.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// `TYPE` (`string`, `stream`, ..., or the module type's name).
    pub kind: String,
    /// Whether the key has a TTL.
    pub volatile: bool,
    /// The content as lines of text (binary bytes escaped), in a fixed order.
    pub content: Vec<String>,
}

/// Every key of the databases read, by (database, key name).
pub type Dataset = BTreeMap<(i64, Vec<u8>), KeyValue>;

/// What to read of a stream's consumer groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamDetail {
    /// Delivery counts of pending entries (Redis raises them on a history read, `XREADGROUP ...
    /// 0`, on the primary only: leave them out where such reads ran).
    pub delivery_counts: bool,
}

impl Default for StreamDetail {
    fn default() -> Self {
        StreamDetail {
            delivery_counts: true,
        }
    }
}

/// Bytes as text: printable ASCII kept, anything else `\xNN`.
pub fn escape(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len());
    for &c in b {
        if (0x20..0x7f).contains(&c) && c != b'\\' {
            s.push(c as char);
        } else {
            let _ = write!(s, "\\x{c:02x}");
        }
    }
    s
}

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => escape(b),
        Value::SimpleString(s) => s.clone(),
        Value::VerbatimString { text, .. } => text.clone(),
        Value::Okay => "OK".into(),
        Value::Int(i) => i.to_string(),
        Value::Double(d) => d.to_string(),
        Value::Boolean(b) => b.to_string(),
        Value::Nil => "(nil)".into(),
        Value::Array(a) | Value::Set(a) => {
            let parts: Vec<String> = a.iter().map(text).collect();
            format!("[{}]", parts.join(" "))
        }
        Value::Map(m) => {
            let parts: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{}={}", text(k), text(v)))
                .collect();
            format!("{{{}}}", parts.join(" "))
        }
        other => format!("{other:?}"),
    }
}

fn list(v: Value) -> Vec<Value> {
    match v {
        Value::Array(a) | Value::Set(a) => a,
        Value::Map(m) => m.into_iter().flat_map(|(k, v)| [k, v]).collect(),
        Value::Nil => Vec::new(),
        other => vec![other],
    }
}

/// Field/value pairs of a RESP2 flat array or a RESP3 map, field names as text.
fn fields(v: Value) -> Vec<(String, Value)> {
    let items = list(v);
    items
        .chunks(2)
        .filter(|c| c.len() == 2)
        .map(|c| (text(&c[0]), c[1].clone()))
        .collect()
}

fn get(f: &[(String, Value)], name: &str) -> String {
    f.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| text(v))
        .unwrap_or_else(|| "-".into())
}

fn query(con: &mut Connection, args: &[&[u8]]) -> redis::RedisResult<Value> {
    let mut c = cmd(std::str::from_utf8(args[0]).unwrap_or("PING"));
    for a in &args[1..] {
        c.arg(*a);
    }
    c.query(con)
}

/// Reads one key (in the database selected on `con`); `None` when it is gone.
pub fn read_key(
    con: &mut Connection,
    key: &[u8],
    detail: StreamDetail,
) -> redis::RedisResult<Option<KeyValue>> {
    let kind = text(&query(con, &[b"TYPE", key])?);
    if kind == "none" {
        return Ok(None);
    }
    let pttl: i64 = redis::from_redis_value(query(con, &[b"PTTL", key])?).unwrap_or(-1);
    let mut content = Vec::new();
    match kind.as_str() {
        "string" => content.push(text(&query(con, &[b"GET", key])?)),
        "list" => content.extend(
            list(query(con, &[b"LRANGE", key, b"0", b"-1"])?)
                .iter()
                .map(text),
        ),
        "set" => {
            let mut m: Vec<String> = list(query(con, &[b"SMEMBERS", key])?)
                .iter()
                .map(text)
                .collect();
            m.sort();
            content = m;
        }
        "hash" => {
            let mut m: Vec<String> = fields(query(con, &[b"HGETALL", key])?)
                .into_iter()
                .map(|(k, v)| format!("{k}={}", text(&v)))
                .collect();
            m.sort();
            content = m;
        }
        "zset" => {
            let items = list(query(con, &[b"ZRANGE", key, b"0", b"-1", b"WITHSCORES"])?);
            content = items
                .chunks(2)
                .map(|c| c.iter().map(text).collect::<Vec<_>>().join(" "))
                .collect();
        }
        "stream" => read_stream(con, key, detail, &mut content)?,
        _ => {
            // A module type: its own serialization.
            content.push(text(&query(con, &[b"DUMP", key])?));
        }
    }
    Ok(Some(KeyValue {
        kind,
        volatile: pttl >= 0,
        content,
    }))
}

fn read_stream(
    con: &mut Connection,
    key: &[u8],
    detail: StreamDetail,
    out: &mut Vec<String>,
) -> redis::RedisResult<()> {
    let info = fields(query(con, &[b"XINFO", b"STREAM", key])?);
    out.push(format!(
        "length={} last-generated-id={} max-deleted-entry-id={} entries-added={}",
        get(&info, "length"),
        get(&info, "last-generated-id"),
        get(&info, "max-deleted-entry-id"),
        get(&info, "entries-added"),
    ));
    for e in list(query(con, &[b"XRANGE", key, b"-", b"+"])?) {
        out.push(format!("entry {}", text(&e)));
    }
    let groups = list(query(con, &[b"XINFO", b"GROUPS", key])?);
    let mut names = Vec::new();
    for g in groups {
        let f = fields(g);
        out.push(format!(
            "group {} last-delivered-id={} entries-read={} pending={}",
            get(&f, "name"),
            get(&f, "last-delivered-id"),
            get(&f, "entries-read"),
            get(&f, "pending"),
        ));
        if let Some((_, Value::BulkString(n))) = f.iter().find(|(k, _)| k == "name") {
            names.push(n.clone());
        } else if let Some((_, Value::SimpleString(n))) = f.iter().find(|(k, _)| k == "name") {
            names.push(n.clone().into_bytes());
        }
    }
    for g in names {
        for c in list(query(con, &[b"XINFO", b"CONSUMERS", key, &g])?) {
            let f = fields(c);
            out.push(format!(
                "consumer {} {} pending={}",
                escape(&g),
                get(&f, "name"),
                get(&f, "pending")
            ));
        }
        for p in list(query(con, &[b"XPENDING", key, &g, b"-", b"+", b"100000"])?) {
            let e = list(p);
            let count = if detail.delivery_counts {
                e.get(3).map(text).unwrap_or_default()
            } else {
                "?".into()
            };
            out.push(format!(
                "pending {} {} {} count={count}",
                escape(&g),
                e.first().map(text).unwrap_or_default(),
                e.get(1).map(text).unwrap_or_default(),
            ));
        }
    }
    Ok(())
}

/// Reads every key of databases `0..dbs` of the server of `con` (leaves database 0 selected).
/// Each key is read with `KEYS *` then one read per key: use it on a quiet server (or read twice).
pub fn snapshot(
    con: &mut Connection,
    dbs: i64,
    detail: StreamDetail,
) -> redis::RedisResult<Dataset> {
    let mut out = Dataset::new();
    for db in 0..dbs {
        let _: () = cmd("SELECT").arg(db).query(con)?;
        let keys: Vec<Vec<u8>> = cmd("KEYS").arg("*").query(con)?;
        for k in keys {
            if let Some(v) = read_key(con, &k, detail)? {
                out.insert((db, k), v);
            }
        }
    }
    let _: () = cmd("SELECT").arg(0).query(con)?;
    Ok(out)
}

/// The differences between two datasets, one line each (at most `limit`), for the keys `keep`
/// accepts; empty when they hold the same.
pub fn diff(
    a: &Dataset,
    b: &Dataset,
    keep: impl Fn(i64, &[u8]) -> bool,
    limit: usize,
) -> Vec<String> {
    let mut out = Vec::new();
    let names: std::collections::BTreeSet<&(i64, Vec<u8>)> = a.keys().chain(b.keys()).collect();
    for k in names {
        if !keep(k.0, &k.1) {
            continue;
        }
        let (x, y) = (a.get(k), b.get(k));
        if x == y {
            continue;
        }
        let name = format!("db{} {}", k.0, escape(&k.1));
        let line = match (x, y) {
            (Some(x), None) => format!(
                "{name}: only in the first ({}: {})",
                x.kind,
                short(&x.content)
            ),
            (None, Some(y)) => format!(
                "{name}: only in the second ({}: {})",
                y.kind,
                short(&y.content)
            ),
            (Some(x), Some(y)) => {
                let mut d = String::new();
                if x.kind != y.kind {
                    let _ = write!(d, " type {} vs {}", x.kind, y.kind);
                }
                if x.volatile != y.volatile {
                    let _ = write!(d, " ttl {} vs {}", x.volatile, y.volatile);
                }
                if x.content != y.content {
                    let first = x
                        .content
                        .iter()
                        .zip(y.content.iter())
                        .position(|(p, q)| p != q)
                        .unwrap_or(x.content.len().min(y.content.len()));
                    let _ = write!(
                        d,
                        " content differs at line {first}: {:?} vs {:?}",
                        x.content.get(first),
                        y.content.get(first)
                    );
                }
                format!("{name}:{d}")
            }
            (None, None) => continue,
        };
        out.push(line);
        if out.len() >= limit {
            out.push("...".into());
            break;
        }
    }
    out
}

fn short(c: &[String]) -> String {
    let s = c.join(" | ");
    if s.len() > 160 {
        let mut end = 160;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &s[..end])
    } else {
        s
    }
}

/// Leaves consumer groups' `entries-read` out of `d`: Redis 7.0 does not replicate it (a replica
/// shows `(nil)` where its primary counts the entries read), so a primary and its replica are
/// compared without it.
pub fn forget_entries_read(d: &mut Dataset) {
    for v in d.values_mut() {
        if v.kind != "stream" {
            continue;
        }
        for line in v.content.iter_mut().filter(|l| l.starts_with("group ")) {
            if let Some(i) = line.find(" entries-read=") {
                let rest = &line[i + 1..];
                let end = rest.find(' ').map(|e| i + 1 + e).unwrap_or(line.len());
                line.replace_range(i..end, " entries-read=?");
            }
        }
    }
}

/// Leaves out of `d` the consumers without pending entries: a blocking `XREADGROUP` that finds
/// nothing creates its consumer on the primary, and Redis 8.2 and Valkey 8.1 do not always
/// propagate it (the primary lists the consumer; its replica, and its AOF, do not), so a
/// primary and its replica, or a server before and after it replays its AOF, are compared
/// without them.
pub fn forget_empty_consumers(d: &mut Dataset) {
    for v in d.values_mut() {
        if v.kind == "stream" {
            v.content
                .retain(|l| !(l.starts_with("consumer ") && l.ends_with(" pending=0")));
        }
    }
}
