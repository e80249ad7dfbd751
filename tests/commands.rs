//! The command surface against a real server: reply shapes (RESP2 and RESP3), every rejected input
//! with its exact error text, binary-safe names, key extraction (`COMMAND GETKEYS`, `COMMAND INFO`,
//! `COMMAND DOCS`), ACLs, module configs, the `INFO reclaim` section and commands on a replica.

use reclaim_testkit::*;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// A `Vec<&[u8]>` of byte-string arguments of any lengths.
macro_rules! a {
    ($($x:expr),* $(,)?) => {
        vec![$(&$x[..] as &[u8]),*]
    };
}

/// A command from binary-safe arguments.
fn rc(name: &str, args: &[&[u8]]) -> redis::Cmd {
    let mut c = cmd(name);
    for a in args {
        c.arg(*a);
    }
    c
}

/// `RECLAIM.POLICY <args>`.
fn pol(args: &[&[u8]]) -> redis::Cmd {
    rc("RECLAIM.POLICY", args)
}

/// Runs a command that must succeed, returning its raw reply.
fn ok(con: &mut Connection, c: &redis::Cmd) -> Value {
    c.query::<Value>(con)
        .unwrap_or_else(|e| panic!("command {:?} failed: {e}", c.get_packed_command()))
}

/// A bulk string value.
fn bs(s: &[u8]) -> Value {
    Value::BulkString(s.to_vec())
}

/// The text of a bulk or simple string reply.
fn string_reply(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        Value::SimpleString(s) => s.clone(),
        Value::Okay => "OK".into(),
        other => panic!("not a string: {other:?}"),
    }
}

fn is_ok(v: &Value) -> bool {
    matches!(v, Value::Okay) || matches!(v, Value::SimpleString(s) if s == "OK")
}

/// A policy as the module reports it.
#[derive(Clone, Debug)]
struct P {
    min_idle: i64,
    max_deliveries: i64,
    dlq: Option<Vec<u8>>,
    claimant: Vec<u8>,
    count: i64,
    interval: i64,
    backoff: Vec<u8>,
    liveness: i64,
    /// `STORM` as GET shows it (`n window-ms`), `None` = off.
    storm: Option<Vec<u8>>,
    dlq_maxlen: i64,
    dlq_maxage: i64,
    /// `yes` or `no`.
    tombstones: Vec<u8>,
    state: Vec<u8>,
}

/// The documented defaults.
fn defaults() -> P {
    P {
        min_idle: 60000,
        max_deliveries: 0,
        dlq: None,
        claimant: b"reclaim".to_vec(),
        count: 100,
        interval: 10000,
        backoff: b"FIXED".to_vec(),
        liveness: 0,
        storm: None,
        dlq_maxlen: 0,
        dlq_maxage: 0,
        tombstones: b"no".to_vec(),
        state: b"active".to_vec(),
    }
}

impl P {
    /// (field, value) in the documented order.
    fn fields(&self) -> Vec<(Value, Value)> {
        vec![
            (bs(b"min-idle"), Value::Int(self.min_idle)),
            (bs(b"max-deliveries"), Value::Int(self.max_deliveries)),
            (
                bs(b"dlq"),
                self.dlq.as_deref().map(bs).unwrap_or(Value::Nil),
            ),
            (bs(b"claimant"), bs(&self.claimant)),
            (bs(b"count"), Value::Int(self.count)),
            (bs(b"interval"), Value::Int(self.interval)),
            (bs(b"backoff"), bs(&self.backoff)),
            (bs(b"liveness"), Value::Int(self.liveness)),
            (
                bs(b"storm"),
                self.storm.as_deref().map(bs).unwrap_or(Value::Nil),
            ),
            (bs(b"dlq-maxlen"), Value::Int(self.dlq_maxlen)),
            (bs(b"dlq-maxage"), Value::Int(self.dlq_maxage)),
            (bs(b"tombstones"), bs(&self.tombstones)),
            (bs(b"state"), bs(&self.state)),
        ]
    }

    /// The GET reply in RESP2: a flat field/value array.
    fn resp2(&self) -> Value {
        flat(self.fields())
    }

    /// The GET reply in RESP3: a map.
    fn resp3(&self) -> Value {
        Value::Map(self.fields())
    }

    /// One LIST element (`key`, `group`, then the GET fields).
    fn list_fields(&self, key: &[u8], group: &[u8]) -> Vec<(Value, Value)> {
        let mut f = vec![(bs(b"key"), bs(key)), (bs(b"group"), bs(group))];
        f.extend(self.fields());
        f
    }

    fn list2(&self, key: &[u8], group: &[u8]) -> Value {
        flat(self.list_fields(key, group))
    }

    fn list3(&self, key: &[u8], group: &[u8]) -> Value {
        Value::Map(self.list_fields(key, group))
    }
}

fn flat(pairs: Vec<(Value, Value)>) -> Value {
    Value::Array(pairs.into_iter().flat_map(|(k, v)| [k, v]).collect())
}

fn get(con: &mut Connection, key: &[u8], group: &[u8]) -> Value {
    ok(con, &pol(&[b"GET", key, group]))
}

fn list(con: &mut Connection) -> Value {
    ok(con, &pol(&[b"LIST"]))
}

/// `RECLAIM.POLICY SET key group <opts>`, which must answer +OK.
fn set(con: &mut Connection, key: &[u8], group: &[u8], opts: &[&[u8]]) {
    let mut a: Vec<&[u8]> = a![b"SET", key, group];
    a.extend_from_slice(opts);
    let r = ok(con, &pol(&a));
    assert!(is_ok(&r), "SET answered {r:?}");
}

/// The error of `RECLAIM.POLICY SET key group <opts>`.
fn set_err(con: &mut Connection, key: &[u8], group: &[u8], opts: &[&[u8]]) -> String {
    let mut a: Vec<&[u8]> = a![b"SET", key, group];
    a.extend_from_slice(opts);
    error_of(con, &pol(&a))
}

/// A connection authenticated as `user` (all test users are `nopass`).
fn conn_as(s: &Server, user: &str) -> Connection {
    let mut c = s.conn();
    let r: Value = cmd("AUTH")
        .arg(user)
        .arg("any")
        .query(&mut c)
        .expect("AUTH");
    assert!(is_ok(&r), "AUTH {user}: {r:?}");
    c
}

