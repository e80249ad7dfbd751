//! Persistence: policies in RDB and AOF (with and without RDB preamble, before and after a
//! rewrite), the AOF shape of a dead-letter move, kill -9 consistency, FLUSHALL, DEL, SWAPDB, and
//! policies saved by older versions of the module (the RDB files of tests/fixtures/).

use reclaim_testkit::*;

const BIN_DLQ: &[u8] = b"dlq\x00\x01\xff";
const BIN_CLAIMANT: &[u8] = b"c\xff\n";
/// A worker's consumer name, binary too.
const BIN_WORKER: &[u8] = b"w\x00\xfe";
const TAG_STREAM: &[u8] = b"{tag}\xff\x00s";
const TAG_GROUP: &[u8] = b"\x00";

/// One policy and where it lives.
#[derive(Debug, Clone)]
struct Fixture {
    db: i64,
    stream: Vec<u8>,
    group: Vec<u8>,
    policy: PolicyView,
}

fn fx(db: i64, stream: &[u8], group: &[u8], policy: PolicyView) -> Fixture {
    Fixture {
        db,
        stream: stream.to_vec(),
        group: group.to_vec(),
        policy,
    }
}

/// Policies in db 0 and db 3, with binary names, with and without DLQ; the same stream and
/// group names in both databases with different policies; two groups of one stream.
fn fixtures() -> Vec<Fixture> {
    vec![
        fx(
            0,
            b"orders",
            b"workers",
            PolicyView::new(200, 20)
                .with_claimant(b"rescuer")
                .with_count(7),
        ),
        fx(0, b"orders", b"audit", PolicyView::new(3_600_000, 5_000)),
        fx(
            0,
            BIN_STREAM,
            BIN_GROUP,
            PolicyView::new(150, 20)
                .with_dlq(BIN_DLQ, 3)
                .with_claimant(BIN_CLAIMANT)
                .with_count(5),
        ),
        fx(
            3,
            b"orders",
            b"workers",
            // FORGET-IDLE (encoding version 5) through every save and load.
            PolicyView::new(250, 20)
                .with_dlq(b"orders:dlq", 2)
                .with_forget_idle(3_600_000),
        ),
        fx(3, TAG_STREAM, TAG_GROUP, PolicyView::new(100, 30)),
    ]
}

fn set_all(s: &Server, fixtures: &[Fixture]) {
    for f in fixtures {
        let mut c = s.conn_db(f.db);
        set_policy(&mut c, &f.stream, &f.group, &f.policy);
    }
}

/// Every policy is GET-able in its database and nowhere else, LIST of each database shows
/// exactly its policies (ordered by key, then group), and INFO counts them all.
fn check_all(s: &Server, fixtures: &[Fixture]) {
    for f in fixtures {
        let mut c = s.conn_db(f.db);
        assert_eq!(
            get_policy(&mut c, &f.stream, &f.group).as_ref(),
            Some(&f.policy),
            "GET {:?} {:?} in db {}",
            String::from_utf8_lossy(&f.stream),
            String::from_utf8_lossy(&f.group),
            f.db
        );
    }
    for db in [0, 1, 3] {
        let mut c = s.conn_db(db);
        let mut want: Vec<(Vec<u8>, Vec<u8>, PolicyView)> = fixtures
            .iter()
            .filter(|f| f.db == db)
            .map(|f| (f.stream.clone(), f.group.clone(), f.policy.clone()))
            .collect();
        want.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        assert_eq!(list_policies(&mut c), want, "LIST in db {db}");
    }
    // A policy of db 3 is not visible from db 1, which has none.
    let mut c1 = s.conn_db(1);
    assert_eq!(get_policy(&mut c1, b"orders", b"workers"), None);
    let mut c = s.conn();
    assert_eq!(reclaim_info(&mut c, "policies"), fixtures.len() as i64);
}

/// Proves that the policy `f` is swept on this server now: a fresh dead consumer's new entries
/// get moved to the policy's claimant, their counts unchanged. `f` must have no DLQ.
fn probe_sweep(s: &Server, f: &Fixture, tag: &str) {
    assert!(f.policy.dlq.is_none());
    let mut c = s.conn_db(f.db);
    ensure_group(&mut c, &f.stream, &f.group);
    let ids = add_entries(&mut c, &f.stream, tag, 2);
    let dead = format!("dead-{tag}");
    read_group(&mut c, &f.stream, &f.group, dead.as_bytes());
    wait_for(10, &format!("probe {tag}: entries moved"), || {
        let p = pending_raw(&mut c, &f.stream, &f.group);
        ids.iter()
            .all(|id| {
                p.iter()
                    .any(|(pid, owner, n)| pid == id && *owner == f.policy.claimant && *n == 1)
            })
            .then_some(())
    });
}

