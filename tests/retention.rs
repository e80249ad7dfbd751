//! DLQ retention and tombstones: `DLQ-MAXLEN` and `DLQ-MAXAGE` trim the DLQ (approximately,
//! `XTRIM ... ~`) in the step that appends to it, counted in `dlq-trimmed`; `TOMBSTONES yes` gives
//! each pending entry deleted from the stream a DLQ record (`reclaim-reason deleted`, no payload)
//! with its XACK, counted in `tombstones`. Both reach replicas and the AOF inside the moves'
//! MULTI/EXEC; the options survive RDB, AOF rewrite and EXPORT/IMPORT (policies saved before them,
//! encoding version 3, load with them off: tests/persistence.rs).

use reclaim_testkit::*;

/// The text of field `f` of a DLQ entry.
fn field_text(e: &Entry, f: &str) -> String {
    String::from_utf8(entry_field(e, f)).unwrap()
}

/// The field names of a stream entry, in stored order.
fn field_names(e: &Entry) -> Vec<String> {
    e.1.iter()
        .step_by(2)
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect()
}

/// The fields of a tombstone: the `reclaim-*` fields of a dead letter and nothing else.
const TOMBSTONE_FIELDS: [&str; 7] = [
    "reclaim-stream",
    "reclaim-group",
    "reclaim-id",
    "reclaim-consumer",
    "reclaim-deliveries",
    "reclaim-reason",
    "reclaim-moved-ms",
];

/// `n` poison entries of `s` (group g, consumer `dead`, delivery count 9), swept by a policy
/// that dead-letters at 3 and trims its DLQ to `DLQ-MAXLEN 100`: the DLQ ends near 100 entries,
/// the newest dead letters, and `dlq-trimmed` counts exactly what went.
#[test]
fn dlq_maxlen_keeps_the_dlq_near_its_length_and_counts_what_it_trims() {
    let s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"jobs", b"g");
    let ids = add_entries(&mut c, b"jobs", "j", 1000);
    read_group(&mut c, b"jobs", b"g", b"dead");
    set_deliveries(&mut c, b"jobs", b"g", b"dead", &ids, 9);
    // Steps of 50 entries, one every timer tick: many trims, and moments to look in between.
    set_policy_opts(
        &mut c,
        "jobs",
        "g",
        "MIN-IDLE 3600000 MAX-DELIVERIES 3 DLQ jobs:dlq DLQ-MAXLEN 100 COUNT 50 INTERVAL 20",
    );
    // While the moves run, an entry is never pending and dead-lettered at once (a DLQ append
    // and its XACK are one MULTI/EXEC); the PEL, the DLQ and the trimmed ones add up to 1000.
    wait_for(30, "every poison entry dead-lettered", || {
        let (pel, dlq) = pel_and_dlq(&mut c, "jobs", "g", "jobs:dlq");
        assert_disjoint(pel.iter().map(|p| p.0.as_str()), &dlq_ids(&dlq), "");
        pel.is_empty().then_some(())
    });
    let len = xlen(&mut c, "jobs:dlq");
    assert!(
        (100..400).contains(&len),
        "DLQ-MAXLEN 100 (~): at least 100 dead letters kept, well below 1000: {len}"
    );
    assert_eq!(stat(&mut c, "jobs", "g", "dead-lettered"), 1000);
    assert_eq!(stat(&mut c, "jobs", "g", "dlq-trimmed"), 1000 - len);
    assert_eq!(reclaim_info(&mut c, "dlq_trimmed"), 1000 - len);
    assert_eq!(stat(&mut c, "jobs", "g", "tombstones"), 0);
    // The oldest go first: what is left are the last dead letters, in order.
    let dlq = xrange(&mut c, b"jobs:dlq");
    assert_eq!(dlq_ids(&dlq), ids[1000 - len as usize..].to_vec());
    assert!(dlq
        .iter()
        .all(|e| field_text(e, "reclaim-reason") == "max-deliveries"));
}

