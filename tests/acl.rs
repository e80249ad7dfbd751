//! ACL through the module: whatever a command does to a key, it checks as the Redis command that
//! would do the same, for the caller's user with all its selectors, at the moment it does it
//! (docs/security.md has the table). Users with key patterns, `%R~`/`%W~` and selectors against
//! every command and every key role (stream, DLQ, SOURCE, policy key): refused with the exact
//! NOPERM and nothing changed, or allowed. Then the issue's reproductions, a blocked read that
//! wakes after its policy or its user changed, a redrive whose starter loses rights mid-task,
//! what LIST, EXPORT, HEALTH and SIMULATE show, and the ACL categories.

use reclaim_testkit::*;

/// The module's refusal: `NOPERM this user has no permissions to run <cmd> on <key>`.
fn ours(cmd: &str, key: &str) -> String {
    format!("NOPERM this user has no permissions to run {cmd} on {key}")
}

const STREAM: &str = "the stream key";
const DLQ: &str = "the DLQ key";
const SOURCE: &str = "the SOURCE key";
const DLQ_STREAMS: &str = "the streams of the policies that use this DLQ (use SOURCE key group)";

/// The policy of the tests: dead-letters into `s:dlq` at 3 deliveries; no timer pass acts during
/// a test (MIN-IDLE and INTERVAL of an hour).
const POLICY: &str = "MIN-IDLE 3600000 MAX-DELIVERIES 3 DLQ s:dlq INTERVAL 3600000";

/// IMPORT's document of [`POLICY`].
const DOC: &str = r#"{"version":1,"policies":[{"key":"s","group":"g","dlq":"s:dlq","max-deliveries":3,"min-idle":3600000,"interval":3600000}]}"#;

/// A fresh database: stream `s` (entries 1-1 to 4-1), group `g`, 1-1 and 2-1 pending at consumer
/// `c`; the DLQ `s:dlq` with a record naming entry 4-1 of `s`, and the policy [`POLICY`].
fn setup(c: &mut Connection) {
    run(c, &["FLUSHALL"]);
    for id in ["1-1", "2-1", "3-1", "4-1"] {
        run(c, &["XADD", "s", id, "f", id]);
    }
    run(c, &["XGROUP", "CREATE", "s", "g", "0"]);
    run(
        c,
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "COUNT",
            "2",
            "STREAMS",
            "s",
            ">",
        ],
    );
    run(
        c,
        &[
            "XADD",
            "s:dlq",
            "*",
            "f",
            "4-1",
            "reclaim-stream",
            "s",
            "reclaim-group",
            "g",
            "reclaim-id",
            "4-1",
        ],
    );
    policy_ok(
        c,
        &[
            &["SET", "s", "g"][..],
            &POLICY.split(' ').collect::<Vec<_>>(),
        ]
        .concat(),
    );
}

/// What a refused command must leave as it was: the keys (stream, DLQ, task keys, policy key),
/// the PEL (owners and counts), the policy, and the policy's counters.
fn snapshot(c: &mut Connection) -> Vec<String> {
    let mut out = Vec::new();
    let keys: Vec<String> = q(c, &["KEYS", "*"]);
    let mut keys = keys;
    keys.sort();
    out.push(format!("keys {keys:?}"));
    out.push(format!("s {:?}", xrange(c, b"s")));
    out.push(format!("dlq {:?}", xrange(c, b"s:dlq")));
    out.push(format!("pel {:?}", pending_raw(c, b"s", b"g")));
    out.push(format!("policy {:?}", get_policy(c, b"s", b"g")));
    if exists(c, "reclaim:redrive:{s:dlq}:s:dlq") {
        out.push(format!(
            "task {:?}",
            run(c, &["HGETALL", "reclaim:redrive:{s:dlq}:s:dlq"])
        ));
    }
    if get_policy(c, b"s", b"g").is_some() {
        let st = stats(c, "s", "g");
        for f in [
            "claimed",
            "dead-lettered",
            "deleted",
            "redelivered",
            "tombstones",
            "dlq-trimmed",
            "errors",
            "status",
        ] {
            out.push(format!("{f} {:?}", field(&st, f)));
        }
    }
    out
}

