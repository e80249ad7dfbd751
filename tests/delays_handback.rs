//! What becomes of entries given back with `RECLAIM.NACK` (issue 31): every `NACK` records the
//! worker that gave the entry back (with its `REASON` or none), so a dead-letter by
//! `MAX-DELIVERIES` on any path names that worker in `reclaim-consumer`, never the module's own
//! consumer it waited at; `RECLAIM.POLICY DEL` hands parked entries back as ordinary pending
//! entries and leaves no delay or NACK record key behind; a paused policy's parked entries wait.

use reclaim_testkit::*;

fn exists(c: &mut Connection, key: &str) -> bool {
    q::<i64>(c, &["EXISTS", key]) == 1
}

fn delay_key(s: &str) -> String {
    format!("reclaim:delay:{{{s}}}:{s}")
}

fn nack_key(s: &str) -> String {
    format!("reclaim:nack:{{{s}}}:{s}")
}

/// One entry added to `s` and taken by `w`: its ID.
fn add_and_take(c: &mut Connection, s: &str, w: &str) -> String {
    let id: String = q(c, &["XADD", s, "*", "job", "x"]);
    let got = readgroup(c, s, "g", w, 1, None);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, id);
    id
}

/// The value of field `name` of the DLQ entry `fields` (flat).
fn field_of<'a>(fields: &'a [Vec<u8>], name: &str) -> Option<&'a [u8]> {
    fields
        .chunks(2)
        .find(|kv| kv[0] == name.as_bytes())
        .map(|kv| kv[1].as_slice())
}

/// Waits for the `n`-th DLQ entry of `dlq` (at most 20 s), reading as `reader` meanwhile when
/// given (a `RECLAIM.READGROUP` that must hand nothing over), and returns its fields.
fn nth_dead_letter(c: &mut Connection, s: &str, n: usize, reader: bool) -> Vec<Vec<u8>> {
    let dlq = format!("{s}:dlq");
    wait_for(20, "the dead-letter", || {
        if reader {
            assert!(readgroup(c, s, "g", "w9", 1, Some(50)).is_empty());
        }
        let all = xrange(c, dlq.as_bytes());
        (all.len() >= n).then(|| all[n - 1].1.clone())
    })
}

#[test]
fn a_dead_letter_names_the_worker_whose_nack_ended_its_last_attempt() {
    let s = Server::new();
    let mut c = s.conn();
    // "sw": passes every 100 ms dead-letter; "rg": no pass for a minute, RECLAIM.READGROUP does.
    for (k, interval) in [("sw", 100), ("rg", 60_000)] {
        create_group(&mut c, k.as_bytes(), b"g");
        let opts = format!("MIN-IDLE 500 MAX-DELIVERIES 1 DLQ {k}:dlq INTERVAL {interval}");
        set_policy_opts(&mut c, k, "g", &opts);
        // Given back at once (the inbox), after 300 ms (reclaim:delayed), after 800 ms
        // (parked, then released): no REASON, each by another worker, at its last delivery.
        for (n, (w, delay)) in [("w1", "0"), ("w2", "300"), ("w3", "800")]
            .iter()
            .enumerate()
        {
            let id = add_and_take(&mut c, k, w);
            let r: i64 = q(&mut c, &["RECLAIM.NACK", k, "g", w, &id, "DELAY", delay]);
            assert_eq!(r, 1);
            let f = nth_dead_letter(&mut c, k, n + 1, k == "rg");
            let ctx = format!("{k} DELAY {delay}");
            assert_eq!(field_of(&f, "reclaim-id"), Some(id.as_bytes()), "{ctx}");
            assert_eq!(
                field_of(&f, "reclaim-consumer"),
                Some(w.as_bytes()),
                "{ctx}"
            );
            assert_eq!(
                field_of(&f, "reclaim-reason"),
                Some(&b"max-deliveries"[..]),
                "{ctx}"
            );
            assert_eq!(
                field_of(&f, "reclaim-last-error"),
                None,
                "{ctx}: no REASON given"
            );
            assert!(owners(&mut c, k, "g").is_empty(), "{ctx}");
            assert!(!exists(&mut c, &nack_key(k)), "{ctx}: the record stays");
            assert!(!exists(&mut c, &delay_key(k)), "{ctx}");
        }
    }
}

