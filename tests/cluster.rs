//! Redis Cluster: policy keys live in their stream's hash slot, cross-slot DLQs are refused by the
//! server, sweeps run in cluster mode, and a policy moves with its stream when its slot migrates
//! (`MIGRATE` → `RESTORE` → `rdb_load` registers it on the new node). Every keyed command is
//! routed as its stream command at each stage of a migration and while the cluster is down;
//! blocked readers end as a blocked XREADGROUP does (a migrated stream, a demoted node, a cluster
//! that goes down); sweeps wait while the cluster is down; `IMPORT ... LOCAL`; the cluster-wide
//! scripts of docs/cluster.md and the `IMPORT ... LOCAL` example of docs/commands.md, run as
//! written. The scenario under load is tests/cluster_chaos.rs (`make test-cluster`).

use reclaim_testkit::*;

/// The policy keys of the selected database.
fn policy_keys(c: &mut Connection) -> Vec<Vec<u8>> {
    let keys: Vec<Vec<u8>> = cmd("KEYS").arg("reclaim:policy:*").query(c).expect("KEYS");
    keys
}

#[test]
fn policy_keys_share_their_streams_slot_and_cross_slot_dlqs_are_refused() {
    let s = cluster_node();
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
    let two = TwoNodes::start();
    let (mut ca, mut cb) = (two.a.conn(), two.b.conn());
    let (ida, idb) = (&two.ida, &two.idb);

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
    set_slot(&mut cb, slot, "IMPORTING", ida);
    set_slot(&mut ca, slot, "MIGRATING", idb);
    let keys = keys_in_slot(&mut ca, slot);
    assert_eq!(keys.len(), 2, "the stream and its policy key: {keys:?}");
    assert!(keys.iter().any(|k| k == st), "{keys:?}");
    two.migrate(&mut ca, &keys);
    // B holds the keys but does not serve the slot yet (importing): its timer's steps are
    // refused by the server (`non local key`). That is a wait, not an error of the policy: no
    // error counted, state `waiting`, and `RECLAIM.STATS` (asked with ASKING, as a client
    // following ASK does) does not show the refusal.
    wait_for(20, "B's step refused while importing", || {
        let line = policy_lines(&mut cb).pop()?;
        (line["status"] == "waiting: this node does not serve the stream's slot").then_some(())
    });
    assert_eq!(reclaim_info(&mut cb, "errors"), 0);
    let _: () = cmd("ASKING").query(&mut cb).expect("ASKING");
    let st_b = stats(&mut cb, "{t}jobs", "g");
    assert_eq!(str_field(&st_b, "status"), "active");
    assert_eq!(int_field(&st_b, "errors"), 0);
    set_slot(&mut cb, slot, "NODE", idb);
    set_slot(&mut ca, slot, "NODE", idb);
    // Served: B's next step runs (INTERVAL 20 ms) and the policy is active again, no error.
    wait_for(20, "B's policy active once the slot is its own", || {
        let line = policy_lines(&mut cb).pop()?;
        (line["status"] == "active").then_some(())
    });
    assert_eq!(reclaim_info(&mut cb, "errors"), 0);

    // B knows the policy (RESTORE registered it) and A sends clients there.
    assert_eq!(
        get_policy(&mut cb, st, b"g"),
        Some(PolicyView::new(600_000, 20))
    );
    let moved = error_of(&mut ca, cmd("RECLAIM.STATS").arg(st).arg("g"));
    assert!(moved.starts_with("MOVED"), "{moved}");

    // B sweeps it: an entry made stale on B is moved to the inbox by B's timer.
    set_pending(&mut cb, ("{t}jobs", "g"), "dead", &ids[..1], 700_000, 1);
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
    let mut s = cluster_node();
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
        let get = policy_reply(c, b"{b}s", b"g");
        assert_eq!(str_field(&get, "status"), format!("invalid: {why}"));
        assert!(!str_field(&policy_reply(c, b"{a}s", b"g"), "status").starts_with("invalid"));
    };
    check(&mut c);
    run(&mut c, &["SAVE"]);
    s.restart();
    let mut c = s.conn();
    wait_cluster_ok(&mut c, 20);
    check(&mut c);
    set_policy(
        &mut c,
        b"{b}s",
        b"g",
        &PolicyView::new(100, 20).with_dlq(b"{b}:dlq", 2),
    );
    assert!(!status(&mut c, "{b}s", "g").starts_with("invalid"));
}