/// What a case must answer.
#[derive(Debug, Clone)]
enum Want {
    /// Allowed: any reply but an error.
    Ok,
    /// The module's refusal, exactly.
    Ours(String),
    /// Redis's own refusal of a declared key (its wording differs between versions).
    RedisKey,
}

/// The commands of the table: each with its arguments (as words).
const COMMANDS: &[(&str, &str)] = &[
    ("set", "RECLAIM.POLICY SET s g"),
    ("get", "RECLAIM.POLICY GET s g"),
    ("del", "RECLAIM.POLICY DEL s g"),
    ("pause", "RECLAIM.POLICY PAUSE s g"),
    ("resume", "RECLAIM.POLICY RESUME s g"),
    ("import", "RECLAIM.POLICY IMPORT"),
    ("sweep", "RECLAIM.SWEEP s g"),
    ("stats", "RECLAIM.STATS s g"),
    ("health", "RECLAIM.HEALTH s g"),
    ("simulate", "RECLAIM.SIMULATE s g"),
    ("readgroup", "RECLAIM.READGROUP GROUP g c STREAMS s >"),
    ("extend", "RECLAIM.EXTEND s g c 1-1"),
    ("nack", "RECLAIM.NACK s g c 1-1"),
    ("term", "RECLAIM.TERM s g c 1-1"),
    ("redrive", "RECLAIM.REDRIVE s:dlq"),
    ("redrive-source", "RECLAIM.REDRIVE s:dlq SOURCE s g"),
    ("redrive-status", "RECLAIM.REDRIVE STATUS s:dlq"),
];

/// The command `name` of [`COMMANDS`].
fn command(name: &str) -> redis::Cmd {
    let (_, text) = COMMANDS.iter().find(|(n, _)| *n == name).unwrap();
    let w: Vec<&str> = text.split(' ').collect();
    let mut k = cmd(w[0]);
    k.arg(&w[1..]);
    match name {
        "set" => {
            k.arg(POLICY.split(' ').collect::<Vec<_>>());
        }
        "import" => {
            k.arg(DOC).arg("REPLACE");
        }
        _ => {}
    }
    k
}

/// Runs every command of [`COMMANDS`] as `user` (created with `rules`) on a fresh [`setup`],
/// and checks each answer against `want` (the commands it leaves out are allowed): a refused
/// command changed nothing.
fn check_user(s: &Server, c: &mut Connection, user: &str, rules: &[&str], want: &[(&str, Want)]) {
    for (name, _) in COMMANDS {
        setup(c);
        run(c, &["ACL", "DELUSER", user]);
        acl_setuser(c, &[&[user, "on", "nopass"][..], rules].concat());
        let mut u = s.conn_as(user);
        let w = want
            .iter()
            .find(|(n, _)| n == name)
            .map_or(Want::Ok, |(_, w)| w.clone());
        let before = snapshot(c);
        let got = command(name).query::<Value>(&mut u);
        let ctx = format!("user {user} ({rules:?}), {name}");
        match (&w, got) {
            (Want::Ok, Ok(_)) => {}
            (Want::Ok, Err(e)) => panic!("{ctx}: refused: {e}"),
            (_, Ok(v)) => panic!("{ctx}: allowed ({v:?}), want {w:?}"),
            (Want::Ours(text), Err(_)) => {
                assert_eq!(&error_of(&mut u, &command(name)), text, "{ctx}");
                assert_eq!(snapshot(c), before, "{ctx}: changed something");
            }
            (Want::RedisKey, Err(_)) => {
                assert_noperm_keys(&error_of(&mut u, &command(name)), &ctx);
                assert_eq!(snapshot(c), before, "{ctx}: changed something");
            }
        }
    }
}

fn noperm(cmd: &str, key: &str) -> Want {
    Want::Ours(ours(cmd, key))
}

fn in_import(field: &str, cmd: &str, key: &str) -> Want {
    Want::Ours(format!(
        "NOPERM policies[0] (key 's', group 'g'), field '{field}': this user has no permissions to run {cmd} on {key}"
    ))
}

