//! Policies as code: `RECLAIM.POLICY EXPORT` writes every policy of the database as one JSON
//! document and `RECLAIM.POLICY IMPORT` sets the policies of such a document, all or none. A
//! round trip gives the same policies, binary names included; a document with one bad policy
//! changes nothing and names it; an import reaches replicas and the AOF as `RECLAIM.POLICY SET`s;
//! the `redis-cli` lines of the README work as written.

use std::process::{Command, Stdio};

use reclaim_testkit::*;

const EXISTS: &str = "this key and group have a policy already (IMPORT ... REPLACE replaces it)";

/// A binary DLQ (NUL, invalid UTF-8) for the kit's binary stream and group ([`BIN_STREAM`],
/// [`BIN_GROUP`]): JSON carries them as hex.
const BIN_DLQ: &[u8] = b"bin\x00\xff:dlq";

/// Three policies in db 0 (one with binary names, one paused) and one in db 1.
fn seed_policies(c: &mut Connection, c1: &mut Connection) -> Vec<(Vec<u8>, Vec<u8>, PolicyView)> {
    let want = vec![
        (
            BIN_STREAM.to_vec(),
            BIN_GROUP.to_vec(),
            PolicyView::new(500, 250)
                .with_dlq(BIN_DLQ, 4)
                .with_claimant(b"c\"\\\r\n\x00")
                .with_storm(50, 60_000),
        ),
        (
            b"orders".to_vec(),
            b"audit".to_vec(),
            PolicyView::new(1000, 10_000)
                .with_backoff("LIST 5 70000")
                .with_count(7),
        ),
        (
            "orders".as_bytes().to_vec(),
            "wörkers".as_bytes().to_vec(),
            PolicyView::new(1000, 5000)
                .with_dlq(b"orders:dlq", 2)
                .with_backoff("EXPONENTIAL 60000")
                .with_liveness(30_000),
        ),
    ];
    for (s, g, p) in &want {
        set_policy(c, s, g, p);
    }
    set_policy(c1, b"other-db", b"g", &PolicyView::new(100, 100));
    want
}

/// The document with no policies, as EXPORT writes it.
const EMPTY: &str = "{\n  \"version\": 1,\n  \"policies\": []\n}";

#[test]
fn export_flushdb_import_gives_the_same_policies_binary_names_included() {
    let s = Server::new();
    let mut c = s.conn();
    let mut c1 = s.conn_db(1);
    let mut want = seed_policies(&mut c, &mut c1);
    policy_ok(&mut c, &["PAUSE", "orders", "audit"]);
    want.sort();
    let listed = list_policies(&mut c);
    let mut options: Vec<_> = listed.clone();
    options.sort();
    assert_eq!(
        options
            .iter()
            .map(|(s, g, p)| (s.clone(), g.clone(), p.clone().with_state("active")))
            .collect::<Vec<_>>(),
        want
    );

    let doc = export_policies(&mut c);
    // The document: db 0's policies only, ordered as LIST (key, then group, bytewise), every
    // option explicit, binary names as hex, STORM as an object, no state.
    let v: serde_json::Value = serde_json::from_str(&doc).unwrap();
    assert_eq!(v["version"], 1);
    let ps = v["policies"].as_array().unwrap();
    assert_eq!(ps.len(), 3);
    assert_eq!(ps[0]["key"]["hex"], "62696e00ff0d0a73747265616d");
    assert_eq!(ps[0]["group"]["hex"], "6700fe");
    assert_eq!(ps[0]["dlq"]["hex"], "62696e00ff3a646c71");
    assert_eq!(ps[0]["claimant"], "c\"\\\r\n\u{0}");
    assert_eq!(
        ps[0]["storm"],
        serde_json::json!({"max": 50, "window": 60000})
    );
    assert_eq!(ps[0]["max-deliveries"], 4);
    assert_eq!(ps[1]["key"], "orders");
    assert_eq!(ps[1]["group"], "audit");
    assert_eq!(ps[1]["backoff"], serde_json::json!({"list": [5, 70000]}));
    assert_eq!(ps[1]["dlq"], serde_json::Value::Null);
    assert_eq!(ps[1]["storm"], serde_json::Value::Null);
    assert_eq!(ps[2]["group"], "wörkers");
    assert_eq!(
        ps[2],
        serde_json::json!({
            "key": "orders", "group": "wörkers", "min-idle": 1000, "max-deliveries": 2,
            "dlq": "orders:dlq", "claimant": "reclaim", "count": 100, "interval": 5000,
            "backoff": {"exponential": 60000}, "liveness": 30000, "storm": null,
            "dlq-maxlen": 0, "dlq-maxage": 0, "tombstones": false, "forget-idle": 0
        })
    );
    assert!(!doc.contains("state") && !doc.contains("paused"), "{doc}");

    let _: () = cmd("FLUSHDB").query(&mut c).unwrap();
    assert_eq!(list_policies(&mut c), vec![]);
    assert_eq!(export_policies(&mut c), EMPTY);

    assert_eq!(import_policies(&mut c, doc.as_bytes(), false), 3);
    assert_eq!(export_policies(&mut c), doc);
    // The same options; the paused policy comes back active (the state is not exported).
    let back = list_policies(&mut c);
    assert_eq!(
        back,
        listed
            .iter()
            .map(|(s, g, p)| (s.clone(), g.clone(), p.clone().with_state("active")))
            .collect::<Vec<_>>()
    );
    // Db 1 was not touched.
    assert_eq!(
        list_policies(&mut c1),
        vec![(
            b"other-db".to_vec(),
            b"g".to_vec(),
            PolicyView::new(100, 100)
        )]
    );
    // The imported policies are registered: RECLAIM.STATS knows them (FLUSHDB took the stream).
    assert_eq!(
        status(&mut c, "orders", "audit"),
        "waiting: no stream orders"
    );
}