/// Creates `group` on a new stream `key` and has consumer `c1` read `n` new entries without
/// acknowledging them.
fn pending_for_c1(con: &mut Connection, key: &[u8], group: &[u8], n: usize) -> Vec<String> {
    let _: () = rc("XGROUP", &[b"CREATE", key, group, b"$", b"MKSTREAM"])
        .query(con)
        .expect("XGROUP CREATE");
    let ids: Vec<String> = (0..n)
        .map(|i| {
            rc("XADD", &[key, b"*", b"n", i.to_string().as_bytes()])
                .query(con)
                .expect("XADD")
        })
        .collect();
    let _: Value = rc(
        "XREADGROUP",
        &[b"GROUP", group, b"c1", b"STREAMS", key, b">"],
    )
    .query(con)
    .expect("XREADGROUP");
    ids
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const WRONGTYPE_DLQ: &str =
    "WRONGTYPE the DLQ key holds the wrong kind of value (it must be a stream)";
const NO_POLICY: &str = "ERR no reclaim policy for this key and group";
const DLQ_IS_MODULE_KEY: &str = "ERR the DLQ key is a key the module keeps for itself (reclaim:policy:..., reclaim:redrive:..., reclaim:redrive-moved:...)";
const NOPERM_KEYS: &str =
    "NOPERM this user has no permissions to access one of the keys used as arguments";
/// The key-permission error as Redis 8.x words it (Valkey 8.1 and Redis 7.x use NOPERM_KEYS).
const NOPERM_KEYS_8: &str = "NOPERM No permissions to access a key";

/// Asserts a key-permission error in the wording of the server under test.
fn assert_noperm_keys(got: &str, ctx: &str) {
    assert!(
        got == NOPERM_KEYS || got == NOPERM_KEYS_8,
        "{ctx}: got {got:?}"
    );
}
const NOPERM_DLQ: &str = "NOPERM this user has no permissions to write the policy's DLQ key";
const READONLY: &str = "READONLY You can't write against a read only replica.";

// ---------------------------------------------------------------------------------------------
// 1. Reply shapes
// ---------------------------------------------------------------------------------------------

#[test]
fn policy_replies_resp2() {
    let s = Server::new();
    let mut c = s.conn();

    // GET of a missing policy is nil; DEL of it is 0; LIST of nothing is empty.
    assert_eq!(get(&mut c, b"s", b"g"), Value::Nil);
    assert_eq!(ok(&mut c, &pol(&[b"DEL", b"s", b"g"])), Value::Int(0));
    assert_eq!(list(&mut c), Value::Array(vec![]));

    // SET answers +OK; every default.
    let r = ok(&mut c, &pol(&[b"SET", b"s", b"g"]));
    assert_eq!(r, Value::Okay);
    assert_eq!(get(&mut c, b"s", b"g"), defaults().resp2());

    // Every option, option names in any case.
    set(
        &mut c,
        b"s",
        b"g",
        &[
            b"min-idle",
            b"5",
            b"Max-Deliveries",
            b"3",
            b"dlq",
            b"s:dlq",
            b"CLAIMANT",
            b"worker-9",
            b"Count",
            b"7",
            b"INTERVAL",
            b"250",
            b"backoff",
            b"list",
            b"5",
            b"300",
            b"liveness",
            b"2000",
            b"storm",
            b"50",
            b"60000",
            b"dlq-maxlen",
            b"1000",
            b"Dlq-MaxAge",
            b"86400000",
            b"TOMBSTONES",
            b"Yes",
        ],
    );
    let full = P {
        min_idle: 5,
        max_deliveries: 3,
        dlq: Some(b"s:dlq".to_vec()),
        claimant: b"worker-9".to_vec(),
        count: 7,
        interval: 250,
        backoff: b"LIST 5 300".to_vec(),
        liveness: 2000,
        storm: Some(b"50 60000".to_vec()),
        dlq_maxlen: 1000,
        dlq_maxage: 86400000,
        tombstones: b"yes".to_vec(),
        state: b"active".to_vec(),
    };
    assert_eq!(get(&mut c, b"s", b"g"), full.resp2());

    // SET replaces the whole policy: options not given go back to their defaults.
    set(&mut c, b"s", b"g", &[b"COUNT", b"9"]);
    let replaced = P {
        count: 9,
        ..defaults()
    };
    assert_eq!(get(&mut c, b"s", b"g"), replaced.resp2());

    // Boundaries that are accepted.
    set(
        &mut c,
        b"s",
        b"g2",
        &[
            b"MIN-IDLE",
            b"9223372036854775807",
            b"COUNT",
            b"10000",
            b"INTERVAL",
            b"1",
            b"MAX-DELIVERIES",
            b"0",
        ],
    );
    let edge = P {
        min_idle: i64::MAX,
        count: 10000,
        interval: 1,
        ..defaults()
    };
    assert_eq!(get(&mut c, b"s", b"g2"), edge.resp2());
    set(
        &mut c,
        b"a",
        b"z",
        &[
            b"COUNT",
            b"1",
            b"MAX-DELIVERIES",
            b"9223372036854775807",
            b"DLQ",
            b"q",
        ],
    );
    let a_z = P {
        count: 1,
        max_deliveries: i64::MAX,
        dlq: Some(b"q".to_vec()),
        ..defaults()
    };
    set(&mut c, b"a", b"b", &[]);

    // LIST: every policy of the db, ordered by key then group, `key` and `group` first.
    assert_eq!(
        list(&mut c),
        Value::Array(vec![
            defaults().list2(b"a", b"b"),
            a_z.list2(b"a", b"z"),
            replaced.list2(b"s", b"g"),
            edge.list2(b"s", b"g2"),
        ])
    );

    // DEL answers 1, then 0; the other policies stay.
    assert_eq!(ok(&mut c, &pol(&[b"DEL", b"s", b"g"])), Value::Int(1));
    assert_eq!(ok(&mut c, &pol(&[b"DEL", b"s", b"g"])), Value::Int(0));
    assert_eq!(get(&mut c, b"s", b"g"), Value::Nil);
    assert_eq!(get(&mut c, b"s", b"g2"), edge.resp2());
    assert_eq!(
        list(&mut c),
        Value::Array(vec![
            defaults().list2(b"a", b"b"),
            a_z.list2(b"a", b"z"),
            edge.list2(b"s", b"g2"),
        ])
    );
    // Subcommand names are case-insensitive.
    assert_eq!(ok(&mut c, &pol(&[b"del", b"a", b"b"])), Value::Int(1));
    assert_eq!(ok(&mut c, &pol(&[b"Get", b"a", b"b"])), Value::Nil);
}

#[test]
fn list_only_shows_the_selected_database() {
    let s = Server::new();
    let mut c0 = s.conn();
    let mut c1 = s.conn();
    let r: Value = cmd("SELECT").arg(1).query(&mut c1).unwrap();
    assert!(is_ok(&r));

    set(&mut c0, b"s", b"g", &[b"COUNT", b"10"]);
    set(&mut c0, b"only0", b"g", &[]);
    set(&mut c1, b"s", b"g", &[b"COUNT", b"11"]);
    set(&mut c1, b"only1", b"h", &[b"CLAIMANT", b"one"]);

    let p0 = P {
        count: 10,
        ..defaults()
    };
    let p1 = P {
        count: 11,
        ..defaults()
    };
    let only1 = P {
        claimant: b"one".to_vec(),
        ..defaults()
    };
    assert_eq!(
        list(&mut c0),
        Value::Array(vec![defaults().list2(b"only0", b"g"), p0.list2(b"s", b"g")])
    );
    assert_eq!(
        list(&mut c1),
        Value::Array(vec![only1.list2(b"only1", b"h"), p1.list2(b"s", b"g")])
    );
    // GET and DEL are per database too.
    assert_eq!(get(&mut c0, b"s", b"g"), p0.resp2());
    assert_eq!(get(&mut c1, b"s", b"g"), p1.resp2());
    assert_eq!(get(&mut c0, b"only1", b"h"), Value::Nil);
    assert_eq!(ok(&mut c1, &pol(&[b"DEL", b"s", b"g"])), Value::Int(1));
    assert_eq!(get(&mut c0, b"s", b"g"), p0.resp2());
    assert_eq!(ok(&mut c1, &pol(&[b"DEL", b"only0", b"g"])), Value::Int(0));
    assert_eq!(
        list(&mut c1),
        Value::Array(vec![only1.list2(b"only1", b"h")])
    );
    // An empty database lists nothing.
    let r: Value = cmd("SELECT").arg(2).query(&mut c1).unwrap();
    assert!(is_ok(&r));
    assert_eq!(list(&mut c1), Value::Array(vec![]));
}

#[test]
fn policy_replies_resp3() {
    let s = Server::new();
    let mut c = s.conn3();

    assert_eq!(get(&mut c, b"s", b"g"), Value::Nil);
    assert_eq!(ok(&mut c, &pol(&[b"SET", b"s", b"g"])), Value::Okay);
    assert_eq!(get(&mut c, b"s", b"g"), defaults().resp3());

    set(
        &mut c,
        b"t",
        b"h",
        &[b"DLQ", b"t:dlq", b"MAX-DELIVERIES", b"2", b"CLAIMANT", b"x"],
    );
    let t = P {
        dlq: Some(b"t:dlq".to_vec()),
        max_deliveries: 2,
        claimant: b"x".to_vec(),
        ..defaults()
    };
    assert_eq!(get(&mut c, b"t", b"h"), t.resp3());
    assert_eq!(
        list(&mut c),
        Value::Array(vec![defaults().list3(b"s", b"g"), t.list3(b"t", b"h")])
    );
    assert_eq!(ok(&mut c, &pol(&[b"DEL", b"s", b"g"])), Value::Int(1));
    assert_eq!(ok(&mut c, &pol(&[b"DEL", b"s", b"g"])), Value::Int(0));
    assert_eq!(list(&mut c), Value::Array(vec![t.list3(b"t", b"h")]));

    // SWEEP of a policy whose stream does not exist: a map of zeros.
    assert_eq!(
        ok(&mut c, &rc("RECLAIM.SWEEP", &[b"t", b"h"])),
        Value::Map(vec![
            (bs(b"claimed"), Value::Int(0)),
            (bs(b"dead-lettered"), Value::Int(0)),
            (bs(b"deleted"), Value::Int(0)),
            (bs(b"dlq-trimmed"), Value::Int(0)),
            (bs(b"tombstones"), Value::Int(0)),
        ])
    );
    // STATS is a map too, with the documented fields in order.
    let st = ok(&mut c, &rc("RECLAIM.STATS", &[b"t", b"h"]));
    let Value::Map(m) = &st else {
        panic!("STATS in RESP3 is not a map: {st:?}");
    };
    let names: Vec<String> = m.iter().map(|(k, _)| string_reply(k)).collect();
    assert_eq!(names, STATS_FIELDS);
    assert_eq!(str_field(&st, "cursor"), "0-0");
    assert_eq!(str_field(&st, "status"), "waiting: stream does not exist");
}

#[test]
fn sweep_and_stats_replies_resp2() {
    let s = Server::new();
    let mut c = s.conn();
    // A policy on a stream that does not exist yet: SWEEP does nothing.
    set(
        &mut c,
        b"s",
        b"g",
        &[b"MIN-IDLE", b"1", b"INTERVAL", b"100000"],
    );
    assert_eq!(
        ok(&mut c, &rc("RECLAIM.SWEEP", &[b"s", b"g"])),
        Value::Array(vec![
            bs(b"claimed"),
            Value::Int(0),
            bs(b"dead-lettered"),
            Value::Int(0),
            bs(b"deleted"),
            Value::Int(0),
            bs(b"dlq-trimmed"),
            Value::Int(0),
            bs(b"tombstones"),
            Value::Int(0),
        ])
    );
    assert_eq!(
        str_field(&stats(&mut c, "s", "g"), "status"),
        "waiting: stream does not exist"
    );

    // The group exists, nothing pending: the timer's first pass completes.
    create_group(&mut c, b"s", b"g");
    wait_for(10, "the first timer pass", || {
        (int_field(&stats(&mut c, "s", "g"), "passes") >= 1).then_some(())
    });
    assert_eq!(str_field(&stats(&mut c, "s", "g"), "status"), "active");
    // Two entries pending for c1; the next timer pass is 100 s away, so only SWEEP claims them.
    add_numbered(&mut c, "s", 2);
    deliver(&mut c, "s", "g", "c1", None);
    let mut claimed = 0;
    wait_for(10, "RECLAIM.SWEEP to claim both entries", || {
        let r = ok(
            &mut c,
            &rc("RECLAIM.SWEEP", &[b"s", b"g", b"LIMIT", b"100"]),
        );
        assert_eq!(int_field(&r, "dead-lettered"), 0);
        assert_eq!(int_field(&r, "deleted"), 0);
        claimed += int_field(&r, "claimed");
        (claimed == 2).then_some(())
    });
    let p = pending(&mut c, "s", "g");
    assert_eq!(p.len(), 2);
    assert!(
        p.iter().all(|e| e.consumer == "reclaim" && e.count == 1),
        "moved into the inbox, a move is not a delivery: {p:?}"
    );
    let st = stats(&mut c, "s", "g");
    assert_eq!(int_field(&st, "claimed"), 2);
    assert_eq!(int_field(&st, "inbox"), 2, "{st:?}");
    assert_eq!(int_field(&st, "redelivered"), 0, "{st:?}");
    assert_eq!(int_field(&st, "errors"), 0);
    assert_eq!(reclaim_info(&mut c, "claimed"), 2);
    let names: Vec<String> = pairs(&st).into_iter().map(|(k, _)| k).collect();
    assert_eq!(names, STATS_FIELDS);
}

// ---------------------------------------------------------------------------------------------
// 2. Rejected input
// ---------------------------------------------------------------------------------------------

#[test]
fn rejected_set_options_change_nothing() {
    let s = Server::new();
    let mut c = s.conn();
    set(
        &mut c,
        b"s",
        b"g",
        &[b"MIN-IDLE", b"1234", b"CLAIMANT", b"keep"],
    );
    let before = get(&mut c, b"s", b"g");
    assert_eq!(
        before,
        P {
            min_idle: 1234,
            claimant: b"keep".to_vec(),
            ..defaults()
        }
        .resp2()
    );

    const MIN_IDLE: &str = "ERR MIN-IDLE must be a positive integer (ms)";
    const COUNT: &str = "ERR COUNT must be an integer from 1 to 10000";
    const INTERVAL: &str = "ERR INTERVAL must be a positive integer (ms)";
    const MAXD: &str = "ERR MAX-DELIVERIES must be a non-negative integer";
    let bad_positive: &[&[u8]] = &[
        b"abc",
        b"0",
        b"-1",
        b"-0",
        b"+1",
        b" 1",
        b"1 ",
        b"1.5",
        b"1e3",
        b"0x10",
        b"007",
        b"",
        b"9223372036854775808",
        b"-9223372036854775809",
        b"99999999999999999999999",
    ];
    let mut cases: Vec<(Vec<&[u8]>, String)> = Vec::new();
    for &v in bad_positive {
        cases.push((a![b"MIN-IDLE", v], MIN_IDLE.into()));
        cases.push((a![b"INTERVAL", v], INTERVAL.into()));
        cases.push((a![b"COUNT", v], COUNT.into()));
    }
    for v in [&b"10001"[..], b"100000", b"9223372036854775807"] {
        cases.push((a![b"COUNT", v], COUNT.into()));
    }
    for v in [
        &b"-1"[..],
        b"-9223372036854775808",
        b"abc",
        b"+1",
        b" 1",
        b"1.0",
        b"",
        b"9223372036854775808",
    ] {
        cases.push((a![b"MAX-DELIVERIES", v, b"DLQ", b"d"], MAXD.into()));
    }
    let more: Vec<(Vec<&[u8]>, &str)> = vec![
        (a![b"FOO", b"1"], "ERR unknown option 'FOO'"),
        (a![b"min-idle", b"5", b"bar", b"1"], "ERR unknown option 'bar'"),
        (a![b"f\x00o\r\no\xff", b"1"], "ERR unknown option 'f?o??o?'"),
        (a![b"LIMIT", b"1"], "ERR unknown option 'LIMIT'"),
        (
            a![[b'x'; 100], b"1"],
            "ERR unknown option 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...'",
        ),
        (
            a![b"COUNT", b"1", b"count", b"2"],
            "ERR option COUNT given more than once",
        ),
        (
            a![b"MIN-IDLE", b"5", b"Min-Idle", b"5"],
            "ERR option MIN-IDLE given more than once",
        ),
        (
            a![b"DLQ", b"a", b"DLQ", b"b"],
            "ERR option DLQ given more than once",
        ),
        (
            a![b"CLAIMANT", b"a", b"claimant", b"b"],
            "ERR option CLAIMANT given more than once",
        ),
        (
            a![b"INTERVAL", b"5", b"INTERVAL", b"5"],
            "ERR option INTERVAL given more than once",
        ),
        (
            a![
                b"MAX-DELIVERIES",
                b"1",
                b"DLQ",
                b"d",
                b"MAX-DELIVERIES",
                b"1",
            ],
            "ERR option MAX-DELIVERIES given more than once",
        ),
        (a![b"COUNT"], "ERR option COUNT needs a value"),
        (a![b"MIN-IDLE"], "ERR option MIN-IDLE needs a value"),
        (a![b"INTERVAL"], "ERR option INTERVAL needs a value"),
        (
            a![b"MAX-DELIVERIES"],
            "ERR option MAX-DELIVERIES needs a value",
        ),
        (a![b"DLQ"], "ERR option DLQ needs a value"),
        (a![b"COUNT", b"5", b"CLAIMANT"], "ERR option CLAIMANT needs a value"),
        (
            a![b"MAX-DELIVERIES", b"3"],
            "ERR MAX-DELIVERIES above 0 needs a DLQ key",
        ),
        (
            a![b"MAX-DELIVERIES", b"1", b"CLAIMANT", b"DLQ"],
            "ERR MAX-DELIVERIES above 0 needs a DLQ key",
        ),
        (
            a![b"DLQ-MAXLEN", b"-1", b"DLQ", b"d"],
            "ERR DLQ-MAXLEN must be a non-negative integer",
        ),
        (
            a![b"DLQ-MAXLEN", b"1e3", b"DLQ", b"d"],
            "ERR DLQ-MAXLEN must be a non-negative integer",
        ),
        (
            a![b"DLQ-MAXAGE", b"-1", b"DLQ", b"d"],
            "ERR DLQ-MAXAGE must be a non-negative integer (ms)",
        ),
        (
            a![b"DLQ-MAXAGE", b"1.5", b"DLQ", b"d"],
            "ERR DLQ-MAXAGE must be a non-negative integer (ms)",
        ),
        (
            a![b"TOMBSTONES", b"true", b"DLQ", b"d"],
            "ERR TOMBSTONES must be yes or no",
        ),
        (a![b"TOMBSTONES"], "ERR option TOMBSTONES needs a value"),
        (
            a![b"DLQ-MAXLEN", b"100"],
            "ERR DLQ-MAXLEN above 0 needs a DLQ key",
        ),
        (
            a![b"DLQ-MAXAGE", b"60000"],
            "ERR DLQ-MAXAGE above 0 needs a DLQ key",
        ),
        (
            a![b"TOMBSTONES", b"yes"],
            "ERR TOMBSTONES yes needs a DLQ key",
        ),
        (
            a![b"DLQ", b"s"],
            "ERR the DLQ key must differ from the stream key",
        ),
        (
            a![b"MAX-DELIVERIES", b"2", b"DLQ", b"s"],
            "ERR the DLQ key must differ from the stream key",
        ),
        // The module's own keys: a policy key, a redrive task key, a redrive moved set.
        (a![b"DLQ", b"reclaim:policy:{s}:s"], DLQ_IS_MODULE_KEY),
        (a![b"DLQ", b"reclaim:redrive:{x}:x"], DLQ_IS_MODULE_KEY),
        (
            a![b"MAX-DELIVERIES", b"1", b"DLQ", b"reclaim:redrive-moved:{x}:x"],
            DLQ_IS_MODULE_KEY,
        ),
    ];
    for (a, e) in more {
        cases.push((a, e.into()));
    }

    let mut failures = Vec::new();
    for (opts, want) in &cases {
        for group in [&b"g"[..], b"fresh"] {
            let got = set_err(&mut c, b"s", group, opts);
            if &got != want {
                failures.push(format!(
                    "SET s {} {:?}: want {want:?}, got {got:?}",
                    String::from_utf8_lossy(group),
                    opts.iter()
                        .map(|o| String::from_utf8_lossy(o).into_owned())
                        .collect::<Vec<_>>()
                ));
            }
        }
        assert_eq!(get(&mut c, b"s", b"g"), before, "after {opts:?}");
        assert_eq!(get(&mut c, b"s", b"fresh"), Value::Nil, "after {opts:?}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(
        list(&mut c),
        Value::Array(vec![P {
            min_idle: 1234,
            claimant: b"keep".to_vec(),
            ..defaults()
        }
        .list2(b"s", b"g")])
    );
    assert_eq!(reclaim_info(&mut c, "policies"), 1);
    assert_eq!(reclaim_info(&mut c, "panics"), 0);
}

#[test]
fn rejected_key_types_change_nothing() {
    let s = Server::new();
    let mut c = s.conn();
    let _: () = cmd("SET").arg("str").arg("x").query(&mut c).unwrap();
    let _: () = cmd("RPUSH").arg("lst").arg("x").query(&mut c).unwrap();

    // The stream key holds a string / a list.
    assert_eq!(set_err(&mut c, b"str", b"g", &[]), WRONGTYPE);
    assert_eq!(
        set_err(&mut c, b"lst", b"g", &[b"MIN-IDLE", b"5"]),
        WRONGTYPE
    );
    assert_eq!(get(&mut c, b"str", b"g"), Value::Nil);
    assert_eq!(get(&mut c, b"lst", b"g"), Value::Nil);
    assert_eq!(list(&mut c), Value::Array(vec![]));

    // The DLQ key holds a string / a list (also with MAX-DELIVERIES 0).
    set(&mut c, b"s", b"g", &[b"COUNT", b"3"]);
    let before = get(&mut c, b"s", b"g");
    assert_eq!(
        set_err(
            &mut c,
            b"s",
            b"g",
            &[b"MAX-DELIVERIES", b"2", b"DLQ", b"str"]
        ),
        WRONGTYPE_DLQ
    );
    assert_eq!(
        set_err(&mut c, b"s", b"g", &[b"DLQ", b"lst"]),
        WRONGTYPE_DLQ
    );
    assert_eq!(
        set_err(&mut c, b"s", b"h", &[b"DLQ", b"str"]),
        WRONGTYPE_DLQ
    );
    assert_eq!(get(&mut c, b"s", b"g"), before);
    assert_eq!(get(&mut c, b"s", b"h"), Value::Nil);
    // Both wrong: the stream is reported.
    assert_eq!(set_err(&mut c, b"str", b"g", &[b"DLQ", b"lst"]), WRONGTYPE);

    // Missing keys and real streams are fine.
    set(&mut c, b"s", b"g", &[b"DLQ", b"missing"]);
    let _: String = cmd("XADD")
        .arg("dq")
        .arg("*")
        .arg("a")
        .arg("1")
        .query(&mut c)
        .unwrap();
    set(
        &mut c,
        b"s",
        b"g",
        &[b"DLQ", b"dq", b"MAX-DELIVERIES", b"1"],
    );

    // The stream's policy key holds something else: refused, not overwritten.
    let _: () = cmd("SET")
        .arg("reclaim:policy:{t}:t")
        .arg("mine")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        set_err(&mut c, b"t", b"g", &[]),
        "ERR the policy key of this stream holds a value that is not a reclaim policy"
    );
    assert_eq!(get(&mut c, b"t", b"g"), Value::Nil);
    let v: String = cmd("GET")
        .arg("reclaim:policy:{t}:t")
        .query(&mut c)
        .unwrap();
    assert_eq!(v, "mine");
    // PAUSE and RESUME say the same, after their own syntax check; the value stays.
    let taken = "ERR the policy key of this stream holds a value that is not a reclaim policy";
    assert_eq!(
        error_of(&mut c, &pol(&[b"PAUSE", b"t", b"g"])),
        taken,
        "PAUSE"
    );
    assert_eq!(
        error_of(&mut c, &pol(&[b"PAUSE", b"t", b"g", b"STORM"])),
        taken
    );
    assert_eq!(
        error_of(&mut c, &pol(&[b"PAUSE", b"t", b"g", b"FOO"])),
        "ERR syntax error: RECLAIM.POLICY PAUSE key group [STORM]"
    );
    assert_eq!(error_of(&mut c, &pol(&[b"RESUME", b"t", b"g"])), taken);
    let v: String = cmd("GET")
        .arg("reclaim:policy:{t}:t")
        .query(&mut c)
        .unwrap();
    assert_eq!(v, "mine");
    assert_eq!(ok(&mut c, &pol(&[b"DEL", b"t", b"g"])), Value::Int(0));
}

#[test]
fn sweep_and_stats_rejections() {
    let s = Server::new();
    let mut c = s.conn();
    // No policy.
    assert_eq!(
        error_of(&mut c, &rc("RECLAIM.SWEEP", &[b"s", b"g"])),
        NO_POLICY
    );
    assert_eq!(
        error_of(&mut c, &rc("RECLAIM.STATS", &[b"s", b"g"])),
        NO_POLICY
    );
    assert_eq!(
        error_of(&mut c, &rc("RECLAIM.SWEEP", &[b"s", b"g", b"LIMIT", b"5"])),
        NO_POLICY
    );
    set(&mut c, b"s", b"g", &[]);
    // Another group of the same stream has no policy.
    assert_eq!(
        error_of(&mut c, &rc("RECLAIM.SWEEP", &[b"s", b"h"])),
        NO_POLICY
    );
    assert_eq!(
        error_of(&mut c, &rc("RECLAIM.STATS", &[b"s", b"h"])),
        NO_POLICY
    );

    const LIMIT: &str = "ERR LIMIT must be a positive integer";
    let mut cases: Vec<(Vec<&[u8]>, &str)> = Vec::new();
    for v in [
        &b"0"[..],
        b"-1",
        b"-0",
        b"abc",
        b"+1",
        b" 1",
        b"1 ",
        b"1.5",
        b"",
        b"007",
        b"9223372036854775808",
    ] {
        cases.push((a![b"LIMIT", v], LIMIT));
        cases.push((a![b"limit", v], LIMIT));
    }
    cases.extend([
        (a![b"LIMIT"[..]], "ERR option LIMIT needs a value"),
        (
            a![b"LIMIT", b"1", b"LIMIT", b"2"],
            "ERR option LIMIT given more than once",
        ),
        (a![b"FOO", b"1"], "ERR unknown option 'FOO'"),
        (a![b"COUNT", b"1"], "ERR unknown option 'COUNT'"),
        (a![b"LIMIT", b"1", b"X"], "ERR unknown option 'X'"),
    ]);
    for (opts, want) in &cases {
        let mut a: Vec<&[u8]> = a![b"s", b"g"];
        a.extend_from_slice(opts);
        assert_eq!(
            error_of(&mut c, &rc("RECLAIM.SWEEP", &a)),
            *want,
            "{opts:?}"
        );
    }
    // LIMIT at the top of the range is accepted.
    let r = ok(
        &mut c,
        &rc(
            "RECLAIM.SWEEP",
            &[b"s", b"g", b"LIMIT", b"9223372036854775807"],
        ),
    );
    assert_eq!(int_field(&r, "claimed"), 0);
    assert_eq!(get(&mut c, b"s", b"g"), defaults().resp2());

    // The stream key turned into a string after the policy was set.
    let _: () = cmd("SET").arg("s").arg("x").query(&mut c).unwrap();
    assert_eq!(
        error_of(&mut c, &rc("RECLAIM.SWEEP", &[b"s", b"g"])),
        WRONGTYPE
    );
    // The DLQ key turned into a string after the policy was set.
    create_group(&mut c, b"t", b"g");
    set(
        &mut c,
        b"t",
        b"g",
        &[b"DLQ", b"t:dlq", b"MAX-DELIVERIES", b"1"],
    );
    let _: () = cmd("SET").arg("t:dlq").arg("x").query(&mut c).unwrap();
    assert_eq!(
        error_of(&mut c, &rc("RECLAIM.SWEEP", &[b"t", b"g"])),
        WRONGTYPE_DLQ
    );
}

#[test]
fn wrong_arity_and_unknown_subcommand() {
    let s = Server::new();
    let mut c = s.conn();
    set(&mut c, b"s", b"g", &[]);
    let wrong = |name: &str| format!("ERR wrong number of arguments for '{name}' command");
    let cases: Vec<(redis::Cmd, String)> = vec![
        (pol(&[]), wrong("reclaim.policy")),
        (pol(&[b"SET"]), wrong("reclaim.policy|set")),
        (pol(&[b"SET", b"s"]), wrong("reclaim.policy|set")),
        (pol(&[b"GET"]), wrong("reclaim.policy|get")),
        (pol(&[b"GET", b"s"]), wrong("reclaim.policy|get")),
        (
            pol(&[b"GET", b"s", b"g", b"x"]),
            wrong("reclaim.policy|get"),
        ),
        (pol(&[b"DEL", b"s"]), wrong("reclaim.policy|del")),
        (
            pol(&[b"DEL", b"s", b"g", b"x"]),
            wrong("reclaim.policy|del"),
        ),
        (pol(&[b"LIST", b"x"]), wrong("reclaim.policy|list")),
        (pol(&[b"EXPORT", b"x"]), wrong("reclaim.policy|export")),
        (pol(&[b"IMPORT"]), wrong("reclaim.policy|import")),
        (rc("RECLAIM.SWEEP", &[]), wrong("reclaim.sweep")),
        (rc("RECLAIM.SWEEP", &[b"s"]), wrong("reclaim.sweep")),
        (rc("RECLAIM.STATS", &[]), wrong("reclaim.stats")),
        (rc("RECLAIM.STATS", &[b"s"]), wrong("reclaim.stats")),
        (
            rc("RECLAIM.STATS", &[b"s", b"g", b"x"]),
            wrong("reclaim.stats"),
        ),
        (rc("RECLAIM.HEALTH", &[]), wrong("reclaim.health")),
        (rc("RECLAIM.HEALTH", &[b"s"]), wrong("reclaim.health")),
        (
            rc("RECLAIM.HEALTH", &[b"s", b"g", b"x"]),
            wrong("reclaim.health"),
        ),
        (
            pol(&[b"FOO"]),
            "ERR unknown subcommand 'FOO'. Try RECLAIM.POLICY HELP.".into(),
        ),
        (
            pol(&[b"FOO", b"s", b"g"]),
            "ERR unknown subcommand 'FOO'. Try RECLAIM.POLICY HELP.".into(),
        ),
    ];
    for (cm, want) in &cases {
        assert_eq!(
            error_of(&mut c, cm),
            *want,
            "{:?}",
            String::from_utf8_lossy(&cm.get_packed_command())
        );
    }
    assert_eq!(get(&mut c, b"s", b"g"), defaults().resp2());
}

// ---------------------------------------------------------------------------------------------
// 3. Binary-safe names
// ---------------------------------------------------------------------------------------------

#[test]
fn binary_names_round_trip() {
    let s = Server::new();
    let mut c = s.conn();
    let key: &[u8] = b"k\x00e\xffy\r\n with spaces";
    let group: &[u8] = b"g\x00\xff\r\n p";
    let claimant: &[u8] = b"c\x00\xff\r\n x";
    let dlq: &[u8] = b"d\x00\xff\r\n q";
    set(
        &mut c,
        key,
        group,
        &[b"CLAIMANT", claimant, b"DLQ", dlq, b"MAX-DELIVERIES", b"4"],
    );
    let p = P {
        claimant: claimant.to_vec(),
        dlq: Some(dlq.to_vec()),
        max_deliveries: 4,
        ..defaults()
    };
    assert_eq!(get(&mut c, key, group), p.resp2());
    // Names that differ only in a trailing byte are different policies.
    assert_eq!(get(&mut c, key, b"g\x00\xff\r\n "), Value::Nil);
    assert_eq!(get(&mut c, b"k", group), Value::Nil);

    // Odd names: empty, with `}` (no usable hash tag), with a hash tag, NUL only.
    let odd: Vec<(&[u8], &[u8], &[u8])> = vec![
        (b"", b"", b"\x00"),
        (b"a}b\xff", b"\x00", b""),
        (b"{t}\r\n", b" ", b"\r\n"),
        (b"\x00", b"\xff\xfe", b"c"),
    ];
    for (k, g, cl) in &odd {
        set(&mut c, k, g, &[b"CLAIMANT", cl]);
    }
    let mut want: Vec<(Vec<u8>, Vec<u8>, Value)> = odd
        .iter()
        .map(|(k, g, cl)| {
            (
                k.to_vec(),
                g.to_vec(),
                P {
                    claimant: cl.to_vec(),
                    ..defaults()
                }
                .list2(k, g),
            )
        })
        .collect();
    want.push((key.to_vec(), group.to_vec(), p.list2(key, group)));
    want.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    assert_eq!(
        list(&mut c),
        Value::Array(want.into_iter().map(|w| w.2).collect())
    );
    for (k, g, cl) in &odd {
        assert_eq!(
            get(&mut c, k, g),
            P {
                claimant: cl.to_vec(),
                ..defaults()
            }
            .resp2()
        );
    }
    for (k, g, _) in &odd {
        assert_eq!(ok(&mut c, &pol(&[b"DEL", k, g])), Value::Int(1));
        assert_eq!(get(&mut c, k, g), Value::Nil);
    }
    assert_eq!(list(&mut c), Value::Array(vec![p.list2(key, group)]));

    // RESP3 too.
    let mut c3 = s.conn3();
    assert_eq!(get(&mut c3, key, group), p.resp3());
}

#[test]
fn sweep_claims_for_a_binary_claimant() {
    let s = Server::new();
    let mut c = s.conn();
    let key: &[u8] = b"st\x00r\xffe\r\nam x";
    let group: &[u8] = b"gr\x00\xff\r\n p";
    let claimant: &[u8] = b"cl\x00\xffai\r\nm nt";
    let ids = pending_for_c1(&mut c, key, group, 3);
    // Make the entries stale now (JUSTID keeps their count at 1), and let only the first pass run.
    let mut xc = cmd("XCLAIM");
    xc.arg(key).arg(group).arg("c1").arg(0);
    for id in &ids {
        xc.arg(id);
    }
    let _: Value = xc
        .arg("IDLE")
        .arg(200_000)
        .arg("JUSTID")
        .query(&mut c)
        .unwrap();
    set(
        &mut c,
        key,
        group,
        &[
            b"MIN-IDLE",
            b"100000",
            b"INTERVAL",
            b"3600000",
            b"CLAIMANT",
            claimant,
        ],
    );
    let p = wait_for(10, "the binary claimant to own every entry", || {
        let p = pending_raw(&mut c, key, group);
        p.iter().all(|e| e.1 == claimant).then_some(p)
    });
    assert_eq!(
        p,
        ids.iter()
            .map(|id| (id.clone(), claimant.to_vec(), 1))
            .collect::<Vec<_>>(),
        "moved, count unchanged"
    );
    let st = ok(&mut c, &rc("RECLAIM.STATS", &[key, group]));
    assert_eq!(int_field(&st, "claimed"), 3);
    assert_eq!(
        int_field(&st, "inbox"),
        3,
        "the binary claimant's inbox: {st:?}"
    );
    assert_eq!(int_field(&st, "errors"), 0);
    assert_eq!(reclaim_info(&mut c, "claimed"), 3);
    // XINFO CONSUMERS shows the binary consumer by its exact name.
    let consumers: Vec<Value> = rc("XINFO", &[b"CONSUMERS", key, group])
        .query(&mut c)
        .unwrap();
    let names: Vec<Value> = consumers
        .iter()
        .map(|v| {
            pairs(v)
                .into_iter()
                .find(|(k, _)| k == "name")
                .expect("consumer name")
                .1
        })
        .collect();
    assert!(names.contains(&bs(claimant)), "{names:?}");
}

// ---------------------------------------------------------------------------------------------
// 4. Key extraction and command metadata
// ---------------------------------------------------------------------------------------------

fn getkeys(con: &mut Connection, args: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut a: Vec<&[u8]> = a![b"GETKEYS"];
    a.extend_from_slice(args);
    rc("COMMAND", &a).query(con).expect("COMMAND GETKEYS")
}

#[test]
fn command_getkeys() {
    let s = Server::new();
    let mut c = s.conn();
    let v = |x: &[&[u8]]| -> Vec<Vec<u8>> { x.iter().map(|k| k.to_vec()).collect() };
    type Case<'a> = (Vec<&'a [u8]>, Vec<Vec<u8>>);
    let cases: Vec<Case> = vec![
        (a![b"RECLAIM.POLICY", b"SET", b"s", b"g"], v(&[b"s"])),
        (
            a![b"RECLAIM.POLICY", b"SET", b"s", b"g", b"DLQ", b"d"],
            v(&[b"s", b"d"]),
        ),
        (
            a![b"reclaim.policy", b"set", b"s", b"g", b"dlq", b"d"],
            v(&[b"s", b"d"]),
        ),
        (
            a![
                b"RECLAIM.POLICY",
                b"SET",
                b"s",
                b"g",
                b"MIN-IDLE",
                b"5",
                b"COUNT",
                b"2",
                b"DLQ",
                b"d",
                b"INTERVAL",
                b"9",
            ],
            v(&[b"s", b"d"]),
        ),
        (
            a![
                b"RECLAIM.POLICY",
                b"SET",
                b"s",
                b"g",
                b"CLAIMANT",
                b"DLQ",
                b"COUNT",
                b"5",
            ],
            v(&[b"s"]),
        ),
        (
            a![
                b"RECLAIM.POLICY",
                b"SET",
                b"s",
                b"g",
                b"CLAIMANT",
                b"DLQ",
                b"DLQ",
                b"x",
            ],
            v(&[b"s", b"x"]),
        ),
        (
            a![b"RECLAIM.POLICY", b"SET", b"s", b"DLQ", b"COUNT", b"5"],
            v(&[b"s"]),
        ),
        (
            a![
                b"RECLAIM.POLICY",
                b"SET",
                b"s\x00\xff",
                b"g",
                b"DLQ",
                b"d\r\n"
            ],
            v(&[b"s\x00\xff", b"d\r\n"]),
        ),
        (a![b"RECLAIM.POLICY", b"GET", b"s", b"g"], v(&[b"s"])),
        (a![b"RECLAIM.POLICY", b"DEL", b"s", b"g"], v(&[b"s"])),
        (a![b"RECLAIM.SWEEP", b"s", b"g"], v(&[b"s"])),
        (a![b"RECLAIM.SWEEP", b"s", b"g", b"LIMIT", b"5"], v(&[b"s"])),
        (a![b"RECLAIM.STATS", b"s", b"g"], v(&[b"s"])),
        (a![b"RECLAIM.HEALTH", b"s", b"g"], v(&[b"s"])),
    ];
    for (args, want) in &cases {
        assert_eq!(
            getkeys(&mut c, args),
            *want,
            "{:?}",
            args.iter()
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
        );
    }
    assert_eq!(
        error_of(
            &mut c,
            &rc("COMMAND", &[b"GETKEYS", b"RECLAIM.POLICY", b"LIST"])
        ),
        "ERR The command has no key arguments"
    );

    // Key flags: the stream is updated, the DLQ receives inserts.
    let kf = ok(
        &mut c,
        &rc(
            "COMMAND",
            &[
                b"GETKEYSANDFLAGS",
                b"RECLAIM.POLICY",
                b"SET",
                b"s",
                b"g",
                b"DLQ",
                b"d",
            ],
        ),
    );
    let got: Vec<(String, Vec<String>)> = match &kf {
        Value::Array(items) => items
            .iter()
            .map(|it| match it {
                Value::Array(p) => (
                    string_reply(&p[0]),
                    match &p[1] {
                        Value::Array(f) => f.iter().map(string_reply).collect(),
                        other => panic!("flags: {other:?}"),
                    },
                ),
                other => panic!("item: {other:?}"),
            })
            .collect(),
        other => panic!("GETKEYSANDFLAGS: {other:?}"),
    };
    assert_eq!(
        got,
        vec![
            (
                "s".to_string(),
                vec!["RW".to_string(), "update".to_string()]
            ),
            (
                "d".to_string(),
                vec!["RW".to_string(), "insert".to_string()]
            ),
        ]
    );
}