/// `DLQ-MAXAGE`: dead letters older than the age are trimmed (`MINID ~`) by the next move, and
/// at the end of every pass even when nothing is appended; not by a paused policy.
#[test]
fn dlq_maxage_trims_old_dead_letters_on_moves_and_at_the_end_of_passes() {
    let s = Server::new();
    let mut c = s.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "stream-node-max-entries", "100"]);
    create_group(&mut c, b"jobs", b"g");
    quiet_policy(
        &mut c,
        "jobs",
        "g",
        "MIN-IDLE 3600000 MAX-DELIVERIES 3 DLQ jobs:dlq DLQ-MAXAGE 60000",
    );
    // 300 dead letters from 1970: three full stream nodes.
    old_dead_letters(&mut c, "jobs:dlq", 300);
    // A pass that moves nothing trims all the same (once a pass ends); SWEEP's reply says so.
    let v = run(&mut c, &["RECLAIM.SWEEP", "jobs", "g"]);
    assert_eq!(int_field(&v, "dead-lettered"), 0);
    assert_eq!(int_field(&v, "dlq-trimmed"), 300);
    assert_eq!(int_field(&v, "tombstones"), 0);
    assert_eq!(xlen(&mut c, "jobs:dlq"), 0);
    assert_eq!(stat(&mut c, "jobs", "g", "dlq-trimmed"), 300);
    assert_eq!(reclaim_info(&mut c, "dlq_trimmed"), 300);

    // By a move: 300 more (the DLQ written again from scratch).
    let _: i64 = q(&mut c, &["DEL", "jobs:dlq"]);
    old_dead_letters(&mut c, "jobs:dlq", 300);

    let ids = add_entries(&mut c, b"jobs", "j", 2);
    read_group(&mut c, b"jobs", b"g", b"dead");
    set_deliveries(&mut c, b"jobs", b"g", b"dead", &ids[..1], 9);
    assert_eq!(sweep(&mut c, "jobs", "g"), (0, 1, 0));
    let dlq = xrange(&mut c, b"jobs:dlq");
    assert_eq!(
        dlq_ids(&dlq),
        vec![ids[0].clone()],
        "only the new dead letter"
    );
    assert_eq!(stat(&mut c, "jobs", "g", "dlq-trimmed"), 600);
    assert_eq!(reclaim_info(&mut c, "dlq_trimmed"), 600);
    // A recent dead letter stays.
    set_deliveries(&mut c, b"jobs", b"g", b"dead", &ids[1..], 9);
    assert_eq!(sweep(&mut c, "jobs", "g"), (0, 1, 0));
    assert_eq!(xlen(&mut c, "jobs:dlq"), 2);
    assert_eq!(stat(&mut c, "jobs", "g", "dlq-trimmed"), 600);

    // The timer's passes trim too, with nothing pending: another policy, on its own DLQ.
    old_dead_letters(&mut c, "t:dlq", 300);
    create_group(&mut c, b"t", b"g");
    set_policy_opts(
        &mut c,
        "t",
        "g",
        "MIN-IDLE 100 DLQ t:dlq DLQ-MAXAGE 60000 INTERVAL 50",
    );
    wait_for(10, "a timer pass to trim the old dead letters", || {
        (xlen(&mut c, "t:dlq") == 0).then_some(())
    });
    assert_eq!(stat(&mut c, "t", "g", "dlq-trimmed"), 300);
    // A paused policy runs no pass, so trims nothing.
    let _: String = q(&mut c, &["RECLAIM.POLICY", "PAUSE", "t", "g"]);
    let _: i64 = q(&mut c, &["DEL", "t:dlq"]);
    old_dead_letters(&mut c, "t:dlq", 100);
    create_group(&mut c, b"witness", b"g");
    set_policy_opts(&mut c, "witness", "g", "MIN-IDLE 100 INTERVAL 50");
    wait_passes(&mut c, "witness", "g", 3);
    assert_eq!(xlen(&mut c, "t:dlq"), 100);
    assert_eq!(stat(&mut c, "t", "g", "dlq-trimmed"), 300);
}

/// A DLQ that is itself a policy's stream (a retry queue) is never trimmed by retention: its
/// entries may be pending work.
#[test]
fn retention_never_trims_a_dlq_that_is_a_policy_stream() {
    let s = Server::new();
    let mut c = s.conn();
    let _: () = q(&mut c, &["CONFIG", "SET", "stream-node-max-entries", "100"]);
    // `retry`: 250 entries from 1970, read by a worker (pending), under a policy of its own.
    create_group(&mut c, b"retry", b"g");
    old_dead_letters(&mut c, "retry", 250);
    read_group(&mut c, b"retry", b"g", b"w");
    quiet_policy(&mut c, "retry", "g", "MIN-IDLE 3600000");
    // `jobs` dead-letters into `retry`, with retention by age and by length.
    create_group(&mut c, b"jobs", b"g");
    quiet_policy(
        &mut c,
        "jobs",
        "g",
        "MIN-IDLE 3600000 MAX-DELIVERIES 1 DLQ retry DLQ-MAXAGE 1000 DLQ-MAXLEN 10",
    );
    let ids = add_entries(&mut c, b"jobs", "j", 1);
    read_group(&mut c, b"jobs", b"g", b"dead");
    set_deliveries(&mut c, b"jobs", b"g", b"dead", &ids, 3);
    // A pass that dead-letters (a trim after the append) and ends (the trim by age): none.
    let v = run(&mut c, &["RECLAIM.SWEEP", "jobs", "g"]);
    assert_eq!(int_field(&v, "dead-lettered"), 1);
    assert_eq!(int_field(&v, "dlq-trimmed"), 0);
    assert_eq!(xlen(&mut c, "retry"), 251);
    assert_eq!(pel_total(&mut c, "retry", "g"), 250);
}

