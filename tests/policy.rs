//! `RECLAIM.POLICY SET / GET / LIST / DEL / HELP` against a real server: the exact replies
//! (RESP2 and RESP3), every rejected option and key type with its exact error text (nothing
//! changes), binary-safe names, databases, and who may read or change a policy (ACL). PAUSE and
//! RESUME are in tests/steer.rs, EXPORT and IMPORT in tests/export.rs.

use reclaim_testkit::*;

// ---------------------------------------------------------------------------------------------
// Replies
// ---------------------------------------------------------------------------------------------

#[test]
fn policy_replies_resp2() {
    let s = Server::new();
    let defaults = PolicyView::defaults();
    let mut c = s.conn();

    // GET of a missing policy is nil; DEL of it is 0; LIST of nothing is empty.
    assert_eq!(policy_reply(&mut c, b"s", b"g"), Value::Nil);
    assert_eq!(policy_del_reply(&mut c, b"s", b"g"), Value::Int(0));
    assert_eq!(policy_list_reply(&mut c), Value::Array(vec![]));

    // SET answers +OK; every default.
    let r = run(&mut c, &["RECLAIM.POLICY", "SET", "s", "g"]);
    assert_eq!(r, Value::Okay);
    assert_policy_reply(&mut c, b"s", b"g", &defaults);

    // Every option, option names in any case.
    set_policy_args(
        &mut c,
        b"s",
        b"g",
        &words("min-idle 5 Max-Deliveries 3 dlq s:dlq CLAIMANT worker-9 Count 7 INTERVAL 250 backoff list 5 300 liveness 2000 storm 50 60000 dlq-maxlen 1000 Dlq-MaxAge 86400000 TOMBSTONES Yes forget-idle 600000"),
    );
    let full = PolicyView {
        min_idle: 5,
        max_deliveries: 3,
        dlq: Some(b"s:dlq".to_vec()),
        claimant: b"worker-9".to_vec(),
        count: 7,
        interval: 250,
        backoff: b"LIST 5 300".to_vec(),
        liveness: 2000,
        storm: Some((50, 60000)),
        dlq_maxlen: 1000,
        dlq_maxage: 86400000,
        tombstones: true,
        forget_idle: 600000,
        state: b"active".to_vec(),
        status: None,
    };
    assert_policy_reply(&mut c, b"s", b"g", &full);

    // SET replaces the whole policy: options not given go back to their defaults.
    set_policy_args(&mut c, b"s", b"g", &words("COUNT 9"));
    let replaced = PolicyView::defaults().with_count(9);
    assert_policy_reply(&mut c, b"s", b"g", &replaced);

    // Boundaries that are accepted.
    set_policy_args(
        &mut c,
        b"s",
        b"g2",
        &words("MIN-IDLE 9223372036854775807 COUNT 10000 INTERVAL 1 MAX-DELIVERIES 0"),
    );
    let edge = PolicyView::new(i64::MAX, 1).with_count(10000);
    assert_policy_reply(&mut c, b"s", b"g2", &edge);
    set_policy_args(
        &mut c,
        b"a",
        b"z",
        &words("COUNT 1 MAX-DELIVERIES 9223372036854775807 DLQ q"),
    );
    let a_z = PolicyView::defaults()
        .with_dlq(b"q", i64::MAX)
        .with_count(1);
    set_policy_args(&mut c, b"a", b"b", &[]);

    // LIST: every policy of the db, ordered by key then group, `key` and `group` first.
    assert_policy_list(
        &mut c,
        &[
            (b"a", b"b", &defaults),
            (b"a", b"z", &a_z),
            (b"s", b"g", &replaced),
            (b"s", b"g2", &edge),
        ],
    );

    // DEL answers 1, then 0; the other policies stay.
    assert_eq!(policy_del_reply(&mut c, b"s", b"g"), Value::Int(1));
    assert_eq!(policy_del_reply(&mut c, b"s", b"g"), Value::Int(0));
    assert_eq!(policy_reply(&mut c, b"s", b"g"), Value::Nil);
    assert_policy_reply(&mut c, b"s", b"g2", &edge);
    assert_policy_list(
        &mut c,
        &[
            (b"a", b"b", &defaults),
            (b"a", b"z", &a_z),
            (b"s", b"g2", &edge),
        ],
    );
    // Subcommand names are case-insensitive.
    assert_eq!(
        run(&mut c, &["RECLAIM.POLICY", "del", "a", "b"]),
        Value::Int(1)
    );
    assert_eq!(
        run(&mut c, &["RECLAIM.POLICY", "Get", "a", "b"]),
        Value::Nil
    );
}

