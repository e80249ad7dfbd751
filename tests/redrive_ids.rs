//! `RECLAIM.REDRIVE dlq ... IDS n id [id ...]` as an adversary uses it: words that are no IDs,
//! counts out of range or not matching the words, `IDS` twice, `SOURCE` before and after it; IDs
//! at the limits (`0-0`, the largest, each given several times, 1000 of them); entries deleted or
//! trimmed from the DLQ while the task runs; users without `XRANGE` or `XDEL` on the DLQ; a
//! replica; Redis Cluster; `DEBUG RELOAD` and a restart from the AOF. Each: a clear error and
//! nothing changed, or the right entries moved back exactly once.

use reclaim_testkit::*;

/// A task's `ids`, `total`, `examined`, `moved`, `skipped` and `left`.
fn figures(st: &Value) -> Vec<i64> {
    ["ids", "total", "examined", "moved", "skipped", "left"]
        .iter()
        .map(|f| int_field(st, f))
        .collect()
}

/// Stream `st` (group g, a policy dead-lettering into `dlq` at 3 deliveries, swept by hand)
/// with `n` entries, all dead-lettered into `dlq`. Returns their IDs in `st`.
fn dead_letters(c: &mut Connection, st: &str, dlq: &str, n: usize) -> Vec<String> {
    create_group(c, st.as_bytes(), b"g");
    let opts = format!("MIN-IDLE 60000 MAX-DELIVERIES 3 DLQ {dlq} INTERVAL 3600000");
    set_policy_opts(c, st, "g", &opts);
    let ids = add_numbered(c, st, n);
    deliver(c, st, "g", "w", None);
    set_deliveries(c, st.as_bytes(), b"g", b"w", &ids, 4);
    wait_for(10, "every entry dead-lettered", || {
        let _: Value = cmd("RECLAIM.SWEEP").arg(st).arg("g").query(c).ok()?;
        (pel_total(c, st, "g") == 0).then_some(())
    });
    ids
}

/// The IDs of the DLQ's entries (their own, not their `reclaim-id`).
fn dlq_of(c: &mut Connection, dlq: &str) -> Vec<String> {
    xrange(c, dlq.as_bytes()).into_iter().map(|e| e.0).collect()
}

/// The pending entries of (st, g) as (ID, delivery count), sorted.
fn pel(c: &mut Connection, st: &str) -> Vec<(String, i64)> {
    let mut p: Vec<(String, i64)> = pending(c, st, "g")
        .into_iter()
        .map(|p| (p.id, p.count))
        .collect();
    p.sort();
    p
}

/// Each of `ids` pending once with delivery count 0 (moved back, not read since).
fn back(ids: &[String]) -> Vec<(String, i64)> {
    sorted(ids).into_iter().map(|id| (id, 0)).collect()
}

/// The error of `RECLAIM.REDRIVE dlq <words...>` (binary-safe).
fn refused(c: &mut Connection, dlq: &str, words: &[Vec<u8>]) -> String {
    let mut a: Vec<&[u8]> = vec![dlq.as_bytes()];
    a.extend(words.iter().map(Vec::as_slice));
    error_of(c, &bin_cmd("RECLAIM.REDRIVE", &a))
}

/// Words from text, split at spaces.
fn w(text: &str) -> Vec<Vec<u8>> {
    text.split(' ').map(|s| s.as_bytes().to_vec()).collect()
}

const RANGE: &str = "ERR IDS must be an integer from 1 to 1000";
const SHORT: &str = "ERR IDS n needs n entry IDs";
const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";