/// One `COMMAND INFO` entry: (name, arity, flags, subcommand entries).
fn command_info(con: &mut Connection, name: &str) -> (String, i64, Vec<String>, Vec<Value>) {
    let v: Value = cmd("COMMAND").arg("INFO").arg(name).query(con).unwrap();
    let Value::Array(top) = v else {
        panic!("COMMAND INFO: {v:?}")
    };
    assert_eq!(top.len(), 1);
    entry_of(&top[0])
}

fn entry_of(v: &Value) -> (String, i64, Vec<String>, Vec<Value>) {
    let Value::Array(e) = v else {
        panic!("COMMAND INFO entry: {v:?}")
    };
    let arity = match &e[1] {
        Value::Int(i) => *i,
        other => panic!("arity: {other:?}"),
    };
    let flags = match &e[2] {
        Value::Array(f) => f.iter().map(string_reply).collect(),
        Value::Set(f) => f.iter().map(string_reply).collect(),
        other => panic!("flags: {other:?}"),
    };
    let subs = match e.get(9) {
        Some(Value::Array(s)) => s.clone(),
        _ => vec![],
    };
    (string_reply(&e[0]), arity, flags, subs)
}

#[test]
fn command_info_and_docs() {
    let s = Server::new();
    let mut c = s.conn();
    let (name, arity, _, subs) = command_info(&mut c, "RECLAIM.POLICY");
    assert_eq!(name, "reclaim.policy");
    assert_eq!(arity, -2);
    let mut subs: Vec<(String, i64, Vec<String>, Vec<Value>)> = subs.iter().map(entry_of).collect();
    subs.sort_by(|a, b| a.0.cmp(&b.0));
    let summary: Vec<(String, i64)> = subs.iter().map(|s| (s.0.clone(), s.1)).collect();
    assert_eq!(
        summary,
        vec![
            ("reclaim.policy|del".to_string(), 4),
            ("reclaim.policy|export".to_string(), 2),
            ("reclaim.policy|get".to_string(), 4),
            ("reclaim.policy|help".to_string(), 2),
            ("reclaim.policy|import".to_string(), -3),
            ("reclaim.policy|list".to_string(), 2),
            ("reclaim.policy|pause".to_string(), -4),
            ("reclaim.policy|resume".to_string(), 4),
            ("reclaim.policy|set".to_string(), -4),
        ]
    );
    let flags_of = |n: &str| subs.iter().find(|s| s.0 == n).unwrap().2.clone();
    for f in ["write", "denyoom", "module", "movablekeys"] {
        assert!(
            flags_of("reclaim.policy|set").contains(&f.to_string()),
            "set lacks {f}"
        );
    }
    assert!(flags_of("reclaim.policy|get").contains(&"readonly".to_string()));
    assert!(flags_of("reclaim.policy|list").contains(&"readonly".to_string()));
    assert!(flags_of("reclaim.policy|del").contains(&"write".to_string()));
    assert!(flags_of("reclaim.policy|export").contains(&"readonly".to_string()));
    for f in ["write", "denyoom"] {
        assert!(
            flags_of("reclaim.policy|import").contains(&f.to_string()),
            "import lacks {f}"
        );
    }

    let (name, arity, flags, _) = command_info(&mut c, "RECLAIM.SWEEP");
    assert_eq!((name.as_str(), arity), ("reclaim.sweep", -3));
    assert!(flags.contains(&"write".to_string()), "{flags:?}");
    assert!(flags.contains(&"denyoom".to_string()), "{flags:?}");
    let (name, arity, flags, _) = command_info(&mut c, "RECLAIM.STATS");
    assert_eq!((name.as_str(), arity), ("reclaim.stats", 3));
    assert!(flags.contains(&"readonly".to_string()), "{flags:?}");
    let (name, arity, flags, _) = command_info(&mut c, "RECLAIM.HEALTH");
    assert_eq!((name.as_str(), arity), ("reclaim.health", 3));
    assert!(flags.contains(&"readonly".to_string()), "{flags:?}");
    assert!(!flags.contains(&"write".to_string()), "{flags:?}");
    // As XREADGROUP: a write command that may block (GROUP g c STREAMS key > at least).
    let (name, arity, flags, _) = command_info(&mut c, "RECLAIM.READGROUP");
    assert_eq!((name.as_str(), arity), ("reclaim.readgroup", -7));
    assert!(flags.contains(&"write".to_string()), "{flags:?}");
    assert!(flags.contains(&"blocking".to_string()), "{flags:?}");
    // RECLAIM.REDRIVE: starts, reads (STATUS) or cancels a task, so it is not flagged write
    // (`may-replicate`, which COMMAND INFO does not show): it refuses the writing forms on a
    // replica itself; its keys come from its getkeys callback.
    let (name, arity, flags, _) = command_info(&mut c, "RECLAIM.REDRIVE");
    assert_eq!((name.as_str(), arity), ("reclaim.redrive", -2));
    assert!(flags.contains(&"movablekeys".to_string()), "{flags:?}");
    assert!(!flags.contains(&"write".to_string()), "{flags:?}");
    let keys: Vec<String> = cmd("COMMAND")
        .arg(&[
            "GETKEYS",
            "RECLAIM.REDRIVE",
            "d",
            "COUNT",
            "5",
            "SOURCE",
            "s",
            "g",
        ])
        .query(&mut c)
        .unwrap();
    assert_eq!(keys, ["d", "s"]);
    let keys: Vec<String> = cmd("COMMAND")
        .arg(&["GETKEYS", "RECLAIM.REDRIVE", "STATUS", "d"])
        .query(&mut c)
        .unwrap();
    assert_eq!(keys, ["d"]);
    // Subcommands are addressable by their full name.
    let (name, arity, _, _) = command_info(&mut c, "RECLAIM.POLICY|SET");
    assert_eq!((name.as_str(), arity), ("reclaim.policy|set", -4));

    // COMMAND LIST FILTERBY MODULE: every command and subcommand.
    let mut listed: Vec<String> = cmd("COMMAND")
        .arg("LIST")
        .arg("FILTERBY")
        .arg("MODULE")
        .arg("reclaim")
        .query(&mut c)
        .unwrap();
    listed.sort();
    assert_eq!(
        listed,
        [
            "reclaim.extend",
            "reclaim.health",
            "reclaim.nack",
            "reclaim.policy",
            "reclaim.policy|del",
            "reclaim.policy|export",
            "reclaim.policy|get",
            "reclaim.policy|help",
            "reclaim.policy|import",
            "reclaim.policy|list",
            "reclaim.policy|pause",
            "reclaim.policy|resume",
            "reclaim.policy|set",
            "reclaim.readgroup",
            "reclaim.redrive",
            "reclaim.simulate",
            "reclaim.stats",
            "reclaim.sweep",
            "reclaim.term"
        ]
    );

    // COMMAND DOCS: summaries, module name and the subcommands.
    let docs: Value = cmd("COMMAND")
        .arg("DOCS")
        .arg("RECLAIM.POLICY")
        .arg("RECLAIM.SWEEP")
        .arg("RECLAIM.STATS")
        .arg("RECLAIM.HEALTH")
        .arg("RECLAIM.READGROUP")
        .arg("RECLAIM.REDRIVE")
        .query(&mut c)
        .unwrap();
    let docs = pairs(&docs);
    let names: Vec<&str> = docs.iter().map(|(k, _)| k.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [
            "reclaim.health",
            "reclaim.policy",
            "reclaim.readgroup",
            "reclaim.redrive",
            "reclaim.stats",
            "reclaim.sweep"
        ]
    );
    for (cmd_name, d) in &docs {
        assert_eq!(str_field(d, "module"), "reclaim", "{cmd_name}");
        assert_eq!(str_field(d, "group"), "module", "{cmd_name}");
        assert!(!str_field(d, "summary").is_empty(), "{cmd_name}");
        assert!(!str_field(d, "complexity").is_empty(), "{cmd_name}");
    }
    let policy = &docs.iter().find(|(k, _)| k == "reclaim.policy").unwrap().1;
    let subdocs = pairs(
        &pairs(policy)
            .into_iter()
            .find(|(k, _)| k == "subcommands")
            .expect("subcommands in COMMAND DOCS")
            .1,
    );
    let mut subnames: Vec<String> = subdocs.iter().map(|(k, _)| k.clone()).collect();
    subnames.sort();
    assert_eq!(
        subnames,
        [
            "reclaim.policy|del",
            "reclaim.policy|export",
            "reclaim.policy|get",
            "reclaim.policy|help",
            "reclaim.policy|import",
            "reclaim.policy|list",
            "reclaim.policy|pause",
            "reclaim.policy|resume",
            "reclaim.policy|set"
        ]
    );
    for (n, d) in &subdocs {
        assert!(!str_field(d, "summary").is_empty(), "{n}");
        assert_eq!(str_field(d, "module"), "reclaim", "{n}");
    }
}

