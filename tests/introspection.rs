//! How Redis and its clients see the module's commands: `COMMAND GETKEYS` and
//! `GETKEYSANDFLAGS` (the keys a cluster client routes by and ACLs check), `COMMAND INFO`,
//! `COMMAND DOCS`, `COMMAND LIST FILTERBY MODULE`, and the arity and unknown-subcommand errors
//! Redis gives from the command table.

use reclaim_testkit::*;

fn getkeys(con: &mut Connection, args: &[&[u8]]) -> Vec<Vec<u8>> {
    let mut a: Vec<&[u8]> = words("GETKEYS");
    a.extend_from_slice(args);
    bin_cmd("COMMAND", &a).query(con).expect("COMMAND GETKEYS")
}

#[test]
fn command_getkeys() {
    let s = Server::new();
    let mut c = s.conn();
    let v = |x: &[&[u8]]| -> Vec<Vec<u8>> { x.iter().map(|k| k.to_vec()).collect() };
    type Case<'a> = (Vec<&'a [u8]>, Vec<Vec<u8>>);
    let cases: Vec<Case> = vec![
        (words("RECLAIM.POLICY SET s g"), v(&words("s"))),
        (words("RECLAIM.POLICY SET s g DLQ d"), v(&words("s d"))),
        (words("reclaim.policy set s g dlq d"), v(&words("s d"))),
        (
            words("RECLAIM.POLICY SET s g MIN-IDLE 5 COUNT 2 DLQ d INTERVAL 9"),
            v(&words("s d")),
        ),
        (
            words("RECLAIM.POLICY SET s g CLAIMANT DLQ COUNT 5"),
            v(&words("s")),
        ),
        (
            words("RECLAIM.POLICY SET s g CLAIMANT DLQ DLQ x"),
            v(&words("s x")),
        ),
        (words("RECLAIM.POLICY SET s DLQ COUNT 5"), v(&words("s"))),
        (
            args![
                b"RECLAIM.POLICY",
                b"SET",
                b"s\x00\xff",
                b"g",
                b"DLQ",
                b"d\r\n"
            ],
            v(&[b"s\x00\xff", b"d\r\n"]),
        ),
        (words("RECLAIM.POLICY GET s g"), v(&words("s"))),
        (words("RECLAIM.POLICY DEL s g"), v(&words("s"))),
        (words("RECLAIM.SWEEP s g"), v(&words("s"))),
        (words("RECLAIM.SWEEP s g LIMIT 5"), v(&words("s"))),
        (words("RECLAIM.STATS s g"), v(&words("s"))),
        (words("RECLAIM.HEALTH s g"), v(&words("s"))),
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
            &bin_cmd("COMMAND", &words("GETKEYS RECLAIM.POLICY LIST"))
        ),
        "ERR The command has no key arguments"
    );

    // Key flags: the stream is updated, the DLQ receives inserts.
    let kf = reply_of(
        &mut c,
        &bin_cmd(
            "COMMAND",
            &words("GETKEYSANDFLAGS RECLAIM.POLICY SET s g DLQ d"),
        ),
    );
    let got: Vec<(String, Vec<String>)> = match &kf {
        Value::Array(items) => items
            .iter()
            .map(|it| match it {
                Value::Array(p) => (
                    string_of(&p[0]),
                    match &p[1] {
                        Value::Array(f) => f.iter().map(string_of).collect(),
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

/// The subcommands of `RECLAIM.POLICY`, sorted.
const POLICY_SUBCOMMANDS: [&str; 9] = [
    "reclaim.policy|del",
    "reclaim.policy|export",
    "reclaim.policy|get",
    "reclaim.policy|help",
    "reclaim.policy|import",
    "reclaim.policy|list",
    "reclaim.policy|pause",
    "reclaim.policy|resume",
    "reclaim.policy|set",
];

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
        Value::Array(f) => f.iter().map(string_of).collect(),
        Value::Set(f) => f.iter().map(string_of).collect(),
        other => panic!("flags: {other:?}"),
    };
    let subs = match e.get(9) {
        Some(Value::Array(s)) => s.clone(),
        _ => vec![],
    };
    (string_of(&e[0]), arity, flags, subs)
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
    let mut want = vec![
        "reclaim.extend",
        "reclaim.health",
        "reclaim.nack",
        "reclaim.policy",
        "reclaim.readgroup",
        "reclaim.redrive",
        "reclaim.simulate",
        "reclaim.stats",
        "reclaim.sweep",
        "reclaim.term",
    ];
    want.extend(POLICY_SUBCOMMANDS);
    want.sort();
    assert_eq!(listed, want);

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
    assert_eq!(subnames, POLICY_SUBCOMMANDS);
    for (n, d) in &subdocs {
        assert!(!str_field(d, "summary").is_empty(), "{n}");
        assert_eq!(str_field(d, "module"), "reclaim", "{n}");
    }
}

#[test]
fn wrong_arity_and_unknown_subcommand() {
    let s = Server::new();
    let mut c = s.conn();
    set_policy_args(&mut c, b"s", b"g", &[]);
    let wrong = |name: &str| format!("ERR wrong number of arguments for '{name}' command");
    let cases: Vec<(redis::Cmd, String)> = vec![
        (policy_cmd(&[]), wrong("reclaim.policy")),
        (policy_cmd(&words("SET")), wrong("reclaim.policy|set")),
        (policy_cmd(&words("SET s")), wrong("reclaim.policy|set")),
        (policy_cmd(&words("GET")), wrong("reclaim.policy|get")),
        (policy_cmd(&words("GET s")), wrong("reclaim.policy|get")),
        (policy_cmd(&words("GET s g x")), wrong("reclaim.policy|get")),
        (policy_cmd(&words("DEL s")), wrong("reclaim.policy|del")),
        (policy_cmd(&words("DEL s g x")), wrong("reclaim.policy|del")),
        (policy_cmd(&words("LIST x")), wrong("reclaim.policy|list")),
        (
            policy_cmd(&words("EXPORT x")),
            wrong("reclaim.policy|export"),
        ),
        (policy_cmd(&words("IMPORT")), wrong("reclaim.policy|import")),
        (bin_cmd("RECLAIM.SWEEP", &[]), wrong("reclaim.sweep")),
        (
            bin_cmd("RECLAIM.SWEEP", &words("s")),
            wrong("reclaim.sweep"),
        ),
        (bin_cmd("RECLAIM.STATS", &[]), wrong("reclaim.stats")),
        (
            bin_cmd("RECLAIM.STATS", &words("s")),
            wrong("reclaim.stats"),
        ),
        (
            bin_cmd("RECLAIM.STATS", &words("s g x")),
            wrong("reclaim.stats"),
        ),
        (bin_cmd("RECLAIM.HEALTH", &[]), wrong("reclaim.health")),
        (
            bin_cmd("RECLAIM.HEALTH", &words("s")),
            wrong("reclaim.health"),
        ),
        (
            bin_cmd("RECLAIM.HEALTH", &words("s g x")),
            wrong("reclaim.health"),
        ),
        (
            policy_cmd(&words("FOO")),
            "ERR unknown subcommand 'FOO'. Try RECLAIM.POLICY HELP.".into(),
        ),
        (
            policy_cmd(&words("FOO s g")),
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
    assert_eq!(
        policy_reply(&mut c, b"s", b"g"),
        PolicyView::defaults().reply(false)
    );
}
