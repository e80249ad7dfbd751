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

/// `RECLAIM.POLICY SET s g` [`POLICY`] and `more` options, which must answer OK.
fn set_the_policy(c: &mut Connection, more: &[&str]) {
    policy_ok(
        c,
        &[
            &["SET", "s", "g"][..],
            &POLICY.split(' ').collect::<Vec<_>>(),
            more,
        ]
        .concat(),
    );
}

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
    set_the_policy(c, &[]);
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
        acl_user(c, user, rules);
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

/// The table of a role whose keys Redis refuses for every command (declared keys out of reach)
/// but the `except` ones ([`role_table`] over [`COMMANDS`]).
fn refused_but(except: &[(&'static str, Want)]) -> Vec<(&'static str, Want)> {
    role_table(COMMANDS.iter().map(|c| c.0), Want::RedisKey, except)
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
        &refused_but(&[
            ("import", in_import("key", "XCLAIM", STREAM)),
            ("redrive", noperm("XCLAIM", DLQ_STREAMS)),
            ("redrive-status", Want::Ok),
        ]),
    );
    // Read-only keys: what only reads is allowed.
    check_user(
        &s,
        &mut c,
        "ronly",
        &["%R~s", "%R~s:dlq", "+@all"],
        &refused_but(&[
            ("import", in_import("key", "XCLAIM", STREAM)),
            ("get", Want::Ok),
            ("stats", Want::Ok),
            ("health", Want::Ok),
            ("simulate", Want::Ok),
            ("redrive-status", Want::Ok),
        ]),
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
    without_the_stream_commands(&s, &mut c);
}

/// Users with every key but not the commands the module's work would be (`-xclaim`, `-xadd`):
/// the module refuses as the command it lacks; with every command, everything is allowed.
fn without_the_stream_commands(s: &Server, c: &mut Connection) {
    check_user(
        s,
        c,
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
        s,
        c,
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
    check_user(s, c, "full", &["~s", "~s:dlq", "+@all"], &[]);
}

/// Selectors: each command is checked against each selector with its keys, never a key in one
/// selector and the command in another. A selector that names the keys but only `GET` grants
/// nothing through the module; one that grants the stream commands on the keys grants what they do.
#[test]
fn selectors_grant_only_what_one_selector_allows() {
    let s = Server::new();
    let mut c = s.conn();
    use Want::RedisKey as K;
    let refused_all = refused_but(&[("import", in_import("key", "XCLAIM", STREAM))]);
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
        &refused_but(&[
            ("import", Want::Ok),
            ("readgroup", worker.clone()),
            ("extend", worker.clone()),
            ("nack", worker.clone()),
            ("term", worker),
        ]),
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

/// Waits until `n` readers block in `RECLAIM.READGROUP`.
fn readers_blocked(c: &mut Connection, n: i64) {
    wait_for(10, &format!("{n} blocked readers"), || {
        (reclaim_info(c, "blocked_readers") == n).then_some(())
    });
}

/// `user` (rules `rules`) blocks in `RECLAIM.READGROUP GROUP g <user> BLOCK 10000 STREAMS s >`
/// on its own connection; the thread returns the reply or the error text.
fn block_as(
    s: &Server,
    user: &str,
    rules: &[&str],
) -> std::thread::JoinHandle<Result<Value, String>> {
    let mut c = s.conn();
    acl_user(&mut c, user, rules);
    let mut u = s.conn_as(user);
    let k = readgroup_cmd("s", "g", user, 10, Some(10_000));
    std::thread::spawn(move || {
        k.query::<Value>(&mut u)
            .map_err(|e| match (e.code(), e.detail()) {
                (Some(code), Some(detail)) => format!("{code} {detail}"),
                _ => e.to_string(),
            })
    })
}

/// The issue's reproduction: a blocked READGROUP woke and acted on permissions checked before
/// it blocked, after the policy's DLQ changed to one the caller may not write. Woken, it checks
/// again: NOPERM, and nothing moved (the entry at its limit stays in the inbox, the new entry is
/// not delivered).
#[test]
fn issue_a_woken_read_checks_again_the_policy_changed() {
    let s = Server::new();
    let mut c = s.conn();
    run(&mut c, &["XADD", "s", "1-1", "f", "1"]);
    run(&mut c, &["XGROUP", "CREATE", "s", "g", "0"]);
    set_the_policy(&mut c, &[]);
    deliver(&mut c, "s", "g", "x", None);
    let reader = block_as(&s, "w", &["~s", "~s:dlq", "+@all"]);
    readers_blocked(&mut c, 1);
    // At once (MULTI): the DLQ becomes vault:dlq, 1-1 waits in the inbox at its limit (a read
    // dead-letters it), and a new entry wakes the reader. The timer leaves 1-1 (not stale).
    run(&mut c, &["MULTI"]);
    let set =
        "RECLAIM.POLICY SET s g MIN-IDLE 3600000 MAX-DELIVERIES 1 DLQ vault:dlq INTERVAL 3600000";
    run(&mut c, &set.split(' ').collect::<Vec<_>>());
    run(
        &mut c,
        &["XCLAIM", "s", "g", "reclaim", "0", "1-1", "JUSTID"],
    );
    run(&mut c, &["XADD", "s", "2-1", "f", "2"]);
    run(&mut c, &["EXEC"]);
    let got = reader.join().unwrap();
    assert_eq!(got, Err(ours("XADD", DLQ)));
    assert!(!exists(&mut c, "vault:dlq"));
    assert_eq!(
        pending_raw(&mut c, b"s", b"g"),
        vec![("1-1".to_string(), b"reclaim".to_vec(), 1)]
    );
    assert_eq!(stat(&mut c, "s", "g", "dead-lettered"), 0);
    // Allowed the new DLQ, the same read dead-letters 1-1 and gets 2-1.
    acl_setuser(&mut c, &["w", "~vault:dlq"]);
    let mut w = s.conn_as("w");
    let got = readgroup(&mut w, "s", "g", "w", 10, None);
    assert_eq!(
        got.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(),
        ["2-1"]
    );
    assert_eq!(xlen(&mut c, "vault:dlq"), 1);
}

/// A blocked READGROUP whose user lost rights while it waited: woken, it is refused and
/// delivers nothing.
#[test]
fn a_woken_read_checks_again_the_user_changed() {
    let s = Server::new();
    let mut c = s.conn();
    run(&mut c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    set_the_policy(&mut c, &[]);
    for (revoke, want) in [
        ("-xclaim", ours("XCLAIM", STREAM)),
        ("-xreadgroup", ours("XREADGROUP", STREAM)),
        ("-xadd", ours("XADD", DLQ)),
    ] {
        let reader = block_as(&s, "w", &["reset", "on", "nopass", "~s", "~s:dlq", "+@all"]);
        readers_blocked(&mut c, 1);
        acl_setuser(&mut c, &["w", revoke]);
        let before = pending_raw(&mut c, b"s", b"g");
        run(&mut c, &["XADD", "s", "*", "f", revoke]);
        assert_eq!(reader.join().unwrap(), Err(want), "{revoke}");
        assert_eq!(pending_raw(&mut c, b"s", b"g"), before, "{revoke}");
        // Without the revoked command, the same reader gets the entry.
        acl_setuser(&mut c, &["w", &revoke.replace('-', "+")]);
        let mut w = s.conn_as("w");
        assert_eq!(
            readgroup(&mut w, "s", "g", "w", 10, None).len(),
            1,
            "{revoke}"
        );
        readers_blocked(&mut c, 0);
    }
}

/// A read answered from what earlier reads learnt (nothing due: no redelivery can happen, the
/// policy is not read) checks the same commands as any read under the policy: the reader may not
/// skip the checks of the XCLAIM, XACK and DLQ writes a read may do, and a refused read delivers
/// nothing.
#[test]
fn a_read_with_nothing_due_is_checked_as_any_read() {
    let s = Server::new();
    let mut c = s.conn();
    setup(&mut c);
    set_the_policy(&mut c, &["DLQ-MAXLEN", "100"]);
    // The default user reads what is new (3-1, 4-1), then finds nothing: by then reads know
    // that nothing can be due for an hour (1-1 and 2-1 are fresh at `c`).
    for _ in 0..3 {
        readgroup(&mut c, "s", "g", "r", 1, None);
    }
    run(&mut c, &["XADD", "s", "5-1", "f", "5-1"]);
    for (revoke, want) in [
        ("-xtrim", ours("XTRIM", DLQ)),
        ("-xadd", ours("XADD", DLQ)),
        ("-xack", ours("XACK", STREAM)),
        ("-xclaim", ours("XCLAIM", STREAM)),
        ("-xreadgroup", ours("XREADGROUP", STREAM)),
    ] {
        acl_setuser(
            &mut c,
            &[
                "w", "reset", "on", "nopass", "~s", "~s:dlq", "+@all", revoke,
            ],
        );
        let mut w = s.conn_as("w");
        let before = snapshot(&mut c);
        assert_eq!(
            error_of(&mut w, &readgroup_cmd("s", "g", "w", 10, None)),
            want,
            "{revoke}"
        );
        assert_eq!(snapshot(&mut c), before, "{revoke}");
    }
    // Allowed all: the new entry is delivered.
    acl_setuser(&mut c, &["w", "+@all"]);
    let mut w = s.conn_as("w");
    let got = readgroup(&mut w, "s", "g", "w", 10, None);
    assert_eq!(
        got.iter().map(|e| e.0.as_str()).collect::<Vec<_>>(),
        ["5-1"]
    );
}

/// The issue's reproduction: TOMBSTONES write into the DLQ whatever MAX-DELIVERIES is (here 0),
/// and DLQ-MAXLEN then trims it: a reader that may not write the DLQ is refused, and someone
/// else's stream stays as it was.
#[test]
fn issue_tombstones_with_max_deliveries_0() {
    let s = Server::new();
    let mut c = s.conn();
    for i in 0..3 {
        run(
            &mut c,
            &["XADD", "other:dlq", "*", "theirs", &i.to_string()],
        );
    }
    run(&mut c, &["XADD", "s", "1-1", "f", "1"]);
    run(&mut c, &["XGROUP", "CREATE", "s", "g", "0"]);
    // The policy's first pass runs before the entry is delivered and deleted: only reads act on
    // it (a pass after the XDEL would bury it itself).
    quiet_policy(
        &mut c,
        "s",
        "g",
        "MIN-IDLE 3600000 MAX-DELIVERIES 0 DLQ other:dlq TOMBSTONES yes DLQ-MAXLEN 1",
    );
    // 1-1 waits in the inbox, deleted from the stream: a read records its tombstone.
    deliver(&mut c, "s", "g", "reclaim", None);
    run(&mut c, &["XDEL", "s", "1-1"]);
    acl_setuser(&mut c, &["w", "on", "nopass", "~s", "+@all"]);
    let mut w = s.conn_as("w");
    let before = xrange(&mut c, b"other:dlq");
    assert_eq!(
        error_of(&mut w, &readgroup_cmd("s", "g", "w", 10, None)),
        ours("XADD", DLQ)
    );
    assert_eq!(xrange(&mut c, b"other:dlq"), before);
    assert_eq!(pending(&mut c, "s", "g").len(), 1);
    assert_eq!(stat(&mut c, "s", "g", "tombstones"), 0);
    // Allowed XADD on the DLQ but not XTRIM (DLQ-MAXLEN trims it): refused all the same.
    acl_setuser(&mut c, &["w", "~other:dlq", "-xtrim"]);
    assert_eq!(
        error_of(&mut w, &readgroup_cmd("s", "g", "w", 10, None)),
        ours("XTRIM", DLQ)
    );
    assert_eq!(xrange(&mut c, b"other:dlq"), before);
    // Allowed both: the tombstone is appended.
    acl_setuser(&mut c, &["w", "+xtrim"]);
    readgroup(&mut w, "s", "g", "w", 10, None);
    assert_eq!(stat(&mut c, "s", "g", "tombstones"), 1);
    assert!(pending(&mut c, "s", "g").is_empty());
}

/// The DLQ `s:dlq` holding 3 dead letters of `s` (group `g`, policy [`POLICY`]), moved there by
/// `RECLAIM.SWEEP` after 4 deliveries each.
fn three_dead_letters(c: &mut Connection) {
    run(c, &["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"]);
    set_the_policy(c, &[]);
    let ids = add_numbered(c, "s", 3);
    deliver(c, "s", "g", "w", None);
    set_deliveries(c, b"s", b"g", b"w", &ids, 4);
    run(c, &["RECLAIM.SWEEP", "s", "g"]);
    assert_eq!(xlen(c, "s:dlq"), 3);
}

/// A redrive acts as the user who started it at every step: a right lost mid-task (the XCLAIM
/// that moves an entry back, the XDEL of the DLQ) stops it as `denied`; what was not moved stays
/// in the DLQ.
#[test]
fn redrive_while_the_starters_rights_change() {
    for (revoke, why) in [
        (
            "-xclaim",
            "user 'ops' may not run XCLAIM on the stream 's' an entry goes back to",
        ),
        (
            "-xdel",
            "user 'ops' may no longer read the DLQ (XRANGE) or delete from it (XDEL)",
        ),
        (
            "-xrange",
            "user 'ops' may no longer read the DLQ (XRANGE) or delete from it (XDEL)",
        ),
    ] {
        let s = Server::new();
        let mut c = s.conn();
        three_dead_letters(&mut c);
        acl_setuser(&mut c, &["ops", "on", "nopass", "~s", "~s:dlq", "+@all"]);
        let mut ops = s.conn_as("ops");
        // The canary holds the task after its first entry, so the rights change mid-task.
        let _: i64 = q(
            &mut ops,
            &["RECLAIM.REDRIVE", "s:dlq", "CANARY", "1", "WINDOW", "500"],
        );
        let state = |c: &mut Connection| {
            str_field(&run(c, &["RECLAIM.REDRIVE", "STATUS", "s:dlq"]), "state")
        };
        wait_for(10, "the canary moved back", || {
            (state(&mut c) == "canary").then_some(())
        });
        acl_setuser(&mut c, &["ops", revoke]);
        wait_for(10, "the task denied", || {
            (state(&mut c) == "denied").then_some(())
        });
        let st = run(&mut c, &["RECLAIM.REDRIVE", "STATUS", "s:dlq"]);
        assert_eq!(int_field(&st, "moved"), 1, "{revoke}");
        assert_eq!(xlen(&mut c, "s:dlq"), 2, "{revoke}");
        assert_eq!(pending(&mut c, "s", "g").len(), 1, "{revoke}");
        assert!(s.log().contains(why), "{revoke}: {}", s.log_tail(20));
    }
}

/// LIST and EXPORT leave out the policies whose stream the caller may not read (EXPORT counts
/// them), HEALTH does not show the length of a DLQ the caller may not read, and a SIMULATE
/// what-if DLQ the caller may not read is refused before its type is looked at.
#[test]
fn what_a_caller_may_not_read_does_not_appear() {
    let s = Server::new();
    let mut c = s.conn();
    for st in ["app:s", "vault:a", "vault:b"] {
        run(&mut c, &["XGROUP", "CREATE", st, "g", "$", "MKSTREAM"]);
        policy_ok(
            &mut c,
            &["SET", st, "g", "MAX-DELIVERIES", "2", "DLQ", "vault:dlq"],
        );
    }
    run(&mut c, &["XADD", "vault:dlq", "*", "f", "v"]);
    run(&mut c, &["SET", "vault:str", "x"]);
    for (user, rules) in [
        ("app", &["~app:*", "+@all"][..]),
        ("sel", &["~app:*", "+@all", "(~vault:* +get)"][..]),
        // Write-only on the vault: it may not read it (XINFO, XLEN, ...).
        ("wo", &["~app:*", "%W~vault:*", "+@all"][..]),
    ] {
        acl_user(&mut c, user, rules);
        let mut u = s.conn_as(user);
        let listed: Vec<Vec<u8>> = list_policies(&mut u)
            .into_iter()
            .map(|(k, _, _)| k)
            .collect();
        assert_eq!(listed, vec![b"app:s".to_vec()], "{user}");
        let doc = export_policies(&mut u);
        assert!(
            doc.starts_with("{\n  \"version\": 1,\n  \"left-out\": 2,\n"),
            "{user}: {doc}"
        );
        assert!(
            doc.contains("\"app:s\"") && !doc.contains("vault:a"),
            "{user}: {doc}"
        );
        let h = run(&mut u, &["RECLAIM.HEALTH", "app:s", "g"]);
        let dlq_length = field(&field(&h, "dead-letters"), "dlq-length");
        // XLEN needs no read permission of the key, only that a selector may run it on it.
        let shown = if user == "wo" {
            Value::Int(1)
        } else {
            Value::Nil
        };
        assert_eq!(dlq_length, shown, "{user}");
        let what_if = ["RECLAIM.SIMULATE", "app:s", "g", "DLQ", "vault:str"];
        let e = error_of(&mut u, cmd(what_if[0]).arg(&what_if[1..]));
        if user == "wo" {
            assert_eq!(e, WRONGTYPE_DLQ, "{user}");
        } else {
            assert_eq!(e, ours("XLEN", DLQ), "{user}");
        }
        assert_noperm_keys(
            &error_of(&mut u, cmd("RECLAIM.POLICY").arg(&["GET", "vault:a", "g"])),
            user,
        );
    }
    // The admin sees everything, and EXPORT has no count.
    assert_eq!(list_policies(&mut c).len(), 3);
    assert!(!export_policies(&mut c).contains("left-out"));
    let h = run(&mut c, &["RECLAIM.HEALTH", "app:s", "g"]);
    assert_eq!(
        field(&field(&h, "dead-letters"), "dlq-length"),
        Value::Int(1)
    );
    let e = error_of(
        &mut c,
        cmd("RECLAIM.SIMULATE").arg(&["app:s", "g", "DLQ", "vault:str"]),
    );
    assert_eq!(e, WRONGTYPE_DLQ);
    // EXPORT's document with its count imports as it is (the count is ignored).
    let mut app = s.conn_as("app");
    let doc = export_policies(&mut app);
    assert_eq!(import_policies(&mut c, doc.as_bytes(), true), 1);
}

/// The policy key follows its stream: a user may set and delete a policy through the module
/// when it may do the policy's work on its keys, without any right on `reclaim:*`; raw access to
/// the policy key (DEL, RENAME, DUMP) needs `~reclaim:*`, and rights on `reclaim:*` alone give
/// nothing through the module.
#[test]
fn the_policy_key_follows_its_stream() {
    let s = Server::new();
    let mut c = s.conn();
    setup(&mut c);
    let key = "reclaim:policy:{s}:s";
    assert!(exists(&mut c, key));
    acl_setuser(&mut c, &["app", "on", "nopass", "~s", "~s:dlq", "+@all"]);
    acl_setuser(&mut c, &["meta", "on", "nopass", "~reclaim:*", "+@all"]);
    let mut app = s.conn_as("app");
    let mut meta = s.conn_as("meta");
    for raw in [
        &["DEL", key][..],
        &["RENAME", key, "reclaim:policy:{s}:x"],
        &["DUMP", key],
    ] {
        assert_noperm_keys(&error_of(&mut app, cmd(raw[0]).arg(&raw[1..])), raw[0]);
    }
    for m in [
        &["SET", "s", "g"][..],
        &["GET", "s", "g"],
        &["DEL", "s", "g"],
    ] {
        assert_noperm_keys(
            &error_of(&mut meta, cmd("RECLAIM.POLICY").arg(m)),
            &format!("meta {m:?}"),
        );
    }
    let _: i64 = q(&mut meta, &["EXISTS", key]);
    set_the_policy(&mut app, &[]);
    assert_eq!(del_policy(&mut app, b"s", b"g"), 1);
    assert!(!exists(&mut c, key));
}

/// The worker commands of [`COMMANDS`].
const WORKER: [&str; 4] = ["readgroup", "extend", "nack", "term"];
/// Those that only read.
const READS: [&str; 5] = ["get", "stats", "health", "simulate", "redrive-status"];
/// Those that write.
const WRITES: [&str; 7] = [
    "set", "del", "pause", "resume", "sweep", "import", "redrive",
];

/// The command `name` of [`COMMANDS`] as `user`, on a fresh [`setup`]: allowed, or its error.
fn verdict(s: &Server, c: &mut Connection, user: &str, name: &str) -> Result<(), String> {
    setup(c);
    let k = command(name);
    let mut u = s.conn_as(user);
    k.query::<Value>(&mut u)
        .map(|_| ())
        .map_err(|_| error_of(&mut u, &k))
}

/// Whether `e` is Redis's refusal of the command itself (not of a key).
fn cmd_refused(e: &str) -> bool {
    e.starts_with("NOPERM") && e.contains("has no permissions to run the '")
}

/// The ACL categories: on servers with `RM_SetCommandACLCategories` (Redis 7.2+, Valkey 8) the
/// worker commands are `@stream` (READGROUP as XREADGROUP: `@write @stream @slow @blocking`),
/// the read-only ones `@read`, the rest `@write`; none is `@dangerous`; where the server adds one
/// (Redis 7.4+, Valkey 8), every command is in `@reclaim`. On every server the ACL lines of
/// docs/security.md work (on 7.0 they name the commands).
#[test]
fn acl_categories_and_the_recipes() {
    let s = Server::new();
    let mut c = s.conn();
    let categories = stream_category(&mut c);
    let cats: Vec<String> = q(&mut c, &["ACL", "CAT"]);
    let own = cats.iter().any(|x| x == "reclaim");
    let users: [(&str, &[&str]); 4] = [
        ("stream", &["~*", "+@stream"]),
        ("read", &["~*", "+@read"]),
        ("nowrite", &["~*", "+@all", "-@write"]),
        ("nodanger", &["~*", "+@all", "-@dangerous"]),
    ];
    for (user, rules) in users {
        acl_user(&mut c, user, rules);
    }
    for name in WORKER {
        let r = verdict(&s, &mut c, "stream", name);
        if categories {
            assert_eq!(r, Ok(()), "+@stream {name}");
        } else {
            assert!(cmd_refused(&r.unwrap_err()), "7.0: +@stream {name}");
        }
        // -@write: on 7.0 the module's command runs (it is in no category) and its first write
        // is refused as the stream command it is.
        let r = verdict(&s, &mut c, "nowrite", name).unwrap_err();
        if categories {
            assert!(cmd_refused(&r), "-@write {name}: {r}");
        } else {
            let first = match name {
                "readgroup" => "XREADGROUP",
                "term" => "XACK",
                _ => "XCLAIM",
            };
            assert_eq!(r, ours(first, STREAM), "7.0: -@write {name}");
        }
        assert_eq!(
            verdict(&s, &mut c, "nodanger", name),
            Ok(()),
            "-@dangerous {name}"
        );
    }
    // STATUS is a form of RECLAIM.REDRIVE, which is @write: its recipe names it.
    for name in ["get", "stats", "health", "simulate"] {
        let r = verdict(&s, &mut c, "read", name);
        if categories {
            assert_eq!(r, Ok(()), "+@read {name}");
        } else {
            assert!(cmd_refused(&r.unwrap_err()), "7.0: +@read {name}");
        }
    }
    for name in WRITES {
        let r = verdict(&s, &mut c, "read", name).unwrap_err();
        assert!(cmd_refused(&r), "+@read {name}: {r}");
        assert_eq!(
            verdict(&s, &mut c, "nodanger", name),
            Ok(()),
            "-@dangerous {name}"
        );
    }
    if own {
        the_reclaim_category(&s, &mut c);
    }
    the_recipes(&s, &mut c);
}

/// `@reclaim` grants the module's commands, not the stream commands they act as.
fn the_reclaim_category(s: &Server, c: &mut Connection) {
    acl_setuser(c, &["mod", "on", "nopass", "~*", "+@reclaim"]);
    assert_eq!(
        verdict(s, c, "mod", "readgroup"),
        Err(ours("XREADGROUP", STREAM))
    );
    assert_eq!(verdict(s, c, "mod", "stats"), Err(ours("XPENDING", STREAM)));
    acl_setuser(c, &["mod", "+@stream"]);
    for name in WORKER.iter().chain(&READS).chain(&WRITES) {
        assert_eq!(
            verdict(s, c, "mod", name),
            Ok(()),
            "+@reclaim +@stream {name}"
        );
    }
}

/// The recipes of docs/security.md, on every server: the worker's and the monitor's rules allow
/// their commands and refuse the others.
fn the_recipes(s: &Server, c: &mut Connection) {
    let worker_rules = [
        "~orders*",
        "~s*",
        "+@stream",
        "+reclaim.readgroup",
        "+reclaim.extend",
        "+reclaim.nack",
        "+reclaim.term",
    ];
    let monitor_rules = [
        "~*",
        "+@read",
        "+reclaim.stats",
        "+reclaim.health",
        "+reclaim.simulate",
        "+reclaim.policy|get",
        "+reclaim.policy|list",
        "+reclaim.policy|export",
        "+reclaim.redrive|status",
    ];
    acl_user(c, "w7", &worker_rules);
    acl_user(c, "m7", &monitor_rules);
    for name in WORKER {
        assert_eq!(verdict(s, c, "w7", name), Ok(()), "worker recipe {name}");
    }
    for name in ["stats", "set", "redrive"] {
        assert!(
            cmd_refused(&verdict(s, c, "w7", name).unwrap_err()),
            "worker recipe {name}"
        );
    }
    for name in READS {
        assert_eq!(verdict(s, c, "m7", name), Ok(()), "monitor recipe {name}");
    }
    for name in ["readgroup", "set", "redrive", "sweep"] {
        assert!(
            cmd_refused(&verdict(s, c, "m7", name).unwrap_err()),
            "monitor recipe {name}"
        );
    }
}

/// A script runs the module's commands as the user who runs the script: the same checks, the
/// same refusals; the default user's script is allowed.
#[test]
fn scripts_run_as_their_caller() {
    let s = Server::new();
    let mut c = s.conn();
    setup(&mut c);
    acl_setuser(
        &mut c,
        &["sel", "on", "nopass", "~app:*", "+@all", "(~s ~s:dlq +get)"],
    );
    acl_setuser(&mut c, &["w", "on", "nopass", "~s", "+@all"]);
    let import = "return redis.call('RECLAIM.POLICY', 'IMPORT', ARGV[1], 'REPLACE')";
    let read = "return redis.call('RECLAIM.READGROUP', 'GROUP', 'g', 'c', 'STREAMS', KEYS[1], '>')";
    let before = snapshot(&mut c);
    let mut sel = s.conn_as("sel");
    let e = error_of(&mut sel, cmd("EVAL").arg(import).arg(0).arg(DOC));
    let want = "NOPERM policies[0] (key 's', group 'g'), field 'key': this user has no permissions to run XCLAIM on the stream key";
    assert!(e.starts_with(want), "{e}");
    let mut w = s.conn_as("w");
    let e = error_of(&mut w, cmd("EVAL").arg(read).arg(1).arg("s"));
    assert!(e.starts_with(&ours("XADD", DLQ)), "{e}");
    assert_eq!(snapshot(&mut c), before);
    let v: Value = cmd("EVAL")
        .arg(import)
        .arg(0)
        .arg(DOC)
        .query(&mut c)
        .unwrap();
    assert_eq!(int_field(&v, "imported"), 1);
    let got: Value = cmd("EVAL").arg(read).arg(1).arg("s").query(&mut c).unwrap();
    assert_ne!(got, Value::Nil);
}
