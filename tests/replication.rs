//! Replication: policies reach replicas by full sync and by the replication stream, replicas
//! never sweep, the primary's sweeps reach them exactly, a promoted replica takes over; on a
//! replica the read commands answer and the writing ones are refused with `READONLY`.

use reclaim_testkit::*;

/// A primary that starts a full sync at once (no diskless-sync delay).
fn primary() -> Server {
    Server::start(&[
        "--repl-diskless-sync-delay",
        "0",
        "--enable-debug-command",
        "yes",
    ])
}

/// `DEBUG DIGEST`: a hash of the whole dataset (module values through their digest callback).
fn digest(con: &mut Connection) -> String {
    cmd("DEBUG").arg("DIGEST").query(con).expect("DEBUG DIGEST")
}

fn pause_writes(con: &mut Connection) {
    let _: () = cmd("CLIENT")
        .arg("PAUSE")
        .arg(120_000)
        .arg("WRITE")
        .query(con)
        .expect("CLIENT PAUSE");
}

#[test]
fn replica_gets_policies_from_full_sync_and_from_the_stream() {
    let p = primary();
    let mut p0 = p.conn_db(0);
    let mut p3 = p.conn_db(3);
    let a = PolicyView::new(500, 100)
        .with_dlq(b"dlq\x00a", 4)
        .with_claimant(b"c\xff");
    let b = PolicyView::new(1_000, 50);
    set_policy(&mut p0, BIN_STREAM, BIN_GROUP, &a);
    set_policy(&mut p3, b"orders", b"workers", &b);

    // Full sync: the replica loads them from the primary's RDB.
    let r = p.replica(&["--enable-debug-command", "yes"]);
    let mut r0 = r.conn_db(0);
    let mut r3 = r.conn_db(3);
    assert_eq!(get_policy(&mut r0, BIN_STREAM, BIN_GROUP), Some(a.clone()));
    assert_eq!(get_policy(&mut r3, b"orders", b"workers"), Some(b.clone()));
    assert_eq!(get_policy(&mut r0, b"orders", b"workers"), None);
    assert_eq!(
        list_policies(&mut r0),
        vec![(BIN_STREAM.to_vec(), BIN_GROUP.to_vec(), a.clone())]
    );
    assert_eq!(
        list_policies(&mut r3),
        vec![(b"orders".to_vec(), b"workers".to_vec(), b.clone())]
    );
    assert_eq!(reclaim_info(&mut r0, "policies"), 2);

    // Replication stream: new policies, a changed one, same names in another database.
    let c = PolicyView::new(300, 30).with_count(9);
    let a2 = PolicyView::new(700, 70).with_claimant(b"x\x00y");
    let d = PolicyView::new(400, 40).with_dlq(b"orders:dlq", 2);
    set_policy(&mut p0, b"orders", b"workers", &c);
    set_policy(&mut p0, BIN_STREAM, BIN_GROUP, &a2);
    set_policy(&mut p3, b"orders", b"audit", &d);
    replica_acked(&mut p0);
    assert_eq!(get_policy(&mut r0, b"orders", b"workers"), Some(c.clone()));
    assert_eq!(get_policy(&mut r0, BIN_STREAM, BIN_GROUP), Some(a2.clone()));
    assert_eq!(get_policy(&mut r3, b"orders", b"audit"), Some(d.clone()));
    assert_eq!(get_policy(&mut r3, b"orders", b"workers"), Some(b.clone()));
    let want0 = sorted(&[
        (b"orders".to_vec(), b"workers".to_vec(), c.clone()),
        (BIN_STREAM.to_vec(), BIN_GROUP.to_vec(), a2.clone()),
    ]);
    let want3 = sorted(&[
        (b"orders".to_vec(), b"audit".to_vec(), d.clone()),
        (b"orders".to_vec(), b"workers".to_vec(), b.clone()),
    ]);
    assert_eq!(list_policies(&mut p0), want0);
    assert_eq!(list_policies(&mut r0), want0);
    assert_eq!(list_policies(&mut p3), want3);
    assert_eq!(list_policies(&mut r3), want3);
    assert_eq!(reclaim_info(&mut r0, "policies"), 4);
    let d = digest(&mut p0);
    assert_ne!(d, "0".repeat(40));
    assert_eq!(digest(&mut r0), d, "DEBUG DIGEST of primary and replica");
}