/// `(db, RECLAIM.POLICY SET stream group <every option>)` of each fixture, in order.
fn set_commands(fixtures: &[Fixture]) -> Vec<(i64, Vec<Vec<u8>>)> {
    fixtures
        .iter()
        .map(|f| {
            let mut a = vec![
                b"RECLAIM.POLICY".to_vec(),
                b"SET".to_vec(),
                f.stream.clone(),
                f.group.clone(),
            ];
            a.extend(f.policy.set_args());
            (f.db, a)
        })
        .collect()
}

fn policy_key_exists(s: &Server, db: i64, stream: &[u8]) -> bool {
    // reclaim:policy:{TAG}:STREAM with TAG = the stream name for names without braces.
    let mut key = b"reclaim:policy:{".to_vec();
    key.extend_from_slice(stream);
    key.extend_from_slice(b"}:");
    key.extend_from_slice(stream);
    let mut c = s.conn_db(db);
    let n: i64 = cmd("EXISTS").arg(key).query(&mut c).expect("EXISTS");
    n == 1
}

/// Six fields of one DLQ record: reclaim-id, n, reclaim-stream, -group, -consumer, -deliveries.
type Fields6 = (Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>, Vec<u8>);

#[test]
fn policies_survive_save_and_restart_and_are_swept_after_it() {
    let mut s = Server::new();
    let fixtures = fixtures();
    let mut c0 = s.conn_db(0);
    let mut c3 = s.conn_db(3);

    // Streams and groups, no pending entries yet.
    create_group(&mut c0, b"orders", b"workers");
    let o0 = add_entries(&mut c0, b"orders", "o0", 4);
    create_group(&mut c0, BIN_STREAM, BIN_GROUP);
    let b0 = add_entries(&mut c0, BIN_STREAM, "b", 3);
    create_group(&mut c3, b"orders", b"workers");
    let o3 = add_entries(&mut c3, b"orders", "o3", 3);

    // Dead consumers read everything, the policies appear and writes are paused, all in one
    // transaction: the sweeper cannot act before the snapshot (it never runs while paused).
    let mut tx = redis::pipe();
    tx.atomic();
    tx.add_command(read_group_cmd(b"orders", b"workers", b"dead"))
        .ignore();
    tx.add_command(read_group_cmd(BIN_STREAM, BIN_GROUP, b"dead"))
        .ignore();
    tx.add_command(set_deliveries_cmd(
        BIN_STREAM,
        BIN_GROUP,
        b"dead",
        &b0[..1],
        10,
    ))
    .ignore();
    for f in fixtures.iter().filter(|f| f.db == 0) {
        tx.add_command(set_policy_cmd(&f.stream, &f.group, &f.policy))
            .ignore();
    }
    tx.cmd("SELECT").arg(3).ignore();
    tx.add_command(read_group_cmd(b"orders", b"workers", b"dead3"))
        .ignore();
    tx.add_command(set_deliveries_cmd(
        b"orders",
        b"workers",
        b"dead3",
        &o3[2..],
        5,
    ))
    .ignore();
    for f in fixtures.iter().filter(|f| f.db == 3) {
        tx.add_command(set_policy_cmd(&f.stream, &f.group, &f.policy))
            .ignore();
    }
    tx.cmd("SELECT").arg(0).ignore();
    tx.cmd("CLIENT")
        .arg("PAUSE")
        .arg(120_000)
        .arg("WRITE")
        .ignore();
    let () = tx.query(&mut c0).expect("transaction");

    check_all(&s, &fixtures);
    let before0 = pending_raw(&mut c0, b"orders", b"workers");
    assert_eq!(
        before0,
        o0.iter()
            .map(|id| (id.clone(), b"dead".to_vec(), 1))
            .collect::<Vec<_>>()
    );
    let before3 = pending_raw(&mut c3, b"orders", b"workers");
    assert_eq!(
        before3,
        vec![
            (o3[0].clone(), b"dead3".to_vec(), 1),
            (o3[1].clone(), b"dead3".to_vec(), 1),
            (o3[2].clone(), b"dead3".to_vec(), 5),
        ]
    );

    let _: () = cmd("SAVE").query(&mut c0).expect("SAVE");
    s.restart();
    assert!(s.dir.path().join("dump.rdb").exists());
    assert!(!s.dir.path().join("appendonlydir").exists());
    check_all(&s, &fixtures);

    // The restarted server sweeps what it loaded.
    let mut c0 = s.conn_db(0);
    let mut c3 = s.conn_db(3);
    // db 0, orders/workers (no DLQ): the dead consumer's entries go to "rescuer", once each.
    let p = wait_for(10, "db 0 orders entries moved to rescuer", || {
        let p = pending_raw(&mut c0, b"orders", b"workers");
        p.iter().all(|(_, o, _)| o == b"rescuer").then_some(p)
    });
    assert_eq!(p.iter().map(|e| e.0.clone()).collect::<Vec<_>>(), o0);
    assert!(p.iter().all(|e| e.2 == 1), "{p:?}");
    assert_eq!(
        int_field(&stats(&mut c0, "orders", "workers"), "claimed"),
        4
    );

    // db 0, binary names with DLQ (MAX-DELIVERIES 3): the poison entry (10 deliveries) is
    // dead-lettered at once; the other two are moved to the inbox and taken by a failing worker
    // twice (counts 2, 3), then dead-lettered: a stable end state.
    for want in [2, 3] {
        let got = take_inbox(&mut c0, BIN_STREAM, BIN_GROUP, BIN_CLAIMANT, BIN_WORKER, 2);
        assert!(got.iter().all(|(_, n)| *n == want), "{got:?}");
    }
    let dlq = wait_for(10, "binary stream fully dead-lettered", || {
        let d = xrange(&mut c0, BIN_DLQ);
        (d.len() == 3 && pending_raw(&mut c0, BIN_STREAM, BIN_GROUP).is_empty()).then_some(d)
    });
    let mut got: Vec<Fields6> = dlq
        .iter()
        .map(|e| {
            (
                entry_field(e, "reclaim-id"),
                entry_field(e, "n"),
                entry_field(e, "reclaim-stream"),
                entry_field(e, "reclaim-group"),
                entry_field(e, "reclaim-consumer"),
                entry_field(e, "reclaim-deliveries"),
            )
        })
        .collect();
    got.sort();
    let mut want: Vec<_> = b0
        .iter()
        .enumerate()
        .map(|(i, id)| {
            (
                id.as_bytes().to_vec(),
                format!("b-{i}").into_bytes(),
                BIN_STREAM.to_vec(),
                BIN_GROUP.to_vec(),
                if i == 0 {
                    b"dead".to_vec()
                } else {
                    BIN_WORKER.to_vec()
                },
                if i == 0 {
                    b"10".to_vec()
                } else {
                    b"3".to_vec()
                },
            )
        })
        .collect();
    want.sort();
    assert_eq!(got, want);
    let st: Value = cmd("RECLAIM.STATS")
        .arg(BIN_STREAM)
        .arg(BIN_GROUP)
        .query(&mut c0)
        .unwrap();
    assert_eq!(int_field(&st, "claimed"), 4);
    assert_eq!(int_field(&st, "redelivered"), 4);
    assert_eq!(int_field(&st, "dead-lettered"), 3);

    // db 3, same stream and group names, MAX-DELIVERIES 2: poison dead-lettered, the others
    // moved to the inbox, taken once by a failing worker (count 2) and then dead-lettered.
    let got = take_inbox(&mut c3, "orders", "workers", "reclaim", "w3", 2);
    assert!(got.iter().all(|(_, n)| *n == 2), "{got:?}");
    let dlq3 = wait_for(10, "db 3 orders fully dead-lettered", || {
        let d = xrange(&mut c3, b"orders:dlq");
        (d.len() == 3 && pending_raw(&mut c3, b"orders", b"workers").is_empty()).then_some(d)
    });
    let mut ids: Vec<Vec<u8>> = dlq3.iter().map(|e| entry_field(e, "reclaim-id")).collect();
    ids.sort();
    let mut want_ids: Vec<Vec<u8>> = o3.iter().map(|i| i.as_bytes().to_vec()).collect();
    want_ids.sort();
    assert_eq!(ids, want_ids);
    for e in &dlq3 {
        let id = String::from_utf8(entry_field(e, "reclaim-id")).unwrap();
        let (consumer, n): (&[u8], &[u8]) = if id == o3[2] {
            (b"dead3", b"5")
        } else {
            (b"w3", b"2")
        };
        assert_eq!(entry_field(e, "reclaim-consumer"), consumer, "{e:?}");
        assert_eq!(entry_field(e, "reclaim-deliveries"), n, "{e:?}");
    }
    let st3 = stats(&mut c3, "orders", "workers");
    assert_eq!(int_field(&st3, "claimed"), 2);
    assert_eq!(int_field(&st3, "redelivered"), 2);
    assert_eq!(int_field(&st3, "dead-lettered"), 3);
    // db 0 has no DLQ stream of that name: db 3's policy never wrote into db 0.
    assert_eq!(xlen(&mut c0, b"orders:dlq"), 0);
}