/// (stream, group) of `RECLAIM.POLICY LIST <options>`, in reply order.
fn listed(c: &mut Connection, options: &[&[u8]]) -> Vec<(Vec<u8>, Vec<u8>)> {
    list_policies_with(c, options)
        .into_iter()
        .map(|(k, g, _)| (k, g))
        .collect()
}

/// Every page of `LIST COUNT n`, each from the last (key, group) of the one before, until a page
/// holds fewer than n: what a client's loop collects.
fn all_pages(c: &mut Connection, n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let count = n.to_string();
    let mut all: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    loop {
        let page = match all.last().cloned() {
            None => listed(c, &[b"COUNT", count.as_bytes()]),
            Some((k, g)) => listed(c, &[b"AFTER", &k, &g, b"COUNT", count.as_bytes()]),
        };
        let last_page = page.len() < n;
        all.extend(page);
        if last_page {
            return all;
        }
    }
}

#[test]
fn list_pages_by_key_then_group() {
    let s = Server::new();
    let mut c = s.conn();
    let names: [(&[u8], &[u8]); 7] = [
        (b"a", b"b"),
        (b"a", b"z"),
        (b"s", b"g"),
        (b"s", b"g2"),
        (b"s\x00\xff", b"g"),
        (b"t", b"x"),
        (b"t", b"\xff"),
    ];
    for (k, g) in names.iter().rev() {
        set_policy_args(&mut c, k, g, &[]);
    }
    let mut c1 = s.conn_db(1);
    set_policy_args(&mut c1, b"a", b"a", &[]);
    let want: Vec<(Vec<u8>, Vec<u8>)> = names
        .iter()
        .map(|(k, g)| (k.to_vec(), g.to_vec()))
        .collect();
    assert_eq!(listed(&mut c, &[]), want);
    assert_eq!(listed(&mut c, &[b"COUNT", b"2"]), want[..2]);
    assert_eq!(
        listed(&mut c, &[b"count", b"3", b"after", b"a", b"z"]),
        want[2..5]
    );
    // AFTER is exclusive and need not name a policy; without COUNT, the rest.
    assert_eq!(listed(&mut c, &[b"AFTER", b"s", b"g1"]), want[3..]);
    assert_eq!(
        listed(&mut c, &[b"AFTER", b"a", b"", b"COUNT", b"1"]),
        want[..1]
    );
    assert_eq!(
        listed(&mut c, &[b"AFTER", b"t", b"x", b"COUNT", b"5"]),
        want[6..]
    );
    assert!(listed(&mut c, &[b"AFTER", b"t", b"\xff", b"COUNT", b"5"]).is_empty());
    assert_eq!(listed(&mut c, &[b"COUNT", b"1000000"]), want);
    for n in [1, 2, 3, 7, 8] {
        assert_eq!(all_pages(&mut c, n), want, "pages of {n}");
    }
    // Database 1 pages its own.
    assert_eq!(
        listed(&mut c1, &[b"COUNT", b"5"]),
        vec![(b"a".to_vec(), b"a".to_vec())]
    );

    // Policies the caller may not see never shorten a page: it is filled from those after them.
    acl_setuser(&mut c, &["pager", "on", "nopass", "~a", "~t", "+@all"]);
    let mut pager = s.conn_as("pager");
    let seen: Vec<(Vec<u8>, Vec<u8>)> = [&want[..2], &want[5..]].concat();
    assert_eq!(
        listed(&mut pager, &[b"AFTER", b"a", b"z", b"COUNT", b"1"]),
        want[5..6]
    );
    for n in [1, 2, 3, 4, 5] {
        assert_eq!(all_pages(&mut pager, n), seen, "the pager's pages of {n}");
    }

    // Bad options: the exact errors.
    for (args, err) in [
        (&["COUNT", "0"][..], "ERR COUNT must be a positive integer"),
        (&["COUNT", "-2"], "ERR COUNT must be a positive integer"),
        (&["COUNT"], "ERR option COUNT needs a value"),
        (&["AFTER", "a"], "ERR option AFTER needs a value"),
        (
            &["COUNT", "1", "COUNT", "1"],
            "ERR option COUNT given more than once",
        ),
        (&["FROM", "a"], "ERR unknown option 'FROM'"),
    ] {
        let list = cmd("RECLAIM.POLICY").arg("LIST").arg(args).clone();
        assert_eq!(error_of(&mut c, &list), err, "{args:?}");
    }
}