#[test]
fn a_record_goes_with_a_redelivery_and_with_term() {
    let s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"t", b"g");
    set_policy_opts(
        &mut c,
        "t",
        "g",
        "MIN-IDLE 500 MAX-DELIVERIES 5 DLQ t:dlq INTERVAL 60000",
    );
    let id = add_and_take(&mut c, "t", "w1");
    let n: i64 = q(&mut c, &["RECLAIM.NACK", "t", "g", "w1", &id]);
    assert_eq!(n, 1);
    assert_eq!(q::<i64>(&mut c, &["HLEN", &nack_key("t")]), 1);
    // Handed over again: the record of the attempt before no longer applies.
    let got = readgroup(&mut c, "t", "g", "w2", 1, None);
    assert_eq!(got[0].0, id);
    assert!(!exists(&mut c, &nack_key("t")));
    // A record left by an XCLAIM the module did not see goes with the TERM that ends the entry.
    let n: i64 = q(
        &mut c,
        &["RECLAIM.NACK", "t", "g", "w2", &id, "REASON", "r"],
    );
    assert_eq!(n, 1);
    let _: Value = run(&mut c, &["XCLAIM", "t", "g", "w3", "0", &id]);
    assert!(exists(&mut c, &nack_key("t")));
    let n: i64 = q(&mut c, &["RECLAIM.TERM", "t", "g", "w3", &id]);
    assert_eq!(n, 1);
    let f = nth_dead_letter(&mut c, "t", 1, false);
    assert_eq!(field_of(&f, "reclaim-consumer"), Some(&b"w3"[..]));
    assert_eq!(field_of(&f, "reclaim-reason"), Some(&b"term"[..]));
    assert_eq!(field_of(&f, "reclaim-last-error"), None);
    assert!(!exists(&mut c, &nack_key("t")));
}

#[test]
fn a_nack_without_reason_needs_no_right_on_the_record_key() {
    let s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"a", b"g");
    set_policy_opts(
        &mut c,
        "a",
        "g",
        "MIN-IDLE 500 MAX-DELIVERIES 1 DLQ a:dlq INTERVAL 100",
    );
    let id = add_and_take(&mut c, "a", "w1");
    acl_setuser(
        &mut c,
        &[
            "worker",
            "on",
            "nopass",
            "+@all",
            "~a",
            "~a:dlq",
            "~reclaim:policy:*",
        ],
    );
    let mut w = s.conn();
    let _: () = q(&mut w, &["AUTH", "worker", "x"]);
    let n: i64 = q(&mut w, &["RECLAIM.NACK", "a", "g", "w1", &id]);
    assert_eq!(n, 1);
    assert!(!exists(&mut c, &nack_key("a")), "nothing recorded");
    let f = nth_dead_letter(&mut c, "a", 1, false);
    assert_eq!(field_of(&f, "reclaim-consumer"), Some(&b"reclaim"[..]));
}

/// `RECLAIM.POLICY DEL key g` -> 1.
fn del_policy_of(c: &mut Connection, s: &str, g: &str) {
    assert_eq!(q::<i64>(c, &["RECLAIM.POLICY", "DEL", s, g]), 1);
}

#[test]
fn policy_del_hands_parked_entries_back_and_leaves_no_key() {
    let s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"p", b"g");
    set_policy_opts(&mut c, "p", "g", "MIN-IDLE 500 INTERVAL 100");
    let a = add_and_take(&mut c, "p", "w1");
    let b = add_and_take(&mut c, "p", "w1");
    for (id, why) in [(&a, "slow"), (&b, "busy")] {
        let n: i64 = q(
            &mut c,
            &[
                "RECLAIM.NACK",
                "p",
                "g",
                "w1",
                id,
                "DELAY",
                "3600000",
                "REASON",
                why,
            ],
        );
        assert_eq!(n, 1);
    }
    assert_eq!(q::<i64>(&mut c, &["ZCARD", &delay_key("p")]), 2);
    del_policy_of(&mut c, "p", "g");
    // Ordinary pending entries now, due at once under the old lease, their counts unchanged.
    let pel = pending(&mut c, "p", "g");
    assert_eq!(pel.len(), 2);
    for e in &pel {
        assert_eq!((e.consumer.as_str(), e.count), ("reclaim:delayed", 1));
        assert!(e.idle >= 500, "{e:?}");
    }
    for k in [delay_key("p"), nack_key("p")] {
        assert!(!exists(&mut c, &k), "{k} left behind");
    }
    // The application claims them as any stale entries ...
    let got: Value = run(
        &mut c,
        &["XAUTOCLAIM", "p", "g", "app", "500", "0", "JUSTID"],
    );
    let ids: Vec<String> = match &items(&got)[1] {
        Value::Array(v) => v.iter().map(string_of).collect(),
        v => panic!("{v:?}"),
    };
    assert_eq!(ids, [a.clone(), b.clone()]);
    let _: i64 = q(&mut c, &["XACK", "p", "g", &b]);
    // ... or a new policy hands them over at once.
    set_policy_opts(&mut c, "p", "g", "MIN-IDLE 500 INTERVAL 100");
    let n: i64 = q(
        &mut c,
        &["RECLAIM.NACK", "p", "g", "app", &a, "DELAY", "3600000"],
    );
    assert_eq!(n, 1, "parked again");
    del_policy_of(&mut c, "p", "g");
    set_policy_opts(&mut c, "p", "g", "MIN-IDLE 500 INTERVAL 100");
    let got = readgroup(&mut c, "p", "g", "w2", 10, None);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, a);
}

