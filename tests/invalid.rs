//! Policies that are not valid where they landed (issue 20: "load never fails because of a
//! policy's content"; issue 24: every key comes back as it was). `RENAME` or `COPY` of a policy key
//! onto the policy key of its own DLQ, `RESTORE` of a policy key's `DUMP` there, `MOVE` of such a
//! key, `RESTORE` of a crafted payload with an option out of range, a policy value under a name
//! that is no stream's policy key: each survives `DEBUG RELOAD`, `SAVE` and a restart, the AOF
//! with and without the RDB preamble (rewritten or not), a replica's full sync from disk and from
//! the socket, with every key as it was; the policy shows `invalid: <reason>` (STATS), `invalid`
//! (INFO, HEALTH), its reason (GET, LIST); it never sweeps, dead-letters or redelivers; a `SET`
//! repairs it; a value that cannot be decoded gets `RESTORE`'s own error.

use reclaim_testkit::*;

const DLQ_IS_STREAM: &str = "the DLQ key must differ from the stream key";
const COUNT_RANGE: &str = "COUNT must be an integer from 1 to 10000";

fn policy_key(stream: &str) -> String {
    format!("reclaim:policy:{{{stream}}}:{stream}")
}

/// An invalid policy the scenario makes: where it is and why.
struct Invalid {
    db: i64,
    stream: &'static str,
    group: &'static str,
    why: &'static str,
}

/// What [`make_invalid`] leaves behind.
fn invalids() -> Vec<Invalid> {
    let i = |db, stream, why| Invalid {
        db,
        stream,
        group: "workers",
        why,
    };
    vec![
        i(0, "orders:dlq", DLQ_IS_STREAM), // RENAME
        i(0, "jobs:dlq", DLQ_IS_STREAM),   // COPY
        i(0, "mail:dlq", DLQ_IS_STREAM),   // DUMP + RESTORE
        i(1, "pay:dlq", DLQ_IS_STREAM),    // RENAME, then MOVE to db 1
        i(0, "crafted", COUNT_RANGE),      // RESTORE of a crafted payload
    ]
}

/// The valid policies the scenario keeps beside them (`jobs` after its COPY, a witness).
const VALID: &[(i64, &str)] = &[(0, "jobs"), (0, "witness")];

/// A policy value under a name that is no stream's policy key: kept, inert.
const STRAYS: &[&str] = &["parked", "reclaim:policy:{zz}:kept"];