#[test]
fn list_only_shows_the_selected_database() {
    let s = Server::new();
    let mut c0 = s.conn();
    let mut c1 = s.conn();
    let r: Value = cmd("SELECT").arg(1).query(&mut c1).unwrap();
    assert!(is_ok(&r));

    set_policy_args(&mut c0, b"s", b"g", &words("COUNT 10"));
    set_policy_args(&mut c0, b"only0", b"g", &[]);
    set_policy_args(&mut c1, b"s", b"g", &words("COUNT 11"));
    set_policy_args(&mut c1, b"only1", b"h", &words("CLAIMANT one"));

    let p0 = PolicyView::defaults().with_count(10);
    let p1 = PolicyView::defaults().with_count(11);
    let only1 = PolicyView::defaults().with_claimant(b"one");
    assert_policy_list(
        &mut c0,
        &[(b"only0", b"g", &PolicyView::defaults()), (b"s", b"g", &p0)],
    );
    assert_policy_list(&mut c1, &[(b"only1", b"h", &only1), (b"s", b"g", &p1)]);
    // GET and DEL are per database too.
    assert_policy_reply(&mut c0, b"s", b"g", &p0);
    assert_policy_reply(&mut c1, b"s", b"g", &p1);
    assert_eq!(policy_reply(&mut c0, b"only1", b"h"), Value::Nil);
    assert_eq!(policy_del_reply(&mut c1, b"s", b"g"), Value::Int(1));
    assert_policy_reply(&mut c0, b"s", b"g", &p0);
    assert_eq!(policy_del_reply(&mut c1, b"only0", b"g"), Value::Int(0));
    assert_policy_list(&mut c1, &[(b"only1", b"h", &only1)]);
    // An empty database lists nothing.
    let r: Value = cmd("SELECT").arg(2).query(&mut c1).unwrap();
    assert!(is_ok(&r));
    assert_eq!(policy_list_reply(&mut c1), Value::Array(vec![]));
}