#[test]
fn words_that_are_no_ids_are_refused_and_change_nothing() {
    let s = Server::new();
    let mut c = s.conn();
    dead_letters(&mut c, "a", "a:dlq", 3);
    let d = dlq_of(&mut c, "a:dlq");
    let before = (xrange(&mut c, b"a:dlq"), pending_raw(&mut c, b"a", b"g"));
    let id = d[0].as_str();
    let many = |n: usize| -> Vec<Vec<u8>> {
        let mut v = w(&format!("IDS {n}"));
        v.extend((0..n).map(|i| format!("1-{i}").into_bytes()));
        v
    };
    let mut cases: Vec<(Vec<Vec<u8>>, String)> = vec![
        (w(&format!("IDS 0 {id}")), RANGE.into()),
        (w(&format!("IDS -1 {id}")), RANGE.into()),
        (w(&format!("IDS 1.0 {id}")), RANGE.into()),
        (w(&format!("IDS 1e3 {id}")), RANGE.into()),
        (w(&format!("IDS one {id}")), RANGE.into()),
        (w(&format!("IDS 99999999999999999999 {id}")), RANGE.into()),
        (vec![b"IDS".to_vec(), b"".to_vec(), id.into()], RANGE.into()),
        (many(1001), RANGE.into()),
        (many(1000)[..1001].to_vec(), SHORT.into()),
        (w(&format!("IDS 3 {id} {}", d[1])), SHORT.into()),
        (w(&format!("IDS 2 {id} COUNT 5")), INVALID_ID.into()),
        (w("SOURCE a g IDS 1 x"), INVALID_ID.into()),
        (
            w(&format!("IDS 1 {id} IDS 1 {}", d[1])),
            "ERR option IDS given more than once".into(),
        ),
        (
            w(&format!("IDS 1 {id} {}", d[1])),
            format!("ERR unknown option '{}'", d[1]),
        ),
        (
            w(&format!("IDS 1 {id} SOURCE a")),
            "ERR option SOURCE needs a value".into(),
        ),
        (
            w(&format!("SOURCE a g IDS 1 {id} SOURCE a g")),
            "ERR option SOURCE given more than once".into(),
        ),
        (w(&format!("IDS 1 {id} SOURCE nope g")), NO_POLICY.into()),
        (
            w(&format!("IDS 1 {id} CANARY 1")),
            "ERR CANARY k and WINDOW ms go together".into(),
        ),
    ];
    // Not stream IDs: `-` and `+` (XRANGE's ends), binary, out of u64, malformed, 200 KB.
    let long = vec![b'7'; 200_000];
    for bad in [
        &b"-"[..],
        b"+",
        b"",
        b"\xff\x00-1",
        b"1-\r\n",
        b"18446744073709551616-0",
        b"1-18446744073709551616",
        b"1-2-3",
        b"1-",
        b"-1",
        &long[..],
    ] {
        cases.push((
            vec![b"IDS".to_vec(), b"1".to_vec(), bad.to_vec()],
            INVALID_ID.into(),
        ));
    }
    for (i, (words, want)) in cases.iter().enumerate() {
        assert_eq!(&refused(&mut c, "a:dlq", words), want, "case {i}");
    }
    // Nothing changed: no task, the same DLQ and PEL.
    assert_eq!(status_of(&mut c, "a:dlq"), Value::Nil);
    assert_eq!(
        (xrange(&mut c, b"a:dlq"), pending_raw(&mut c, b"a", b"g")),
        before
    );
    assert_eq!(reclaim_info(&mut c, "panics"), 0);
}

