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
            ("reclaim.policy|list".to_string(), -2),
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
        (
            policy_cmd(&words("LIST x")),
            "ERR unknown option 'x'".into(),
        ),
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
        PolicyView::defaults().reply_on(b"s", false)
    );
}

/// Every command and subcommand, with the module version it appeared in (the CHANGELOG's 0.1.0
/// section lists what 0.1.0 had).
const SINCE: &[(&str, &str)] = &[
    ("reclaim.policy", "0.1.0"),
    ("reclaim.policy|set", "0.1.0"),
    ("reclaim.policy|get", "0.1.0"),
    ("reclaim.policy|del", "0.1.0"),
    ("reclaim.policy|list", "0.1.0"),
    ("reclaim.policy|help", "0.1.0"),
    ("reclaim.policy|pause", "0.2.0"),
    ("reclaim.policy|resume", "0.2.0"),
    ("reclaim.policy|export", "0.2.0"),
    ("reclaim.policy|import", "0.2.0"),
    ("reclaim.sweep", "0.1.0"),
    ("reclaim.stats", "0.1.0"),
    ("reclaim.simulate", "0.2.0"),
    ("reclaim.health", "0.2.0"),
    ("reclaim.readgroup", "0.2.0"),
    ("reclaim.extend", "0.2.0"),
    ("reclaim.nack", "0.2.0"),
    ("reclaim.term", "0.2.0"),
    ("reclaim.redrive", "0.2.0"),
];

/// The `COMMAND DOCS` entry of every command and subcommand, by full name (`reclaim.policy|set`).
fn all_docs(con: &mut Connection) -> Vec<(String, Value)> {
    let mut a = words("DOCS");
    let names: Vec<&str> = SINCE
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| !n.contains('|'))
        .collect();
    a.extend(names.iter().map(|n| n.as_bytes()));
    let docs: Value = bin_cmd("COMMAND", &a).query(con).expect("COMMAND DOCS");
    let mut out = vec![];
    for (name, d) in pairs(&docs) {
        if let Some((_, subs)) = pairs(&d).into_iter().find(|(k, _)| k == "subcommands") {
            out.extend(pairs(&subs));
        }
        out.push((name, d));
    }
    out
}

/// One argument of a `COMMAND DOCS` reply as redis-cli 7.0 renders it in its hints
/// (`cliAddArgument`), each placeholder checked for its type on the way.
fn render_arg(cmd_name: &str, a: &Value, leaves: &mut Vec<(String, String)>) -> String {
    let f = pairs(a);
    let get = |k: &str| f.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let name = string_of(&get("name").expect("name"));
    let kind = string_of(&get("type").expect("type"));
    let flags: Vec<String> = get("flags")
        .map(|v| items(&v).iter().map(string_of).collect())
        .unwrap_or_default();
    let subs: Vec<Value> = get("arguments")
        .map(|v| items(&v).to_vec())
        .unwrap_or_default();
    let token = get("token").map(|t| string_of(&t));
    if kind == "key" {
        assert!(get("key_spec_index").is_some(), "{cmd_name} {name}");
    }
    let repeat = match kind.as_str() {
        "oneof" => subs
            .iter()
            .map(|s| render_arg(cmd_name, s, leaves))
            .collect::<Vec<_>>()
            .join("|"),
        "block" => subs
            .iter()
            .map(|s| render_arg(cmd_name, s, leaves))
            .collect::<Vec<_>>()
            .join(" "),
        "pure-token" => {
            leaves.push((token.clone().expect("a pure token's token"), kind.clone()));
            String::new()
        }
        _ => {
            leaves.push((name.clone(), kind.clone()));
            name.clone()
        }
    };
    let token = match token {
        Some(t) if kind == "pure-token" => t,
        Some(t) => format!("{t} "),
        None => String::new(),
    };
    let mut out = format!("{token}{repeat}");
    if flags.iter().any(|f| f == "multiple") {
        let again = if flags.iter().any(|f| f == "multiple_token") {
            format!("{token}{repeat}")
        } else {
            repeat
        };
        out = format!("{out} [{again} ...]");
    }
    if flags.iter().any(|f| f == "optional") {
        out = format!("[{out}]");
    }
    out
}

/// The syntax blocks of docs/commands.md by command (`reclaim.policy|set`): the ```` ```text
/// syntax ```` block of each `## RECLAIM.*` section, its lines joined, spaces around `|`
/// dropped, and the forms of a command of several (each line that starts with its name) joined
/// with `|`, as a `oneof` renders them.
fn documented_syntax() -> Vec<(String, String)> {
    let md = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/commands.md"))
        .expect("docs/commands.md");
    let mut out = vec![];
    let mut section: Option<String> = None;
    let mut lines = md.lines();
    while let Some(l) = lines.next() {
        if let Some(h) = l.strip_prefix("## RECLAIM.") {
            section = Some(format!("RECLAIM.{h}"));
        } else if l == "```text syntax" {
            let Some(title) = section.take() else {
                continue;
            };
            let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "```").collect();
            let mut forms: Vec<String> = vec![];
            for l in body {
                let l = l.split_whitespace().collect::<Vec<_>>().join(" ");
                match l.strip_prefix(title.as_str()) {
                    Some(rest) => forms.push(rest.trim().to_string()),
                    None => {
                        let last = forms.last_mut().expect("a form first");
                        last.push(' ');
                        last.push_str(&l);
                    }
                }
            }
            let name = title.to_lowercase().replacen(' ', "|", 1);
            out.push((name, forms.join("|").replace(" | ", "|")));
        }
    }
    out
}