/// Makes every kind of invalid policy, by the commands a client may run, on server `s`. Then
/// each invalid policy's stream gets an entry a crashed consumer left pending, stale at once
/// (`MIN-IDLE 1`) and delivered past `MAX-DELIVERIES`: a valid policy would dead-letter it (the
/// witness's does, into its DLQ).
fn make_invalid(s: &Server) {
    let mut c = s.conn();
    for st in [
        "orders", "jobs", "mail", "pay", "witness", "crafted", "kept",
    ] {
        for name in [st.to_string(), format!("{st}:dlq")] {
            run(
                &mut c,
                &["XGROUP", "CREATE", &name, "workers", "0", "MKSTREAM"],
            );
        }
        let dlq = format!("{st}:dlq");
        let interval = if st == "witness" { "20" } else { "50" };
        run(
            &mut c,
            &[
                "RECLAIM.POLICY",
                "SET",
                st,
                "workers",
                "DLQ",
                &dlq,
                "MAX-DELIVERIES",
                "3",
                "MIN-IDLE",
                "1",
                "INTERVAL",
                interval,
                "COUNT",
                "9999",
            ],
        );
    }
    run(
        &mut c,
        &["RENAME", &policy_key("orders"), &policy_key("orders:dlq")],
    );
    run(
        &mut c,
        &["COPY", &policy_key("jobs"), &policy_key("jobs:dlq")],
    );
    let dump: Vec<u8> = cmd("DUMP")
        .arg(policy_key("mail"))
        .query(&mut c)
        .expect("DUMP");
    let _: () = cmd("RESTORE")
        .arg(policy_key("mail:dlq"))
        .arg(0)
        .arg(&dump)
        .query(&mut c)
        .expect("RESTORE onto the policy key of its own DLQ");
    run(&mut c, &["DEL", &policy_key("mail")]);
    // COUNT 9999 is `2, 0x67, 0x0f` in the payload (an RDB length of 14 bits): 10001 instead.
    let dump: Vec<u8> = cmd("DUMP")
        .arg(policy_key("crafted"))
        .query(&mut c)
        .expect("DUMP");
    let crafted = patch_dump(&dump, &[2, 0x67, 0x0f], &[2, 0x67, 0x11]);
    let _: () = cmd("RESTORE")
        .arg(policy_key("crafted"))
        .arg(0)
        .arg(&crafted)
        .arg("REPLACE")
        .query(&mut c)
        .expect("RESTORE of a crafted payload");
    run(&mut c, &["RENAME", &policy_key("kept"), "parked"]);
    run(&mut c, &["COPY", "parked", STRAYS[1]]);
    for name in ["orders:dlq", "jobs:dlq", "mail:dlq", "crafted", "witness"] {
        let id: String = q(&mut c, &["XADD", name, "*", "f", "v"]);
        deliver(&mut c, name, "workers", "crashed", None);
        set_pending(&mut c, (name, "workers"), "crashed", &[&id], 10, 9);
    }
    // The witness dead-letters its stream's entry at once: the timer ran.
    wait_for(20, "the witness dead-letters", || {
        (xlen(&mut c, "witness:dlq") == 1).then_some(())
    });
    wait_for(20, "the witness's PEL is empty", || {
        pending(&mut c, "witness", "workers")
            .is_empty()
            .then_some(())
    });
    // Last, so nothing follows a `MOVE` in the AOF (tests/dataset.rs checks the loader's
    // database after one: Valkey 8.1 left it in the `MOVE`'s until server::caller_db).
    run(
        &mut c,
        &["RENAME", &policy_key("pay"), &policy_key("pay:dlq")],
    );
    run(&mut c, &["MOVE", &policy_key("pay:dlq"), "1"]);
}

/// Every key of databases 0 and 1, in order, with what it holds: a stream's entries and, per
/// group, its last delivered ID and PEL (IDs, owners, counts); a policy value's `DUMP`; any other
/// key's type. (`entries-read` and `lag` are left out: an AOF load recomputes them, with or
/// without the module.)
fn dataset(s: &Server) -> Vec<(i64, String, String)> {
    let mut out = Vec::new();
    for db in 0..2 {
        let mut c = s.conn_db(db);
        let mut keys: Vec<Vec<u8>> = cmd("KEYS").arg("*").query(&mut c).expect("KEYS");
        keys.sort();
        for k in keys {
            let name = String::from_utf8_lossy(&k).into_owned();
            let t: String = cmd("TYPE").arg(&k).query(&mut c).expect("TYPE");
            let what = match t.as_str() {
                "stream" => {
                    let entries: Value = cmd("XRANGE")
                        .arg(&k)
                        .arg("-")
                        .arg("+")
                        .query(&mut c)
                        .expect("XRANGE");
                    let groups: Value = cmd("XINFO")
                        .arg("GROUPS")
                        .arg(&k)
                        .query(&mut c)
                        .expect("XINFO");
                    let mut text = format!("stream {}", show(&entries));
                    for g in items(&groups) {
                        let name = str_field(g, "name");
                        let pel: Vec<(String, String, i64)> =
                            pel_state(&mut c, &String::from_utf8_lossy(&k), &name);
                        text.push_str(&format!(
                            " group {name} at {} pel {pel:?}",
                            str_field(g, "last-delivered-id")
                        ));
                    }
                    text
                }
                "reclaimpl" => {
                    let d: Vec<u8> = cmd("DUMP").arg(&k).query(&mut c).expect("DUMP");
                    format!("reclaimpl {d:?}")
                }
                other => other.to_string(),
            };
            out.push((db, name, what));
        }
    }
    out
}