#[test]
fn policy_del_of_one_group_keeps_the_other_groups_delays() {
    let s = Server::new();
    let mut c = s.conn();
    for g in ["g", "h"] {
        create_group(&mut c, b"two", g.as_bytes());
        set_policy_opts(&mut c, "two", g, "MIN-IDLE 500 INTERVAL 100");
    }
    let id: String = q(&mut c, &["XADD", "two", "*", "job", "x"]);
    for g in ["g", "h"] {
        assert_eq!(readgroup(&mut c, "two", g, "w1", 1, None).len(), 1);
        let n: i64 = q(
            &mut c,
            &["RECLAIM.NACK", "two", g, "w1", &id, "DELAY", "3600000"],
        );
        assert_eq!(n, 1);
    }
    del_policy_of(&mut c, "two", "g");
    assert_eq!(
        owners(&mut c, "two", "g").remove(&id).map(|o| o.0),
        Some("reclaim:delayed".into())
    );
    assert_eq!(
        owners(&mut c, "two", "h").remove(&id).map(|o| o.0),
        Some("reclaim:parked".into())
    );
    let members: Vec<Vec<u8>> = cmd("ZRANGE")
        .arg(delay_key("two"))
        .arg(0)
        .arg(-1)
        .query(&mut c)
        .unwrap();
    assert_eq!(members, [format!("h\0{id}").into_bytes()]);
    // The last policy goes: nothing of the stream's stays.
    del_policy_of(&mut c, "two", "h");
    for k in [delay_key("two"), nack_key("two")] {
        assert!(!exists(&mut c, &k), "{k} left behind");
    }
}

#[test]
fn policy_del_after_the_stream_or_group_is_gone_leaves_no_key() {
    let s = Server::new();
    let mut c = s.conn();
    for k in ["gone", "nogroup"] {
        create_group(&mut c, k.as_bytes(), b"g");
        // A pass a minute: only the POLICY DEL can clean up in time.
        set_policy_opts(&mut c, k, "g", "MIN-IDLE 500 INTERVAL 60000");
        let id = add_and_take(&mut c, k, "w1");
        let n: i64 = q(
            &mut c,
            &["RECLAIM.NACK", k, "g", "w1", &id, "DELAY", "3600000"],
        );
        assert_eq!(n, 1);
    }
    let _: i64 = q(&mut c, &["DEL", "gone"]);
    let _: i64 = q(&mut c, &["XGROUP", "DESTROY", "nogroup", "g"]);
    for k in ["gone", "nogroup"] {
        del_policy_of(&mut c, k, "g");
        for key in [delay_key(k), nack_key(k)] {
            assert!(!exists(&mut c, &key), "{key} left behind");
        }
    }
}

#[test]
fn policy_del_needs_the_right_to_hand_parked_entries_back() {
    let s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"r", b"g");
    set_policy_opts(&mut c, "r", "g", "MIN-IDLE 500 INTERVAL 100");
    let id = add_and_take(&mut c, "r", "w1");
    let n: i64 = q(
        &mut c,
        &["RECLAIM.NACK", "r", "g", "w1", &id, "DELAY", "3600000"],
    );
    assert_eq!(n, 1);
    acl_setuser(
        &mut c,
        &["ops", "on", "nopass", "+@all", "~r", "~reclaim:policy:*"],
    );
    let mut o = s.conn();
    let _: () = q(&mut o, &["AUTH", "ops", "x"]);
    let e = error_of(&mut o, cmd("RECLAIM.POLICY").arg(&["DEL", "r", "g"]));
    assert_eq!(
        e,
        "NOPERM this user has no permissions to run ZADD on the delay key"
    );
    assert!(get_policy(&mut c, b"r", b"g").is_some(), "nothing changed");
    assert_eq!(
        owners(&mut c, "r", "g").remove(&id).map(|o| o.0),
        Some("reclaim:parked".into())
    );
}