/// The type each placeholder of the docs' syntax has: the numbers are integers, the stream and
/// DLQ names keys (a what-if DLQ of SIMULATE is no key of that command), the words tokens.
fn expected_type(cmd_name: &str, leaf: &str) -> &'static str {
    match leaf {
        "ms" | "n" | "max-ms" | "window-ms" | "count" | "milliseconds" | "entries-per-s" | "k" => {
            "integer"
        }
        "key" | "dlq" => "key",
        "dlq-key" if cmd_name == "reclaim.policy|set" => "key",
        l if l == ">"
            || l == "yes"
            || l == "no"
            || l.chars().all(|c| c.is_ascii_uppercase() || c == '-') =>
        {
            "pure-token"
        }
        _ => "string",
    }
}

#[test]
fn command_docs_arguments_and_versions_match_commands_md() {
    let s = Server::new();
    let mut c = s.conn();
    let docs = all_docs(&mut c);
    let mut names: Vec<&str> = docs.iter().map(|(n, _)| n.as_str()).collect();
    names.sort();
    let mut want: Vec<&str> = SINCE.iter().map(|(n, _)| *n).collect();
    want.sort();
    assert_eq!(names, want);
    let documented = documented_syntax();
    for (name, d) in &docs {
        let since = SINCE.iter().find(|(n, _)| n == name).unwrap().1;
        assert_eq!(str_field(d, "since"), since, "{name}");
        let args: Vec<Value> = pairs(d)
            .into_iter()
            .find(|(k, _)| k == "arguments")
            .map(|(_, v)| items(&v).to_vec())
            .unwrap_or_default();
        let mut leaves = vec![];
        let rendered = args
            .iter()
            .map(|a| render_arg(name, a, &mut leaves))
            .collect::<Vec<_>>()
            .join(" ");
        if name == "reclaim.policy" {
            assert_eq!(rendered, "", "a container has no arguments of its own");
            continue;
        }
        let doc = documented
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("no syntax block for {name} in docs/commands.md"));
        assert_eq!(rendered, doc.1, "{name}: COMMAND DOCS vs docs/commands.md");
        for (leaf, kind) in &leaves {
            assert_eq!(kind, expected_type(name, leaf), "{name} {leaf}");
        }
    }
    // Per argument, the version only where it differs from the command's: SET's options since
    // 0.1.0 show none, those added since show 0.2.0; SIMULATE (0.2.0) shows none.
    let set = &docs
        .iter()
        .find(|(n, _)| n == "reclaim.policy|set")
        .unwrap()
        .1;
    let since_of: Vec<(String, String)> = arguments_since(set);
    let expect: Vec<(String, String)> = [
        ("key", ""),
        ("group", ""),
        ("MIN-IDLE", ""),
        ("MAX-DELIVERIES", ""),
        ("DLQ", ""),
        ("CLAIMANT", ""),
        ("COUNT", ""),
        ("INTERVAL", ""),
        ("BACKOFF", "0.2.0"),
        ("LIVENESS", "0.2.0"),
        ("STORM", "0.2.0"),
        ("DLQ-MAXLEN", "0.2.0"),
        ("DLQ-MAXAGE", "0.2.0"),
        ("TOMBSTONES", "0.2.0"),
        ("FORGET-IDLE", "0.3.0"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(since_of, expect);
    let simulate = &docs
        .iter()
        .find(|(n, _)| n == "reclaim.simulate")
        .unwrap()
        .1;
    // SIMULATE came with every option but the one added since (FORGET-IDLE, 0.3.0).
    for a in items(&field(simulate, "arguments")) {
        let f = pairs(a);
        let since = f
            .iter()
            .find(|(k, _)| k == "since")
            .map(|(_, v)| string_of(v));
        let token = f
            .iter()
            .find(|(k, _)| k == "token")
            .map(|(_, v)| string_of(v));
        match token.as_deref() {
            Some("FORGET-IDLE") => assert_eq!(since.as_deref(), Some("0.3.0")),
            _ => assert_eq!(since, None, "SIMULATE came with this option: {a:?}"),
        }
    }
}

/// `MODULE LIST` `ver`: major * 10000 + minor * 100 + patch of the crate's version (0.2.0: 200).
#[test]
fn module_list_version_is_the_crate_version() {
    let s = Server::new();
    let mut c = s.conn();
    let list: Value = cmd("MODULE").arg("LIST").query(&mut c).unwrap();
    let m = items(&list)
        .iter()
        .find(|m| str_field(m, "name") == "reclaim")
        .expect("reclaim in MODULE LIST")
        .clone();
    let n = |s: &str| s.parse::<i64>().unwrap();
    let want = n(env!("CARGO_PKG_VERSION_MAJOR")) * 10000
        + n(env!("CARGO_PKG_VERSION_MINOR")) * 100
        + n(env!("CARGO_PKG_VERSION_PATCH"));
    assert_eq!(int_field(&m, "ver"), want);
    assert_eq!(env!("CARGO_PKG_VERSION"), "0.2.0");
    assert_eq!(want, 200);
}

/// redis-cli in a terminal (a pty), as a person types: after a command's name and a space it
/// shows the command's syntax as a hint, from the `COMMAND DOCS` it read at start.
#[test]
fn redis_cli_shows_the_syntax_as_a_hint() {
    let s = Server::new();
    let Some(mut cli) = Pty::spawn(&reclaim_testkit::cli_binary(), &["-p", &s.port.to_string()])
    else {
        // A chroot without devpts (../shared/tools/fresh-machine.sh) has no terminal to offer.
        eprintln!("skipped: this machine has no pseudo-terminals (/dev/pts is not mounted)");
        return;
    };
    // Typed only once it prompts (the terminal is in raw mode then).
    cli.read_until(&format!("127.0.0.1:{}> ", s.port));
    let cases = [
        (
            "RECLAIM.POLICY SET ",
            "key group [MIN-IDLE ms] [MAX-DELIVERIES n] [DLQ dlq-key] [CLAIMANT consumer] \
             [COUNT n] [INTERVAL ms] [BACKOFF FIXED|EXPONENTIAL max-ms|LIST ms [ms ...]] \
             [LIVENESS ms] [STORM n window-ms] [DLQ-MAXLEN n] [DLQ-MAXAGE ms] \
             [TOMBSTONES yes|no] [FORGET-IDLE ms]",
        ),
        (
            "RECLAIM.READGROUP ",
            "GROUP group consumer [COUNT count] [BLOCK milliseconds] [DELIVERY-METADATA] STREAMS key [key ...] > [> ...]",
        ),
        (
            "RECLAIM.NACK ",
            "key group consumer id [id ...] [DELAY ms] [REASON text]",
        ),
    ];
    for (typed, hint) in cases {
        // Ctrl-U clears the line, then the command is typed.
        cli.write(b"\x15");
        cli.write(typed.as_bytes());
        // linenoise draws the hint in grey (SGR 90) after what was typed.
        let want = format!("{typed}\x1b[0;90;49m{hint}\x1b[0m");
        cli.read_until(&want);
    }
}

/// A program in a pseudo-terminal of 1000 columns (hints are cut at the line's end), killed on
/// drop. `None` only when the machine has no pseudo-terminals at all (no devpts mounted).
struct Pty {
    master: std::fs::File,
    child: std::process::Child,
    seen: Vec<u8>,
}

impl Pty {
    fn spawn(program: &std::path::Path, args: &[&str]) -> Option<Pty> {
        use std::os::fd::FromRawFd;
        let (mut master, mut slave) = (0, 0);
        let size = libc::winsize {
            ws_row: 50,
            ws_col: 1000,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let rc = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                &size,
            )
        };
        if rc != 0 && !std::path::Path::new("/dev/pts/ptmx").exists() {
            return None;
        }
        assert_eq!(rc, 0, "openpty");
        let slave = unsafe { std::fs::File::from_raw_fd(slave) };
        let child = std::process::Command::new(program)
            .args(args)
            .env("TERM", "xterm")
            .stdin(slave.try_clone().unwrap())
            .stdout(slave.try_clone().unwrap())
            .stderr(slave)
            .spawn()
            .expect("spawn redis-cli");
        let master = unsafe { std::fs::File::from_raw_fd(master) };
        unsafe {
            let fl = libc::fcntl(master_fd(&master), libc::F_GETFL);
            libc::fcntl(master_fd(&master), libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
        Some(Pty {
            master,
            child,
            seen: vec![],
        })
    }

    fn write(&mut self, b: &[u8]) {
        use std::io::Write;
        self.master.write_all(b).expect("write to the pty");
    }

    /// Reads what the program writes until `want` appears (panics after a deadline, with what
    /// it wrote).
    fn read_until(&mut self, want: &str) {
        use std::io::Read;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut buf = [0u8; 4096];
        loop {
            if String::from_utf8_lossy(&self.seen).contains(want) {
                self.seen.clear();
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no {want:?} from redis-cli; it wrote: {:?}",
                String::from_utf8_lossy(&self.seen)
            );
            match self.master.read(&mut buf) {
                Ok(n) if n > 0 => self.seen.extend_from_slice(&buf[..n]),
                _ => std::thread::sleep(std::time::Duration::from_millis(20)),
            }
        }
    }
}

fn master_fd(f: &std::fs::File) -> i32 {
    use std::os::fd::AsRawFd;
    f.as_raw_fd()
}

impl Drop for Pty {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