#[test]
fn policy_del_replicates() {
    let p = primary();
    let r = p.replica(&[]);
    let mut pc = p.conn();
    let mut rc = r.conn();
    let pol = PolicyView::new(1_000, 100);
    set_policy(&mut pc, b"s1", b"g1", &pol);
    set_policy(&mut pc, b"s1", b"g2", &pol);
    set_policy(&mut pc, BIN_STREAM, BIN_GROUP, &pol);
    replica_acked(&mut pc);
    assert_eq!(list_policies(&mut rc).len(), 3);

    assert_eq!(del_policy(&mut pc, b"s1", b"g1"), 1);
    assert_eq!(del_policy(&mut pc, BIN_STREAM, BIN_GROUP), 1);
    assert_eq!(del_policy(&mut pc, BIN_STREAM, BIN_GROUP), 0);
    replica_acked(&mut pc);
    assert_eq!(get_policy(&mut rc, b"s1", b"g1"), None);
    assert_eq!(get_policy(&mut rc, BIN_STREAM, BIN_GROUP), None);
    assert_eq!(get_policy(&mut rc, b"s1", b"g2"), Some(pol.clone()));
    assert_eq!(
        list_policies(&mut rc),
        vec![(b"s1".to_vec(), b"g2".to_vec(), pol.clone())]
    );
    // The last group of a stream gone: its policy key is gone on the replica too.
    let keys: Vec<Vec<u8>> = cmd("KEYS").arg("reclaim:policy:*").query(&mut rc).unwrap();
    assert_eq!(keys, vec![b"reclaim:policy:{s1}:s1".to_vec()]);
    assert_eq!(reclaim_info(&mut rc, "policies"), 1);
}

#[test]
fn replica_never_sweeps_and_matches_the_primary_after_sweeps() {
    let p = primary();
    let r = p.replica(&[]);
    let mut pc = p.conn();
    let mut rc = r.conn();

    create_group(&mut pc, b"jobs", b"workers");
    let ids = add_entries(&mut pc, b"jobs", "j", 6);
    read_group(&mut pc, b"jobs", b"workers", b"dead");
    let poison = vec![ids[1].clone(), ids[4].clone()];
    set_deliveries(&mut pc, b"jobs", b"workers", b"dead", &poison, 10);
    let pol = PolicyView::new(100, 20)
        .with_dlq(b"jobs:dlq", 5)
        .with_claimant(b"rescuer");
    set_policy(&mut pc, b"jobs", b"workers", &pol);
    replica_acked(&mut pc);
    assert_eq!(get_policy(&mut rc, b"jobs", b"workers"), Some(pol.clone()));

    // The replica skips its ticks.
    let skipped = reclaim_info(&mut rc, "ticks_skipped_replica");
    wait_for(10, "replica ticks_skipped_replica growing", || {
        (reclaim_info(&mut rc, "ticks_skipped_replica") > skipped).then_some(())
    });
    assert_eq!(
        str_field(&stats(&mut rc, "jobs", "workers"), "status"),
        "replica"
    );

    // The primary moves the dead consumer's entries to the inbox and dead-letters the poison ones.
    wait_for(10, "primary swept", || {
        let pel = pending_raw(&mut pc, b"jobs", b"workers");
        let dlq = xrange(&mut pc, b"jobs:dlq");
        let moved: Vec<Vec<u8>> = dlq.iter().map(|e| entry_field(e, "reclaim-id")).collect();
        (poison
            .iter()
            .all(|id| moved.contains(&id.as_bytes().to_vec()))
            && pel.iter().all(|e| e.1 != b"dead"))
        .then_some(())
    });
    // Stop the primary's sweeper so that both sides can be compared at rest.
    pause_writes(&mut pc);
    replica_acked(&mut pc);

    let pel_p = pending_raw(&mut pc, b"jobs", b"workers");
    let pel_r = pending_raw(&mut rc, b"jobs", b"workers");
    assert_eq!(pel_r, pel_p);
    let dlq_p = xrange(&mut pc, b"jobs:dlq");
    let dlq_r = xrange(&mut rc, b"jobs:dlq");
    assert_eq!(dlq_r, dlq_p);
    assert_eq!(xlen(&mut rc, b"jobs"), 6);
    assert_eq!(xlen(&mut pc, b"jobs"), 6);
    assert_eq!(xlen(&mut rc, b"jobs:dlq"), xlen(&mut pc, b"jobs:dlq"));
    // What the primary did, seen on both.
    for e in &dlq_p[..2] {
        let id = String::from_utf8(entry_field(e, "reclaim-id")).unwrap();
        assert!(poison.contains(&id), "{e:?}");
        assert_eq!(entry_field(e, "reclaim-deliveries"), b"10");
        assert_eq!(entry_field(e, "reclaim-consumer"), b"dead");
        assert_eq!(entry_field(e, "reclaim-stream"), b"jobs");
        assert_eq!(entry_field(e, "reclaim-group"), b"workers");
    }
    // Moved once each, their counts unchanged, and waiting in the inbox (nobody reads it).
    assert!(
        pel_p.iter().all(|e| e.1 == b"rescuer" && e.2 == 1),
        "{pel_p:?}"
    );
    assert_eq!(pel_p.len(), 4);
    assert_eq!(dlq_p.len(), 2);
    let pst = stats(&mut pc, "jobs", "workers");
    assert_eq!(int_field(&pst, "claimed"), 4);
    assert_eq!(int_field(&pst, "dead-lettered"), 2);

    // The replica did none of it itself.
    assert_eq!(reclaim_info(&mut rc, "claimed"), 0);
    assert_eq!(reclaim_info(&mut rc, "dead_lettered"), 0);
    assert_eq!(reclaim_info(&mut rc, "steps"), 0);
    let rst = stats(&mut rc, "jobs", "workers");
    assert_eq!(int_field(&rst, "claimed"), 0);
    assert_eq!(int_field(&rst, "dead-lettered"), 0);
    assert_eq!(str_field(&rst, "status"), "replica");
}