/// `n` dead letters from 1970 (IDs are move times) in `dlq`: whole stream nodes with
/// `stream-node-max-entries 100`.
fn old_dead_letters(c: &mut Connection, dlq: &str, n: usize) {
    for i in 0..n {
        let id = format!("1000-{i}");
        let _: String = q(c, &["XADD", dlq, &id, "reclaim-reason", "max-deliveries"]);
    }
}

/// Pending entries of `jobs` (group g): 6 read by `w` (count 1), 2 of them over-delivered
/// (count 9); then the first two are trimmed away (`XTRIM MINID`), the fourth and the fifth
/// (over-delivered) deleted (`XDEL`); then the policy `opts` ([`quiet_policy`]: its one pass has
/// run). Returns the IDs and the deleted ones.
fn deleted_while_pending(c: &mut Connection, opts: &str) -> (Vec<String>, Vec<String>) {
    create_group(c, b"jobs", b"g");
    let ids = add_entries(c, b"jobs", "j", 6);
    read_group(c, b"jobs", b"g", b"w");
    set_deliveries(c, b"jobs", b"g", b"w", &[ids[4].clone(), ids[5].clone()], 9);
    let trimmed: i64 = q(c, &["XTRIM", "jobs", "MINID", &ids[2]]);
    assert_eq!(trimmed, 2);
    let deleted: i64 = q(c, &["XDEL", "jobs", &ids[3], &ids[4]]);
    assert_eq!(deleted, 2);
    let gone = vec![
        ids[0].clone(),
        ids[1].clone(),
        ids[3].clone(),
        ids[4].clone(),
    ];
    quiet_policy(c, "jobs", "g", opts);
    (ids, gone)
}

#[test]
fn tombstones_record_entries_deleted_while_pending() {
    let s = Server::new();
    let mut c = s.conn();
    // MIN-IDLE 1: every entry is stale; the sweep purges the trimmed ones, finds the deleted
    // ones when it moves or dead-letters them, moves ids[2] and dead-letters ids[5].
    let policy = "MIN-IDLE 1 MAX-DELIVERIES 3 DLQ jobs:dlq TOMBSTONES yes";
    let (ids, gone) = deleted_while_pending(&mut c, policy);
    assert_eq!(stat(&mut c, "jobs", "g", "deleted"), 4);
    assert_eq!(stat(&mut c, "jobs", "g", "tombstones"), 4);
    assert_eq!(stat(&mut c, "jobs", "g", "dead-lettered"), 1);
    assert_eq!(stat(&mut c, "jobs", "g", "claimed"), 1);
    assert_eq!(reclaim_info(&mut c, "tombstones"), 4);
    assert_eq!(
        pending_raw(&mut c, b"jobs", b"g"),
        vec![(ids[2].clone(), b"reclaim".to_vec(), 1)]
    );
    let dlq = xrange(&mut c, b"jobs:dlq");
    let mut tombs: Vec<&Entry> = dlq
        .iter()
        .filter(|e| field_text(e, "reclaim-reason") == "deleted")
        .collect();
    tombs.sort_by_key(|e| field_text(e, "reclaim-id"));
    let tomb_ids: Vec<String> = tombs.iter().map(|e| field_text(e, "reclaim-id")).collect();
    assert_eq!(sorted(&tomb_ids), sorted(&gone));
    for t in &tombs {
        let id = field_text(t, "reclaim-id");
        // No payload: only the reclaim-* fields.
        assert_eq!(field_names(t), TOMBSTONE_FIELDS, "{t:?}");
        assert_eq!(field_text(t, "reclaim-stream"), "jobs");
        assert_eq!(field_text(t, "reclaim-group"), "g");
        assert_eq!(field_text(t, "reclaim-consumer"), "w");
        let n = if id == ids[4] { "9" } else { "1" };
        assert_eq!(field_text(t, "reclaim-deliveries"), n, "{t:?}");
    }
    let dead: Vec<&Entry> = dlq
        .iter()
        .filter(|e| field_text(e, "reclaim-reason") == "max-deliveries")
        .collect();
    assert_eq!(dead.len(), 1);
    assert_eq!(field_text(dead[0], "reclaim-id"), ids[5]);
    assert_eq!(entry_field(dead[0], "n"), b"j-5");
}