#[test]
fn ids_at_the_limits_move_each_entry_exactly_once() {
    let s = Server::new();
    let mut c = s.conn();
    let src = dead_letters(&mut c, "a", "a:dlq", 3);
    let d = dlq_of(&mut c, "a:dlq");
    // 0-0: no entry has it; examined, skipped, and nothing is left.
    assert_eq!(
        redrive(&mut c, &["a:dlq", "IDS", "1", "0-0"]),
        Value::Int(1)
    );
    let st = wait_state(&mut c, "a:dlq", "done", 10);
    assert_eq!(figures(&st), [1, 1, 1, 0, 1, 0]);
    assert_eq!(dlq_of(&mut c, "a:dlq"), d);
    // 1000 words: each DLQ entry given twice (the first three times), 0-0, the largest ID, `1`
    // (1-0), and IDs no entry has: 996 distinct IDs, 3 of them in the DLQ.
    let mut words: Vec<String> = d.iter().flat_map(|id| [id.clone(), id.clone()]).collect();
    words.push(d[0].clone());
    words.push("18446744073709551615-18446744073709551615".into());
    words.push("0-0".into());
    words.push("1".into());
    while words.len() < 1000 {
        words.push(format!("1-{}", words.len()));
    }
    let mut args = vec!["a:dlq", "IDS", "1000"];
    args.extend(words.iter().map(String::as_str));
    assert_eq!(redrive(&mut c, &args), Value::Int(2));
    // The task's hash holds each ID once, as a stream ID.
    let field: String = q(&mut c, &["HGET", "reclaim:redrive:{a:dlq}:a:dlq", "ids"]);
    let stored: Vec<&str> = field.split(',').collect();
    assert_eq!(stored.len(), 996);
    assert_eq!(stored[0], "0-0");
    assert_eq!(stored[1], "1-0");
    assert_eq!(stored[995], "18446744073709551615-18446744073709551615");
    let st = wait_state(&mut c, "a:dlq", "done", 30);
    assert_eq!(figures(&st), [996, 996, 996, 3, 993, 0]);
    assert_eq!(xlen(&mut c, "a:dlq"), 0);
    assert_eq!(pel(&mut c, "a"), back(&src));
    // The same IDs again: they are no longer in the DLQ, so nothing moves a second time.
    let again = [&["a:dlq", "IDS", "3"][..], &[&d[0], &d[1], &d[2]]].concat();
    assert_eq!(redrive(&mut c, &again), Value::Int(3));
    let st = wait_state(&mut c, "a:dlq", "done", 10);
    assert_eq!(figures(&st), [3, 3, 3, 0, 3, 0]);
    assert_eq!(pel(&mut c, "a"), back(&src));
    assert_eq!(reclaim_info(&mut c, "panics"), 0);
}

/// The entries of a DLQ as (DLQ ID, source ID).
fn sources(entries: &[Entry]) -> Vec<(String, String)> {
    entries
        .iter()
        .map(|e| {
            let id = String::from_utf8(entry_field(e, "reclaim-id")).unwrap();
            (e.0.clone(), id)
        })
        .collect()
}

#[test]
fn entries_deleted_or_trimmed_while_the_task_runs_are_skipped() {
    let s = Server::new();
    let mut c = s.conn();
    let src = dead_letters(&mut c, "a", "a:dlq", 40);
    let d = dlq_of(&mut c, "a:dlq");
    // Every entry by ID, at RATE 20: two seconds at least.
    let mut args = vec!["a:dlq", "IDS", "40"];
    args.extend(d.iter().map(String::as_str));
    args.extend(["RATE", "20"]);
    redrive(&mut c, &args);
    wait_for(20, "some moves", || {
        (int_field(&status_of(&mut c, "a:dlq"), "moved") >= 2).then_some(())
    });
    // In one transaction (no step in between): the last five deleted, then the oldest trimmed
    // down to 20 entries.
    let last: Vec<&String> = d[35..].iter().collect();
    let (was, deleted, trimmed, is): (Vec<Entry>, i64, i64, Vec<Entry>) = redis::pipe()
        .atomic()
        .cmd("XRANGE")
        .arg("a:dlq")
        .arg("-")
        .arg("+")
        .cmd("XDEL")
        .arg("a:dlq")
        .arg(&last)
        .cmd("XTRIM")
        .arg("a:dlq")
        .arg("MAXLEN")
        .arg(20)
        .cmd("XRANGE")
        .arg("a:dlq")
        .arg("-")
        .arg("+")
        .query(&mut c)
        .expect("MULTI");
    assert_eq!(deleted, 5);
    assert!(
        trimmed > 0 && was.len() as i64 > 30,
        "{trimmed} {}",
        was.len()
    );
    let kept: Vec<String> = sources(&is).into_iter().map(|(_, s)| s).collect();
    let removed: Vec<String> = sources(&was)
        .into_iter()
        .map(|(_, s)| s)
        .filter(|s| !kept.contains(s))
        .collect();
    assert_eq!(removed.len() as i64, deleted + trimmed);
    let st = wait_state(&mut c, "a:dlq", "done", 30);
    let n = removed.len() as i64;
    assert_eq!(figures(&st), [40, 40, 40, 40 - n, n, 0]);
    assert_eq!(xlen(&mut c, "a:dlq"), 0);
    // Back exactly once: every entry but the removed ones.
    let expect: Vec<String> = src.into_iter().filter(|s| !removed.contains(s)).collect();
    assert_eq!(pel(&mut c, "a"), back(&expect));
}

