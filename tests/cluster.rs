//! Redis Cluster: policy keys live in their stream's hash slot, cross-slot DLQs are refused by the
//! server (key specs), sweeps run in cluster mode, and a policy moves with its stream when its slot
//! migrates (`MIGRATE` → `RESTORE` → `rdb_load` registers it on the new node).

use reclaim_testkit::*;

/// A cluster node with the module (its `nodes.conf` in its own temporary directory).
fn node() -> Server {
    Server::start(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        "5000",
    ])
}

fn keyslot(c: &mut Connection, key: &[u8]) -> i64 {
    cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(c)
        .expect("CLUSTER KEYSLOT")
}

fn cluster_info(c: &mut Connection, field: &str) -> String {
    let text: String = cmd("CLUSTER").arg("INFO").query(c).expect("CLUSTER INFO");
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

fn myid(c: &mut Connection) -> String {
    cmd("CLUSTER").arg("MYID").query(c).expect("CLUSTER MYID")
}

/// The policy keys of the selected database.
fn policy_keys(c: &mut Connection) -> Vec<Vec<u8>> {
    let keys: Vec<Vec<u8>> = cmd("KEYS").arg("reclaim:policy:*").query(c).expect("KEYS");
    keys
}

/// Gives `c`'s node every slot and waits until its cluster is up.
fn own_all_slots(c: &mut Connection) {
    let _: () = cmd("CLUSTER")
        .arg("ADDSLOTSRANGE")
        .arg(0)
        .arg(16383)
        .query(c)
        .expect("CLUSTER ADDSLOTSRANGE");
    wait_for(20, "cluster_state:ok", || {
        (cluster_info(c, "cluster_state") == "ok").then_some(())
    });
}

#[test]
fn policy_keys_share_their_streams_slot_and_cross_slot_dlqs_are_refused() {
    let s = node();
    let mut c = s.conn();
    own_all_slots(&mut c);
    let streams: [&[u8]; 4] = [b"jobs", b"{t}jobs", b"a{b}c", b"\xff{\x00}\r\n"];
    for st in streams {
        create_group(&mut c, st, b"g");
        set_policy(&mut c, st, b"g", &PolicyView::new(60_000, 10_000));
    }
    let keys = policy_keys(&mut c);
    assert_eq!(keys.len(), streams.len(), "{keys:?}");
    for st in streams {
        let want = keyslot(&mut c, st);
        // `reclaim:policy:{TAG}:STREAM`: exactly one key ends with `:` and the stream's name.
        let suffix = [&b":"[..], st].concat();
        let matching: Vec<&Vec<u8>> = keys.iter().filter(|k| k.ends_with(&suffix)).collect();
        assert_eq!(matching.len(), 1, "policy key of {st:?} in {keys:?}");
        assert_eq!(
            keyslot(&mut c, matching[0]),
            want,
            "{:?} vs {st:?}",
            matching[0]
        );
    }

    // The DLQ is a key too: in another slot, the server refuses the command before the module.
    let err = error_of(
        &mut c,
        cmd("RECLAIM.POLICY")
            .arg("SET")
            .arg("jobs")
            .arg("g")
            .arg("MAX-DELIVERIES")
            .arg(1)
            .arg("DLQ")
            .arg("jobs:dlq"),
    );
    assert!(err.starts_with("CROSSSLOT"), "{err}");
    let pol = PolicyView::new(100, 20).with_dlq(b"{jobs}:dlq", 2);
    set_policy(&mut c, b"jobs", b"g", &pol);

    // And the sweep works in cluster mode: one entry moved to the inbox (its count unchanged), one
    // dead-lettered.
    let ids = add_entries(&mut c, b"jobs", "e", 2);
    read_group(&mut c, b"jobs", b"g", b"dead");
    set_deliveries(&mut c, b"jobs", b"g", b"dead", &ids[1..], 5);
    wait_for(20, "one move and one dead-letter move", || {
        let st = stats(&mut c, "jobs", "g");
        (int_field(&st, "claimed") == 1 && int_field(&st, "dead-lettered") == 1).then_some(())
    });
    assert_eq!(xlen(&mut c, b"{jobs}:dlq"), 1);
    let pel = pending_raw(&mut c, b"jobs", b"g");
    assert_eq!(pel, [(ids[0].clone(), b"reclaim".to_vec(), 1)]);
    // A worker's RECLAIM.READGROUP (its key in this node's slot) takes it: its second delivery.
    let got = take_inbox(&mut c, "jobs", "g", "reclaim", "w", 1);
    assert_eq!(got, [(ids[0].clone(), 2)]);
}

#[test]
fn policy_moves_with_its_stream_when_the_slot_migrates() {
    let a = node();
    let b = node();
    let mut ca = a.conn();
    let mut cb = b.conn();
    own_all_slots(&mut ca);
    let _: () = cmd("CLUSTER")
        .arg("MEET")
        .arg("127.0.0.1")
        .arg(b.port)
        .query(&mut ca)
        .expect("CLUSTER MEET");
    wait_for(20, "both nodes in one cluster, state ok", || {
        (cluster_info(&mut ca, "cluster_known_nodes") == "2"
            && cluster_info(&mut cb, "cluster_known_nodes") == "2"
            && cluster_info(&mut cb, "cluster_state") == "ok")
            .then_some(())
    });
    let (ida, idb) = (myid(&mut ca), myid(&mut cb));

    // On A: a stream with a dead consumer's entries and a policy that finds nothing stale yet.
    let st: &[u8] = b"{t}jobs";
    create_group(&mut ca, st, b"g");
    let ids = add_entries(&mut ca, st, "e", 3);
    read_group(&mut ca, st, b"g", b"dead");
    set_policy(&mut ca, st, b"g", &PolicyView::new(600_000, 20));
    wait_for(20, "A's first pass", || {
        (int_field(&stats(&mut ca, "{t}jobs", "g"), "passes") >= 1).then_some(())
    });

    // Migrate the slot: every key in it (the stream and its policy key) goes to B.
    let slot = keyslot(&mut ca, st);
    let setslot = |c: &mut Connection, how: &str, id: &str| {
        let _: () = cmd("CLUSTER")
            .arg("SETSLOT")
            .arg(slot)
            .arg(how)
            .arg(id)
            .query(c)
            .unwrap_or_else(|e| panic!("SETSLOT {how}: {e}"));
    };
    setslot(&mut cb, "IMPORTING", &ida);
    setslot(&mut ca, "MIGRATING", &idb);
    let keys: Vec<Vec<u8>> = cmd("CLUSTER")
        .arg("GETKEYSINSLOT")
        .arg(slot)
        .arg(100)
        .query(&mut ca)
        .expect("GETKEYSINSLOT");
    assert_eq!(keys.len(), 2, "the stream and its policy key: {keys:?}");
    assert!(keys.iter().any(|k| k == st), "{keys:?}");
    let _: () = cmd("MIGRATE")
        .arg("127.0.0.1")
        .arg(b.port)
        .arg("")
        .arg(0)
        .arg(5000)
        .arg("KEYS")
        .arg(&keys)
        .query(&mut ca)
        .expect("MIGRATE");
    setslot(&mut cb, "NODE", &idb);
    setslot(&mut ca, "NODE", &idb);

    // B knows the policy (RESTORE registered it) and A sends clients there.
    assert_eq!(
        get_policy(&mut cb, st, b"g"),
        Some(PolicyView::new(600_000, 20))
    );
    let moved = error_of(&mut ca, cmd("RECLAIM.STATS").arg(st).arg("g"));
    assert!(moved.starts_with("MOVED"), "{moved}");

    // B sweeps it: an entry made stale on B is moved to the inbox by B's timer.
    set_deliveries(&mut cb, st, b"g", b"dead", &ids[..1], 1);
    let _: Vec<String> = cmd("XCLAIM")
        .arg(st)
        .arg("g")
        .arg("dead")
        .arg(0)
        .arg(&ids[0])
        .arg("IDLE")
        .arg(700_000)
        .arg("JUSTID")
        .query(&mut cb)
        .expect("XCLAIM IDLE");
    wait_for(20, "B moves the stale entry", || {
        (int_field(&stats(&mut cb, "{t}jobs", "g"), "claimed") == 1).then_some(())
    });
    let pel = pending_raw(&mut cb, st, b"g");
    assert_eq!(pel.len(), 3);
    assert_eq!(pel[0], (ids[0].clone(), b"reclaim".to_vec(), 1));
    assert!(
        pel[1..].iter().all(|(_, o, n)| o == b"dead" && *n == 1),
        "{pel:?}"
    );
}

/// A policy restored onto another stream's policy key keeps a DLQ in the first stream's slot: in
/// cluster mode it is invalid there (`CROSSSLOT`, the server's answer to such a `SET`), through a
/// restart too, and a `SET` on the new stream (with a DLQ in its slot) repairs it.
#[test]
fn a_restored_policy_with_a_dlq_in_another_slot_is_invalid() {
    let mut s = node();
    let mut c = s.conn();
    own_all_slots(&mut c);
    create_group(&mut c, b"{a}s", b"g");
    set_policy(
        &mut c,
        b"{a}s",
        b"g",
        &PolicyView::new(100, 20).with_dlq(b"{a}:dlq", 2),
    );
    let dump: Vec<u8> = cmd("DUMP")
        .arg("reclaim:policy:{a}:{a}s")
        .query(&mut c)
        .expect("DUMP");
    let _: () = cmd("RESTORE")
        .arg("reclaim:policy:{b}:{b}s")
        .arg(0)
        .arg(&dump)
        .query(&mut c)
        .expect("RESTORE");
    let why = "the DLQ key must hash to the stream key's slot (use a hash tag, e.g. {orders}:dlq)";
    let check = |c: &mut Connection| {
        assert_eq!(status(c, "{b}s", "g"), format!("invalid: {why}"));
        let p = get_policy(c, b"{b}s", b"g").expect("GET");
        assert_eq!(p.invalid.as_deref(), Some(why.as_bytes()));
        assert_eq!(get_policy(c, b"{a}s", b"g").expect("GET").invalid, None);
    };
    check(&mut c);
    run(&mut c, &["SAVE"]);
    s.restart();
    let mut c = s.conn();
    wait_for(20, "cluster_state:ok", || {
        (cluster_info(&mut c, "cluster_state") == "ok").then_some(())
    });
    check(&mut c);
    set_policy(
        &mut c,
        b"{b}s",
        b"g",
        &PolicyView::new(100, 20).with_dlq(b"{b}:dlq", 2),
    );
    assert_eq!(
        get_policy(&mut c, b"{b}s", b"g").expect("GET").invalid,
        None
    );
}