#[test]
fn policy_replies_resp3() {
    let s = Server::new();
    let defaults = PolicyView::defaults();
    let mut c = s.conn3();

    assert_eq!(policy_reply(&mut c, b"s", b"g"), Value::Nil);
    assert_eq!(
        run(&mut c, &["RECLAIM.POLICY", "SET", "s", "g"]),
        Value::Okay
    );
    assert_eq!(
        policy_reply(&mut c, b"s", b"g"),
        defaults.reply_on(b"s", true)
    );

    set_policy_args(
        &mut c,
        b"t",
        b"h",
        &words("DLQ t:dlq MAX-DELIVERIES 2 CLAIMANT x"),
    );
    let t = PolicyView::defaults()
        .with_dlq(b"t:dlq", 2)
        .with_claimant(b"x");
    assert_eq!(policy_reply(&mut c, b"t", b"h"), t.reply_on(b"t", true));
    assert_eq!(
        policy_list_reply(&mut c),
        Value::Array(vec![
            defaults.list_item(b"s", b"g", true),
            t.list_item(b"t", b"h", true)
        ])
    );
    assert_eq!(policy_del_reply(&mut c, b"s", b"g"), Value::Int(1));
    assert_eq!(policy_del_reply(&mut c, b"s", b"g"), Value::Int(0));
    assert_eq!(
        policy_list_reply(&mut c),
        Value::Array(vec![t.list_item(b"t", b"h", true)])
    );

    // SWEEP of a policy whose stream does not exist: a map of zeros.
    assert_eq!(
        run(&mut c, &["RECLAIM.SWEEP", "t", "h"]),
        Value::Map(vec![
            (bs(b"claimed"), Value::Int(0)),
            (bs(b"dead-lettered"), Value::Int(0)),
            (bs(b"deleted"), Value::Int(0)),
            (bs(b"dlq-trimmed"), Value::Int(0)),
            (bs(b"tombstones"), Value::Int(0)),
        ])
    );
    // STATS is a map too, with the documented fields in order.
    let st = run(&mut c, &["RECLAIM.STATS", "t", "h"]);
    let Value::Map(m) = &st else {
        panic!("STATS in RESP3 is not a map: {st:?}");
    };
    let names: Vec<String> = m.iter().map(|(k, _)| string_of(k)).collect();
    assert_eq!(names, STATS_FIELDS);
    assert_eq!(str_field(&st, "cursor"), "0-0");
    assert_eq!(str_field(&st, "status"), "waiting: no stream t");
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
    // What GET and LIST reply, and IMPORT's LOCAL, are named.
    assert!(
        lines.contains(
            &"    Return the policy as field/value pairs, its live status first, or nil."
                .to_string()
        ),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("IMPORT <json> [REPLACE] [LOCAL]")),
        "{lines:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Rejected input: an exact error, and nothing changes
// ---------------------------------------------------------------------------------------------

#[test]
fn rejected_set_options_change_nothing() {
    let s = Server::new();
    let mut c = s.conn();
    set_policy_args(&mut c, b"s", b"g", &words("MIN-IDLE 1234 CLAIMANT keep"));
    let before = policy_reply(&mut c, b"s", b"g");
    assert_eq!(
        before,
        PolicyView::new(1234, 10_000)
            .with_claimant(b"keep")
            .reply_on(b"s", false)
    );

    const MIN_IDLE: &str = "ERR MIN-IDLE must be a positive integer (ms)";
    const COUNT: &str = "ERR COUNT must be an integer from 1 to 10000";
    const INTERVAL: &str = "ERR INTERVAL must be a positive integer (ms)";
    const MAXD: &str = "ERR MAX-DELIVERIES must be a non-negative integer";
    // Values separated by `|`: empty ones and ones with spaces among them.
    let bad_positive = "abc|0|-1|-0|+1| 1|1 |1.5|1e3|0x10|007||9223372036854775808|-9223372036854775809|99999999999999999999999";
    let mut cases: Vec<(Vec<&[u8]>, String)> = Vec::new();
    for v in bad_positive.split('|').map(str::as_bytes) {
        cases.push((args![b"MIN-IDLE", v], MIN_IDLE.into()));
        cases.push((args![b"INTERVAL", v], INTERVAL.into()));
        cases.push((args![b"COUNT", v], COUNT.into()));
    }
    for v in "10001 100000 9223372036854775807"
        .split(' ')
        .map(str::as_bytes)
    {
        cases.push((args![b"COUNT", v], COUNT.into()));
    }
    let bad_deliveries = "-1|-9223372036854775808|abc|+1| 1|1.0||9223372036854775808";
    for v in bad_deliveries.split('|').map(str::as_bytes) {
        cases.push((args![b"MAX-DELIVERIES", v, b"DLQ", b"d"], MAXD.into()));
    }
    let more: Vec<(Vec<&[u8]>, &str)> = vec![
        (words("FOO 1"), "ERR unknown option 'FOO'"),
        (words("min-idle 5 bar 1"), "ERR unknown option 'bar'"),
        (args![b"f\x00o\r\no\xff", b"1"], "ERR unknown option 'f?o??o?'"),
        (words("LIMIT 1"), "ERR unknown option 'LIMIT'"),
        (
            args![[b'x'; 100], b"1"],
            "ERR unknown option 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...'",
        ),
        (
            words("COUNT 1 count 2"),
            "ERR option COUNT given more than once",
        ),
        (
            words("MIN-IDLE 5 Min-Idle 5"),
            "ERR option MIN-IDLE given more than once",
        ),
        (
            words("DLQ a DLQ b"),
            "ERR option DLQ given more than once",
        ),
        (
            words("CLAIMANT a claimant b"),
            "ERR option CLAIMANT given more than once",
        ),
        (
            words("INTERVAL 5 INTERVAL 5"),
            "ERR option INTERVAL given more than once",
        ),
        (
            words("MAX-DELIVERIES 1 DLQ d MAX-DELIVERIES 1"),
            "ERR option MAX-DELIVERIES given more than once",
        ),
        (words("COUNT"), "ERR option COUNT needs a value"),
        (words("MIN-IDLE"), "ERR option MIN-IDLE needs a value"),
        (words("INTERVAL"), "ERR option INTERVAL needs a value"),
        (
            words("MAX-DELIVERIES"),
            "ERR option MAX-DELIVERIES needs a value",
        ),
        (words("DLQ"), "ERR option DLQ needs a value"),
        (words("COUNT 5 CLAIMANT"), "ERR option CLAIMANT needs a value"),
        (
            words("MAX-DELIVERIES 3"),
            "ERR MAX-DELIVERIES above 0 needs a DLQ key",
        ),
        (
            words("MAX-DELIVERIES 1 CLAIMANT DLQ"),
            "ERR MAX-DELIVERIES above 0 needs a DLQ key",
        ),
        (
            words("DLQ-MAXLEN -1 DLQ d"),
            "ERR DLQ-MAXLEN must be a non-negative integer",
        ),
        (
            words("DLQ-MAXLEN 1e3 DLQ d"),
            "ERR DLQ-MAXLEN must be a non-negative integer",
        ),
        (
            words("DLQ-MAXAGE -1 DLQ d"),
            "ERR DLQ-MAXAGE must be a non-negative integer (ms)",
        ),
        (
            words("DLQ-MAXAGE 1.5 DLQ d"),
            "ERR DLQ-MAXAGE must be a non-negative integer (ms)",
        ),
        (
            words("TOMBSTONES true DLQ d"),
            "ERR TOMBSTONES must be yes or no",
        ),
        (words("TOMBSTONES"), "ERR option TOMBSTONES needs a value"),
        (
            words("DLQ-MAXLEN 100"),
            "ERR DLQ-MAXLEN above 0 needs a DLQ key",
        ),
        (
            words("DLQ-MAXAGE 60000"),
            "ERR DLQ-MAXAGE above 0 needs a DLQ key",
        ),
        (
            words("TOMBSTONES yes"),
            "ERR TOMBSTONES yes needs a DLQ key",
        ),
        (
            words("DLQ s"),
            "ERR the DLQ key must differ from the stream key",
        ),
        (
            words("MAX-DELIVERIES 2 DLQ s"),
            "ERR the DLQ key must differ from the stream key",
        ),
        // The module's own keys: a policy key, a redrive task key, a redrive moved set.
        (words("DLQ reclaim:policy:{s}:s"), DLQ_IS_MODULE_KEY),
        (words("DLQ reclaim:redrive:{x}:x"), DLQ_IS_MODULE_KEY),
        (
            words("MAX-DELIVERIES 1 DLQ reclaim:redrive-moved:{x}:x"),
            DLQ_IS_MODULE_KEY,
        ),
    ];
    for (a, e) in more {
        cases.push((a, e.into()));
    }

    let mut failures = Vec::new();
    for (opts, want) in &cases {
        for group in [&b"g"[..], b"fresh"] {
            let got = set_policy_err(&mut c, b"s", group, opts);
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
        assert_eq!(policy_reply(&mut c, b"s", b"g"), before, "after {opts:?}");
        assert_eq!(
            policy_reply(&mut c, b"s", b"fresh"),
            Value::Nil,
            "after {opts:?}"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(
        policy_list_reply(&mut c),
        Value::Array(vec![PolicyView::new(1234, 10_000)
            .with_claimant(b"keep")
            .list_item(b"s", b"g", false)])
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
    assert_eq!(set_policy_err(&mut c, b"str", b"g", &[]), WRONGTYPE);
    assert_eq!(
        set_policy_err(&mut c, b"lst", b"g", &words("MIN-IDLE 5")),
        WRONGTYPE
    );
    assert_eq!(policy_reply(&mut c, b"str", b"g"), Value::Nil);
    assert_eq!(policy_reply(&mut c, b"lst", b"g"), Value::Nil);
    assert_eq!(policy_list_reply(&mut c), Value::Array(vec![]));

    // The DLQ key holds a string / a list (also with MAX-DELIVERIES 0).
    set_policy_args(&mut c, b"s", b"g", &words("COUNT 3"));
    let before = policy_reply(&mut c, b"s", b"g");
    assert_eq!(
        set_policy_err(&mut c, b"s", b"g", &words("MAX-DELIVERIES 2 DLQ str")),
        WRONGTYPE_DLQ
    );
    assert_eq!(
        set_policy_err(&mut c, b"s", b"g", &words("DLQ lst")),
        WRONGTYPE_DLQ
    );
    assert_eq!(
        set_policy_err(&mut c, b"s", b"h", &words("DLQ str")),
        WRONGTYPE_DLQ
    );
    assert_eq!(policy_reply(&mut c, b"s", b"g"), before);
    assert_eq!(policy_reply(&mut c, b"s", b"h"), Value::Nil);
    // Both wrong: the stream is reported.
    assert_eq!(
        set_policy_err(&mut c, b"str", b"g", &words("DLQ lst")),
        WRONGTYPE
    );

    // Missing keys and real streams are fine.
    set_policy_args(&mut c, b"s", b"g", &words("DLQ missing"));
    let _: String = cmd("XADD")
        .arg("dq")
        .arg("*")
        .arg("a")
        .arg("1")
        .query(&mut c)
        .unwrap();
    set_policy_args(&mut c, b"s", b"g", &words("DLQ dq MAX-DELIVERIES 1"));

    // The stream's policy key holds something else: refused, not overwritten.
    let _: () = cmd("SET")
        .arg("reclaim:policy:{t}:t")
        .arg("mine")
        .query(&mut c)
        .unwrap();
    assert_eq!(
        set_policy_err(&mut c, b"t", b"g", &[]),
        "ERR the policy key of this stream holds a value that is not a reclaim policy"
    );
    assert_eq!(policy_reply(&mut c, b"t", b"g"), Value::Nil);
    let v: String = cmd("GET")
        .arg("reclaim:policy:{t}:t")
        .query(&mut c)
        .unwrap();
    assert_eq!(v, "mine");
    // PAUSE and RESUME say the same, after their own syntax check; the value stays.
    let taken = "ERR the policy key of this stream holds a value that is not a reclaim policy";
    assert_eq!(
        error_of(&mut c, &policy_cmd(&words("PAUSE t g"))),
        taken,
        "PAUSE"
    );
    assert_eq!(
        error_of(&mut c, &policy_cmd(&words("PAUSE t g STORM"))),
        taken
    );
    assert_eq!(
        error_of(&mut c, &policy_cmd(&words("PAUSE t g FOO"))),
        "ERR syntax error: RECLAIM.POLICY PAUSE key group [STORM]"
    );
    assert_eq!(error_of(&mut c, &policy_cmd(&words("RESUME t g"))), taken);
    let v: String = cmd("GET")
        .arg("reclaim:policy:{t}:t")
        .query(&mut c)
        .unwrap();
    assert_eq!(v, "mine");
    assert_eq!(policy_del_reply(&mut c, b"t", b"g"), Value::Int(0));
}

// ---------------------------------------------------------------------------------------------
// Binary-safe names
// ---------------------------------------------------------------------------------------------

#[test]
fn binary_names_round_trip() {
    let s = Server::new();
    let mut c = s.conn();
    let key: &[u8] = b"k\x00e\xffy\r\n with spaces";
    let group: &[u8] = b"g\x00\xff\r\n p";
    let claimant: &[u8] = b"c\x00\xff\r\n x";
    let dlq: &[u8] = b"d\x00\xff\r\n q";
    set_policy_args(
        &mut c,
        key,
        group,
        &[b"CLAIMANT", claimant, b"DLQ", dlq, b"MAX-DELIVERIES", b"4"],
    );
    let p = PolicyView::defaults()
        .with_dlq(dlq, 4)
        .with_claimant(claimant);
    assert_policy_reply(&mut c, key, group, &p);
    // Names that differ only in a trailing byte are different policies.
    assert_eq!(policy_reply(&mut c, key, b"g\x00\xff\r\n "), Value::Nil);
    assert_eq!(policy_reply(&mut c, b"k", group), Value::Nil);

    // Odd names: empty, with `}` (no usable hash tag), with a hash tag, NUL only.
    let odd: Vec<(&[u8], &[u8], &[u8])> = vec![
        (b"", b"", b"\x00"),
        (b"a}b\xff", b"\x00", b""),
        (b"{t}\r\n", b" ", b"\r\n"),
        (b"\x00", b"\xff\xfe", b"c"),
    ];
    for (k, g, cl) in &odd {
        set_policy_args(&mut c, k, g, &[b"CLAIMANT", cl]);
    }
    let mut want: Vec<(Vec<u8>, Vec<u8>, Value)> = odd
        .iter()
        .map(|(k, g, cl)| {
            (
                k.to_vec(),
                g.to_vec(),
                PolicyView::defaults()
                    .with_claimant(cl)
                    .list_item(k, g, false),
            )
        })
        .collect();
    want.push((key.to_vec(), group.to_vec(), p.list_item(key, group, false)));
    want.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    assert_eq!(
        policy_list_reply(&mut c),
        Value::Array(want.into_iter().map(|w| w.2).collect())
    );
    for (k, g, cl) in &odd {
        assert_eq!(
            policy_reply(&mut c, k, g),
            PolicyView::defaults().with_claimant(cl).reply_on(k, false)
        );
    }
    for (k, g, _) in &odd {
        assert_eq!(
            reply_of(&mut c, &policy_cmd(&[b"DEL", k, g])),
            Value::Int(1)
        );
        assert_eq!(policy_reply(&mut c, k, g), Value::Nil);
    }
    assert_eq!(
        policy_list_reply(&mut c),
        Value::Array(vec![p.list_item(key, group, false)])
    );

    // RESP3 too.
    let mut c3 = s.conn3();
    assert_eq!(policy_reply(&mut c3, key, group), p.reply_on(key, true));
}

// ---------------------------------------------------------------------------------------------
// ACL: the stream key and the DLQ are the keys a user needs
// ---------------------------------------------------------------------------------------------

#[test]
fn acl_key_patterns_cover_stream_and_dlq() {
    let s = Server::new();
    let mut admin = s.conn();
    acl_setuser(&mut admin, &["app", "on", "nopass", "~app:*", "+@all"]);
    let mut app = s.conn_as("app");

    set_policy_args(
        &mut app,
        b"app:s",
        b"g",
        &words("DLQ app:dlq MAX-DELIVERIES 2"),
    );
    let p = PolicyView::defaults().with_dlq(b"app:dlq", 2);
    assert_policy_reply(&mut app, b"app:s", b"g", &p);
    // A CLAIMANT value that looks like a key outside the pattern is not a key.
    set_policy_args(&mut app, b"app:s", b"g2", &words("CLAIMANT other:dlq"));
    set_policy_args(&mut app, b"app:s", b"g3", &words("CLAIMANT DLQ COUNT 5"));

    let denied: Vec<(&[u8], Vec<&[u8]>)> = vec![
        (b"other:s", vec![]),
        (b"app:s", words("DLQ other:dlq")),
        (b"app:s", words("DLQ other:dlq MAX-DELIVERIES 2")),
        (b"app:s", words("CLAIMANT DLQ DLQ other:x")),
    ];
    for (key, opts) in &denied {
        assert_noperm_keys(
            &set_policy_err(&mut app, key, b"g", opts),
            &format!("{opts:?}"),
        );
    }
    assert_policy_reply(&mut app, b"app:s", b"g", &p);
    assert_eq!(policy_reply(&mut admin, b"other:s", b"g"), Value::Nil);
    // The other commands check the stream key too.
    set_policy_args(&mut admin, b"other:s", b"g", &[]);
    for cm in [
        policy_cmd(&words("GET other:s g")),
        policy_cmd(&words("DEL other:s g")),
        bin_cmd("RECLAIM.SWEEP", &words("other:s g")),
        bin_cmd("RECLAIM.STATS", &words("other:s g")),
        bin_cmd("RECLAIM.HEALTH", &words("other:s g")),
    ] {
        assert_noperm_keys(&error_of(&mut app, &cm), "app user");
    }
    assert_eq!(
        policy_reply(&mut admin, b"other:s", b"g"),
        PolicyView::defaults().reply_on(b"other:s", false)
    );
    let st = run(&mut app, &["RECLAIM.STATS", "app:s", "g"]);
    assert_eq!(int_field(&st, "errors"), 0);
}

#[test]
fn acl_read_only_user() {
    let s = Server::new();
    let mut admin = s.conn();
    set_policy_args(&mut admin, b"s", b"g", &words("COUNT 4"));
    let p = PolicyView::defaults().with_count(4);
    acl_setuser(&mut admin, &["ro", "on", "nopass", "%R~*", "+@all"]);
    let mut ro = s.conn_as("ro");

    assert_policy_reply(&mut ro, b"s", b"g", &p);
    assert_policy_list(&mut ro, &[(b"s", b"g", &p)]);
    let st = run(&mut ro, &["RECLAIM.STATS", "s", "g"]);
    assert_eq!(str_field(&st, "status"), "waiting: no stream s");
    // A read-only user reads RECLAIM.HEALTH (no stream yet: nothing live).
    let h = run(&mut ro, &["RECLAIM.HEALTH", "s", "g"]);
    assert_eq!(field(&h, "live"), Value::Nil);

    for cm in [
        policy_cmd(&words("SET s g")),
        policy_cmd(&words("SET s g COUNT 5")),
        policy_cmd(&words("SET new g")),
        policy_cmd(&words("DEL s g")),
        bin_cmd("RECLAIM.SWEEP", &words("s g")),
    ] {
        assert_noperm_keys(&error_of(&mut ro, &cm), "read-only user");
    }
    assert_policy_reply(&mut admin, b"s", b"g", &p);
    assert_eq!(policy_reply(&mut admin, b"new", b"g"), Value::Nil);

    // The same by denying the write commands instead of write access to keys.
    acl_setuser(
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
    let mut ro2 = s.conn_as("ro2");
    assert_policy_reply(&mut ro2, b"s", b"g", &p);
    assert_policy_list(&mut ro2, &[(b"s", b"g", &p)]);
    let _ = run(&mut ro2, &["RECLAIM.STATS", "s", "g"]);
    let cases = [
        (
            policy_cmd(&words("SET s g")),
            "NOPERM this user has no permissions to run the 'reclaim.policy|set' command",
        ),
        (
            policy_cmd(&words("DEL s g")),
            "NOPERM this user has no permissions to run the 'reclaim.policy|del' command",
        ),
        (
            bin_cmd("RECLAIM.SWEEP", &words("s g")),
            "NOPERM this user has no permissions to run the 'reclaim.sweep' command",
        ),
    ];
    for (cm, want) in &cases {
        // Redis 8.x names the user instead of "this user".
        let got = error_of(&mut ro2, cm).replace("User ro2 has", "this user has");
        assert_eq!(got, *want);
    }
    assert_policy_reply(&mut admin, b"s", b"g", &p);
}

// ---------------------------------------------------------------------------------------------
// A policy set before its stream or group exists (or with a typo in a name) waits, and says so
// ---------------------------------------------------------------------------------------------

/// The lines of the server log that tell what a policy waits for.
fn waiting_notices(s: &Server) -> Vec<String> {
    s.log()
        .lines()
        .filter_map(|l| l.split_once("<reclaim> ").map(|(_, m)| m.to_string()))
        .filter(|m| m.contains(") is waiting: no "))
        .collect()
}

#[test]
fn a_policy_waiting_for_its_group_says_so_everywhere_and_logs_it_once() {
    let s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"orders", b"workers");
    // A typo in the group: SET still answers OK (policies may come before their groups).
    let typo: &[u8] = b"wrk\xff,rs";
    let r = reply_of(
        &mut c,
        &policy_cmd(&[b"SET", b"orders", typo, b"INTERVAL", b"20"]),
    );
    assert_eq!(r, Value::Okay);
    let want = b"waiting: no group wrk\xff,rs".to_vec();
    // GET, LIST, STATS and HEALTH say what it waits for, by name, binary-safe.
    let view = PolicyView {
        status: Some(want.clone()),
        ..PolicyView::new(60_000, 20)
    };
    assert_policy_reply(&mut c, b"orders", typo, &view);
    assert_eq!(
        policy_list_reply(&mut c),
        Value::Array(vec![view.list_item(b"orders", typo, false)])
    );
    let stats = reply_of(&mut c, &bin_cmd("RECLAIM.STATS", &[b"orders", typo]));
    assert_eq!(bytes_of(&field(&stats, "status")), want);
    let health = reply_of(&mut c, &bin_cmd("RECLAIM.HEALTH", &[b"orders", typo]));
    assert_eq!(bytes_of(&field(&health, "status")), want);
    // INFO escapes the name as it does in `group=`.
    let line = &policy_lines(&mut c)[0];
    assert_eq!(line["group"], "wrk%FF%2Crs");
    assert_eq!(line["status"], "waiting: no group wrk%FF%2Crs");
    // The log says it once, however many passes find it so, and a SET again while it waits.
    let notice = "reclaim: the policy of stream 'orders' group 'wrk?,rs' (db 0) is waiting: no \
                  group 'wrk?,rs'. It starts when it exists (XGROUP CREATE creates it); a typo? \
                  RECLAIM.POLICY DEL it and set the right name";
    wait_for(10, "the notice in the log", || {
        (!waiting_notices(&s).is_empty()).then_some(())
    });
    wait_steps(&mut c, 5);
    reply_of(
        &mut c,
        &policy_cmd(&[b"SET", b"orders", typo, b"INTERVAL", b"20"]),
    );
    wait_steps(&mut c, 5);
    assert_eq!(waiting_notices(&s), [notice]);

    // The group appears: active everywhere (INFO and HEALTH after the next pass).
    create_group(&mut c, b"orders", typo);
    let stats = reply_of(&mut c, &bin_cmd("RECLAIM.STATS", &[b"orders", typo]));
    assert_eq!(str_field(&stats, "status"), "active");
    let get = policy_reply(&mut c, b"orders", typo);
    assert_eq!(str_field(&get, "status"), "active");
    wait_for(10, "INFO to say active", || {
        (policy_lines(&mut c)[0]["status"] == "active").then_some(())
    });
    let health = reply_of(&mut c, &bin_cmd("RECLAIM.HEALTH", &[b"orders", typo]));
    assert_eq!(str_field(&health, "status"), "active");

    // Gone again: waiting again, and told again (once).
    let _: i64 = cmd("XGROUP")
        .arg("DESTROY")
        .arg("orders")
        .arg(typo)
        .query(&mut c)
        .unwrap();
    wait_for(10, "INFO to say waiting", || {
        policy_lines(&mut c)[0]["status"]
            .starts_with("waiting")
            .then_some(())
    });
    wait_steps(&mut c, 5);
    assert_eq!(waiting_notices(&s), [notice, notice]);

    // No stream at all: the stream is what it waits for.
    set_policy_opts(&mut c, "nostream", "g", "INTERVAL 20");
    assert_eq!(
        status(&mut c, "nostream", "g"),
        "waiting: no stream nostream"
    );
    let get = policy_reply(&mut c, b"nostream", b"g");
    assert_eq!(str_field(&get, "status"), "waiting: no stream nostream");
    wait_for(10, "the second notice", || {
        (waiting_notices(&s).len() == 3).then_some(())
    });
    assert_eq!(
        waiting_notices(&s)[2],
        "reclaim: the policy of stream 'nostream' group 'g' (db 0) is waiting: no stream \
         'nostream'. It starts when it exists (XGROUP CREATE ... MKSTREAM creates both); a typo? \
         RECLAIM.POLICY DEL it and set the right name"
    );
}