/// Checks every invalid policy (status, GET, LIST, INFO, HEALTH), the valid ones and the strays.
fn check_invalid(s: &Server) {
    for inv in invalids() {
        let mut c = s.conn_db(inv.db);
        let st = status(&mut c, inv.stream, inv.group);
        assert_eq!(st, format!("invalid: {}", inv.why), "{} status", inv.stream);
        let get = policy_reply(&mut c, inv.stream.as_bytes(), inv.group.as_bytes());
        assert_eq!(str_field(&get, "status"), st, "{} GET", inv.stream);
        let p = get_policy(&mut c, inv.stream.as_bytes(), inv.group.as_bytes()).expect("GET");
        let listed = list_policies(&mut c)
            .into_iter()
            .find(|(k, _, _)| k == inv.stream.as_bytes())
            .expect("listed");
        assert_eq!(listed.2, p, "{} LIST", inv.stream);
        let list = policy_list_reply(&mut c);
        let item = items(&list)
            .iter()
            .find(|i| bytes_of(&field(i, "key")) == inv.stream.as_bytes())
            .expect("listed");
        assert_eq!(str_field(item, "status"), st, "{} LIST status", inv.stream);
        let h: Value = cmd("RECLAIM.HEALTH")
            .arg(inv.stream)
            .arg(inv.group)
            .query(&mut c)
            .expect("HEALTH");
        assert_eq!(str_field(&h, "status"), st, "{} HEALTH", inv.stream);
        let line = policy_lines(&mut c)
            .into_iter()
            .find(|l| {
                l["db"] == inv.db.to_string() && l["stream"] == inv.stream.replace(':', "%3A")
            })
            .unwrap_or_else(|| panic!("no INFO line for {}", inv.stream));
        assert_eq!(line["status"], "invalid", "{} INFO", inv.stream);
    }
    for (db, st) in VALID {
        let mut c = s.conn_db(*db);
        let get = policy_reply(&mut c, st.as_bytes(), b"workers");
        assert!(!str_field(&get, "status").starts_with("invalid"), "{st}");
    }
    let mut c = s.conn();
    for k in STRAYS {
        let t: String = cmd("TYPE").arg(*k).query(&mut c).expect("TYPE");
        assert_eq!(t, "reclaimpl", "{k} kept");
    }
    assert_eq!(
        get_policy(&mut c, b"kept", b"workers"),
        None,
        "a stray is nobody's policy"
    );
}

/// What an invalid policy's stream looks like while nothing acts on it: its entry still pending
/// with the crashed consumer, nothing dead-lettered into itself (one entry).
fn assert_untouched(s: &Server) {
    for inv in invalids() {
        let mut c = s.conn_db(inv.db);
        if inv.db == 1 {
            continue; // db 1 holds only the moved policy key
        }
        assert_eq!(
            xlen(&mut c, inv.stream),
            1,
            "{}: nothing dead-lettered into it",
            inv.stream
        );
        let owners: Vec<String> = pending(&mut c, inv.stream, inv.group)
            .into_iter()
            .map(|p| p.consumer)
            .collect();
        assert_eq!(owners, ["crashed"], "{}", inv.stream);
    }
}