#[test]
fn a_paused_policy_keeps_its_parked_entries_until_resume() {
    let s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"z", b"g");
    set_policy_opts(&mut c, "z", "g", "MIN-IDLE 500 INTERVAL 100");
    let id = add_and_take(&mut c, "z", "w1");
    let before = server_ms(&mut c);
    let n: i64 = q(
        &mut c,
        &["RECLAIM.NACK", "z", "g", "w1", &id, "DELAY", "800"],
    );
    assert_eq!(n, 1);
    let _: () = q(&mut c, &["RECLAIM.POLICY", "PAUSE", "z", "g"]);
    // Well past its due time, over passes of another policy, nothing releases it.
    create_group(&mut c, b"other", b"g");
    set_policy_opts(&mut c, "other", "g", "MIN-IDLE 500 INTERVAL 100");
    wait_for(20, "its due time passed", || {
        (server_ms(&mut c) >= before + 1600).then_some(())
    });
    wait_passes(&mut c, "other", "g", 3);
    assert!(readgroup(&mut c, "z", "g", "w2", 1, None).is_empty());
    assert_eq!(
        owners(&mut c, "z", "g").remove(&id).map(|o| o.0),
        Some("reclaim:parked".into())
    );
    let _: () = q(&mut c, &["RECLAIM.POLICY", "RESUME", "z", "g"]);
    let got = wait_for(20, "the entry after RESUME", || {
        readgroup(&mut c, "z", "g", "w2", 1, Some(50))
            .into_iter()
            .next()
    });
    assert_eq!(got.0, id);
    assert!(!exists(&mut c, &delay_key("z")));
}

#[test]
fn command_docs_show_nack_reason_since_0_3_0() {
    let s = Server::new();
    let mut c = s.conn();
    let v: Value = run(&mut c, &["COMMAND", "DOCS", "reclaim.nack"]);
    let doc = &items(&v)[1];
    let since: Vec<(String, String)> = arguments_since(doc);
    let want: Vec<(String, String)> = [
        ("key", ""),
        ("group", ""),
        ("consumer", ""),
        ("id", ""),
        ("DELAY", ""),
        ("REASON", "0.3.0"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(since, want);
}

#[test]
fn policy_del_hands_back_the_same_on_a_replica_and_in_the_aof() {
    let mut p = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let r = p.replica(&[]);
    let (mut c, mut rc) = (p.conn(), r.conn());
    create_group(&mut c, b"rp", b"g");
    set_policy_opts(&mut c, "rp", "g", "MIN-IDLE 500 INTERVAL 100");
    let id = add_and_take(&mut c, "rp", "w1");
    let n: i64 = q(
        &mut c,
        &["RECLAIM.NACK", "rp", "g", "w1", &id, "DELAY", "3600000"],
    );
    assert_eq!(n, 1);
    del_policy_of(&mut c, "rp", "g");
    let read = |c: &mut Connection| {
        let pel: Vec<(String, String, i64)> = pending(c, "rp", "g")
            .into_iter()
            .map(|e| (e.id, e.consumer, e.count))
            .collect();
        let keys: i64 = q(c, &["EXISTS", &delay_key("rp"), &nack_key("rp")]);
        (pel, keys)
    };
    let on_both = replica_agrees(&mut c, &mut rc, read);
    assert_eq!(
        on_both,
        (vec![(id.clone(), "reclaim:delayed".into(), 1)], 0)
    );
    assert!(get_policy(&mut rc, b"rp", b"g").is_none());
    // The AOF replays the hand-back and the DEL to the same state.
    p.restart();
    let mut c = p.conn();
    assert_eq!(read(&mut c), on_both);
    assert!(get_policy(&mut c, b"rp", b"g").is_none());
}

#[test]
fn policy_del_hands_back_at_most_4096_per_call_and_the_rest_keep_their_records() {
    let s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"big", b"g");
    set_policy_opts(&mut c, "big", "g", "MIN-IDLE 500 INTERVAL 60000");
    let ids = add_entries(&mut c, b"big", "x", 4100);
    read_group(&mut c, b"big", b"g", b"w1");
    let n: i64 = cmd("RECLAIM.NACK")
        .arg(&["big", "g", "w1"])
        .arg(&ids)
        .arg(&["DELAY", "3600000"])
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 4100);
    del_policy_of(&mut c, "big", "g");
    let by_owner = |c: &mut Connection, who: &str| {
        pending(c, "big", "g")
            .into_iter()
            .filter(|e| e.consumer == who)
            .count()
    };
    assert_eq!(by_owner(&mut c, "reclaim:delayed"), 4096);
    assert_eq!(by_owner(&mut c, "reclaim:parked"), 4);
    // The 4 left keep their records: a new policy and its DEL hand them back, and the keys go.
    assert_eq!(q::<i64>(&mut c, &["ZCARD", &delay_key("big")]), 4);
    set_policy_opts(&mut c, "big", "g", "MIN-IDLE 500 INTERVAL 60000");
    del_policy_of(&mut c, "big", "g");
    // None parked, none lost (the new policy's first pass may have claimed some of the handed-back
    // ones, stale at once, before its DEL: they are pending at its claimant then).
    assert_eq!(by_owner(&mut c, "reclaim:parked"), 0);
    assert_eq!(pending(&mut c, "big", "g").len(), 4100);
    for k in [delay_key("big"), nack_key("big")] {
        assert!(!exists(&mut c, &k), "{k} left behind");
    }
}