/// Every command against users whose key patterns leave out one key role: the ones whose keys
/// Redis sees (declared) are refused by Redis, the others by the module, as the Redis command
/// that does the same.
#[test]
fn key_patterns_every_command_and_key_role() {
    let s = Server::new();
    let mut c = s.conn();
    use Want::RedisKey as K;
    // The stream, not the DLQ.
    check_user(
        &s,
        &mut c,
        "streamonly",
        &["~s", "+@all"],
        &[
            ("set", K),
            ("import", in_import("dlq", "XADD", DLQ)),
            ("sweep", noperm("XADD", DLQ)),
            ("simulate", noperm("XLEN", DLQ)),
            ("readgroup", noperm("XADD", DLQ)),
            ("term", noperm("XADD", DLQ)),
            ("redrive", K),
            ("redrive-source", K),
            ("redrive-status", K),
        ],
    );
    // The DLQ (and the module's keys), not the stream.
    check_user(
        &s,
        &mut c,
        "dlqonly",
        &["~s:dlq", "~reclaim:*", "+@all"],
        &[
            ("set", K),
            ("get", K),
            ("del", K),
            ("pause", K),
            ("resume", K),
            ("import", in_import("key", "XCLAIM", STREAM)),
            ("sweep", K),
            ("stats", K),
            ("health", K),
            ("simulate", K),
            ("readgroup", K),
            ("extend", K),
            ("nack", K),
            ("term", K),
            ("redrive", noperm("XCLAIM", DLQ_STREAMS)),
            ("redrive-source", K),
        ],
    );
    // Read-only keys: what only reads is allowed.
    check_user(
        &s,
        &mut c,
        "ronly",
        &["%R~s", "%R~s:dlq", "+@all"],
        &[
            ("set", K),
            ("del", K),
            ("pause", K),
            ("resume", K),
            ("import", in_import("key", "XCLAIM", STREAM)),
            ("sweep", K),
            ("readgroup", K),
            ("extend", K),
            ("nack", K),
            ("term", K),
            ("redrive", K),
            ("redrive-source", K),
        ],
    );
    // Write-only keys: what would copy entries (dead-letters) or show them is refused.
    check_user(
        &s,
        &mut c,
        "wonly",
        &["%W~s", "%W~s:dlq", "+@all"],
        &[
            ("set", noperm("XRANGE", STREAM)),
            ("get", K),
            ("import", in_import("key", "XRANGE", STREAM)),
            ("sweep", noperm("XRANGE", STREAM)),
            ("stats", K),
            ("health", K),
            ("simulate", K),
            ("readgroup", K),
            ("term", noperm("XRANGE", STREAM)),
            ("redrive", noperm("XRANGE", DLQ)),
            ("redrive-source", noperm("XRANGE", DLQ)),
            ("redrive-status", K),
        ],
    );
    // Every key, but not the commands the module's work would be: `-xclaim`, `-xadd`.
    check_user(
        &s,
        &mut c,
        "noxclaim",
        &["~s", "~s:dlq", "+@all", "-xclaim"],
        &[
            ("set", noperm("XCLAIM", STREAM)),
            ("import", in_import("key", "XCLAIM", STREAM)),
            ("sweep", noperm("XCLAIM", STREAM)),
            ("readgroup", noperm("XCLAIM", STREAM)),
            ("extend", noperm("XCLAIM", STREAM)),
            ("nack", noperm("XCLAIM", STREAM)),
            ("redrive", noperm("XCLAIM", DLQ_STREAMS)),
            ("redrive-source", noperm("XCLAIM", SOURCE)),
        ],
    );
    check_user(
        &s,
        &mut c,
        "noxadd",
        &[
            "~s",
            "~s:dlq",
            "+@all",
            "-xadd",
            "-xpending",
            "-xlen",
            "-xinfo",
        ],
        &[
            ("set", noperm("XADD", DLQ)),
            ("get", noperm("XINFO", STREAM)),
            ("import", in_import("dlq", "XADD", DLQ)),
            ("sweep", noperm("XADD", DLQ)),
            ("stats", noperm("XPENDING", STREAM)),
            ("health", noperm("XPENDING", STREAM)),
            ("simulate", noperm("XPENDING", STREAM)),
            ("readgroup", noperm("XADD", DLQ)),
            ("term", noperm("XADD", DLQ)),
        ],
    );
    // Every key and command: everything is allowed.
    check_user(&s, &mut c, "full", &["~s", "~s:dlq", "+@all"], &[]);
}