// ---------------------------------------------------------------------------------------------
// 5. ACL
// ---------------------------------------------------------------------------------------------

fn acl(con: &mut Connection, args: &[&str]) {
    let mut c = cmd("ACL");
    c.arg("SETUSER").arg(args);
    let r: Value = c.query(con).expect("ACL SETUSER");
    assert!(is_ok(&r), "{r:?}");
}

#[test]
fn acl_key_patterns_cover_stream_and_dlq() {
    let s = Server::new();
    let mut admin = s.conn();
    acl(&mut admin, &["app", "on", "nopass", "~app:*", "+@all"]);
    let mut app = conn_as(&s, "app");

    set(
        &mut app,
        b"app:s",
        b"g",
        &[b"DLQ", b"app:dlq", b"MAX-DELIVERIES", b"2"],
    );
    let p = P {
        dlq: Some(b"app:dlq".to_vec()),
        max_deliveries: 2,
        ..defaults()
    };
    assert_eq!(get(&mut app, b"app:s", b"g"), p.resp2());
    // A CLAIMANT value that looks like a key outside the pattern is not a key.
    set(&mut app, b"app:s", b"g2", &[b"CLAIMANT", b"other:dlq"]);
    set(
        &mut app,
        b"app:s",
        b"g3",
        &[b"CLAIMANT", b"DLQ", b"COUNT", b"5"],
    );

    let denied: Vec<(&[u8], Vec<&[u8]>)> = vec![
        (b"other:s", vec![]),
        (b"app:s", a![b"DLQ", b"other:dlq"]),
        (b"app:s", a![b"DLQ", b"other:dlq", b"MAX-DELIVERIES", b"2"]),
        (b"app:s", a![b"CLAIMANT", b"DLQ", b"DLQ", b"other:x"]),
    ];
    for (key, opts) in &denied {
        assert_noperm_keys(&set_err(&mut app, key, b"g", opts), &format!("{opts:?}"));
    }
    assert_eq!(get(&mut app, b"app:s", b"g"), p.resp2());
    assert_eq!(get(&mut admin, b"other:s", b"g"), Value::Nil);
    // The other commands check the stream key too.
    set(&mut admin, b"other:s", b"g", &[]);
    for cm in [
        pol(&[b"GET", b"other:s", b"g"]),
        pol(&[b"DEL", b"other:s", b"g"]),
        rc("RECLAIM.SWEEP", &[b"other:s", b"g"]),
        rc("RECLAIM.STATS", &[b"other:s", b"g"]),
        rc("RECLAIM.HEALTH", &[b"other:s", b"g"]),
    ] {
        assert_noperm_keys(&error_of(&mut app, &cm), "app user");
    }
    assert_eq!(get(&mut admin, b"other:s", b"g"), defaults().resp2());
    let st = ok(&mut app, &rc("RECLAIM.STATS", &[b"app:s", b"g"]));
    assert_eq!(int_field(&st, "errors"), 0);
}