/// Every keyed RECLAIM command, with arguments that name `st` (its group `g`, DLQ `dlq`), and
/// whether it only reads (compared with `XLEN`) or writes (compared with `XREADGROUP`).
fn keyed_commands(st: &str, dlq: &str) -> Vec<(Vec<String>, bool)> {
    let w = |s: &str| {
        s.split(' ')
            .map(|x| match x {
                "ST" => st.to_string(),
                "DLQ" => dlq.to_string(),
                other => other.to_string(),
            })
            .collect::<Vec<String>>()
    };
    vec![
        (w("RECLAIM.READGROUP GROUP g c COUNT 5 STREAMS ST >"), false),
        (w("RECLAIM.EXTEND ST g c 0-1"), false),
        (w("RECLAIM.NACK ST g c 0-1"), false),
        (w("RECLAIM.TERM ST g c 0-1"), false),
        (w("RECLAIM.STATS ST g"), true),
        (w("RECLAIM.HEALTH ST g"), true),
        (w("RECLAIM.SIMULATE ST g"), true),
        (w("RECLAIM.SWEEP ST g"), false),
        (
            w("RECLAIM.POLICY SET ST g MIN-IDLE 1000 MAX-DELIVERIES 3 DLQ DLQ"),
            false,
        ),
        (w("RECLAIM.POLICY GET ST g"), true),
        (w("RECLAIM.POLICY DEL ST g"), false),
        (w("RECLAIM.POLICY PAUSE ST g"), false),
        (w("RECLAIM.POLICY RESUME ST g"), false),
        (w("RECLAIM.REDRIVE DLQ"), false),
        (w("RECLAIM.REDRIVE STATUS DLQ"), true),
        (w("RECLAIM.REDRIVE CANCEL DLQ"), false),
    ]
}

fn words_cmd(words: &[String]) -> redis::Cmd {
    let mut c = cmd(&words[0]);
    for w in &words[1..] {
        c.arg(w);
    }
    c
}

/// The error of `words` on `c`, or `""` when it succeeds.
fn error_or_empty(c: &mut Connection, words: &[String]) -> String {
    match words_cmd(words).query::<Value>(c) {
        Ok(_) => String::new(),
        Err(e) => redirect_text(&e),
    }
}

/// An error as the wire has it: `MOVED 1234 127.0.0.1:7000`, `CROSSSLOT ...` (as [`error_of`]).
fn redirect_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    }
}

/// Asserts that each keyed command of `st` gets on `c` the error its stream command gets there
/// (XREADGROUP for those that write, XLEN for those that only read), and that it starts with
/// `want`.
fn assert_routed_as_streams(c: &mut Connection, st: &str, dlq: &str, want: &str) {
    let xreadgroup = error_or_empty(
        c,
        &["XREADGROUP", "GROUP", "g", "c", "STREAMS", st, ">"].map(String::from),
    );
    let xlen = error_or_empty(c, &["XLEN", st].map(String::from));
    assert!(xreadgroup.starts_with(want), "XREADGROUP: {xreadgroup}");
    for (words, readonly) in keyed_commands(st, dlq) {
        let reference = if readonly { &xlen } else { &xreadgroup };
        assert_eq!(
            &error_or_empty(c, &words),
            reference,
            "{} (as {})",
            words.join(" "),
            if readonly { "XLEN" } else { "XREADGROUP" }
        );
    }
}