/// The invalid policies do nothing while the timer runs (the witness's passes go on), refuse
/// SWEEP and TERM, and READGROUP reads their streams as XREADGROUP does (new entries only).
fn check_inert(s: &Server) {
    let mut c = s.conn();
    // An invalid policy never sweeps: its passes stay where they were while the witness (every
    // 20 ms) runs ten, long past the invalid ones' INTERVAL 50. (A pass `crafted` ran while it was
    // still valid, before its RESTORE, may already be counted.)
    let passes = |c: &mut Connection| -> Vec<(String, String)> {
        let lines = policy_lines(c);
        invalids()
            .iter()
            .filter(|inv| inv.db == 0)
            .map(|inv| {
                let stream = inv.stream.replace(':', "%3A");
                let line = lines
                    .iter()
                    .find(|l| l["db"] == "0" && l["stream"] == stream)
                    .unwrap_or_else(|| panic!("no INFO line for {}", inv.stream));
                (inv.stream.to_string(), line["passes"].clone())
            })
            .collect()
    };
    let before = passes(&mut c);
    wait_passes(&mut c, "witness", "workers", 10);
    assert_eq!(passes(&mut c), before, "invalid policies never sweep");
    assert_untouched(s);
    let e = error_of(
        &mut c,
        cmd("RECLAIM.SWEEP").arg("orders:dlq").arg("workers"),
    );
    assert_eq!(
        e,
        format!("ERR the policy of this key and group is invalid where it is ({DLQ_IS_STREAM}): RECLAIM.POLICY SET replaces it")
    );
    let pend = pending(&mut c, "orders:dlq", "workers");
    let e = error_of(
        &mut c,
        cmd("RECLAIM.TERM")
            .arg("orders:dlq")
            .arg("workers")
            .arg("crashed")
            .arg(&pend[0].id),
    );
    assert!(e.contains("is invalid where it is"), "{e}");
    let new: String = q(&mut c, &["XADD", "orders:dlq", "*", "f", "new"]);
    let got = readgroup(&mut c, "orders:dlq", "workers", "w2", 10, None);
    let ids: Vec<String> = got.into_iter().map(|e| e.0).collect();
    assert_eq!(
        ids,
        std::slice::from_ref(&new),
        "new entries only, no redelivery"
    );
    run(&mut c, &["XACK", "orders:dlq", "workers", &new]);
    run(&mut c, &["XDEL", "orders:dlq", &new]);
}

/// A `SET` on the policy key repairs each invalid policy; `DEL` removes a stray.
fn check_repair(s: &Server) {
    for inv in invalids() {
        let mut c = s.conn_db(inv.db);
        run(
            &mut c,
            &[
                "RECLAIM.POLICY",
                "SET",
                inv.stream,
                inv.group,
                "DLQ",
                "elsewhere",
                "MAX-DELIVERIES",
                "3",
            ],
        );
        assert!(!status(&mut c, inv.stream, inv.group).starts_with("invalid"));
    }
    let mut c = s.conn();
    // The repaired orders:dlq policy now acts: its crashed entry goes to `elsewhere`.
    wait_for(20, "the repaired policy dead-letters", || {
        (xlen(&mut c, "elsewhere") >= 1).then_some(())
    });
    for k in STRAYS {
        assert_eq!(q::<i64>(&mut c, &["DEL", k]), 1);
    }
}

/// Runs the scenario through `reload` (which brings `s` back from its own persistence): the data
/// is all there key by key, and the invalid policies are as before.
fn through(extra: &[&str], reload: impl FnOnce(&mut Server)) {
    let mut args = vec!["--enable-debug-command", "yes", "--databases", "4"];
    args.extend_from_slice(extra);
    let mut s = Server::start(&args);
    make_invalid(&s);
    check_invalid(&s);
    assert_untouched(&s);
    // Each command that made one logged it.
    let log = s.log();
    for (what, stream) in [
        ("RENAME", "orders:dlq"),
        ("COPY", "jobs:dlq"),
        ("RESTORE", "mail:dlq"),
        ("RESTORE", "crafted"),
        ("MOVE", "pay:dlq"),
    ] {
        let line = format!("reclaim: {what} left the policy of stream '{stream}' group 'workers'");
        assert!(log.contains(&line), "no warning {line:?} in\n{log}");
    }
    for (what, key) in [("RENAME", "parked"), ("COPY", STRAYS[1])] {
        let line = format!("reclaim: {what} put the policies of stream 'kept' under key '{key}'");
        assert!(log.contains(&line), "no warning {line:?} in\n{log}");
    }
    let before = dataset(&s);
    let warned = s.log().matches("invalid where it is").count();
    reload(&mut s);
    assert_eq!(dataset(&s), before, "the dataset after the reload");
    // The load (or the AOF's commands again) named them once more.
    assert!(
        s.log().matches("invalid where it is").count() > warned,
        "{}",
        s.log_tail(30)
    );
    check_invalid(&s);
    check_inert(&s);
    check_repair(&s);
    assert!(
        !s.log().contains("Internal error in RDB"),
        "{}",
        s.log_tail(20)
    );
}