#[test]
fn promoted_replica_sweeps_and_never_dead_letters_twice() {
    let mut p = primary();
    let r = p.replica(&[]);
    let mut pc = p.conn();
    let mut rc = r.conn();

    create_group(&mut pc, b"jobs", b"g");
    let pol = PolicyView::new(100, 20).with_dlq(b"dlq", 3);
    set_policy(&mut pc, b"jobs", b"g", &pol);

    // Phase 1, on the primary: two poison entries are dead-lettered.
    let p1 = add_entries(&mut pc, b"jobs", "p1", 2);
    read_group(&mut pc, b"jobs", b"g", b"dead");
    set_deliveries(&mut pc, b"jobs", b"g", b"dead", &p1, 9);
    wait_for(10, "primary dead-letters phase 1", || {
        (xlen(&mut pc, b"dlq") == 2 && pending_raw(&mut pc, b"jobs", b"g").is_empty()).then_some(())
    });

    // Phase 2: a dead consumer takes new entries (two of them poison) and the primary stops
    // sweeping in the same transaction, then dies.
    let n = add_entries(&mut pc, b"jobs", "n", 3);
    let p2 = add_entries(&mut pc, b"jobs", "p2", 2);
    deliver_then_pause(&mut pc, (b"jobs", b"g", b"dead2"), &p2, 9, 120_000);
    replica_acked(&mut pc);
    let mut want_pel: Vec<PendRaw> = n
        .iter()
        .map(|id| (id.clone(), b"dead2".to_vec(), 1))
        .chain(p2.iter().map(|id| (id.clone(), b"dead2".to_vec(), 9)))
        .collect();
    want_pel.sort();
    assert_eq!(pending_raw(&mut rc, b"jobs", b"g"), want_pel);
    assert_eq!(xlen(&mut rc, b"dlq"), 2);
    p.kill();

    // Promotion: the former replica sweeps its policies. A worker whose handler fails takes the
    // three entries of the dead consumer each time the sweep moved them to the inbox.
    promote(&mut rc);
    for want in [2, 3] {
        let got = take_inbox(&mut rc, "jobs", "g", "reclaim", "w", 3);
        assert!(got.iter().all(|(_, k)| *k == want), "{got:?}");
    }
    let dlq = wait_for(15, "promoted replica dead-letters everything", || {
        // PEL first: once it is empty nothing moves any more, so the DLQ read after it is final.
        let done = pending_raw(&mut rc, b"jobs", b"g").is_empty();
        done.then(|| xrange(&mut rc, b"dlq"))
    });
    // Each entry exactly once: two from the old primary, five from the promoted replica (the
    // three moved to the inbox and taken by the worker twice, count 1 -> 2 -> 3, then
    // dead-lettered at the limit).
    let all: Vec<String> = p1.iter().chain(&n).chain(&p2).cloned().collect();
    assert_eq!(
        sorted(&dlq_ids(&dlq)),
        sorted(&all),
        "one DLQ entry per entry, none twice"
    );
    assert_provenance(&dlq, |id| {
        if p1.iter().any(|x| x == id) {
            ("dead", "9")
        } else if p2.iter().any(|x| x == id) {
            ("dead2", "9")
        } else {
            ("w", "3")
        }
    });
    let st = stats(&mut rc, "jobs", "g");
    assert_eq!(int_field(&st, "claimed"), 6);
    assert_eq!(int_field(&st, "redelivered"), 6);
    assert_eq!(int_field(&st, "dead-lettered"), 5);
    assert_eq!(str_field(&st, "status"), "active");
    assert_eq!(reclaim_info(&mut rc, "claimed"), 6);
    assert_eq!(reclaim_info(&mut rc, "dead_lettered"), 5);
}