/// `RECLAIM.READGROUP` hands over the stale entries the stream still holds; one deleted meanwhile
/// gets its tombstone instead of silently leaving the PEL.
#[test]
fn readgroup_writes_tombstones_for_deleted_entries_it_would_hand_over() {
    let s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"jobs", b"g");
    quiet_policy(
        &mut c,
        "jobs",
        "g",
        "MIN-IDLE 100 MAX-DELIVERIES 5 DLQ jobs:dlq TOMBSTONES yes",
    );
    let ids = add_entries(&mut c, b"jobs", "j", 3);
    read_group(&mut c, b"jobs", b"g", b"w");
    // Stale now (idle 1000 >= MIN-IDLE), count unchanged.
    set_pending(&mut c, ("jobs", "g"), "w", &ids, 1000, 1);
    let _: i64 = q(&mut c, &["XDEL", "jobs", &ids[1]]);
    let got = readgroup(&mut c, "jobs", "g", "w2", 10, None);
    let got_ids: Vec<String> = got.iter().map(|e| e.0.clone()).collect();
    assert_eq!(got_ids, vec![ids[0].clone(), ids[2].clone()]);
    let dlq = xrange(&mut c, b"jobs:dlq");
    assert_eq!(dlq.len(), 1);
    assert_eq!(field_names(&dlq[0]), TOMBSTONE_FIELDS);
    assert_eq!(field_text(&dlq[0], "reclaim-id"), ids[1]);
    assert_eq!(field_text(&dlq[0], "reclaim-reason"), "deleted");
    assert_eq!(field_text(&dlq[0], "reclaim-consumer"), "w");
    assert_eq!(stat(&mut c, "jobs", "g", "tombstones"), 1);
    assert_eq!(stat(&mut c, "jobs", "g", "deleted"), 1);
    assert_eq!(stat(&mut c, "jobs", "g", "redelivered"), 2);
    let pel: Vec<String> = pending(&mut c, "jobs", "g")
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(pel, vec![ids[0].clone(), ids[2].clone()]);
}

#[test]
fn without_tombstones_deleted_entries_only_leave_the_pel() {
    let s = Server::new();
    let mut c = s.conn();
    let (ids, _) = deleted_while_pending(&mut c, "MIN-IDLE 1 MAX-DELIVERIES 3 DLQ jobs:dlq");
    assert!(
        !get_policy(&mut c, b"jobs", b"g").unwrap().tombstones,
        "TOMBSTONES is no by default"
    );
    assert_eq!(stat(&mut c, "jobs", "g", "deleted"), 4);
    assert_eq!(stat(&mut c, "jobs", "g", "tombstones"), 0);
    assert_eq!(
        pending_raw(&mut c, b"jobs", b"g"),
        vec![(ids[2].clone(), b"reclaim".to_vec(), 1)]
    );
    let dlq = xrange(&mut c, b"jobs:dlq");
    assert_eq!(dlq_ids(&dlq), vec![ids[5].clone()]);
}