#[test]
fn a_user_without_xrange_or_xdel_on_the_dlq_is_refused() {
    let s = Server::new();
    let mut c = s.conn();
    dead_letters(&mut c, "a", "a:dlq", 2);
    let d = dlq_of(&mut c, "a:dlq");
    let before = (xrange(&mut c, b"a:dlq"), pending_raw(&mut c, b"a", b"g"));
    acl_setuser(
        &mut c,
        &["noxrange", "on", "nopass", "+@all", "-xrange", "~*"],
    );
    acl_setuser(&mut c, &["noxdel", "on", "nopass", "+@all", "-xdel", "~*"]);
    for (user, want) in [
        (
            "noxrange",
            "NOPERM this user has no permissions to run XRANGE on the DLQ key",
        ),
        (
            "noxdel",
            "NOPERM this user has no permissions to run XDEL on the DLQ key",
        ),
    ] {
        let mut u = s.conn_as(user);
        for words in [
            w(&format!("IDS 1 {}", d[0])),
            w(&format!("IDS 2 {} {} SOURCE a g", d[0], d[1])),
        ] {
            assert_eq!(refused(&mut u, "a:dlq", &words), want, "{user} {words:?}");
        }
    }
    // Read-only on the DLQ: Redis itself refuses the command, whose keys are written.
    acl_setuser(
        &mut c,
        &["readdlq", "on", "nopass", "+@all", "%R~a:dlq", "~a"],
    );
    let mut u = s.conn_as("readdlq");
    let e = refused(&mut u, "a:dlq", &w(&format!("IDS 1 {}", d[0])));
    assert_noperm_keys(&e, "a user that may only read the DLQ");
    assert_eq!(status_of(&mut c, "a:dlq"), Value::Nil);
    assert_eq!(
        (xrange(&mut c, b"a:dlq"), pending_raw(&mut c, b"a", b"g")),
        before
    );
}

#[test]
fn a_replica_refuses_ids_as_it_refuses_redrive_and_shows_the_task() {
    let p = Server::new();
    let r = p.replica(&[]);
    let mut c = p.conn();
    let src = dead_letters(&mut c, "a", "a:dlq", 4);
    let d = dlq_of(&mut c, "a:dlq");
    replica_acked(&mut c);
    let mut rc = r.conn();
    for words in [vec![], w(&format!("IDS 1 {}", d[0]))] {
        assert_eq!(refused(&mut rc, "a:dlq", &words), READONLY);
    }
    // The options are read first, on a replica too.
    assert_eq!(refused(&mut rc, "a:dlq", &w("IDS 0 1-0")), RANGE);
    assert_eq!(xlen(&mut rc, "a:dlq"), 4);
    // Started on the primary: the replica shows its IDs and the same figures.
    redrive(&mut c, &["a:dlq", "IDS", "2", &d[3], &d[1]]);
    let st = wait_state(&mut c, "a:dlq", "done", 10);
    assert_eq!(figures(&st), [2, 2, 2, 2, 0, 0]);
    replica_acked(&mut c);
    assert_eq!(status_of(&mut rc, "a:dlq"), st);
    assert_eq!(pel(&mut rc, "a"), back(&[src[1].clone(), src[3].clone()]));
    assert_eq!(dlq_of(&mut rc, "a:dlq"), [d[0].clone(), d[2].clone()]);
}