#[test]
fn policies_survive_aof_restart_and_rewrite_with_rdb_preamble() {
    let mut s = Server::start(&["--appendonly", "yes"]);
    let fixtures = fixtures();
    set_all(&s, &fixtures[..1]);
    // One policy set with most options left out, in lower case: the AOF gets it with every
    // option explicit.
    let mut c = s.conn();
    let _: () = cmd("RECLAIM.POLICY")
        .arg("SET")
        .arg("orders")
        .arg("audit")
        .arg("min-idle")
        .arg(3_600_000)
        .arg("interval")
        .arg(5_000)
        .query(&mut c)
        .expect("RECLAIM.POLICY SET");
    set_all(&s, &fixtures[2..]);
    check_all(&s, &fixtures);
    let mut db = 0i64;
    let mut logged: Vec<(i64, Vec<Vec<u8>>)> = Vec::new();
    for c in incr_commands(&s) {
        if is_cmd(&c, "SELECT") {
            db = String::from_utf8_lossy(&c[1]).parse().expect("SELECT db");
        } else if is_cmd(&c, "RECLAIM.POLICY") {
            logged.push((db, c));
        }
    }
    assert_eq!(
        logged,
        set_commands(&fixtures),
        "RECLAIM.POLICY commands in the AOF"
    );

    // Restart from the AOF: the policies were replayed from RECLAIM.POLICY SET commands.
    s.shutdown();
    s.restart();
    assert!(!s.dir.path().join("dump.rdb").exists());
    check_all(&s, &fixtures);
    probe_sweep(&s, &fixtures[0], "after-aof-0");
    probe_sweep(&s, &fixtures[4], "after-aof-3");

    // Rewrite (RDB preamble: the base is an RDB holding the policy values), restart.
    let mut c = s.conn();
    let _: Value = cmd("BGREWRITEAOF").query(&mut c).expect("BGREWRITEAOF");
    wait_aof_rewrite_done(&mut c);
    let files = s.aof_manifest_files();
    let bases: Vec<&(String, String, Vec<u8>)> = files.iter().filter(|f| f.1 == "b").collect();
    assert_eq!(
        bases.len(),
        1,
        "{:?}",
        files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    assert!(bases[0].0.ends_with(".base.rdb"), "{}", bases[0].0);
    assert!(bases[0].2.starts_with(b"REDIS"));
    s.shutdown();
    s.restart();
    check_all(&s, &fixtures);
    probe_sweep(&s, &fixtures[0], "after-rewrite-0");
    probe_sweep(&s, &fixtures[4], "after-rewrite-3");
}

#[test]
fn aof_rewrite_without_rdb_preamble_holds_policy_set_commands() {
    let mut s = Server::start(&["--appendonly", "yes", "--aof-use-rdb-preamble", "no"]);
    let mut fixtures = fixtures();
    set_all(&s, &fixtures);
    let mut c = s.conn();
    let _: Value = cmd("BGREWRITEAOF").query(&mut c).expect("BGREWRITEAOF");
    wait_aof_rewrite_done(&mut c);

    let files = s.aof_manifest_files();
    let bases: Vec<&(String, String, Vec<u8>)> = files.iter().filter(|f| f.1 == "b").collect();
    assert_eq!(bases.len(), 1);
    assert!(bases[0].0.ends_with(".base.aof"), "{}", bases[0].0);
    // The base holds one RECLAIM.POLICY SET per policy, every option explicit, after a SELECT
    // of the policy's database.
    let mut db = 0i64;
    let mut got: Vec<(i64, Vec<Vec<u8>>)> = Vec::new();
    for c in parse_aof(&bases[0].2) {
        if is_cmd(&c, "SELECT") {
            db = String::from_utf8_lossy(&c[1]).parse().expect("SELECT db");
        } else if is_cmd(&c, "RECLAIM.POLICY") {
            got.push((db, c));
        }
    }
    let mut want = set_commands(&fixtures);
    got.sort();
    want.sort();
    assert_eq!(got, want);
    // The increment after the rewrite is empty of policy commands: a restart now depends on
    // the base alone.
    for (name, ty, data) in &files {
        if ty == "i" {
            assert!(
                !parse_aof(data).iter().any(|c| is_cmd(c, "RECLAIM.POLICY")),
                "{name}"
            );
        }
    }

    s.shutdown();
    s.restart();
    check_all(&s, &fixtures);
    probe_sweep(&s, &fixtures[4], "after-rewrite");

    // Changes after the rewrite go to the increment and are replayed over the base.
    fixtures[0].policy = PolicyView::new(90, 15).with_claimant(b"other");
    set_all(&s, &fixtures[..1]);
    let mut c3 = s.conn_db(3);
    assert_eq!(del_policy(&mut c3, TAG_STREAM, TAG_GROUP), 1);
    let removed = fixtures.remove(4);
    s.shutdown();
    s.restart();
    check_all(&s, &fixtures);
    let mut c3 = s.conn_db(3);
    assert_eq!(get_policy(&mut c3, &removed.stream, &removed.group), None);
}

/// The AOF commands of the server's increment files, in order.
fn incr_commands(s: &Server) -> Vec<Vec<Vec<u8>>> {
    s.aof_manifest_files()
        .iter()
        .filter(|f| f.1 == "i")
        .flat_map(|f| parse_aof(&f.2))
        .collect()
}

#[test]
fn dead_letter_move_is_one_multi_exec_block_in_the_aof() {
    let s = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.conn();
    create_group(&mut c, b"jobs", b"g");
    let ids = add_entries(&mut c, b"jobs", "j", 5);
    read_group(&mut c, b"jobs", b"g", b"dead");
    let poison: Vec<String> = vec![ids[0].clone(), ids[2].clone(), ids[4].clone()];
    set_deliveries(&mut c, b"jobs", b"g", b"dead", &poison, 9);
    // Never stale (no claims): only the three over-delivered entries move.
    set_policy(
        &mut c,
        b"jobs",
        b"g",
        &PolicyView::new(3_600_000, 20).with_dlq(b"jobs:dlq", 3),
    );
    let dlq = wait_for(10, "three dead-letter moves", || {
        let d = xrange(&mut c, b"jobs:dlq");
        (d.len() == 3).then_some(d)
    });
    assert_eq!(
        pending_raw(&mut c, b"jobs", b"g"),
        vec![
            (ids[1].clone(), b"dead".to_vec(), 1),
            (ids[3].clone(), b"dead".to_vec(), 1)
        ]
    );

    // appendfsync always: everything before the last reply is in the file.
    let cmds = incr_commands(&s);
    let boundary = |c: &Vec<Vec<u8>>| is_cmd(c, "MULTI") || is_cmd(c, "EXEC");
    let mut moved: Vec<(String, String)> = Vec::new();
    for (i, c) in cmds.iter().enumerate() {
        if !(is_cmd(c, "XADD") && c[1] == b"jobs:dlq") {
            continue;
        }
        let xadd_id = String::from_utf8(c[2].clone()).unwrap();
        let e: Entry = (xadd_id.clone(), c[3..].to_vec());
        let src = String::from_utf8(entry_field(&e, "reclaim-id")).unwrap();
        let start = (0..i)
            .rev()
            .find(|&j| boundary(&cmds[j]))
            .unwrap_or_else(|| panic!("XADD of {src} is not inside MULTI/EXEC"));
        assert!(
            is_cmd(&cmds[start], "MULTI"),
            "XADD of {src}: the block before it ends with EXEC, so the XADD is outside MULTI"
        );
        let end = (i + 1..cmds.len())
            .find(|&k| boundary(&cmds[k]))
            .unwrap_or_else(|| panic!("XADD of {src}: no EXEC after it"));
        assert!(
            is_cmd(&cmds[end], "EXEC"),
            "XADD of {src}: MULTI follows before EXEC"
        );
        let acked = cmds[i + 1..end].iter().any(|a| {
            is_cmd(a, "XACK")
                && a[1] == b"jobs"
                && a[2] == b"g"
                && a[3..].contains(&src.clone().into_bytes())
        });
        assert!(
            acked,
            "XADD of {src}: no XACK jobs g {src} after it in its MULTI block: {:?}",
            cmds[start..=end]
                .iter()
                .map(|c| String::from_utf8_lossy(&c.join(&b' ')).into_owned())
                .collect::<Vec<_>>()
        );
        moved.push((xadd_id, src));
    }
    moved.sort();
    let mut want: Vec<(String, String)> = dlq
        .iter()
        .map(|e| {
            (
                e.0.clone(),
                String::from_utf8(entry_field(e, "reclaim-id")).unwrap(),
            )
        })
        .collect();
    want.sort();
    assert_eq!(moved, want, "the AOF holds exactly the three moves");
    let mut src: Vec<String> = want.into_iter().map(|w| w.1).collect();
    src.sort();
    assert_eq!(src, poison);
}

/// Dead-letter moves in progress, a server killed with SIGKILL (`appendfsync always`) and
/// restarted from its AOF, twice: every entry is pending or in the DLQ, never both, and ends in the
/// DLQ exactly once, with the count its deliveries reached (the poison entries 9; the others 3:
/// their first delivery, then two hand-overs by a failing worker after the sweep moved them to
/// the inbox, which the AOF keeps across the kills).
#[test]
fn kill_9_keeps_pel_and_dlq_consistent() {
    let mut s = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let mut c = s.conn();
    create_group(&mut c, b"jobs", b"g");
    let ids = add_entries(&mut c, b"jobs", "j", 12);
    read_group(&mut c, b"jobs", b"g", b"dead");
    let poison: Vec<String> = ids.iter().step_by(2).cloned().collect();
    set_deliveries(&mut c, b"jobs", b"g", b"dead", &poison, 9);
    set_policy(
        &mut c,
        b"jobs",
        b"g",
        &PolicyView::new(150, 10)
            .with_dlq(b"jobs:dlq", 3)
            .with_count(2),
    );
    wait_for(10, "first dead-letter moves", || {
        (xlen(&mut c, b"jobs:dlq") >= 1).then_some(())
    });

    // Freeze the sweeper, take the state, kill -9.
    let _: () = cmd("CLIENT")
        .arg("PAUSE")
        .arg(120_000)
        .arg("WRITE")
        .query(&mut c)
        .unwrap();
    let pel = pending_raw(&mut c, b"jobs", b"g");
    let dlq = xrange(&mut c, b"jobs:dlq");
    assert_partition(&pel, &dlq, &ids);
    s.kill();

    // Restart as a replica of nobody: it loads its AOF and never sweeps, so what we read is
    // exactly what was loaded.
    let nowhere = free_port().to_string();
    s.args
        .extend(["--replicaof", "127.0.0.1", nowhere.as_str()].map(String::from));
    s.restart();
    let mut c = s.conn();
    assert_eq!(pending_raw(&mut c, b"jobs", b"g"), pel);
    assert_eq!(xrange(&mut c, b"jobs:dlq"), dlq);

    // Promote it: sweeping resumes. The sweep moves the six other entries to the inbox, and a
    // worker whose handler fails takes them twice (count 3); they are dead-lettered as they go
    // stale. Kill -9 again at an arbitrary moment of those moves.
    promote(&mut c);
    for want in [2, 3] {
        let got = take_inbox(&mut c, "jobs", "g", "reclaim", "w", 6);
        assert!(got.iter().all(|(_, n)| *n == want), "{got:?}");
    }
    let dlq_len = xlen(&mut c, b"jobs:dlq");
    wait_for(10, "dead-letter moves of the worker's entries", || {
        (xlen(&mut c, b"jobs:dlq") > dlq_len).then_some(())
    });
    s.kill();
    s.restart();
    let mut c = s.conn();
    let pel = pending_raw(&mut c, b"jobs", b"g");
    let dlq = xrange(&mut c, b"jobs:dlq");
    assert_partition(&pel, &dlq, &ids);

    // Finish as a primary: every entry ends in the DLQ exactly once.
    promote(&mut c);
    let dlq = wait_for(15, "everything dead-lettered", || {
        let pel = pending_raw(&mut c, b"jobs", b"g");
        let d = xrange(&mut c, b"jobs:dlq");
        pel.is_empty().then_some(d)
    });
    assert_partition(&[], &dlq, &ids);
    for e in &dlq {
        let id = String::from_utf8(entry_field(e, "reclaim-id")).unwrap();
        let want: &[u8] = if poison.contains(&id) { b"9" } else { b"3" };
        assert_eq!(entry_field(e, "reclaim-deliveries"), want, "{e:?}");
    }
}

#[test]
fn flushall_removes_policies_and_del_of_the_stream_keeps_them() {
    let s = Server::new();
    let mut c0 = s.conn_db(0);
    let mut c3 = s.conn_db(3);
    let p = PolicyView::new(100, 20).with_claimant(b"rescuer");
    let pd = PolicyView::new(100, 20).with_dlq(b"dlq", 4);
    set_policy(&mut c0, b"orders", b"workers", &p);
    set_policy(&mut c0, BIN_STREAM, BIN_GROUP, &pd);
    set_policy(&mut c3, b"orders", b"workers", &pd);
    assert_eq!(reclaim_info(&mut c0, "policies"), 3);

    // DEL of the stream: the policy stays, and works on the stream when it comes back.
    create_group(&mut c0, b"orders", b"workers");
    add_entries(&mut c0, b"orders", "a", 2);
    let n: i64 = cmd("DEL").arg("orders").query(&mut c0).unwrap();
    assert_eq!(n, 1);
    assert_eq!(get_policy(&mut c0, b"orders", b"workers"), Some(p.clone()));
    assert_eq!(list_policies(&mut c0).len(), 2);
    assert!(policy_key_exists(&s, 0, b"orders"));
    assert_eq!(
        str_field(&stats(&mut c0, "orders", "workers"), "status"),
        "waiting: no stream orders"
    );
    create_group(&mut c0, b"orders", b"workers");
    let ids = add_entries(&mut c0, b"orders", "b", 3);
    read_group(&mut c0, b"orders", b"workers", b"dead");
    wait_for(10, "recreated stream swept", || {
        let pl = pending_raw(&mut c0, b"orders", b"workers");
        (pl.len() == 3 && pl.iter().all(|e| e.1 == b"rescuer")).then_some(())
    });
    assert_eq!(
        pending_raw(&mut c0, b"orders", b"workers")
            .iter()
            .map(|e| e.0.clone())
            .collect::<Vec<_>>(),
        ids
    );

    // FLUSHALL: every policy of every database is gone.
    let _: () = cmd("FLUSHALL").query(&mut c0).unwrap();
    assert_eq!(get_policy(&mut c0, b"orders", b"workers"), None);
    assert_eq!(get_policy(&mut c0, BIN_STREAM, BIN_GROUP), None);
    assert_eq!(get_policy(&mut c3, b"orders", b"workers"), None);
    assert_eq!(list_policies(&mut c0), vec![]);
    assert_eq!(list_policies(&mut c3), vec![]);
    assert_eq!(
        error_of(&mut c0, cmd("RECLAIM.STATS").arg("orders").arg("workers")),
        "ERR no reclaim policy for this key and group"
    );
    wait_for(10, "INFO reclaim_policies 0 after FLUSHALL", || {
        (reclaim_info(&mut c0, "policies") == 0).then_some(())
    });
    let dbsize: i64 = cmd("DBSIZE").query(&mut c3).unwrap();
    assert_eq!(dbsize, 0);

    // A policy set again starts afresh.
    set_policy(&mut c0, b"orders", b"workers", &p);
    assert_eq!(reclaim_info(&mut c0, "policies"), 1);
    assert_eq!(
        int_field(&stats(&mut c0, "orders", "workers"), "claimed"),
        0
    );
}

#[test]
fn swapdb_moves_policies_with_their_database() {
    let s = Server::new();
    let mut c0 = s.conn_db(0);
    let mut c1 = s.conn_db(1);
    let p = PolicyView::new(100, 20).with_claimant(b"rescuer");
    let q = PolicyView::new(3_600_000, 1_000);
    set_policy(&mut c0, b"orders", b"workers", &p);
    set_policy(&mut c1, b"other", b"g2", &q);
    create_group(&mut c0, b"orders", b"workers");
    let first = add_entries(&mut c0, b"orders", "first", 2);
    read_group(&mut c0, b"orders", b"workers", b"dead");
    wait_for(10, "db 0 swept before SWAPDB", || {
        let pl = pending_raw(&mut c0, b"orders", b"workers");
        (pl.len() == 2 && pl.iter().all(|e| e.1 == b"rescuer")).then_some(())
    });

    let _: () = cmd("SWAPDB").arg(0).arg(1).query(&mut c0).unwrap();
    assert_eq!(get_policy(&mut c1, b"orders", b"workers"), Some(p.clone()));
    assert_eq!(get_policy(&mut c0, b"orders", b"workers"), None);
    assert_eq!(get_policy(&mut c0, b"other", b"g2"), Some(q.clone()));
    assert_eq!(get_policy(&mut c1, b"other", b"g2"), None);
    assert_eq!(
        list_policies(&mut c1),
        vec![(b"orders".to_vec(), b"workers".to_vec(), p.clone())]
    );
    assert_eq!(
        list_policies(&mut c0),
        vec![(b"other".to_vec(), b"g2".to_vec(), q.clone())]
    );
    assert_eq!(reclaim_info(&mut c0, "policies"), 2);
    assert_eq!(
        error_of(&mut c0, cmd("RECLAIM.STATS").arg("orders").arg("workers")),
        "ERR no reclaim policy for this key and group"
    );

    // The sweeper keeps working on the stream, now in db 1.
    let claimed_before = int_field(&stats(&mut c1, "orders", "workers"), "claimed");
    assert!(claimed_before >= 2, "{claimed_before}");
    let second = add_entries(&mut c1, b"orders", "second", 3);
    read_group(&mut c1, b"orders", b"workers", b"dead2");
    wait_for(10, "db 1 swept after SWAPDB", || {
        let pl = pending_raw(&mut c1, b"orders", b"workers");
        second
            .iter()
            .all(|id| pl.iter().any(|e| &e.0 == id && e.1 == b"rescuer"))
            .then_some(())
    });
    let pl = pending_raw(&mut c1, b"orders", b"workers");
    let mut all = first.clone();
    all.extend(second.iter().cloned());
    assert_eq!(pl.iter().map(|e| e.0.clone()).collect::<Vec<_>>(), all);
    assert!(int_field(&stats(&mut c1, "orders", "workers"), "claimed") >= claimed_before + 3);
    assert_eq!(
        str_field(&stats(&mut c1, "orders", "workers"), "status"),
        "active"
    );
}

// ---------------------------------------------------------------------------------------------
// Policies saved by older versions (tests/fixtures/*.rdb)
// ---------------------------------------------------------------------------------------------

/// The policy each fixture holds on (`orders`, `workers`), as the module that saved it in policy
/// encoding `version` knew it: `RECLAIM.POLICY SET orders workers MIN-IDLE 1234 MAX-DELIVERIES 2
/// DLQ orders:dlq CLAIMANT rescuer COUNT 5 INTERVAL 77`, from version 2 on with `BACKOFF
/// EXPONENTIAL 9000 LIVENESS 500`, in version 3 with `STORM 10 60000` and then `RECLAIM.POLICY
/// PAUSE orders workers`.
fn saved_policy(version: u32) -> PolicyView {
    let mut p = PolicyView::new(1234, 77)
        .with_dlq(b"orders:dlq", 2)
        .with_claimant(b"rescuer")
        .with_count(5);
    if version >= 2 {
        p = p.with_backoff("EXPONENTIAL 9000").with_liveness(500);
    }
    if version >= 3 {
        p = p.with_storm(10, 60_000).with_state("paused");
    }
    p
}

/// The policy on (`orders`, `workers`) of a server started from a fixture.
fn loaded_policy(c: &mut Connection, fixture: &str) -> PolicyView {
    get_policy(c, b"orders", b"workers").unwrap_or_else(|| panic!("the policy of {fixture}"))
}

#[test]
fn a_policy_written_by_0_1_0_loads_unchanged() {
    // policies-0.1.0.rdb: saved by 0.1.0 (policy encoding version 1).
    let s = Server::from_fixture("policies-0.1.0.rdb");
    let mut c = s.conn();
    assert_eq!(loaded_policy(&mut c, "0.1.0"), saved_policy(1));
    assert_eq!(reclaim_info(&mut c, "policies"), 1);
}

#[test]
fn a_policy_saved_in_encoding_version_2_loads_active_without_storm() {
    // policies-encoding-2.rdb: saved by the module before STORM and the state (policy encoding
    // version 2).
    let s = Server::from_fixture("policies-encoding-2.rdb");
    let mut c = s.conn();
    let p = loaded_policy(&mut c, "version 2");
    assert_eq!(p, saved_policy(2));
    assert_eq!(p.state, b"active");
    assert_eq!(p.storm, None);
}

#[test]
fn a_policy_saved_in_encoding_version_3_loads_without_retention_or_tombstones() {
    // policies-encoding-3.rdb: saved by the module before DLQ-MAXLEN, DLQ-MAXAGE and TOMBSTONES
    // (policy encoding version 3).
    let mut s = Server::from_fixture("policies-encoding-3.rdb");
    let mut c = s.conn();
    let p = loaded_policy(&mut c, "version 3");
    assert_eq!(p, saved_policy(3));
    assert_eq!((p.dlq_maxlen, p.dlq_maxage, p.tombstones), (0, 0, false));
    // Saved again, it is version 4 and loads the same.
    let _: () = q(&mut c, &["SAVE"]);
    drop(c);
    s.kill();
    s.restart();
    let mut c = s.conn();
    assert_eq!(get_policy(&mut c, b"orders", b"workers"), Some(p));
}