#[test]
fn invalid_policies_survive_debug_reload() {
    through(&[], |s| {
        run(&mut s.conn(), &["DEBUG", "RELOAD"]);
    });
}

#[test]
fn invalid_policies_survive_save_and_restart() {
    through(&[], |s| {
        run(&mut s.conn(), &["SAVE"]);
        s.restart();
    });
    // The log names each invalid policy the load found.
}

/// Restarts `s` from its AOF (after a clean SHUTDOWN, which writes it out).
fn restart_from_aof(s: &mut Server, rewrite: bool) {
    let mut c = s.conn();
    if rewrite {
        run(&mut c, &["BGREWRITEAOF"]);
        wait_aof_rewrite_done(&mut c);
    }
    s.shutdown();
    s.restart();
}

#[test]
fn invalid_policies_survive_the_aof_with_preamble() {
    through(
        &["--appendonly", "yes", "--aof-use-rdb-preamble", "yes"],
        |s| restart_from_aof(s, false),
    );
    through(
        &["--appendonly", "yes", "--aof-use-rdb-preamble", "yes"],
        |s| restart_from_aof(s, true),
    );
}

#[test]
fn invalid_policies_survive_the_aof_without_preamble() {
    through(
        &["--appendonly", "yes", "--aof-use-rdb-preamble", "no"],
        |s| restart_from_aof(s, false),
    );
    through(
        &["--appendonly", "yes", "--aof-use-rdb-preamble", "no"],
        |s| restart_from_aof(s, true),
    );
}

/// A replica of a primary holding every kind of invalid policy has the same keys and the same
/// invalid policies, after a full sync through `extra` (disk or socket).
fn replica_sync(extra: &[&str]) {
    let mut args = vec!["--databases", "4"];
    args.extend_from_slice(extra);
    let p = Server::start(&args);
    make_invalid(&p);
    let mut r_args = vec!["--databases", "4"];
    r_args.extend_from_slice(extra);
    let r = p.replica(&r_args);
    replica_acked(&mut p.conn());
    assert_eq!(dataset(&r), dataset(&p));
    check_invalid(&r);
    assert!(
        !r.log().contains("Internal error in RDB"),
        "{}",
        r.log_tail(20)
    );
}

#[test]
fn invalid_policies_reach_a_replica_by_full_sync() {
    replica_sync(&[]);
}

#[test]
fn invalid_policies_reach_a_replica_by_diskless_sync() {
    replica_sync(&[
        "--repl-diskless-sync",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
        "--repl-diskless-load",
        "swapdb",
    ]);
}

#[test]
fn a_corrupt_policy_payload_gets_restores_error() {
    let s = Server::new();
    let mut c = s.conn();
    run(&mut c, &["RECLAIM.POLICY", "SET", "s", "g"]);
    let dump: Vec<u8> = cmd("DUMP")
        .arg(policy_key("s"))
        .query(&mut c)
        .expect("DUMP");
    // The value cut short (the group count says 2, one group follows), CRC made right again.
    let short = patch_dump(&dump, &[2, 1, 5, 1, b'g'], &[2, 2, 5, 1, b'g']);
    let e = error_of(&mut c, cmd("RESTORE").arg("other").arg(0).arg(&short));
    assert_eq!(e, "ERR Bad data format");
    assert!(!exists(&mut c, "other"));
    assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
}