#[test]
fn acl_read_only_user() {
    let s = Server::new();
    let mut admin = s.conn();
    set(&mut admin, b"s", b"g", &[b"COUNT", b"4"]);
    let p = P {
        count: 4,
        ..defaults()
    };
    acl(&mut admin, &["ro", "on", "nopass", "%R~*", "+@all"]);
    let mut ro = conn_as(&s, "ro");

    assert_eq!(get(&mut ro, b"s", b"g"), p.resp2());
    assert_eq!(list(&mut ro), Value::Array(vec![p.list2(b"s", b"g")]));
    let st = ok(&mut ro, &rc("RECLAIM.STATS", &[b"s", b"g"]));
    assert_eq!(str_field(&st, "status"), "waiting: stream does not exist");
    // A read-only user reads RECLAIM.HEALTH (no stream yet: nothing live).
    let h = ok(&mut ro, &rc("RECLAIM.HEALTH", &[b"s", b"g"]));
    assert_eq!(field(&h, "live"), Value::Nil);

    for cm in [
        pol(&[b"SET", b"s", b"g"]),
        pol(&[b"SET", b"s", b"g", b"COUNT", b"5"]),
        pol(&[b"SET", b"new", b"g"]),
        pol(&[b"DEL", b"s", b"g"]),
        rc("RECLAIM.SWEEP", &[b"s", b"g"]),
    ] {
        assert_noperm_keys(&error_of(&mut ro, &cm), "read-only user");
    }
    assert_eq!(get(&mut admin, b"s", b"g"), p.resp2());
    assert_eq!(get(&mut admin, b"new", b"g"), Value::Nil);

    // The same by denying the write commands instead of write access to keys.
    acl(
        &mut admin,
        &[
            "ro2",
            "on",
            "nopass",
            "~*",
            "+@all",
            "-reclaim.policy|set",
            "-reclaim.policy|del",
            "-reclaim.sweep",
        ],
    );
    let mut ro2 = conn_as(&s, "ro2");
    assert_eq!(get(&mut ro2, b"s", b"g"), p.resp2());
    assert_eq!(list(&mut ro2), Value::Array(vec![p.list2(b"s", b"g")]));
    let _ = ok(&mut ro2, &rc("RECLAIM.STATS", &[b"s", b"g"]));
    let cases = [
        (
            pol(&[b"SET", b"s", b"g"]),
            "NOPERM this user has no permissions to run the 'reclaim.policy|set' command",
        ),
        (
            pol(&[b"DEL", b"s", b"g"]),
            "NOPERM this user has no permissions to run the 'reclaim.policy|del' command",
        ),
        (
            rc("RECLAIM.SWEEP", &[b"s", b"g"]),
            "NOPERM this user has no permissions to run the 'reclaim.sweep' command",
        ),
    ];
    for (cm, want) in &cases {
        // Redis 8.x names the user instead of "this user".
        let got = error_of(&mut ro2, cm).replace("User ro2 has", "this user has");
        assert_eq!(got, *want);
    }
    assert_eq!(get(&mut admin, b"s", b"g"), p.resp2());
}