/// Two nodes: A serves every slot, B none. Then the slot of `{r}jobs` moves from A to B as
/// `redis-cli --cluster reshard` moves it (SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE).
/// At every stage every keyed command is answered as XREADGROUP/XLEN are: MOVED on a node that
/// does not serve the slot, ASK on the migrating node once the keys left, TRYAGAIN on both for a
/// read of two streams of which one moved, CROSSSLOT for
/// streams of two slots; with ASKING the importing node serves the moved stream with its policy.
#[test]
fn every_keyed_command_is_redirected_as_its_stream_command() {
    let nodes = TwoNodes::start();
    let (mut ca, mut cb) = (nodes.a.conn(), nodes.b.conn());
    let (ida, idb) = (&nodes.ida, &nodes.idb);
    let (st, two, dlq) = ("{r}jobs", "{r}two", "{r}dlq");
    let slot = keyslot(&mut ca, st.as_bytes());
    for s in [st, two] {
        create_group(&mut ca, s.as_bytes(), b"g");
    }
    add_entries(&mut ca, st.as_bytes(), "e", 3);
    set_policy(
        &mut ca,
        st.as_bytes(),
        b"g",
        &PolicyView::new(60_000, 100).with_dlq(dlq.as_bytes(), 3),
    );
    let addr_a = format!("127.0.0.1:{}", nodes.a.port);
    let addr_b = format!("127.0.0.1:{}", nodes.b.port);

    // Stable: B sends everything to A.
    assert_routed_as_streams(&mut cb, st, dlq, &format!("MOVED {slot} {addr_a}"));
    // Streams of two slots: CROSSSLOT, as XREADGROUP.
    let cross = ["GROUP", "g", "c", "STREAMS", st, "{x}jobs", ">", ">"];
    let xr = error_of(&mut ca, cmd("XREADGROUP").arg(&cross));
    assert!(xr.starts_with("CROSSSLOT"), "{xr}");
    assert_eq!(error_of(&mut ca, cmd("RECLAIM.READGROUP").arg(&cross)), xr);

    // The slot opens: B imports, A migrates. B still sends clients without ASKING to A.
    set_slot(&mut cb, slot, "IMPORTING", ida);
    set_slot(&mut ca, slot, "MIGRATING", idb);
    assert_routed_as_streams(&mut cb, st, dlq, &format!("MOVED {slot} {addr_a}"));
    // One of two streams moved: a read of both gets TRYAGAIN on A (some keys here, some gone)
    // and on B (ASKING: some keys there, some not yet).
    nodes.migrate(&mut ca, &[two.as_bytes().to_vec()]);
    let both = ["GROUP", "g", "c", "STREAMS", st, two, ">", ">"];
    let xr = error_of(&mut ca, cmd("XREADGROUP").arg(&both));
    assert!(xr.starts_with("TRYAGAIN"), "{xr}");
    assert_eq!(error_of(&mut ca, cmd("RECLAIM.READGROUP").arg(&both)), xr);
    let asking = |c: &mut Connection, words: &[&str]| -> String {
        let mut p = redis::pipe();
        p.cmd("ASKING").ignore();
        p.cmd(words[0]).arg(&words[1..]);
        match p.query::<Vec<Value>>(c) {
            Ok(v) => format!("{v:?}"),
            Err(e) => redirect_text(&e),
        }
    };
    let xr = asking(&mut cb, &[&["XREADGROUP"][..], &both].concat());
    assert!(xr.starts_with("TRYAGAIN"), "{xr}");
    assert_eq!(
        asking(&mut cb, &[&["RECLAIM.READGROUP"][..], &both].concat()),
        xr
    );

    // Everything moved: A answers ASK; B serves the stream and its policy to an ASKING client.
    let keys = keys_in_slot(&mut ca, slot);
    nodes.migrate(&mut ca, &keys);
    assert_routed_as_streams(&mut ca, st, dlq, &format!("ASK {slot} {addr_b}"));
    let read = asking(
        &mut cb,
        &["RECLAIM.READGROUP", "GROUP", "g", "w", "STREAMS", st, ">"],
    );
    assert!(
        read.contains("e-0") || read.contains("e0") || read.contains(st),
        "{read}"
    );
    let stats = asking(&mut cb, &["RECLAIM.STATS", st, "g"]);
    assert!(stats.contains("passes"), "{stats}");

    // The slot is B's: A sends everything there.
    set_slot(&mut cb, slot, "NODE", idb);
    set_slot(&mut ca, slot, "NODE", idb);
    assert_routed_as_streams(&mut ca, st, dlq, &format!("MOVED {slot} {addr_b}"));
    assert_eq!(
        get_policy(&mut cb, st.as_bytes(), b"g").map(|p| p.max_deliveries),
        Some(3)
    );
}

/// Two readers of group `g` blocked (`BLOCK 0`) on `st` on server `s`, each on a connection of
/// its own: XREADGROUP and RECLAIM.READGROUP. Each thread returns how the read ended: its error
/// as the wire has it ([`redirect_text`]), or its reply.
fn blocked_readers(
    s: &Server,
    st: &str,
) -> (
    std::thread::JoinHandle<String>,
    std::thread::JoinHandle<String>,
) {
    let blocked = |name: &'static str| {
        let mut c = s.conn();
        let st = st.to_string();
        std::thread::spawn(move || {
            let r = cmd(name)
                .arg("GROUP")
                .arg("g")
                .arg(format!("{name}-c"))
                .arg("BLOCK")
                .arg(0)
                .arg("STREAMS")
                .arg(&st)
                .arg(">")
                .query::<Value>(&mut c);
            match r {
                Ok(v) => format!("{v:?}"),
                Err(e) => redirect_text(&e),
            }
        })
    };
    (blocked("XREADGROUP"), blocked("RECLAIM.READGROUP"))
}

