//! What a hostile client can send (issue 20): arbitrary bytes in every name position of every
//! command get a well-formed reply (an error line with its text as UTF-8, NUL, CR and LF escaped)
//! and never a panic; a command the server refuses (authentication, ACL, syntax, out of memory, a
//! discarded `MULTI`) changes nothing in the module, although the command filter saw it.

use reclaim_testkit::*;

/// Names a client may send: non-ASCII (U+0100 became NUL in the crate's error reply, U+010D
/// became CR), NUL, CR/LF, invalid UTF-8, a long one, and random bytes.
fn hostile_names() -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = vec![
        "Ā".into(),
        "Āx".into(),
        "一".into(),
        "č".into(),
        b"a\x00b".to_vec(),
        b"a\r\nb".to_vec(),
        b"\xff\xfe".to_vec(),
        b"%s%n".to_vec(),
        vec![b'x'; 5000],
        Vec::new(),
    ];
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for len in [1usize, 3, 8, 40] {
        for _ in 0..4 {
            let name = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            out.push(name);
        }
    }
    out
}

/// Every command with `n` in each of its name positions (key, group, consumer, DLQ, claimant,
/// SOURCE key, option name, ID, JSON field and key).
fn commands_naming(n: &[u8]) -> Vec<redis::Cmd> {
    let json_text = String::from_utf8_lossy(n)
        .replace('\\', "\\\\")
        .replace('"', "\\\"");
    let doc = |policy: String| format!("{{\"version\":1,\"policies\":[{policy}]}}").into_bytes();
    let mut raw_doc = b"{\"version\":1,\"policies\":[{\"key\":\"".to_vec();
    raw_doc.extend_from_slice(n);
    raw_doc.extend_from_slice(b"\",\"group\":\"g\"}]}");
    let c = |name: &str, args: &[&[u8]]| bin_cmd(name, args);
    vec![
        c("RECLAIM.POLICY", &[b"SET", n, b"g"]),
        c("RECLAIM.POLICY", &[b"SET", b"s", n]),
        c("RECLAIM.POLICY", &[b"SET", b"s", b"g", b"DLQ", n]),
        c("RECLAIM.POLICY", &[b"SET", b"s", b"g", b"CLAIMANT", n, b"COUNT", n]),
        c("RECLAIM.POLICY", &[b"SET", b"s", b"g", n, b"1"]),
        c("RECLAIM.POLICY", &[b"SET", n, b"g", b"DLQ", n]),
        c("RECLAIM.POLICY", &[b"GET", n, n]),
        c("RECLAIM.POLICY", &[b"DEL", n, n]),
        c("RECLAIM.POLICY", &[b"PAUSE", n, n]),
        c("RECLAIM.POLICY", &[b"PAUSE", b"s", b"g", n]),
        c("RECLAIM.POLICY", &[b"RESUME", n, n]),
        c("RECLAIM.POLICY", &[b"IMPORT", &doc(format!("{{\"key\":\"a\",\"group\":\"g\",\"{json_text}\":1}}"))]),
        c("RECLAIM.POLICY", &[b"IMPORT", &doc(format!("{{\"key\":\"{json_text}\",\"group\":\"{json_text}\",\"dlq\":\"{json_text}\",\"count\":0}}"))]),
        c("RECLAIM.POLICY", &[b"IMPORT", &raw_doc]),
        c("RECLAIM.POLICY", &[b"IMPORT", n]),
        c("RECLAIM.STATS", &[n, n]),
        c("RECLAIM.STATS", &[b"s", n]),
        c("RECLAIM.SWEEP", &[n, n]),
        c("RECLAIM.SWEEP", &[b"s", b"g", n, b"1"]),
        c("RECLAIM.HEALTH", &[n, n]),
        c("RECLAIM.SIMULATE", &[n, n]),
        c("RECLAIM.SIMULATE", &[b"s", b"g", n, b"1"]),
        c("RECLAIM.SIMULATE", &[b"s", b"g", b"DLQ", n]),
        c("RECLAIM.READGROUP", &[b"GROUP", n, n, b"STREAMS", n, b">"]),
        c("RECLAIM.READGROUP", &[b"GROUP", b"g", b"c", b"STREAMS", b"s", n]),
        c("RECLAIM.READGROUP", &[b"GROUP", b"g", b"c", n, b"STREAMS", b"s", b">"]),
        c("RECLAIM.EXTEND", &[n, b"g", b"c", b"1-0"]),
        c("RECLAIM.EXTEND", &[b"s", n, n, n]),
        c("RECLAIM.NACK", &[n, n, n, b"1-0"]),
        c("RECLAIM.NACK", &[b"s", b"g", b"c", b"1-0", n, n]),
        c("RECLAIM.TERM", &[n, n, n, b"1-0"]),
        c("RECLAIM.TERM", &[b"s", b"g", b"c", n, b"REASON", n]),
        c("RECLAIM.REDRIVE", &[n]),
        c("RECLAIM.REDRIVE", &[b"s:dlq", b"SOURCE", n, n]),
        c("RECLAIM.REDRIVE", &[b"s:dlq", n, n]),
        c("RECLAIM.REDRIVE", &[b"STATUS", n]),
        c("RECLAIM.REDRIVE", &[b"CANCEL", n]),
    ]
}