#[test]
fn acl_sweep_needs_write_access_to_the_dlq() {
    let s = Server::new();
    let mut admin = s.conn();
    create_group(&mut admin, b"w:s", b"g");
    // Entries delivered once are dead-lettered as soon as they are stale.
    set(
        &mut admin,
        b"w:s",
        b"g",
        &[
            b"MIN-IDLE",
            b"1",
            b"DLQ",
            b"d:dlq",
            b"MAX-DELIVERIES",
            b"1",
            b"INTERVAL",
            b"100000",
        ],
    );
    set(&mut admin, b"w:s", b"nodlq", &[b"INTERVAL", b"100000"]);
    // The timer's first pass (empty PEL) is done; the next one is 100 s away.
    wait_for(10, "the first timer pass", || {
        (int_field(&stats(&mut admin, "w:s", "g"), "passes") >= 1).then_some(())
    });
    let _: String = q(&mut admin, &["XADD", "w:s", "*", "n", "1"]);
    deliver(&mut admin, "w:s", "g", "c1", None);

    acl(&mut admin, &["w", "on", "nopass", "~w:*", "+@all"]);
    acl(
        &mut admin,
        &["wr", "on", "nopass", "~w:*", "%R~d:*", "+@all"],
    );
    acl(
        &mut admin,
        &["ww", "on", "nopass", "~w:*", "%W~d:*", "+@all"],
    );
    let mut w = conn_as(&s, "w");
    let mut wr = conn_as(&s, "wr");
    let mut ww = conn_as(&s, "ww");
    for con in [&mut w, &mut wr] {
        assert_eq!(
            error_of(con, &rc("RECLAIM.SWEEP", &[b"w:s", b"g"])),
            NOPERM_DLQ
        );
        assert_eq!(
            error_of(con, &rc("RECLAIM.SWEEP", &[b"w:s", b"g", b"LIMIT", b"1"])),
            NOPERM_DLQ
        );
        // A policy without a DLQ sweeps fine, and STATS needs no DLQ access.
        let r = ok(con, &rc("RECLAIM.SWEEP", &[b"w:s", b"nodlq"]));
        assert_eq!(int_field(&r, "dead-lettered"), 0);
        let _ = ok(con, &rc("RECLAIM.STATS", &[b"w:s", b"g"]));
    }
    // The refused sweeps did not touch the PEL or the DLQ.
    let p = pending_raw(&mut admin, b"w:s", b"g");
    assert_eq!(p.len(), 1);
    assert_eq!(p[0].1, b"c1".to_vec());
    let n: i64 = cmd("XLEN").arg("d:dlq").query(&mut admin).unwrap();
    assert_eq!(n, 0);
    assert_eq!(
        int_field(&stats(&mut admin, "w:s", "g"), "dead-lettered"),
        0
    );

    // Write-only access to the DLQ is enough.
    let mut dead = 0;
    wait_for(10, "a sweep by `ww` to dead-letter the entry", || {
        let r = ok(&mut ww, &rc("RECLAIM.SWEEP", &[b"w:s", b"g"]));
        dead += int_field(&r, "dead-lettered");
        (dead == 1).then_some(())
    });
    assert_eq!(pending_raw(&mut admin, b"w:s", b"g"), vec![]);
    let n: i64 = cmd("XLEN").arg("d:dlq").query(&mut admin).unwrap();
    assert_eq!(n, 1);
}