/// A one-node cluster whose state turns `fail` (a slot unassigned): keyed commands and blocked
/// readers get CLUSTERDOWN as XREADGROUP does; the policy's sweeps stop without counting errors
/// (status `cluster-down`, `ticks_skipped_cluster_down`), and start again by themselves once the
/// cluster is ok.
#[test]
fn while_the_cluster_is_down_sweeps_wait_and_readers_get_clusterdown() {
    let s = cluster_node();
    let mut c = s.conn();
    own_all_slots(&mut c);
    let (st, dlq) = ("{d}jobs", "{d}dlq");
    create_group(&mut c, st.as_bytes(), b"g");
    set_policy(
        &mut c,
        st.as_bytes(),
        b"g",
        &PolicyView::new(60_000, 50).with_dlq(dlq.as_bytes(), 3),
    );
    wait_for(20, "a first pass", || {
        (int_field(&stats(&mut c, st, "g"), "passes") >= 1).then_some(())
    });
    // Two readers blocked on the stream: XREADGROUP and RECLAIM.READGROUP.
    let (x, r) = blocked_readers(&s, st);
    wait_blocked(&mut c, 2);
    let errors_before = reclaim_info(&mut c, "errors");
    let skipped_before = reclaim_info(&mut c, "ticks_skipped_cluster_down");

    // A slot that is not the stream's is left unassigned: the cluster is down.
    let other = (keyslot(&mut c, st.as_bytes()) + 1) % 16384;
    let _: () = cmd("CLUSTER")
        .arg("DELSLOTS")
        .arg(other)
        .query(&mut c)
        .expect("DELSLOTS");
    wait_for(10, "cluster_state:fail", || {
        (cluster_info_field(&mut c, "cluster_state") == "fail").then_some(())
    });
    let (x, r) = (x.join().expect("XREADGROUP"), r.join().expect("READGROUP"));
    assert!(x.starts_with("CLUSTERDOWN"), "{x}");
    assert_eq!(r, x);
    assert_routed_as_streams(&mut c, st, dlq, "CLUSTERDOWN");
    // The module looks at the cluster's state every 100 ms.
    wait_for(
        10,
        "ticks skipped for the cluster, status cluster-down",
        || {
            let line = policy_lines(&mut c).pop()?;
            let skipped = reclaim_info(&mut c, "ticks_skipped_cluster_down");
            (line["status"] == "cluster-down" && skipped > skipped_before + 3).then_some(())
        },
    );
    // No pass while the cluster is down: the module looked at its state three more times (a
    // tick skipped each time) and the policy's passes did not move.
    let passes = policy_lines(&mut c).pop().expect("the policy's INFO line")["passes"].clone();
    let skipped = reclaim_info(&mut c, "ticks_skipped_cluster_down");
    wait_for(10, "three more ticks skipped for the cluster", || {
        (reclaim_info(&mut c, "ticks_skipped_cluster_down") >= skipped + 3).then_some(())
    });
    let line = policy_lines(&mut c).pop().expect("the policy's INFO line");
    assert_eq!(line["passes"], passes, "no pass while the cluster is down");
    assert_eq!(reclaim_info(&mut c, "errors"), errors_before);

    // The slot is back: the cluster is ok and the sweeps run again, by themselves.
    let _: () = cmd("CLUSTER")
        .arg("ADDSLOTS")
        .arg(other)
        .query(&mut c)
        .expect("ADDSLOTS");
    wait_for(20, "passes again", || {
        let line = policy_lines(&mut c).pop()?;
        (line["status"] == "active" && line["passes"] != passes).then_some(())
    });
    assert_eq!(reclaim_info(&mut c, "errors"), errors_before);
    assert_eq!(str_field(&stats(&mut c, st, "g"), "status"), "active");
}