#[test]
fn a_document_with_one_bad_policy_changes_nothing_and_names_it() {
    let s = Server::start(&["--appendonly", "yes"]);
    let mut c = s.conn();
    let replica = s.replica(&[]);
    let mut rc = replica.conn();
    set_policy(&mut c, b"orders", b"workers", &PolicyView::new(1000, 1000));
    let before = export_policies(&mut c);
    let _: () = cmd("SET").arg("cache").arg("x").query(&mut c).unwrap();
    let aof_before = witness_write(&s, &mut c, "witness-1").len();

    let good = r#"{"key": "new", "group": "g", "min-idle": 5000}"#;
    let replace = r#"{"key": "orders", "group": "workers", "count": 9}"#;
    let cases: &[(&str, &str)] = &[
        // SET's rules, with the field.
        (
            r#"{"key": "orders", "group": "audit", "count": 0}"#,
            "ERR policies[2] (key 'orders', group 'audit'), field 'count': COUNT must be an integer from 1 to 10000",
        ),
        (
            r#"{"key": "orders", "group": "audit", "max-deliveries": 3}"#,
            "ERR policies[2] (key 'orders', group 'audit'), field 'max-deliveries': MAX-DELIVERIES above 0 needs a DLQ key",
        ),
        (
            r#"{"key": "orders", "group": "audit", "storm": {"max": 5}}"#,
            "ERR policies[2] (key 'orders', group 'audit'), field 'storm': missing field `window`",
        ),
        (
            r#"{"key": "orders", "group": "audit", "state": "paused"}"#,
            "ERR policies[2] (key 'orders', group 'audit'), field 'state': unknown field `state`, expected one of `key`, `group`, `min-idle`, `max-deliveries`, `dlq`, `claimant`, `count`, `interval`, `backoff`, `liveness`, `storm`, `dlq-maxlen`, `dlq-maxage`, `tombstones`, `forget-idle`",
        ),
        // A DLQ in the module's own namespace.
        (
            r#"{"key": "orders", "group": "audit", "max-deliveries": 1, "dlq": "reclaim:redrive-moved:{x}:x"}"#,
            "ERR policies[2] (key 'orders', group 'audit'), field 'dlq': the DLQ key is a key the module keeps for itself (reclaim:policy:..., reclaim:redrive:..., reclaim:redrive-moved:...)",
        ),
        // What the keyspace says, with its own prefix.
        (
            r#"{"key": "cache", "group": "g"}"#,
            "WRONGTYPE policies[2] (key 'cache', group 'g'), field 'key': Operation against a key holding the wrong kind of value",
        ),
        (
            r#"{"key": "orders", "group": "audit", "max-deliveries": 1, "dlq": "cache"}"#,
            "WRONGTYPE policies[2] (key 'orders', group 'audit'), field 'dlq': the DLQ key holds the wrong kind of value (it must be a stream)",
        ),
        // The same (key, group) twice.
        (
            r#"{"key": "new", "group": "g"}"#,
            "ERR policies[2] (key 'new', group 'g'): the document has a policy for this key and group already, at policies[0]",
        ),
    ];
    for (bad, want) in cases {
        let doc = format!(r#"{{"version": 1, "policies": [{good}, {replace}, {bad}]}}"#);
        assert_eq!(
            error_of(&mut c, &import_cmd(doc.as_bytes(), true)),
            *want,
            "{bad}"
        );
        assert_eq!(export_policies(&mut c), before, "{bad}: nothing changed");
    }
    // A document that is not one, or of another version.
    for (doc, want) in [
        (
            r#"{"version": 2, "policies": []}"#,
            "ERR the policy document has version 2: this module reads version 1",
        ),
        (
            r#"{"version": 1, "policies": ["#,
            "ERR the policy document is not valid: EOF while parsing a list at line 1 column 28",
        ),
    ] {
        assert_eq!(error_of(&mut c, &import_cmd(doc.as_bytes(), false)), want);
    }
    assert_eq!(export_policies(&mut c), before);
    assert_eq!(get_policy(&mut c, b"new", b"g"), None);
    // Nothing reached the replica or the AOF.
    let after = witness_write(&s, &mut c, "witness-2");
    assert_eq!(export_policies(&mut rc), before);
    assert_eq!(
        after[aof_before..].to_vec(),
        vec![vec![b"SET".to_vec(), b"witness-2".to_vec(), b"1".to_vec()]],
        "only the witness write"
    );
}

#[test]
fn replace_replaces_and_keeps_the_state_without_it_an_existing_policy_is_an_error() {
    let s = Server::new();
    let mut c = s.conn();
    set_policy(
        &mut c,
        b"orders",
        b"workers",
        &PolicyView::new(1000, 1000).with_storm(3, 100),
    );
    set_policy(&mut c, b"untouched", b"g", &PolicyView::new(2000, 2000));
    policy_ok(&mut c, &["PAUSE", "orders", "workers", "STORM"]);
    let before = export_policies(&mut c);
    let doc = r#"{"version": 1, "policies": [
        {"key": "fresh", "group": "g", "interval": 300},
        {"key": "orders", "group": "workers", "min-idle": 40, "max-deliveries": 1, "dlq": "orders:dlq",
         "storm": {"max": 10, "window": 1000}}
    ]}"#;

    // Without REPLACE: the existing policy is named, and the new one is not set either.
    assert_eq!(
        error_of(&mut c, &import_cmd(doc.as_bytes(), false)),
        format!("ERR policies[1] (key 'orders', group 'workers'): {EXISTS}")
    );
    assert_eq!(export_policies(&mut c), before);

    // With REPLACE (after the document, or before it as `redis-cli -x ... IMPORT REPLACE` sends).
    assert_eq!(import_policies(&mut c, doc.as_bytes(), true), 2);
    let want_orders = PolicyView::new(40, 10_000)
        .with_dlq(b"orders:dlq", 1)
        .with_storm(10, 1000)
        .with_state("storm");
    assert_eq!(
        list_policies(&mut c),
        vec![
            (
                b"fresh".to_vec(),
                b"g".to_vec(),
                PolicyView::new(60_000, 300)
            ),
            (b"orders".to_vec(), b"workers".to_vec(), want_orders.clone()),
            (
                b"untouched".to_vec(),
                b"g".to_vec(),
                PolicyView::new(2000, 2000)
            ),
        ]
    );
    let again: Value = cmd("RECLAIM.POLICY")
        .arg("IMPORT")
        .arg("replace")
        .arg(before.as_bytes())
        .query(&mut c)
        .unwrap();
    assert_eq!(int_field(&again, "imported"), 2);
    // Back to the exported options; the state stays what it was (storm).
    assert_eq!(
        get_policy(&mut c, b"orders", b"workers"),
        Some(
            PolicyView::new(1000, 1000)
                .with_storm(3, 100)
                .with_state("storm")
        )
    );
    assert_eq!(
        get_policy(&mut c, b"fresh", b"g"),
        Some(PolicyView::new(60_000, 300)),
        "a policy the document does not name is kept"
    );

    // Arguments.
    for (args, want) in [
        (vec!["{}", "FORCE"], "ERR unknown option 'FORCE'"),
        (vec!["{}", "REPLACE", "x"], "ERR syntax error"),
    ] {
        let mut k = cmd("RECLAIM.POLICY");
        k.arg("IMPORT").arg(&args);
        assert_eq!(error_of(&mut c, &k), want);
    }
}