// ---------------------------------------------------------------------------------------------
// 6. Module configs
// ---------------------------------------------------------------------------------------------

#[test]
fn config_get_and_set() {
    let s = Server::new();
    let mut c = s.conn();
    assert_eq!(config_get(&mut c, "reclaim.tick-interval-ms"), "10");
    assert_eq!(config_get(&mut c, "reclaim.tick-budget-us"), "500");
    let all: Vec<String> = cmd("CONFIG")
        .arg("GET")
        .arg("reclaim.*")
        .query(&mut c)
        .unwrap();
    let mut names: Vec<&String> = all.iter().step_by(2).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "reclaim.enabled",
            "reclaim.tick-budget-us",
            "reclaim.tick-interval-ms"
        ]
    );
    assert_eq!(config_get(&mut c, "reclaim.enabled"), "yes");

    let cases: &[(&str, &[&str], &[&str], &str)] = &[
        (
            "reclaim.tick-interval-ms",
            &["1", "1000", "25"],
            &["0", "1001", "-1"],
            "argument must be between 1 and 1000 inclusive",
        ),
        (
            "reclaim.tick-budget-us",
            &["50", "100000", "700"],
            &["49", "100001", "0"],
            "argument must be between 50 and 100000 inclusive",
        ),
    ];
    for (name, good, bad, range) in cases {
        for v in *good {
            let r: Value = cmd("CONFIG")
                .arg("SET")
                .arg(*name)
                .arg(*v)
                .query(&mut c)
                .unwrap();
            assert!(is_ok(&r), "{r:?}");
            assert_eq!(config_get(&mut c, name), *v);
        }
        let last = good.last().unwrap();
        for v in *bad {
            assert_eq!(
                error_of(&mut c, cmd("CONFIG").arg("SET").arg(*name).arg(*v)),
                format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {range}")
            );
            assert_eq!(config_get(&mut c, name), *last, "after {v}");
        }
        assert_eq!(
            error_of(&mut c, cmd("CONFIG").arg("SET").arg(*name).arg("abc")),
            format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - argument couldn't be parsed into an integer"
            )
        );
        assert_eq!(config_get(&mut c, name), *last);
    }

    // The sweeper keeps working at the new settings.
    let _ = pending_for_c1(&mut c, b"s", b"g", 2);
    set(&mut c, b"s", b"g", &[b"MIN-IDLE", b"1", b"INTERVAL", b"50"]);
    wait_for(10, "claims at tick-interval 25 ms", || {
        let p = pending_raw(&mut c, b"s", b"g");
        (p.len() == 2 && p.iter().all(|e| e.1 == b"reclaim")).then_some(())
    });
}

#[test]
fn configs_from_the_command_line_and_loadmodule_args() {
    // `--reclaim.<name> value` after the module is loaded.
    let s = Server::start(&["--reclaim.tick-interval-ms", "5"]);
    let mut c = s.conn();
    assert_eq!(config_get(&mut c, "reclaim.tick-interval-ms"), "5");
    assert_eq!(config_get(&mut c, "reclaim.tick-budget-us"), "500");
    drop(c);
    drop(s);

    // Module arguments: the harness puts `extra` right after the module path, so arguments before
    // the first `--option` belong to the `loadmodule` line.
    let s = Server::start(&["tick-interval-ms", "5", "tick-budget-us", "200"]);
    let mut c = s.conn();
    assert_eq!(config_get(&mut c, "reclaim.tick-interval-ms"), "5");
    assert_eq!(config_get(&mut c, "reclaim.tick-budget-us"), "200");
    let ml: Value = cmd("MODULE").arg("LIST").query(&mut c).unwrap();
    let Value::Array(mods) = &ml else {
        panic!("{ml:?}")
    };
    // Redis 8 lists its built-in modules too (vectorset), in no set order.
    let names: Vec<String> = mods
        .iter()
        .map(|m| string_reply(&pairs(m).into_iter().find(|(k, _)| k == "name").unwrap().1))
        .collect();
    assert!(names.iter().any(|n| n == "reclaim"), "{names:?}");
    drop(c);
    drop(s);

    // A yes/no config, as a module argument and on the command line.
    let s = Server::start(&["enabled", "no"]);
    assert_eq!(config_get(&mut s.conn(), "reclaim.enabled"), "no");
    drop(s);
    let s = Server::start(&["--reclaim.enabled", "no"]);
    assert_eq!(config_get(&mut s.conn(), "reclaim.enabled"), "no");
    drop(s);

    // Both: the command-line config wins over the module argument.
    let s = Server::start(&["tick-interval-ms", "5", "--reclaim.tick-interval-ms", "7"]);
    let mut c = s.conn();
    assert_eq!(config_get(&mut c, "reclaim.tick-interval-ms"), "7");
}

/// `Ok` when redis-server, started with the module and `args` right after the module path (so
/// arguments before the first `--option` are `loadmodule` arguments), exits during start-up;
/// `Err` with the reclaim configs it reports when it starts serving instead.
fn start_refused(args: &[&str]) -> Result<(), String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let mut child = std::process::Command::new(server_binary())
        .arg("--port")
        .arg(port.to_string())
        .arg("--bind")
        .arg("127.0.0.1")
        .arg("--dir")
        .arg(dir.path())
        .arg("--logfile")
        .arg(dir.path().join("server.log"))
        .arg("--save")
        .arg("")
        .arg("--loadmodule")
        .arg(module_path())
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start redis-server");
    let outcome = wait_for(
        20,
        &format!("redis-server {args:?} to exit or serve"),
        || {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(Ok(status));
            }
            let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
            let mut con = client.get_connection().ok()?;
            // Only our server counts (not another one that got the port after ours exited).
            let server: String = cmd("INFO").arg("server").query(&mut con).ok()?;
            let ours = format!("process_id:{}", child.id());
            if !server.lines().any(|l| l.trim() == ours) {
                return None;
            }
            let v: Vec<String> = cmd("CONFIG")
                .arg("GET")
                .arg("reclaim.*")
                .query(&mut con)
                .ok()?;
            Some(Err(v))
        },
    );
    let _ = child.kill();
    let _ = child.wait();
    match outcome {
        Ok(status) => {
            assert!(
                !status.success(),
                "redis-server {args:?} exited with {status}"
            );
            Ok(())
        }
        Err(v) => Err(format!(
            "redis-server {args:?} started; CONFIG GET reclaim.* = {v:?}"
        )),
    }
}

#[test]
fn a_clean_start_logs_no_module_warning() {
    // Warning-level lines are marked `#` in the log; the module's are prefixed `<reclaim>`.
    let s = Server::new();
    let log = s.log();
    assert!(log.contains("<reclaim> Created new data type"), "{log}");
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains(" # <reclaim>")).collect();
    assert_eq!(warnings, Vec::<&str>::new());
}