#[test]
fn arbitrary_bytes_in_every_name_get_a_well_formed_reply() {
    let s = Server::new();
    let mut c = s.conn();
    // Something to act on: a policy with a DLQ, an entry pending, a policy whose names are bytes.
    run(&mut c, &["XGROUP", "CREATE", "s", "g", "0", "MKSTREAM"]);
    run(&mut c, &["XGROUP", "CREATE", "s:dlq", "g", "0", "MKSTREAM"]);
    set_policy_opts(&mut c, "s", "g", "DLQ s:dlq MAX-DELIVERIES 3");
    run(&mut c, &["XADD", "s", "1-0", "f", "v"]);
    deliver(&mut c, "s", "g", "c", None);
    let mut errors = 0;
    for n in hostile_names() {
        for k in commands_naming(&n) {
            match k.query::<Value>(&mut c) {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        redis::ErrorKind::Server(_) | redis::ErrorKind::Extension
                    ) =>
                {
                    errors += 1;
                    let text = e.to_string();
                    assert!(
                        !text.contains("internal error"),
                        "{:?}: {text}",
                        show_cmd(&k)
                    );
                }
                // A reply the client cannot read, or a dropped connection.
                Err(e) => panic!("{:?}: not a well-formed reply: {e}", show_cmd(&k)),
            }
        }
        assert_eq!(q::<String>(&mut c, &["PING"]), "PONG");
    }
    assert!(errors > 100, "the names got errors ({errors})");
    assert_eq!(reclaim_info(&mut c, "panics"), 0);
    assert!(!s.log().contains("internal error"), "{}", s.log_tail(20));
}