/// RECLAIM.SIMULATE takes the new options as what-ifs and shows the policy it evaluated; the
/// entries a tombstone is written for keep their rule (`trimmed`, `deleted`) and action `purge`.
#[test]
fn simulate_takes_the_options_and_plans_purges() {
    let s = Server::new();
    let mut c = s.conn();
    // The first pass purges the trimmed ones and handles the over-delivered ones (ids[4], deleted,
    // only leaves the PEL: TOMBSTONES no; ids[5] is dead-lettered): ids[2] and ids[3] are left.
    let policy = "MIN-IDLE 3600000 MAX-DELIVERIES 3 DLQ jobs:dlq";
    let (ids, _) = deleted_while_pending(&mut c, policy);
    let v = run(
        &mut c,
        &[
            "RECLAIM.SIMULATE",
            "jobs",
            "g",
            "TOMBSTONES",
            "yes",
            "DLQ-MAXLEN",
            "10",
            "DLQ-MAXAGE",
            "5000",
            "MIN-IDLE",
            "1",
        ],
    );
    let p = PolicyView::from_reply(&field(&v, "policy"));
    assert_eq!((p.tombstones, p.dlq_maxlen, p.dlq_maxage), (true, 10, 5000));
    let plan: Vec<(String, String, String)> = items(&field(&v, "entries"))
        .iter()
        .map(|e| {
            (
                str_field(e, "id"),
                str_field(e, "action"),
                str_field(e, "rule"),
            )
        })
        .collect();
    let t = |i: usize, a: &str, r: &str| (ids[i].clone(), a.to_string(), r.to_string());
    assert_eq!(plan, vec![t(2, "move", "stale"), t(3, "purge", "deleted")]);
    // A what-if changes nothing.
    assert!(!get_policy(&mut c, b"jobs", b"g").unwrap().tombstones);
    let err = error_of(
        &mut c,
        cmd("RECLAIM.SIMULATE")
            .arg("jobs")
            .arg("g")
            .arg("TOMBSTONES")
            .arg("maybe"),
    );
    assert_eq!(err, "ERR TOMBSTONES must be yes or no");
}

/// Tombstones and trims reach a replica and the AOF: the replica's DLQ and PEL are the
/// primary's, and every tombstone's XADD is in a MULTI/EXEC block with the XACK of its entry.
#[test]
fn tombstones_and_trims_replicate_and_are_multi_exec_in_the_aof() {
    let s = Server::start(&["--appendonly", "yes", "--appendfsync", "always"]);
    let r = s.replica(&[]);
    let mut c = s.conn();
    let mut rc = r.conn();
    // 150 old dead letters (two stream nodes' worth and a half) for DLQ-MAXLEN to trim.
    let _: () = q(&mut c, &["CONFIG", "SET", "stream-node-max-entries", "100"]);
    for i in 0..150 {
        let id = format!("1000-{i}");
        let _: String = q(&mut c, &["XADD", "jobs:dlq", &id, "old", "x"]);
    }
    let policy = "MIN-IDLE 1 MAX-DELIVERIES 3 DLQ jobs:dlq TOMBSTONES yes DLQ-MAXLEN 10";
    let (ids, gone) = deleted_while_pending(&mut c, policy);
    assert_eq!(stat(&mut c, "jobs", "g", "tombstones"), 4);
    let trimmed = stat(&mut c, "jobs", "g", "dlq-trimmed");
    assert!(
        trimmed >= 100,
        "a whole node of old ones trimmed: {trimmed}"
    );
    assert_eq!(xlen(&mut c, "jobs:dlq"), 150 + 5 - trimmed);
    replica_acked(&mut c);
    assert_eq!(xrange(&mut rc, b"jobs:dlq"), xrange(&mut c, b"jobs:dlq"));
    assert_eq!(
        pending_raw(&mut rc, b"jobs", b"g"),
        pending_raw(&mut c, b"jobs", b"g")
    );
    assert_eq!(
        pending_raw(&mut c, b"jobs", b"g"),
        vec![(ids[2].clone(), b"reclaim".to_vec(), 1)]
    );

    // The AOF: each tombstone inside MULTI ... EXEC with the XACK of its entry; the trim too.
    let cmds: Vec<Vec<Vec<u8>>> = s
        .aof_manifest_files()
        .iter()
        .filter(|f| f.1 == "i")
        .flat_map(|f| parse_aof(&f.2))
        .collect();
    let boundary = |c: &Vec<Vec<u8>>| is_cmd(c, "MULTI") || is_cmd(c, "EXEC");
    let mut buried = Vec::new();
    let mut trims_in_blocks = 0;
    for (i, cm) in cmds.iter().enumerate() {
        let start = (0..i).rev().find(|&j| boundary(&cmds[j]));
        let end = (i + 1..cmds.len()).find(|&k| boundary(&cmds[k]));
        let in_block = matches!((start, end), (Some(a), Some(b))
            if is_cmd(&cmds[a], "MULTI") && is_cmd(&cmds[b], "EXEC"));
        if is_cmd(cm, "XTRIM") && cm[1] == b"jobs:dlq" {
            assert!(in_block, "the DLQ trim is in the moves' MULTI/EXEC");
            trims_in_blocks += 1;
        }
        if !(is_cmd(cm, "XADD") && cm[1] == b"jobs:dlq") {
            continue;
        }
        let e: Entry = (String::from_utf8(cm[2].clone()).unwrap(), cm[3..].to_vec());
        if e.1.first().map(|f| f.as_slice()) == Some(b"old") {
            continue;
        }
        if field_text(&e, "reclaim-reason") != "deleted" {
            continue;
        }
        let src = field_text(&e, "reclaim-id");
        assert!(in_block, "the tombstone of {src} is inside MULTI/EXEC");
        let b = end.unwrap();
        assert!(
            cmds[i + 1..b].iter().any(|x| is_cmd(x, "XACK")
                && x[1] == b"jobs"
                && x[3..].contains(&src.clone().into_bytes())),
            "the tombstone of {src} has its XACK in the same block"
        );
        buried.push(src);
    }
    assert_eq!(sorted(&buried), sorted(&gone));
    assert!(trims_in_blocks >= 1, "an XTRIM of the DLQ in the AOF");
}