#[test]
fn out_of_range_configs_at_startup_are_refused() {
    let cases: &[&[&str]] = &[
        // Command-line configs (validated by Redis).
        &["--reclaim.tick-interval-ms", "0"],
        &["--reclaim.tick-interval-ms", "1001"],
        &["--reclaim.tick-budget-us", "49"],
        &["--reclaim.tick-budget-us", "100001"],
        // loadmodule arguments.
        &["tick-interval-ms", "abc"],
        &["tick-interval-ms", "0"],
        &["tick-interval-ms", "1001"],
        &["tick-budget-us", "49"],
        &["tick-budget-us", "100001"],
        &["enabled", "maybe"],
        &["--reclaim.enabled", "maybe"],
    ];
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|a| start_refused(a).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

// ---------------------------------------------------------------------------------------------
// 7. INFO reclaim
// ---------------------------------------------------------------------------------------------

#[test]
fn info_section() {
    let s = Server::new();
    let mut c = s.conn();
    let text: String = cmd("INFO").arg("reclaim").query(&mut c).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines[0].trim(), "# reclaim", "{text}");
    for f in [
        "reclaim_policies",
        "reclaim_inbox",
        "reclaim_tracked_consumers",
        "reclaim_used_memory",
        "reclaim_blocked_readers",
        "reclaim_ticks",
        "reclaim_ticks_skipped_replica",
        "reclaim_ticks_skipped_loading",
        "reclaim_ticks_skipped_paused",
        "reclaim_ticks_skipped_oom",
        "reclaim_steps",
        "reclaim_passes",
        "reclaim_claimed",
        "reclaim_redelivered",
        "reclaim_dead_lettered",
        "reclaim_deleted",
        "reclaim_oom_skips",
        "reclaim_errors",
        "reclaim_dlq_trimmed",
        "reclaim_tombstones",
        "reclaim_last_tick_us",
        "reclaim_max_tick_us",
        "reclaim_panics",
    ] {
        let _ = info_int(&mut c, "reclaim", f);
    }
    // Every line of the section is `reclaim_<name>:<integer>`; the per-policy lines follow in
    // their own section (tests/observe.rs).
    let totals: Vec<&&str> = lines[1..]
        .iter()
        .take_while(|l| !l.starts_with('#'))
        .collect();
    assert_eq!(
        lines.get(totals.len() + 1).map(|l| l.trim()),
        Some("# reclaim_policies"),
        "{text}"
    );
    for l in totals {
        let (k, v) = l.split_once(':').unwrap_or_else(|| panic!("line {l:?}"));
        assert!(k.starts_with("reclaim_"), "{l:?}");
        assert!(v.trim().parse::<u64>().is_ok(), "{l:?}");
    }
    // The section is part of `INFO everything` too.
    let all: String = cmd("INFO").arg("everything").query(&mut c).unwrap();
    assert!(
        all.contains("# reclaim\r\n"),
        "INFO everything lacks # reclaim"
    );

    assert_eq!(reclaim_info(&mut c, "policies"), 0);
    assert_eq!(reclaim_info(&mut c, "claimed"), 0);
    assert_eq!(reclaim_info(&mut c, "redelivered"), 0);
    assert_eq!(reclaim_info(&mut c, "inbox"), 0);
    assert_eq!(reclaim_info(&mut c, "dead_lettered"), 0);
    assert_eq!(reclaim_info(&mut c, "deleted"), 0);
    assert_eq!(reclaim_info(&mut c, "ticks_skipped_replica"), 0);

    set(&mut c, b"a", b"g", &[]);
    set(&mut c, b"a", b"h", &[]);
    set(&mut c, b"b", b"g", &[]);
    assert_eq!(reclaim_info(&mut c, "policies"), 3);
    // Replacing is not adding.
    set(&mut c, b"a", b"g", &[b"COUNT", b"5"]);
    assert_eq!(reclaim_info(&mut c, "policies"), 3);
    // A rejected SET adds nothing.
    let _ = set_err(&mut c, b"z", b"g", &[b"COUNT", b"0"]);
    assert_eq!(reclaim_info(&mut c, "policies"), 3);
    // Policies of every database count.
    let mut c1 = s.conn();
    let _: () = cmd("SELECT").arg(1).query(&mut c1).unwrap();
    set(&mut c1, b"a", b"g", &[]);
    assert_eq!(reclaim_info(&mut c, "policies"), 4);
    assert_eq!(ok(&mut c, &pol(&[b"DEL", b"a", b"h"])), Value::Int(1));
    assert_eq!(reclaim_info(&mut c, "policies"), 3);
    assert_eq!(ok(&mut c, &pol(&[b"DEL", b"a", b"h"])), Value::Int(0));
    assert_eq!(reclaim_info(&mut c, "policies"), 3);
    // FLUSHDB forgets the policies of its database.
    let _: () = cmd("FLUSHDB").query(&mut c1).unwrap();
    assert_eq!(reclaim_info(&mut c, "policies"), 2);
    let _: () = cmd("FLUSHALL").query(&mut c).unwrap();
    assert_eq!(reclaim_info(&mut c, "policies"), 0);
    assert_eq!(list(&mut c), Value::Array(vec![]));
    assert_eq!(reclaim_info(&mut c, "panics"), 0);
}

// ---------------------------------------------------------------------------------------------
// 8. A replica
// ---------------------------------------------------------------------------------------------

#[test]
fn commands_on_a_replica() {
    // No diskless-sync delay: the replica's full sync starts at once.
    let primary = Server::start(&["--repl-diskless-sync-delay", "0"]);
    let mut pc = primary.conn();
    // One policy before the replica attaches (arrives by full sync), one after (by the stream).
    set(&mut pc, b"early", b"g", &[b"COUNT", b"3"]);
    let replica = primary.replica(&[]);
    let mut rc_ = replica.conn();

    let claimant: &[u8] = b"c\x00\xff\r\n";
    set(
        &mut pc,
        b"s",
        b"g",
        &[
            b"MIN-IDLE",
            b"5",
            b"MAX-DELIVERIES",
            b"2",
            b"DLQ",
            b"s:dlq",
            b"CLAIMANT",
            claimant,
            b"INTERVAL",
            b"100000",
        ],
    );
    let p = P {
        min_idle: 5,
        max_deliveries: 2,
        dlq: Some(b"s:dlq".to_vec()),
        claimant: claimant.to_vec(),
        interval: 100000,
        ..defaults()
    };
    let early = P {
        count: 3,
        ..defaults()
    };
    wait_for(10, "the policy to reach the replica", || {
        (get(&mut rc_, b"s", b"g") == p.resp2()).then_some(())
    });
    assert_eq!(get(&mut rc_, b"early", b"g"), early.resp2());
    let want_list = Value::Array(vec![early.list2(b"early", b"g"), p.list2(b"s", b"g")]);
    assert_eq!(list(&mut pc), want_list);
    assert_eq!(list(&mut rc_), want_list);
    let mut r3 = replica.conn3();
    assert_eq!(get(&mut r3, b"s", b"g"), p.resp3());

    // STATS works, and says why nothing is swept here.
    let st = ok(&mut rc_, &rc("RECLAIM.STATS", &[b"s", b"g"]));
    assert_eq!(str_field(&st, "status"), "replica");
    assert_eq!(int_field(&st, "passes"), 0);
    assert_eq!(
        str_field(
            &ok(&mut rc_, &rc("RECLAIM.STATS", &[b"early", b"g"])),
            "status"
        ),
        "replica"
    );
    assert_eq!(
        error_of(&mut rc_, &rc("RECLAIM.STATS", &[b"s", b"nope"])),
        NO_POLICY
    );

    // Writes are refused.
    for cm in [
        pol(&[b"SET", b"s", b"g"]),
        pol(&[b"SET", b"new", b"g"]),
        pol(&[b"DEL", b"s", b"g"]),
        rc("RECLAIM.SWEEP", &[b"s", b"g"]),
    ] {
        assert_eq!(error_of(&mut rc_, &cm), READONLY);
    }
    // Parse errors are still READONLY first (the command is a write).
    assert_eq!(
        error_of(&mut rc_, &pol(&[b"SET", b"s", b"g", b"COUNT", b"0"])),
        READONLY
    );
    assert_eq!(get(&mut rc_, b"s", b"g"), p.resp2());
    assert_eq!(get(&mut rc_, b"new", b"g"), Value::Nil);

    // The replica counts its policies and its skipped ticks.
    assert_eq!(reclaim_info(&mut rc_, "policies"), 2);
    wait_for(10, "ticks skipped on the replica", || {
        (reclaim_info(&mut rc_, "ticks_skipped_replica") > 0).then_some(())
    });
    assert_eq!(reclaim_info(&mut pc, "ticks_skipped_replica"), 0);

    // A DEL on the primary reaches the replica.
    assert_eq!(ok(&mut pc, &pol(&[b"DEL", b"s", b"g"])), Value::Int(1));
    wait_for(10, "the DEL to reach the replica", || {
        (get(&mut rc_, b"s", b"g") == Value::Nil).then_some(())
    });
    assert_eq!(
        list(&mut rc_),
        Value::Array(vec![early.list2(b"early", b"g")])
    );
    assert_eq!(
        error_of(&mut rc_, &rc("RECLAIM.STATS", &[b"s", b"g"])),
        NO_POLICY
    );
    assert_eq!(reclaim_info(&mut rc_, "policies"), 1);

    // A policy in another database replicates to that database.
    let mut p1 = primary.conn();
    let _: () = cmd("SELECT").arg(1).query(&mut p1).unwrap();
    set(&mut p1, b"s", b"g", &[b"COUNT", b"8"]);
    let mut r1 = replica.conn();
    let _: () = cmd("SELECT").arg(1).query(&mut r1).unwrap();
    let db1 = P {
        count: 8,
        ..defaults()
    };
    wait_for(10, "the db 1 policy to reach the replica", || {
        (get(&mut r1, b"s", b"g") == db1.resp2()).then_some(())
    });
    assert_eq!(list(&mut r1), Value::Array(vec![db1.list2(b"s", b"g")]));
    assert_eq!(get(&mut rc_, b"s", b"g"), Value::Nil);
}

#[test]
fn policy_help_lists_the_subcommands() {
    let s = Server::new();
    let mut c = s.conn();
    let lines: Vec<String> = cmd("RECLAIM.POLICY").arg("HELP").query(&mut c).unwrap();
    assert_eq!(lines.len(), 19);
    assert!(
        lines[0].starts_with("RECLAIM.POLICY <subcommand>"),
        "{lines:?}"
    );
    for sub in [
        "SET <key> <group>",
        "GET <key> <group>",
        "DEL <key> <group>",
        "LIST",
        "EXPORT",
        "IMPORT <json> [REPLACE]",
        "PAUSE <key> <group> [STORM]",
        "RESUME <key> <group>",
        "HELP",
    ] {
        assert!(
            lines.iter().any(|l| l.starts_with(sub)),
            "{sub} missing from {lines:?}"
        );
    }
}