/// The exact error text of a non-ASCII field name: kept as UTF-8 (it was `ERR internal error`).
#[test]
fn non_ascii_error_texts_are_kept() {
    let s = Server::new();
    let mut c = s.conn();
    let e = error_of(
        &mut c,
        cmd("RECLAIM.POLICY")
            .arg("IMPORT")
            .arg(r#"{"version":1,"policies":[{"key":"a","group":"g","Ā":1}]}"#),
    );
    assert!(
        e.starts_with("ERR policies[0] (key 'a', group 'g'), field 'Ā': unknown field `Ā`"),
        "{e}"
    );
    assert_eq!(reclaim_info(&mut c, "panics"), 0);
}

fn show_cmd(k: &redis::Cmd) -> String {
    String::from_utf8_lossy(&k.get_packed_command())
        .chars()
        .take(200)
        .collect()
}

/// The fields of `RECLAIM.STATS` a client command's touch changes: `stale-not-before` (an
/// `IDLE`/`TIME` forgets it), `consumer-checks` and `full-passes` (the next pass checks the
/// consumer it names), `cursor`, and the module's `tracked_consumers` and `tracking_overflows`.
fn touched_state(c: &mut Connection) -> Vec<(String, String)> {
    let st = stats(c, "s", "g");
    let mut out: Vec<(String, String)> = [
        "stale-not-before",
        "consumer-checks",
        "full-passes",
        "cursor",
        "claimed",
    ]
    .iter()
    .map(|f| (f.to_string(), show(&field(&st, f))))
    .collect();
    for f in ["tracked_consumers", "tracking_overflows"] {
        out.push((f.to_string(), reclaim_info(c, f).to_string()));
    }
    out
}

#[test]
fn refused_commands_change_nothing() {
    let s = Server::new();
    let mut c = s.conn();
    run(&mut c, &["XGROUP", "CREATE", "s", "g", "0", "MKSTREAM"]);
    let id: String = q(&mut c, &["XADD", "s", "*", "f", "v"]);
    deliver(&mut c, "s", "g", "w1", None);
    let opts = "MIN-IDLE 3600000 INTERVAL 30 MAX-DELIVERIES 5 DLQ s:dlq";
    set_policy_opts(&mut c, "s", "g", opts);
    acl_user(&mut c, "other", &["~other*", "+@all"]);
    let mut other = s.conn_as("other");
    wait_passes(&mut c, "s", "g", 2);
    assert!(stat(&mut c, "s", "g", "stale-not-before") > 0);
    let before = touched_state(&mut c);
    let claim = |consumer: &str| -> redis::Cmd {
        let mut k = cmd("XCLAIM");
        k.arg("s")
            .arg("g")
            .arg(consumer)
            .arg(0)
            .arg(&id)
            .arg("IDLE")
            .arg(1);
        k
    };

    // ACL: a user that may not touch `s`.
    assert!(error_of(&mut other, &claim("w1")).starts_with("NOPERM"));
    // Syntax: arity, a bad option value, an unbalanced XREADGROUP.
    assert!(error_of(&mut c, cmd("XCLAIM").arg("s").arg("g").arg("w1"))
        .contains("wrong number of arguments"));
    let mut bad = claim("w1");
    bad.arg("IDLE").arg("soon");
    assert!(error_of(&mut c, &bad).starts_with("ERR"));
    assert!(error_of(
        &mut c,
        cmd("XREADGROUP")
            .arg("GROUP")
            .arg("g")
            .arg("w1")
            .arg("STREAMS")
            .arg("s")
            .arg("x")
            .arg("0")
    )
    .starts_with("ERR"));
    // A discarded MULTI.
    let _: () = cmd("MULTI").query(&mut c).expect("MULTI");
    let _: Value = claim("w1").query(&mut c).expect("QUEUED");
    let _: () = cmd("DISCARD").query(&mut c).expect("DISCARD");
    // Out of memory: EXEC of a transaction with a write that may grow memory is refused.
    let _: () = cmd("MULTI").query(&mut c).expect("MULTI");
    let _: Value = claim("w1").query(&mut c).expect("QUEUED");
    let _: Value = cmd("XADD")
        .arg("s")
        .arg("*")
        .arg("f")
        .arg("v")
        .query(&mut c)
        .expect("QUEUED");
    let mut admin = s.conn();
    run(&mut admin, &["CONFIG", "SET", "maxmemory", "1"]);
    let e = error_of(&mut c, &cmd("EXEC"));
    run(&mut admin, &["CONFIG", "SET", "maxmemory", "0"]);
    assert!(e.contains("OOM") || e.contains("EXECABORT"), "{e}");
    // Authentication: the same command before AUTH (the default user gets a password).
    run(&mut c, &["ACL", "SETUSER", "default", "on", ">pw"]);
    let mut anon = redis::Client::open(format!("redis://127.0.0.1:{}/", s.port))
        .expect("client")
        .get_connection()
        .expect("connect");
    assert!(error_of(&mut anon, &claim("w1")).starts_with("NOAUTH"));
    run(&mut c, &["ACL", "SETUSER", "default", "on", "nopass"]);

    // The policy had its chances to act on what it saw: passes, STATS (which confirms too).
    wait_passes(&mut c, "s", "g", 3);
    assert_eq!(
        touched_state(&mut c),
        before,
        "refused commands changed the module's state"
    );
    assert_eq!(
        pel_state(&mut c, "s", "g"),
        [(id.clone(), "w1".to_string(), 1)]
    );

    // The same command allowed: it runs, and its touch counts.
    let _: Value = claim("w2").query(&mut c).expect("XCLAIM");
    assert_eq!(stat(&mut c, "s", "g", "stale-not-before"), 0);
}