#[test]
fn in_redis_cluster_the_keys_are_read_past_the_ids() {
    let s = cluster_node();
    let mut c = s.conn();
    own_all_slots(&mut c);
    let src = dead_letters(&mut c, "{o}:in", "{o}:dlq", 3);
    let d = dlq_of(&mut c, "{o}:dlq");
    let keys = |c: &mut Connection, words: &str| -> Vec<String> {
        let mut a = vec!["COMMAND", "GETKEYS", "RECLAIM.REDRIVE", "{o}:dlq"];
        a.extend(words.split(' '));
        q(c, &a)
    };
    // An ID spelled SOURCE is an ID, not the option; SOURCE before or after IDS is found.
    assert_eq!(keys(&mut c, "IDS 1 SOURCE SOURCE k g"), ["{o}:dlq", "k"]);
    assert_eq!(keys(&mut c, "IDS 2 1-0 2-0 SOURCE k g"), ["{o}:dlq", "k"]);
    assert_eq!(keys(&mut c, "SOURCE k g IDS 1 1-0"), ["{o}:dlq", "k"]);
    assert_eq!(keys(&mut c, "IDS 3 SOURCE k g"), ["{o}:dlq"]);
    // SOURCE in another slot, after IDS or before it: CROSSSLOT, nothing changed.
    for words in [
        format!("IDS 1 {} SOURCE other g", d[0]),
        format!("SOURCE other g IDS 1 {}", d[0]),
    ] {
        let e = refused(&mut c, "{o}:dlq", &w(&words));
        assert!(e.starts_with("CROSSSLOT"), "{e}");
    }
    assert_eq!(status_of(&mut c, "{o}:dlq"), Value::Nil);
    assert_eq!(dlq_of(&mut c, "{o}:dlq"), d);
    redrive(
        &mut c,
        &["{o}:dlq", "IDS", "2", &d[2], &d[0], "SOURCE", "{o}:in", "g"],
    );
    let st = wait_state(&mut c, "{o}:dlq", "done", 10);
    assert_eq!(figures(&st), [2, 2, 2, 2, 0, 0]);
    assert_eq!(
        pel(&mut c, "{o}:in"),
        back(&[src[0].clone(), src[2].clone()])
    );
    assert_eq!(dlq_of(&mut c, "{o}:dlq"), [d[1].clone()]);
}

#[test]
fn the_ids_survive_debug_reload_and_a_restart_from_the_aof() {
    let mut s = Server::with_aof_and_debug();
    let mut c = s.conn();
    let src = dead_letters(&mut c, "a", "a:dlq", 40);
    let d = dlq_of(&mut c, "a:dlq");
    // Every other entry, at RATE 4: five seconds at least.
    let chosen: Vec<&str> = d.iter().step_by(2).map(String::as_str).collect();
    let mut args = vec!["a:dlq", "IDS", "20"];
    args.extend(&chosen);
    args.extend(["RATE", "4"]);
    redrive(&mut c, &args);
    let moved = |c: &mut Connection| int_field(&status_of(c, "a:dlq"), "moved");
    wait_for(20, "a first move", || (moved(&mut c) >= 1).then_some(()));
    let _: () = cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    let st = status_of(&mut c, "a:dlq");
    assert_eq!(str_field(&st, "state"), "running");
    assert_eq!(int_field(&st, "ids"), 20);
    let at = moved(&mut c);
    wait_for(20, "a move after DEBUG RELOAD", || {
        (moved(&mut c) > at).then_some(())
    });
    s.kill();
    s.restart();
    let mut c = s.conn();
    let st = status_of(&mut c, "a:dlq");
    assert!(
        int_field(&st, "moved") < 20,
        "the task was over before the restart"
    );
    assert_eq!(int_field(&st, "ids"), 20);
    let st = wait_state(&mut c, "a:dlq", "done", 30);
    assert_eq!(figures(&st), [20, 20, 20, 20, 0, 0]);
    let back_ids: Vec<String> = src.iter().step_by(2).cloned().collect();
    assert_eq!(pel(&mut c, "a"), back(&back_ids));
    let left: Vec<String> = d.iter().skip(1).step_by(2).cloned().collect();
    assert_eq!(dlq_of(&mut c, "a:dlq"), left);
}