/// Selectors: each command is checked against each selector with its keys, never a key in one
/// selector and the command in another. A selector that names the keys but only `GET` grants
/// nothing through the module; one that grants the stream commands on the keys grants what they do.
#[test]
fn selectors_grant_only_what_one_selector_allows() {
    let s = Server::new();
    let mut c = s.conn();
    use Want::RedisKey as K;
    let refused_all = [
        ("set", K),
        ("get", K),
        ("del", K),
        ("pause", K),
        ("resume", K),
        ("import", in_import("key", "XCLAIM", STREAM)),
        ("sweep", K),
        ("stats", K),
        ("health", K),
        ("simulate", K),
        ("readgroup", K),
        ("extend", K),
        ("nack", K),
        ("term", K),
        ("redrive", K),
        ("redrive-source", K),
        ("redrive-status", K),
    ];
    check_user(
        &s,
        &mut c,
        "sel",
        &["~app:*", "+@all", "(~s ~s:dlq +get)"],
        &refused_all,
    );
    // The stream commands on the keys in a selector, the module's commands in the root. IMPORT
    // declares no key: the root may run it, and a selector may do each of the stream commands
    // its policy's work is, so it is allowed. The commands that declare `s` need one selector
    // that allows both: on a server with categories, `+@stream` holds the worker commands.
    let worker = if stream_category(&mut c) { Want::Ok } else { K };
    check_user(
        &s,
        &mut c,
        "split",
        &["~app:*", "+@all", "(~s ~s:dlq +@stream)"],
        &[
            ("set", K),
            ("get", K),
            ("del", K),
            ("pause", K),
            ("resume", K),
            ("sweep", K),
            ("stats", K),
            ("health", K),
            ("simulate", K),
            ("readgroup", worker.clone()),
            ("extend", worker.clone()),
            ("nack", worker.clone()),
            ("term", worker),
            ("redrive", K),
            ("redrive-source", K),
            ("redrive-status", K),
        ],
    );
}

/// Whether the server put the module's worker commands in `@stream` (Redis 7.2+, Valkey 8:
/// `RM_SetCommandACLCategories`).
fn stream_category(c: &mut Connection) -> bool {
    let cmds: Vec<String> = q(c, &["ACL", "CAT", "stream"]);
    cmds.iter().any(|n| n == "reclaim.readgroup")
}

/// The issue's reproduction: a selector that may only GET `vault:*` exfiltrated a vault stream
/// through IMPORT (its policy dead-lettered the entries into a DLQ the user may read).
#[test]
fn issue_selector_exfiltration_via_import() {
    let s = Server::new();
    let mut c = s.conn();
    acl_setuser(
        &mut c,
        &["sel", "on", ">pw", "~app:*", "+@all", "(~vault:* +get)"],
    );
    run(&mut c, &["XADD", "vault:s", "*", "card", "4111"]);
    run(&mut c, &["XGROUP", "CREATE", "vault:s", "g", "0"]);
    run(
        &mut c,
        &["XREADGROUP", "GROUP", "g", "w1", "STREAMS", "vault:s", ">"],
    );
    let mut sel = s.conn();
    run(&mut sel, &["AUTH", "sel", "pw"]);
    assert_noperm_keys(
        &error_of(&mut sel, cmd("XRANGE").arg(&["vault:s", "-", "+"])),
        "XRANGE",
    );
    let doc = r#"{"version":1,"policies":[{"key":"vault:s","group":"g","dlq":"app:loot","max-deliveries":1,"min-idle":1,"interval":100}]}"#;
    assert_eq!(
        error_of(&mut sel, &import_cmd(doc.as_bytes(), true)),
        "NOPERM policies[0] (key 'vault:s', group 'g'), field 'key': this user has no permissions to run XCLAIM on the stream key"
    );
    assert_eq!(get_policy(&mut c, b"vault:s", b"g"), None);
    // Had a pass run, it would have dead-lettered within 100 ms: give it that chance.
    let witness = PolicyView::new(1, 100);
    create_group(&mut c, b"w", b"g");
    set_policy(&mut c, b"w", b"g", &witness);
    wait_passes(&mut c, "w", "g", 3);
    assert!(!exists(&mut c, "app:loot"));
    assert_eq!(pending(&mut c, "vault:s", "g").len(), 1);
    let loot: Vec<Value> = q(&mut sel, &["XRANGE", "app:loot", "-", "+"]);
    assert!(loot.is_empty());
}