#[test]
fn commands_on_a_replica() {
    // No diskless-sync delay: the replica's full sync starts at once.
    let primary = Server::start(&["--repl-diskless-sync-delay", "0"]);
    let mut pc = primary.conn();
    // One policy before the replica attaches (arrives by full sync), one after (by the stream).
    set_policy_args(&mut pc, b"early", b"g", &words("COUNT 3"));
    let replica = primary.replica(&[]);
    let mut rc_ = replica.conn();

    let claimant: &[u8] = b"c\x00\xff\r\n";
    set_policy_args(
        &mut pc,
        b"s",
        b"g",
        &[
            b"MIN-IDLE",
            b"5",
            b"MAX-DELIVERIES",
            b"2",
            b"DLQ",
            b"s:dlq",
            b"CLAIMANT",
            claimant,
            b"INTERVAL",
            b"100000",
        ],
    );
    let p = PolicyView::new(5, 100000)
        .with_dlq(b"s:dlq", 2)
        .with_claimant(claimant);
    let early = PolicyView::defaults().with_count(3);
    // The same policies on both; a replica's status says why it sweeps nothing.
    let (p_r, early_r) = (
        p.clone().with_status("replica"),
        early.clone().with_status("replica"),
    );
    wait_for(10, "the policy to reach the replica", || {
        (policy_reply(&mut rc_, b"s", b"g") == p_r.reply_on(b"s", false)).then_some(())
    });
    assert_policy_reply(&mut rc_, b"early", b"g", &early_r);
    assert_policy_list(&mut pc, &[(b"early", b"g", &early), (b"s", b"g", &p)]);
    assert_policy_list(&mut rc_, &[(b"early", b"g", &early_r), (b"s", b"g", &p_r)]);
    let mut r3 = replica.conn3();
    assert_eq!(policy_reply(&mut r3, b"s", b"g"), p_r.reply_on(b"s", true));

    // STATS works, and says why nothing is swept here.
    let st = run(&mut rc_, &["RECLAIM.STATS", "s", "g"]);
    assert_eq!(str_field(&st, "status"), "replica");
    assert_eq!(int_field(&st, "passes"), 0);
    assert_eq!(
        str_field(&run(&mut rc_, &["RECLAIM.STATS", "early", "g"]), "status"),
        "replica"
    );
    assert_eq!(
        error_of(&mut rc_, &bin_cmd("RECLAIM.STATS", &words("s nope"))),
        NO_POLICY
    );

    // Writes are refused.
    for cm in [
        policy_cmd(&words("SET s g")),
        policy_cmd(&words("SET new g")),
        policy_cmd(&words("DEL s g")),
        bin_cmd("RECLAIM.SWEEP", &words("s g")),
    ] {
        assert_eq!(error_of(&mut rc_, &cm), READONLY);
    }
    // Parse errors are still READONLY first (the command is a write).
    assert_eq!(
        error_of(&mut rc_, &policy_cmd(&words("SET s g COUNT 0"))),
        READONLY
    );
    assert_policy_reply(&mut rc_, b"s", b"g", &p_r);
    assert_eq!(policy_reply(&mut rc_, b"new", b"g"), Value::Nil);

    // The replica counts its policies and its skipped ticks.
    assert_eq!(reclaim_info(&mut rc_, "policies"), 2);
    wait_for(10, "ticks skipped on the replica", || {
        (reclaim_info(&mut rc_, "ticks_skipped_replica") > 0).then_some(())
    });
    assert_eq!(reclaim_info(&mut pc, "ticks_skipped_replica"), 0);

    // A DEL on the primary reaches the replica.
    assert_eq!(policy_del_reply(&mut pc, b"s", b"g"), Value::Int(1));
    wait_for(10, "the DEL to reach the replica", || {
        (policy_reply(&mut rc_, b"s", b"g") == Value::Nil).then_some(())
    });
    assert_policy_list(&mut rc_, &[(b"early", b"g", &early_r)]);
    assert_eq!(
        error_of(&mut rc_, &bin_cmd("RECLAIM.STATS", &words("s g"))),
        NO_POLICY
    );
    assert_eq!(reclaim_info(&mut rc_, "policies"), 1);

    // A policy in another database replicates to that database.
    let mut p1 = primary.conn();
    let _: () = cmd("SELECT").arg(1).query(&mut p1).unwrap();
    set_policy_args(&mut p1, b"s", b"g", &words("COUNT 8"));
    let mut r1 = replica.conn();
    let _: () = cmd("SELECT").arg(1).query(&mut r1).unwrap();
    let db1 = PolicyView::defaults().with_count(8).with_status("replica");
    wait_for(10, "the db 1 policy to reach the replica", || {
        (policy_reply(&mut r1, b"s", b"g") == db1.reply_on(b"s", false)).then_some(())
    });
    assert_policy_list(&mut r1, &[(b"s", b"g", &db1)]);
    assert_eq!(policy_reply(&mut rc_, b"s", b"g"), Value::Nil);
}