/// The options survive a restart from the RDB, an AOF rewrite without RDB preamble (as
/// `RECLAIM.POLICY SET` commands) and a restart from it, and EXPORT then IMPORT.
#[test]
fn options_survive_rdb_aof_rewrite_and_export_import() {
    let mut s = Server::start(&["--aof-use-rdb-preamble", "no"]);
    let mut c = s.conn();
    let want = PolicyView::new(5000, 250)
        .with_dlq(b"jobs:dlq", 3)
        .with_retention(1000, 86_400_000)
        .with_tombstones(true);
    let other = PolicyView::new(5000, 250)
        .with_dlq(b"jobs:dlq", 0)
        .with_retention(0, 60_000);
    set_policy(&mut c, b"jobs", b"g", &want);
    set_policy(&mut c, b"jobs", b"h", &other);
    let check = |c: &mut Connection, when: &str| {
        assert_eq!(get_policy(c, b"jobs", b"g"), Some(want.clone()), "{when}");
        assert_eq!(get_policy(c, b"jobs", b"h"), Some(other.clone()), "{when}");
    };
    check(&mut c, "as set");

    // RDB.
    let _: () = q(&mut c, &["SAVE"]);
    drop(c);
    s.kill();
    s.restart();
    let mut c = s.conn();
    check(&mut c, "after a restart from the RDB");

    // AOF rewrite (no RDB preamble: commands), then a restart from the AOF alone.
    let _: () = q(&mut c, &["CONFIG", "SET", "appendonly", "yes"]);
    wait_aof_rewrite_done(&mut c);
    let _: Value = q(&mut c, &["BGREWRITEAOF"]);
    wait_aof_rewrite_done(&mut c);
    let base: Vec<Vec<Vec<u8>>> = s
        .aof_manifest_files()
        .iter()
        .filter(|f| f.1 == "b")
        .flat_map(|f| parse_aof(&f.2))
        .collect();
    let sets: Vec<&Vec<Vec<u8>>> = base
        .iter()
        .filter(|x| is_cmd(x, "RECLAIM.POLICY"))
        .collect();
    assert_eq!(sets.len(), 2, "{sets:?}");
    let mut full = vec![b"SET".to_vec(), b"jobs".to_vec(), b"g".to_vec()];
    full.extend(want.set_args());
    assert_eq!(sets[0][1..].to_vec(), full);
    drop(c);
    s.kill();
    std::fs::remove_file(s.dir.path().join("dump.rdb")).expect("remove the RDB");
    s.args = ["--appendonly", "yes", "--aof-use-rdb-preamble", "no"]
        .map(String::from)
        .to_vec();
    s.restart();
    let mut c = s.conn();
    check(&mut c, "after a restart from the rewritten AOF");

    // EXPORT, then IMPORT into an empty database.
    let doc = export_policies(&mut c);
    let v: serde_json::Value = serde_json::from_str(&doc).unwrap();
    let p = &v["policies"][0];
    assert_eq!(
        (&p["dlq-maxlen"], &p["dlq-maxage"], &p["tombstones"]),
        (
            &serde_json::json!(1000),
            &serde_json::json!(86_400_000),
            &serde_json::json!(true)
        )
    );
    let _: () = q(&mut c, &["FLUSHALL"]);
    assert_eq!(get_policy(&mut c, b"jobs", b"g"), None);
    assert_eq!(import_policies(&mut c, doc.as_bytes(), false), 2);
    check(&mut c, "after EXPORT and IMPORT");
}