/// A reader blocked on a stream that `MIGRATE` moves to another node ends its wait with the error
/// a blocked XREADGROUP gets there and then: `ASK <slot> <node>` on Redis 7.2+ and Valkey (they run
/// the blocked XREADGROUP again through the slot check), `UNBLOCKED the stream key no longer
/// exists` on 7.0.
#[test]
fn a_reader_blocked_on_a_migrated_stream_ends_as_xreadgroup() {
    let nodes = TwoNodes::start();
    let (mut ca, mut cb) = (nodes.a.conn(), nodes.b.conn());
    let st = "{m}jobs";
    create_group(&mut ca, st.as_bytes(), b"g");
    set_policy(&mut ca, st.as_bytes(), b"g", &PolicyView::new(60_000, 100));
    let slot = keyslot(&mut ca, st.as_bytes());
    let (x, r) = blocked_readers(&nodes.a, st);
    wait_blocked(&mut ca, 2);
    set_slot(&mut cb, slot, "IMPORTING", &nodes.ida);
    set_slot(&mut ca, slot, "MIGRATING", &nodes.idb);
    let keys = keys_in_slot(&mut ca, slot);
    nodes.migrate(&mut ca, &keys);
    let (x, r) = (x.join().expect("XREADGROUP"), r.join().expect("READGROUP"));
    let ask = format!("ASK {slot} 127.0.0.1:{}", nodes.b.port);
    assert!(
        x == ask || x == "UNBLOCKED the stream key no longer exists",
        "{x}"
    );
    assert_eq!(r, x);
}

/// A primary whose replica takes over (`CLUSTER FAILOVER`) ends the wait of its blocked readers as
/// it ends a blocked XREADGROUP's: `UNBLOCKED force unblock ... (master -> replica?)`, and forgets
/// them (`reclaim_blocked_readers` 0). On the demoted node the next read gets `MOVED` to the new
/// primary, as XREADGROUP does, and the new primary serves it with the policy (a redelivery
/// under the policy's rules there).
#[test]
fn a_reader_blocked_on_a_demoted_node_ends_as_xreadgroup() {
    let TwoNodes { a, b, ida, .. } = TwoNodes::start();
    let (mut ca, mut cb) = (a.conn(), b.conn());
    // B learns A's ID from the handshake, then may replicate it.
    wait_for(20, "B a replica of A", || {
        cmd("CLUSTER")
            .arg("REPLICATE")
            .arg(&ida)
            .query::<()>(&mut cb)
            .ok()
    });
    let st = "{f}jobs";
    create_group(&mut ca, st.as_bytes(), b"g");
    let ids = add_entries(&mut ca, st.as_bytes(), "e", 1);
    read_group(&mut ca, st.as_bytes(), b"g", b"dead");
    set_policy(&mut ca, st.as_bytes(), b"g", &PolicyView::new(60_000, 100));
    // A replica serves reads to a READONLY client.
    let _: () = cmd("READONLY").query(&mut cb).expect("READONLY");
    wait_for(30, "B a synced replica of A with the policy", || {
        let synced = info(&mut cb, "replication")
            .iter()
            .any(|(k, v)| k == "master_link_status" && v == "up");
        (synced && get_policy(&mut cb, st.as_bytes(), b"g").is_some()).then_some(())
    });
    let (x, r) = blocked_readers(&a, st);
    wait_blocked(&mut ca, 2);
    assert_eq!(reclaim_info(&mut ca, "blocked_readers"), 1);

    let _: () = cmd("CLUSTER")
        .arg("FAILOVER")
        .query(&mut cb)
        .expect("CLUSTER FAILOVER");
    let (x, r) = (x.join().expect("XREADGROUP"), r.join().expect("READGROUP"));
    assert_eq!(
        x,
        "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)"
    );
    assert_eq!(r, x);
    // A is a replica now: it forgot its blocked reader, sweeps nothing, and sends readers to B.
    let mut ca = a.conn();
    wait_for(10, "A a replica", || {
        (role(&mut ca) == "slave").then_some(())
    });
    assert_eq!(reclaim_info(&mut ca, "blocked_readers"), 0);
    let slot = keyslot(&mut ca, st.as_bytes());
    let moved = format!("MOVED {slot} 127.0.0.1:{}", b.port);
    for name in ["XREADGROUP", "RECLAIM.READGROUP"] {
        let read = cmd(name)
            .arg("GROUP")
            .arg("g")
            .arg("w")
            .arg("STREAMS")
            .arg(st)
            .arg(">")
            .clone();
        let e = read.query::<Value>(&mut ca).expect_err(name);
        assert_eq!(redirect_text(&e), moved, "{name}");
    }
    // B serves it, with the policy: the dead consumer's entry, made stale, is handed over.
    set_pending(&mut cb, (st, "g"), "dead", &ids, 70_000, 1);
    let got = take_inbox(&mut cb, st, "g", "reclaim", "w", 1);
    assert_eq!(got, [(ids[0].clone(), 2)]);
}

