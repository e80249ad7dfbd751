//! Reading replies: field/value replies (RESP2 or RESP3), strings, errors, `INFO` sections.

use redis::{cmd, Connection, Value};

/// Field/value reply (RESP2 flat array or RESP3 map) as a list of (field, value) pairs.
pub fn pairs(v: &Value) -> Vec<(String, Value)> {
    match v {
        Value::Array(a) => a
            .chunks(2)
            .map(|c| {
                (
                    redis::from_redis_value::<String>(c[0].clone()).unwrap_or_default(),
                    c[1].clone(),
                )
            })
            .collect(),
        Value::Map(m) => m
            .iter()
            .map(|(k, v)| {
                (
                    redis::from_redis_value::<String>(k.clone()).unwrap_or_default(),
                    v.clone(),
                )
            })
            .collect(),
        other => panic!("not a field/value reply: {other:?}"),
    }
}

/// One field of a field/value reply (panics when it has none of that name).
pub fn field(v: &Value, name: &str) -> Value {
    let (_, val) = pairs(v)
        .into_iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no field {name} in {v:?}"));
    val
}

/// One integer field of a field/value reply.
pub fn int_field(v: &Value, name: &str) -> i64 {
    redis::from_redis_value(field(v, name)).expect("integer field")
}

/// One string field of a field/value reply.
pub fn str_field(v: &Value, name: &str) -> String {
    redis::from_redis_value(field(v, name)).expect("string field")
}

/// The bytes of a bulk/simple string reply.
pub fn bytes_of(v: &Value) -> Vec<u8> {
    match v {
        Value::BulkString(b) => b.clone(),
        Value::SimpleString(s) => s.clone().into_bytes(),
        Value::Okay => b"OK".to_vec(),
        Value::Int(i) => i.to_string().into_bytes(),
        other => panic!("not a string reply: {other:?}"),
    }
}

/// Whether a reply is `+OK`.
pub fn is_ok(v: &Value) -> bool {
    matches!(v, Value::Okay) || matches!(v, Value::SimpleString(s) if s == "OK")
}

/// A bulk string reply holding `b`, for comparing whole replies.
pub fn bs(b: &[u8]) -> Value {
    Value::BulkString(b.to_vec())
}

/// The reply of a command that must succeed (panics with the command and the error otherwise).
pub fn reply_of(con: &mut Connection, c: &redis::Cmd) -> Value {
    c.query::<Value>(con).unwrap_or_else(|e| {
        panic!(
            "{:?} failed: {e}",
            String::from_utf8_lossy(&c.get_packed_command())
        )
    })
}

/// The error text of a command that must fail.
pub fn error_of(con: &mut Connection, c: &redis::Cmd) -> String {
    match c.query::<Value>(con) {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => {
            // redis-rs splits "CODE message"; put them back together as the wire text.
            match (e.code(), e.detail()) {
                (Some(code), Some(detail)) => format!("{code} {detail}"),
                (Some(code), None) => code.to_string(),
                _ => e.to_string(),
            }
        }
    }
}

/// `INFO section` as (field, value) pairs.
pub fn info(con: &mut Connection, section: &str) -> Vec<(String, String)> {
    let text: String = cmd("INFO").arg(section).query(con).expect("INFO");
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

/// One integer field of `INFO section`.
pub fn info_int(con: &mut Connection, section: &str, field: &str) -> i64 {
    let all = info(con, section);
    let (_, v) = all
        .iter()
        .find(|(k, _)| k == field)
        .unwrap_or_else(|| panic!("no {field} in INFO {section}: {all:?}"));
    v.parse()
        .unwrap_or_else(|_| panic!("{field} is not an integer: {v}"))
}

/// One text field of `INFO section` (panics when there is none of that name).
pub fn info_field(con: &mut Connection, section: &str, field: &str) -> String {
    let all = info(con, section);
    all.iter()
        .find(|(k, _)| k == field)
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| panic!("no {field} in INFO {section}: {all:?}"))
}

/// The server's clock, ms since the epoch (`TIME`).
pub fn server_ms(con: &mut Connection) -> i64 {
    let (s, us): (i64, i64) = cmd("TIME").query(con).expect("TIME");
    s * 1000 + us / 1000
}

/// The integer field `reclaim_<name>` of `INFO reclaim`.
pub fn reclaim_info(con: &mut Connection, name: &str) -> i64 {
    info_int(con, "reclaim", &format!("reclaim_{name}"))
}

/// The text of a bulk or simple string reply (or OK); panics on anything else.
pub fn string_of(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".into(),
        other => panic!("not a string: {other:?}"),
    }
}

/// The text of a string-like reply (bulk or simple string, OK, integer); `None` for anything else.
pub fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Okay => Some("OK".into()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

/// A reply as a person reads it (`(nil)`, `[a, b]`, `{k: v}`), for timelines and logs.
pub fn show(v: &Value) -> String {
    match v {
        Value::Nil => "(nil)".into(),
        Value::Array(a) => format!("[{}]", a.iter().map(show).collect::<Vec<_>>().join(", ")),
        Value::Map(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", show(k), show(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => text(other).unwrap_or_else(|| format!("{other:?}")),
    }
}

/// The elements of an array reply; empty for anything else.
pub fn items(v: &Value) -> &[Value] {
    match v {
        Value::Array(a) => a,
        _ => &[],
    }
}

/// An integer reply, or a string reply that holds one; 0 for anything else.
pub fn int_of(v: &Value) -> i64 {
    match v {
        Value::Int(i) => *i,
        other => text(other).and_then(|t| t.parse().ok()).unwrap_or(0),
    }
}

/// `CONFIG GET name`: the value of one config (panics unless the reply is exactly that config).
pub fn config_get(con: &mut Connection, name: &str) -> String {
    let v: Vec<String> = cmd("CONFIG").arg("GET").arg(name).query(con).unwrap();
    assert_eq!(v.len(), 2, "CONFIG GET {name}: {v:?}");
    assert_eq!(v[0], name);
    v[1].clone()
}

/// The per-policy lines of `INFO reclaim` (section `reclaim_policies`), in order, each as its
/// `field=value` pairs (values as written: names stay escaped).
pub fn policy_lines(con: &mut Connection) -> Vec<std::collections::BTreeMap<String, String>> {
    let text: String = cmd("INFO")
        .arg("reclaim_policies")
        .query(con)
        .expect("INFO");
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("reclaim_policy_"))
        .map(|l| {
            let (_, v) = l.split_once(':').expect("reclaim_policy_<n>:...");
            v.split(',')
                .map(|kv| {
                    let (k, v) = kv.split_once('=').expect("field=value");
                    (k.to_string(), v.to_string())
                })
                .collect()
        })
        .collect()
}

/// The arguments of a `COMMAND DOCS` entry, each as its token (or name) and its `since` (`""`
/// when it has none: as old as its command).
pub fn arguments_since(doc: &Value) -> Vec<(String, String)> {
    items(&field(doc, "arguments"))
        .iter()
        .map(|a| {
            let f = pairs(a);
            let get = |k: &str| f.iter().find(|(n, _)| n == k).map(|(_, v)| string_of(v));
            (
                get("token").or_else(|| get("name")).unwrap(),
                get("since").unwrap_or_default(),
            )
        })
        .collect()
}