/// A primary and its replica, with group `g` on streams `kept` and `evicted`.
fn kept_and_evicted() -> (Server, Server) {
    let p = primary();
    let r = p.replica(&[]);
    let mut pc = p.conn();
    create_group(&mut pc, b"kept", b"g");
    create_group(&mut pc, b"evicted", b"g");
    (p, r)
}

/// A reader blocked in `RECLAIM.READGROUP ... BLOCK 0` on streams `kept` and `evicted` (group
/// `g`) of `p`, once the server counts it blocked; the thread returns the error its wait ends with.
fn blocked_on_kept_and_evicted(p: &Server, pc: &mut Connection) -> std::thread::JoinHandle<String> {
    let mut reader = p.conn();
    let waiting = std::thread::spawn(move || {
        let read = [
            "GROUP", "g", "w", "BLOCK", "0", "STREAMS", "kept", "evicted", ">", ">",
        ];
        error_of(&mut reader, cmd("RECLAIM.READGROUP").arg(&read))
    });
    wait_blocked(pc, 1);
    waiting
}

/// Found by `make fuzz FUZZ_ARGS=--evict-burst` (issue 29): a reader blocked in
/// `RECLAIM.READGROUP` on two streams, the second of which is evicted by an eviction burst (one
/// command run under a tiny `maxmemory`) that evicts many keys before it. Every evicted key's DEL
/// reaches the replica: after the primary's writes are acknowledged, both hold the same keys.
/// On Redis 7.0.15 the module used to end the reader's wait inside the `evicted` keyspace
/// callback, whose `RM_Call` flushed the DELs pending in that eviction with replication off:
/// they were lost and the replica kept ~300 keys its primary had evicted.
#[test]
fn evictions_around_a_blocked_reader_reach_the_replica() {
    let (p, r) = kept_and_evicted();
    let (mut pc, mut rc) = (p.conn(), r.conn());
    // volatile-ttl evicts only keys with a TTL, the soonest first: `kept` stays (the reader's
    // wake-up reads it), the 300 strings go first and `evicted` last.
    let mut fill = redis::pipe();
    for i in 0..300 {
        fill.cmd("SET")
            .arg(format!("k{i}"))
            .arg("v".repeat(100))
            .arg("EX")
            .arg(1000 + i)
            .ignore();
    }
    fill.cmd("EXPIRE").arg("evicted").arg(100_000).ignore();
    let _: () = fill.query(&mut pc).expect("fill");

    let waiting = blocked_on_kept_and_evicted(&p, &mut pc);
    let _: () = cmd("CONFIG")
        .arg(&["SET", "maxmemory-policy", "volatile-ttl", "maxmemory", "1"])
        .query(&mut pc)
        .expect("CONFIG SET");
    // The burst: evictions run before this command (not inside another command's call).
    let _: Value = cmd("PING").query(&mut pc).expect("PING");
    let _: () = cmd("CONFIG")
        .arg(&["SET", "maxmemory", "0"])
        .query(&mut pc)
        .expect("CONFIG SET");
    assert_eq!(
        waiting.join().expect("reader thread"),
        "UNBLOCKED the stream key no longer exists"
    );
    assert!(info_int(&mut pc, "stats", "evicted_keys") >= 300);

    replica_acked(&mut pc);
    let detail = dataset::StreamDetail::default();
    let mut on_p = dataset::snapshot(&mut pc, 1, detail).expect("primary dataset");
    let mut on_r = dataset::snapshot(&mut rc, 1, detail).expect("replica dataset");
    // The servers' own (docs/reliability.md, what the fuzzer's comparison leaves out): a blocking
    // read creates its consumer on the primary only on 8.2 and Valkey 8.1.
    for d in [&mut on_p, &mut on_r] {
        dataset::forget_entries_read(d);
        dataset::forget_empty_consumers(d);
    }
    assert_eq!(
        on_p.keys().map(|k| &k.1).collect::<Vec<_>>(),
        vec![&b"kept".to_vec()]
    );
    let d = dataset::diff(&on_p, &on_r, |_, _| true, 12);
    assert!(
        d.is_empty(),
        "the replica differs from its primary:\n{}",
        d.join("\n")
    );
}