/// The fenced block of the page `page` (a path from the crate's root) that opens with `open`
/// (its first line, newline included), after `marker` when given: its text.
fn doc_block_after(page: &str, marker: &str, open: &str) -> String {
    let doc = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(page))
        .expect("the page");
    let from = doc.find(marker).expect("the marker in the page");
    let rest = &doc[from..];
    let start = rest.find(open).expect("the block") + open.len();
    let end = rest[start..].find("```").expect("the end of the block");
    rest[start..start + end].to_string()
}

/// The first block of `page` that opens with `open`.
fn doc_block(page: &str, open: &str) -> String {
    doc_block_after(page, "", open)
}

/// The shell block of docs/cluster.md (```` ```sh run-by=tests/cluster.rs ````) that follows
/// `marker`.
fn doc_script(marker: &str) -> String {
    doc_block_after("docs/cluster.md", marker, "```sh run-by=tests/cluster.rs\n")
}

/// `PATH` with the directory of the command-line client the tests use first (the server's own,
/// for a matrix server), for the docs' shell lines.
fn cli_path() -> String {
    let path = std::env::var("PATH").unwrap_or_default();
    match cli_binary().parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(bin) => format!("{}:{path}", bin.display()),
        None => path,
    }
}

/// Runs `script` with bash (`-eu`, and `pipefail`) in a temporary directory, with `env`; its
/// output (stdout then stderr), or a panic with it when it fails.
fn run_script(script: &str, env: &[(&str, String)]) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut sh = std::process::Command::new("bash");
    sh.arg("-euo").arg("pipefail").arg("-c").arg(script);
    sh.current_dir(dir.path()).env("PATH", cli_path());
    for (k, v) in env {
        sh.env(k, v);
    }
    let run = sh.output().expect("bash");
    let text =
        String::from_utf8_lossy(&run.stdout).into_owned() + &String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{script}\n{text}");
    text
}

/// Two streams per primary of `src` (group `g`), each with a policy of its own; the first of the
/// first primary's in its lowest slot (the one a reshard of 1 slot moves). Returns them in order.
fn two_policies_per_primary(src: &Cluster) -> Vec<(String, PolicyView)> {
    let mut want = Vec::new();
    for (n, p) in src.primaries().into_iter().enumerate() {
        let low = src.lowest_slot(p);
        for (k, slot) in [low, low + 100].into_iter().enumerate() {
            let st = format!("{}in", tag_for_slot(&format!("s{n}{k}"), slot));
            let pol = PolicyView::new(1000 + (n * 10 + k) as i64, 500)
                .with_dlq(st.replace("in", "dlq").as_bytes(), 3);
            let mut c = src.conn(p);
            create_group(&mut c, st.as_bytes(), b"g");
            set_policy(&mut c, st.as_bytes(), b"g", &pol);
            want.push((st, pol));
        }
    }
    want
}

/// The policy of `st` (group `g`) is `pol` on the primary of `cl` that serves `st`, and every
/// other primary answers its `GET` with `MOVED`.
fn assert_only_on_its_primary(cl: &Cluster, st: &str, pol: &PolicyView) {
    let owner = cl.owner(key_slot(st.as_bytes()));
    for p in cl.primaries() {
        if p == owner {
            let got = get_policy(&mut cl.conn(p), st.as_bytes(), b"g");
            assert_eq!(got.as_ref(), Some(pol), "{st} on its primary");
        } else {
            let get = cmd("RECLAIM.POLICY").arg("GET").arg(st).arg("g").clone();
            let moved = error_of(&mut cl.conn(p), &get);
            assert!(moved.starts_with("MOVED"), "{st}: {moved}");
        }
    }
}