#[test]
fn import_reaches_replicas_and_the_aof_as_set_commands() {
    let mut s = Server::start(&["--appendonly", "yes"]);
    let mut c = s.conn();
    let replica = s.replica(&[]);
    let mut rc = replica.conn();
    let mut c1 = s.conn_db(1);
    let src = Server::new();
    let mut sc = src.conn();
    let mut sc1 = src.conn_db(1);
    let want = seed_policies(&mut sc, &mut sc1);
    let doc = export_policies(&mut sc);

    assert_eq!(import_policies(&mut c, doc.as_bytes(), false), 3);
    let cmds = witness_write(&s, &mut c, "witness");
    let mut got = list_policies(&mut rc);
    got.sort();
    let mut want = want;
    want.sort();
    assert_eq!(got, want, "the replica has the imported policies");
    assert_eq!(export_policies(&mut rc), doc);
    assert_eq!(list_policies(&mut c1), vec![], "db 1 of the importer");

    // The AOF holds one RECLAIM.POLICY SET per policy (every option explicit), in MULTI/EXEC;
    // never the JSON.
    let sets: Vec<&Vec<Vec<u8>>> = cmds
        .iter()
        .filter(|k| is_cmd(k, "RECLAIM.POLICY"))
        .collect();
    assert_eq!(sets.len(), 3, "{cmds:?}");
    for (k, (stream, group, p)) in sets.iter().zip(list_policies(&mut c)) {
        let mut w = vec![b"SET".to_vec(), stream, group];
        w.extend(p.set_args());
        assert_eq!(k[1].to_ascii_uppercase(), w[0]);
        assert_eq!(k[2..].to_vec(), w[1..].to_vec());
    }
    let names: Vec<String> = cmds
        .iter()
        .map(|k| String::from_utf8_lossy(&k[0]).to_ascii_uppercase())
        .collect();
    let multi = names.iter().position(|n| n == "MULTI").expect("MULTI");
    assert_eq!(names[multi + 4], "EXEC", "{names:?}");
    assert!(
        !cmds.iter().flatten().any(|a| a.starts_with(b"{")),
        "no JSON in the AOF"
    );

    // A restart from the AOF has them.
    drop(c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(export_policies(&mut c), doc);
}

#[test]
fn redis_cli_export_to_a_file_and_import_from_it_as_the_readme_shows() {
    let s = Server::new();
    let mut c = s.conn();
    let mut c1 = s.conn_db(1);
    let mut want = seed_policies(&mut c, &mut c1);
    want.sort();
    let doc = export_policies(&mut c);
    let file = s.dir.path().join("policies.json");
    let port = s.port.to_string();
    let cli = cli_binary();

    // redis-cli --raw RECLAIM.POLICY EXPORT > policies.json
    let out = Command::new(&cli)
        .args(["-p", &port, "--raw", "RECLAIM.POLICY", "EXPORT"])
        .stdout(std::fs::File::create(&file).unwrap())
        .status()
        .unwrap();
    assert!(out.success());
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        format!("{doc}\n"),
        "the file is the document (redis-cli adds a newline)"
    );

    // redis-cli -x RECLAIM.POLICY IMPORT < policies.json
    let _: () = cmd("FLUSHDB").query(&mut c).unwrap();
    let import = |extra: &[&str]| {
        let out = Command::new(&cli)
            .args(["-p", &port, "-x", "RECLAIM.POLICY", "IMPORT"])
            .args(extra)
            .stdin(std::fs::File::open(&file).unwrap())
            .stdout(Stdio::piped())
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    // redis-cli prints the reply's map one word a line; FLUSHDB took the streams, so all three
    // wait for theirs (tests/export.rs's last test has the `waiting` entries).
    let first_words = |out: String| out.lines().take(3).collect::<Vec<_>>().join(" ");
    assert_eq!(first_words(import(&[])), "imported 3 waiting");
    assert_eq!(export_policies(&mut c), doc);
    let mut got = list_policies(&mut c);
    got.sort();
    assert_eq!(got, want);
    // Again: each policy exists; with REPLACE (stdin is the last argument) it is replaced.
    assert_eq!(
        import(&[]),
        format!(
            "ERR policies[0] (key '{}', group '{}'): {EXISTS}",
            "bin????stream", "g??"
        )
    );
    assert_eq!(first_words(import(&["REPLACE"])), "imported 3 waiting");
    assert_eq!(export_policies(&mut c), doc);
}

/// Every command of the server's incremental AOF files (the base is an RDB), in manifest order,
/// without SELECT.
fn aof_commands(s: &Server) -> Vec<Vec<Vec<u8>>> {
    s.aof_manifest_files()
        .iter()
        .filter(|(_, ty, _)| ty == "i")
        .flat_map(|(_, _, data)| parse_aof(data))
        .filter(|k| !is_cmd(k, "SELECT"))
        .collect()
}

/// `SET name 1`, then waits until a replica has it (`WAIT`) and the AOF holds it (Redis may
/// postpone an AOF write while a background fsync runs): what the AOF holds then.
fn witness_write(s: &Server, c: &mut Connection, name: &str) -> Vec<Vec<Vec<u8>>> {
    let _: () = cmd("SET").arg(name).arg("1").query(c).unwrap();
    replica_acked(c);
    wait_for(20, &format!("SET {name} in the AOF"), || {
        let all = aof_commands(s);
        all.iter()
            .any(|k| is_cmd(k, "SET") && k.get(1).map(Vec::as_slice) == Some(name.as_bytes()))
            .then_some(all)
    })
}

#[test]
fn import_checks_each_policys_keys_against_the_users_acl() {
    let s = Server::new();
    let mut c = s.conn();
    let _: () = cmd("ACL")
        .arg(
            &[
                "SETUSER",
                "ops",
                "on",
                "nopass",
                "~orders*",
                "+reclaim.policy",
                "+@stream",
            ][..],
        )
        .query(&mut c)
        .unwrap();
    let mut ops = s.conn();
    let _: () = cmd("AUTH").arg("ops").arg("x").query(&mut ops).unwrap();
    let ok = r#"{"key": "orders", "group": "g", "max-deliveries": 1, "dlq": "orders:dlq"}"#;
    for (bad, want) in [
        (
            r#"{"key": "payments", "group": "g"}"#,
            "NOPERM policies[1] (key 'payments', group 'g'), field 'key': this user has no permissions to run XCLAIM on the stream key",
        ),
        (
            r#"{"key": "orders2", "group": "g", "max-deliveries": 1, "dlq": "dead"}"#,
            "NOPERM policies[1] (key 'orders2', group 'g'), field 'dlq': this user has no permissions to run XADD on the DLQ key",
        ),
    ] {
        let doc = format!(r#"{{"version": 1, "policies": [{ok}, {bad}]}}"#);
        assert_eq!(error_of(&mut ops, &import_cmd(doc.as_bytes(), false)), want);
        assert_eq!(export_policies(&mut c), EMPTY);
    }
    let doc = format!(r#"{{"version": 1, "policies": [{ok}]}}"#);
    assert_eq!(import_policies(&mut ops, doc.as_bytes(), false), 1);
    assert_eq!(
        get_policy(&mut c, b"orders", b"g"),
        Some(PolicyView::new(60_000, 10_000).with_dlq(b"orders:dlq", 1))
    );
}

#[test]
fn in_redis_cluster_import_checks_each_policys_slots() {
    // One node serving half of the slots (the other half has no node).
    let s = Server::start(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-require-full-coverage",
        "no",
    ]);
    let mut c = s.conn();
    let _: () = cmd("CLUSTER")
        .arg("ADDSLOTSRANGE")
        .arg(0)
        .arg(8191)
        .query(&mut c)
        .unwrap();
    wait_for(20, "cluster_state:ok", || {
        let info: String = cmd("CLUSTER").arg("INFO").query(&mut c).ok()?;
        info.contains("cluster_state:ok").then_some(())
    });
    let slot = |c: &mut Connection, k: &str| -> i64 {
        cmd("CLUSTER").arg("KEYSLOT").arg(k).query(c).unwrap()
    };
    let names: Vec<String> = (0..64).map(|i| format!("s{i}")).collect();
    let served = names
        .iter()
        .find(|k| slot(&mut c, k) <= 8191)
        .unwrap()
        .clone();
    let other = names
        .iter()
        .find(|k| slot(&mut c, k) > 8191)
        .unwrap()
        .clone();
    let ok = format!(r#"{{"key": "{served}", "group": "g"}}"#);
    for (bad, want) in [
        (
            format!(r#"{{"key": "{other}", "group": "g"}}"#),
            format!("ERR policies[1] (key '{other}', group 'g'), field 'key': this node does not serve the stream key's hash slot (import each node's own policies there)"),
        ),
        (
            format!(r#"{{"key": "{served}", "group": "h", "max-deliveries": 1, "dlq": "{other}"}}"#),
            format!("CROSSSLOT policies[1] (key '{served}', group 'h'), field 'dlq': the DLQ key must hash to the stream key's slot (use a hash tag, e.g. {{orders}}:dlq)"),
        ),
    ] {
        let doc = format!(r#"{{"version": 1, "policies": [{ok}, {bad}]}}"#);
        assert_eq!(error_of(&mut c, &import_cmd(doc.as_bytes(), false)), want);
        assert_eq!(export_policies(&mut c), EMPTY);
    }
    // A DLQ with the stream's hash tag is in its slot.
    let dlq = format!("{{{served}}}:dlq");
    let good =
        format!(r#"{{"key": "{served}", "group": "h", "max-deliveries": 1, "dlq": "{dlq}"}}"#);
    let doc = format!(r#"{{"version": 1, "policies": [{ok}, {good}]}}"#);
    assert_eq!(import_policies(&mut c, doc.as_bytes(), false), 2);
    assert_eq!(
        get_policy(&mut c, served.as_bytes(), b"h"),
        Some(PolicyView::new(60_000, 10_000).with_dlq(dlq.as_bytes(), 1))
    );
}

/// One row of IMPORT's `waiting` (RESP2): the policy's place in the document, key, group and
/// status.
fn waiting_row(index: i64, key: &[u8], group: &[u8], status: &[u8]) -> Value {
    Value::Array(vec![
        bs(b"index"),
        Value::Int(index),
        bs(b"key"),
        bs(key),
        bs(b"group"),
        bs(group),
        bs(b"status"),
        bs(status),
    ])
}

/// IMPORT sets a policy whose stream or group does not exist (it waits), and says which in its
/// reply: `imported`, then `waiting` with each one's place in the document, key, group and status.
#[test]
fn import_reports_the_policies_that_wait_for_their_stream_or_group() {
    let s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"orders", b"billing");
    let doc = br#"{"version": 1, "policies": [
        {"key": "orders", "group": "billing"},
        {"key": "orders", "group": "biling"},
        {"key": "ordrs", "group": "billing"},
        {"key": {"hex": "6f7264657273"}, "group": {"hex": "ff2c"}}]}"#;
    let want = Value::Array(vec![
        bs(b"imported"),
        Value::Int(4),
        bs(b"waiting"),
        Value::Array(vec![
            waiting_row(1, b"orders", b"biling", b"waiting: no group biling"),
            waiting_row(2, b"ordrs", b"billing", b"waiting: no stream ordrs"),
            waiting_row(3, b"orders", b"\xff,", b"waiting: no group \xff,"),
        ]),
    ]);
    assert_eq!(reply_of(&mut c, &import_cmd(doc, false)), want);
    // All four are set; the good one runs.
    assert_eq!(list_policies(&mut c).len(), 4);
    assert_eq!(status(&mut c, "orders", "billing"), "active");
    assert_eq!(
        status(&mut c, "orders", "biling"),
        "waiting: no group biling"
    );
    // RESP3: maps; nothing waits once every group exists.
    create_group(&mut c, b"ordrs", b"billing");
    create_group(&mut c, b"orders", b"biling");
    create_group(&mut c, b"orders", b"\xff,");
    let mut c3 = s.conn3();
    assert_eq!(
        reply_of(&mut c3, &import_cmd(doc, true)),
        Value::Map(vec![
            (bs(b"imported"), Value::Int(4)),
            (bs(b"waiting"), Value::Array(vec![])),
        ])
    );
}