/// The same with active expiry (issue 29): `evicted` and 1000 strings expire together while a
/// reader is blocked on `kept` and `evicted`. The primary's expiry cycle deletes them and sends
/// their DELs; replicas never expire keys themselves, so the replica holds exactly what the DELs
/// left (`DBSIZE`, which counts keys whose TTL has passed). On Redis 7.0.15 the module's wake-up
/// used to drop the DELs pending in the cycle: up to 1958 of 2000 keys stayed on the replica.
#[test]
fn expiries_around_a_blocked_reader_reach_the_replica() {
    let (p, r) = kept_and_evicted();
    let (mut pc, mut rc) = (p.conn(), r.conn());
    let waiting = blocked_on_kept_and_evicted(&p, &mut pc);
    let mut fill = redis::pipe();
    for i in 0..1000 {
        fill.cmd("SET")
            .arg(format!("k{i}"))
            .arg("v")
            .arg("PX")
            .arg(300)
            .ignore();
    }
    fill.cmd("PEXPIRE").arg("evicted").arg(300).ignore();
    let _: () = fill.query(&mut pc).expect("fill");
    assert_eq!(
        waiting.join().expect("reader thread"),
        "UNBLOCKED the stream key no longer exists"
    );
    wait_for(30, "the primary to expire every key but kept", || {
        let n: i64 = cmd("DBSIZE").query(&mut pc).expect("DBSIZE");
        (n == 1).then_some(())
    });
    replica_acked(&mut pc);
    let n: i64 = cmd("DBSIZE").query(&mut rc).expect("DBSIZE");
    assert_eq!(n, 1, "keys the primary expired are still on the replica");
}