/// docs/cluster.md's cluster-wide export and import, run as written: the policies of a whole
/// 3-primary cluster exported (one document per primary) and imported with `IMPORT ... LOCAL`
/// into another 3-primary cluster whose slots are laid out differently (a reshard): each policy
/// lands once, on the primary that serves its stream, and each node reports the others as
/// `elsewhere`. Its `redis-cli --cluster call` lines work too.
#[test]
fn a_whole_cluster_is_exported_and_imported_as_the_docs_show() {
    let src = Cluster::start(3, 0, 5000, &[]);
    let dst = Cluster::start(3, 0, 5000, &[]);
    // The first stream of the source is moved to the destination's node 1 before the import.
    let want = two_policies_per_primary(&src);
    // The stream of the docs' examples, on its primary.
    let orders = PolicyView::new(30_000, 1000).with_dlq(b"{orders}:dlq", 5);
    let mut c = src.conn(src.owner(key_slot(b"{orders}:in")));
    create_group(&mut c, b"{orders}:in", b"workers");
    set_policy(&mut c, b"{orders}:in", b"workers", &orders);
    wait_for(10, "a pass of {orders}:in", || {
        (int_field(&stats(&mut c, "{orders}:in", "workers"), "passes") > 0).then_some(())
    });
    // The docs' cluster-wide LIST, INFO and STATS, from any node.
    let text = run_script(
        &doc_script("With `NODE` set to any node"),
        &[("NODE", src.addr(2))],
    );
    for (st, _) in &want {
        assert!(text.contains(st.as_str()), "{st} in {text}");
    }
    assert!(
        text.lines()
            .any(|l| l == format!("policies {}", want.len() + 1)),
        "{text}"
    );
    // RECLAIM.STATS of {orders}:in, followed to its primary: its fields and status.
    let lines: Vec<&str> = text.lines().collect();
    let after = |f: &str| lines.iter().position(|l| *l == f).map(|i| lines[i + 1]);
    assert_eq!(after("status"), Some("active"), "{text}");
    assert!(after("passes").is_some_and(|v| v.parse::<u64>().is_ok_and(|n| n > 0)));
    let p0 = dst.owner(key_slot(want[0].0.as_bytes()));
    let p1 = dst
        .primaries()
        .into_iter()
        .find(|&p| p != p0)
        .expect("another primary");
    dst.reshard(p0, p1, 1);
    dst.wait_ok(30);

    let text = run_script(
        &doc_script("This script exports"),
        &[("SRC", src.addr(0)), ("DST", dst.addr(0))],
    );
    // 3 documents x 3 primaries: every policy imported once, reported elsewhere twice.
    let imported: i64 = text
        .lines()
        .collect::<Vec<_>>()
        .windows(2)
        .filter(|w| w[0] == "imported")
        .map(|w| w[1].parse::<i64>().unwrap_or(0))
        .sum();
    // And {orders}:in, the docs' stream.
    assert_eq!(imported, want.len() as i64 + 1, "{text}");
    let owner = dst.owner(key_slot(b"{orders}:in"));
    let got = get_policy(&mut dst.conn(owner), b"{orders}:in", b"workers");
    assert_eq!(got, Some(orders));
    assert_eq!(dst.owner(key_slot(want[0].0.as_bytes())), p1);
    for (st, pol) in &want {
        assert_only_on_its_primary(&dst, st, pol);
    }
    let lists: usize = dst
        .primaries()
        .into_iter()
        .map(|p| list_policies(&mut dst.conn(p)).len())
        .sum();
    assert_eq!(lists, want.len() + 1);
}

/// `IMPORT ... LOCAL` on one node: the reply's `imported` and `elsewhere` (key, group, slot).
#[test]
fn import_local_reports_the_policies_of_other_nodes() {
    // A serves every slot but that of `{far}s`, which B serves.
    let TwoNodes { a, b, idb, .. } = TwoNodes::start();
    let (mut c, mut cb) = (a.conn(), b.conn());
    let far = "{far}s";
    let slot = keyslot(&mut c, far.as_bytes());
    for con in [&mut cb, &mut c] {
        set_slot(con, slot, "NODE", &idb);
    }
    let doc = format!(
        r#"{{"version": 1, "policies": [{{"key": "near", "group": "g", "min-idle": 500}}, {{"key": "{far}", "group": "g"}}]}}"#
    );
    let reply: Value = cmd("RECLAIM.POLICY")
        .arg("IMPORT")
        .arg(&doc)
        .arg("LOCAL")
        .query(&mut c)
        .expect("IMPORT LOCAL");
    assert_eq!(int_field(&reply, "imported"), 1);
    let elsewhere = field(&reply, "elsewhere");
    let others: Vec<(String, String, i64)> = items(&elsewhere)
        .iter()
        .map(|e| {
            (
                str_field(e, "key"),
                str_field(e, "group"),
                int_field(e, "slot"),
            )
        })
        .collect();
    assert_eq!(others, [(far.to_string(), "g".to_string(), slot)]);
    assert_eq!(
        get_policy(&mut c, b"near", b"g").map(|p| p.min_idle),
        Some(500)
    );
    // docs/commands.md's example, run as written (its node's port aside) on the same document,
    // once `near` is gone again: the same reply, as redis-cli prints it.
    let _: () = cmd("RECLAIM.POLICY")
        .arg("DEL")
        .arg("near")
        .arg("g")
        .query(&mut c)
        .expect("DEL");
    let block = doc_block("docs/commands.md", "```text run-by=tests/cluster.rs\n");
    let (command, want) = block.split_once('\n').expect("a command and its output");
    let command = command
        .strip_prefix("$ ")
        .expect("a shell line")
        .replace("-p 7001", &format!("-p {}", a.port));
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("policies.json"), &doc).expect("policies.json");
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(&command)
        .env("PATH", cli_path())
        .current_dir(dir.path())
        .output()
        .expect("bash");
    assert_eq!(String::from_utf8_lossy(&out.stdout), want, "{command}");
    assert_eq!(slot, 3845, "the slot docs/commands.md shows");
    // Without LOCAL, the same document fails as a whole and imports nothing.
    let err = error_of(
        &mut c,
        cmd("RECLAIM.POLICY").arg("IMPORT").arg(&doc).arg("REPLACE"),
    );
    assert!(
        err.contains("does not serve the stream key's hash slot"),
        "{err}"
    );
}

/// A delay longer than the lease parked on one node migrates with its slot (the stream, its
/// policy key, its delay key and its NACK record key) and is delivered by the node it lands on, not before its time.
#[test]
fn a_parked_delay_moves_with_its_slot() {
    let two = TwoNodes::start();
    let (mut ca, mut cb) = (two.a.conn(), two.b.conn());
    let st: &[u8] = b"{t}jobs";
    create_group(&mut ca, st, b"g");
    set_policy_opts(&mut ca, "{t}jobs", "g", "MIN-IDLE 500 INTERVAL 50");
    let id: String = q(&mut ca, &["XADD", "{t}jobs", "*", "job", "x"]);
    assert_eq!(readgroup(&mut ca, "{t}jobs", "g", "w1", 1, None).len(), 1);
    let before = server_ms(&mut ca);
    let n: i64 = q(
        &mut ca,
        &["RECLAIM.NACK", "{t}jobs", "g", "w1", &id, "DELAY", "3000"],
    );
    assert_eq!(n, 1);
    let slot = keyslot(&mut ca, st);
    set_slot(&mut cb, slot, "IMPORTING", &two.ida);
    set_slot(&mut ca, slot, "MIGRATING", &two.idb);
    let keys = keys_in_slot(&mut ca, slot);
    assert!(
        keys.iter().any(|k| k == b"reclaim:delay:{t}:{t}jobs"),
        "{keys:?}"
    );
    assert_eq!(
        keys.len(),
        4,
        "the stream, its policy key, its delay key, its NACK record key: {keys:?}"
    );
    two.migrate(&mut ca, &keys);
    set_slot(&mut cb, slot, "NODE", &two.idb);
    set_slot(&mut ca, slot, "NODE", &two.idb);
    let pel = pending_raw(&mut cb, st, b"g");
    assert_eq!(pel, [(id.clone(), b"reclaim:parked".to_vec(), 1)]);
    let got = wait_for(20, "the parked entry on B", || {
        readgroup(&mut cb, "{t}jobs", "g", "w2", 1, Some(50))
            .into_iter()
            .next()
    });
    assert_eq!(got.0, id);
    assert!(server_ms(&mut cb) >= before + 3000);
    assert_eq!(
        pending_raw(&mut cb, st, b"g"),
        [(id.clone(), b"w2".to_vec(), 2)]
    );
    let left: i64 = q(&mut cb, &["EXISTS", "reclaim:delay:{t}:{t}jobs"]);
    assert_eq!(left, 0);
}
