//! Issue 31's durability matrix for `RECLAIM.NACK ... DELAY` longer than the lease (the entry
//! parked at `<claimant>:parked`, its due time in the stream's delay key), the cases
//! tests/delays.rs and tests/cluster.rs leave out: an RDB restart, a partial resync (the replica
//! reconnects within the backlog) and a full one, each followed by a promotion, a slot moved by
//! `redis-cli --cluster reshard`, `FLUSHALL` and a new stream of the same name, `SWAPDB` and
//! back, and a stream deleted or a group destroyed (no delay key and no NACK record key left).
//! Each asserts that the entry is not delivered before its due time (the server's clock) and is
//! delivered once due.
//!
//! Covered elsewhere: `DEBUG RELOAD`, an AOF restart, a replica promoted after its primary was
//! killed, `SWAPDB` once, `DEL` of the stream, `XGROUP DESTROY` and `FLUSHALL` (the delay key
//! gone) in tests/delays.rs; a slot moved by `MIGRATE` of its keys in tests/cluster.rs.

use reclaim_testkit::*;

/// A policy on stream `s`, group `g`: MIN-IDLE 500, INTERVAL 100.
fn policy(c: &mut Connection, s: &str) {
    create_group(c, s.as_bytes(), b"g");
    set_policy_opts(c, s, "g", "MIN-IDLE 500 INTERVAL 100");
}

/// The delay key of stream `s` (the whole name is the hash tag when it has none).
fn delay_key(s: &str) -> String {
    if s.contains('{') {
        let tag = &s[s.find('{').unwrap()..=s.find('}').unwrap()];
        format!("reclaim:delay:{tag}:{s}")
    } else {
        format!("reclaim:delay:{{{s}}}:{s}")
    }
}

/// The NACK record key of stream `s`.
fn nack_key(s: &str) -> String {
    delay_key(s).replacen("reclaim:delay:", "reclaim:nack:", 1)
}

fn exists(c: &mut Connection, key: &str) -> bool {
    q::<i64>(c, &["EXISTS", key]) == 1
}

/// One entry added to `s` and taken by `w1`: its ID.
fn add_and_take(c: &mut Connection, s: &str) -> String {
    let id: String = q(c, &["XADD", s, "*", "job", "x"]);
    let got = readgroup(c, s, "g", "w1", 1, None);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, id, "a new entry, nothing handed over again");
    id
}

/// Parks `id` (held by `w1`) for `ms` with `RECLAIM.NACK ... DELAY`: the server time before the
/// call.
fn park(c: &mut Connection, s: &str, id: &str, ms: i64) -> i64 {
    let before = server_ms(c);
    let n: i64 = q(
        c,
        &["RECLAIM.NACK", s, "g", "w1", id, "DELAY", &ms.to_string()],
    );
    assert_eq!(n, 1);
    before
}

/// Asserts that `id` is parked at `reclaim:parked` with count `count` and its record in the
/// delay key, due at `before + ms` or later (and not later than now + `ms`).
fn assert_parked(c: &mut Connection, s: &str, id: &str, count: i64, before: i64, ms: i64) {
    let owner = owners(c, s, "g").remove(id);
    assert_eq!(owner, Some(("reclaim:parked".into(), count)), "{s} {id}");
    let member = format!("g\0{id}");
    let due: Option<f64> = cmd("ZSCORE")
        .arg(delay_key(s))
        .arg(member.as_bytes())
        .query(c)
        .unwrap();
    let due = due.expect("the delay record") as i64;
    let now = server_ms(c);
    assert!(
        due >= before + ms && due <= now + ms,
        "{before} {due} {now}"
    );
}

/// Reads as `w2` until `id` comes (at most 20 s), asserting that nothing else came and that it
/// came at or after the server time `before + ms`; then that it is `w2`'s with count `count + 1`
/// and that the delay key is gone.
fn delivered_after(c: &mut Connection, s: &str, id: &str, before: i64, ms: i64, count: i64) {
    let got = wait_for(20, "the parked entry", || {
        let got = readgroup(c, s, "g", "w2", 10, Some(50));
        (!got.is_empty()).then_some(got)
    });
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, id);
    let at = server_ms(c);
    assert!(
        at >= before + ms,
        "delivered at {at}, due at {}",
        before + ms
    );
    assert_eq!(owners(c, s, "g").remove(id), Some(("w2".into(), count + 1)));
    assert!(!exists(c, &delay_key(s)), "the delay key stays");
}

#[test]
fn a_delay_survives_an_rdb_restart() {
    let mut s = Server::new();
    let mut c = s.conn();
    policy(&mut c, "rdb");
    let id = add_and_take(&mut c, "rdb");
    let before = park(&mut c, "rdb", &id, 3000);
    let _: () = q(&mut c, &["SAVE"]);
    s.restart();
    let mut c = s.conn();
    assert_parked(&mut c, "rdb", &id, 1, before, 3000);
    delivered_after(&mut c, "rdb", &id, before, 3000, 1);
}

/// The primary's `sync_partial_ok` and `sync_full` (`INFO stats`).
fn syncs(c: &mut Connection) -> (i64, i64) {
    (
        info_int(c, "stats", "sync_partial_ok"),
        info_int(c, "stats", "sync_full"),
    )
}

/// Kills primary `p`, promotes replica `r` and checks there that both parked entries are kept
/// and delivered at their times.
fn promoted_delivers(mut p: Server, r: &Server, parked: &[(&str, i64, i64)], s: &str) {
    p.kill();
    let mut rc = r.conn();
    for (id, before, ms) in parked {
        assert_parked(&mut rc, s, id, 1, *before, *ms);
    }
    promote(&mut rc);
    // Each comes once, not before its due time (the server's clock after the read that got it).
    let mut got: Vec<String> = Vec::new();
    while got.len() < parked.len() {
        let e = wait_for(20, "a parked entry", || {
            readgroup(&mut rc, s, "g", "w2", 1, Some(50))
                .into_iter()
                .next()
        });
        let at = server_ms(&mut rc);
        let (_, before, ms) = parked
            .iter()
            .find(|x| x.0 == e.0)
            .expect("one of the parked");
        assert!(
            at >= before + ms,
            "{} delivered at {at}, due at {}",
            e.0,
            before + ms
        );
        assert!(!got.contains(&e.0), "{} twice", e.0);
        // Done (or the 500 ms lease ends and it is handed over again).
        let _: i64 = q(&mut rc, &["XACK", s, "g", &e.0]);
        got.push(e.0);
    }
    assert!(!exists(&mut rc, &delay_key(s)));
}

#[test]
fn a_delay_survives_a_partial_resync_then_a_promotion() {
    let p = Server::start(&["--repl-backlog-size", "10mb"]);
    let r = p.replica(&[]);
    let (mut c, mut rc) = (p.conn(), r.conn());
    policy(&mut c, "pr");
    let a = add_and_take(&mut c, "pr");
    let b = add_and_take(&mut c, "pr");
    let before_a = park(&mut c, "pr", &a, 6000);
    replica_acked(&mut c);
    let (partial, full) = syncs(&mut c);
    // The replica drops its link: what the primary parks meanwhile reaches it from the backlog.
    let _: i64 = q(&mut rc, &["CLIENT", "KILL", "TYPE", "master"]);
    let before_b = park(&mut c, "pr", &b, 8000);
    wait_for(20, "a partial resync", || {
        (syncs(&mut c) == (partial + 1, full)).then_some(())
    });
    replica_acked(&mut c);
    promoted_delivers(p, &r, &[(&a, before_a, 6000), (&b, before_b, 8000)], "pr");
}

#[test]
fn a_delay_survives_a_full_resync_then_a_promotion() {
    let p = Server::new();
    let mut c = p.conn();
    policy(&mut c, "fr");
    let a = add_and_take(&mut c, "fr");
    let before_a = park(&mut c, "fr", &a, 8000);
    // A replica attached after the NACK gets the delay key in the RDB of its full sync.
    let (_, full) = syncs(&mut c);
    let r = p.replica(&[]);
    replica_acked(&mut c);
    assert_eq!(syncs(&mut c).1, full + 1, "a full sync");
    let b = add_and_take(&mut c, "fr");
    let before_b = park(&mut c, "fr", &b, 6000);
    replica_acked(&mut c);
    promoted_delivers(p, &r, &[(&a, before_a, 8000), (&b, before_b, 6000)], "fr");
}

#[test]
fn a_delay_moves_with_a_slot_resharded_by_redis_cli() {
    let cl = Cluster::start(3, 0, 2000, &[]);
    let slot = cl.lowest_slot(0);
    let s = format!("{}jobs", tag_for_slot("d", slot));
    let mut c0 = cl.conn(0);
    policy(&mut c0, &s);
    let id = add_and_take(&mut c0, &s);
    let before = park(&mut c0, &s, &id, 4000);
    assert!(exists(&mut c0, &delay_key(&s)));
    cl.reshard(0, 1, 1);
    assert_eq!(cl.owner(slot), 1);
    let mut c1 = cl.conn(1);
    let moved = keys_in_slot(&mut c1, slot as i64);
    assert_eq!(
        moved.len(),
        4,
        "the stream, its policy, delay and NACK record keys: {moved:?}"
    );
    assert!(keys_in_slot(&mut c0, slot as i64).is_empty());
    assert_parked(&mut c1, &s, &id, 1, before, 4000);
    delivered_after(&mut c1, &s, &id, before, 4000, 1);
}

#[test]
fn flushall_forgets_a_delay_and_a_new_stream_of_that_name_keeps_its_own() {
    let s = Server::new();
    let mut c = s.conn();
    policy(&mut c, "fl");
    let _: String = q(&mut c, &["XADD", "fl", "5-1", "job", "x"]);
    assert_eq!(readgroup(&mut c, "fl", "g", "w1", 1, None).len(), 1);
    let _ = park(&mut c, "fl", "5-1", 1000);
    assert!(exists(&mut c, &nack_key("fl")), "the NACK names its worker");
    let _: () = q(&mut c, &["FLUSHALL"]);
    for k in [delay_key("fl"), nack_key("fl")] {
        assert!(!exists(&mut c, &k), "{k}");
    }
    // The same names and ID again: the new entry is due at its own time, not the old one's.
    policy(&mut c, "fl");
    let _: String = q(&mut c, &["XADD", "fl", "5-1", "job", "y"]);
    assert_eq!(readgroup(&mut c, "fl", "g", "w1", 1, None).len(), 1);
    let before = park(&mut c, "fl", "5-1", 3000);
    assert_parked(&mut c, "fl", "5-1", 1, before, 3000);
    delivered_after(&mut c, "fl", "5-1", before, 3000, 1);
}

#[test]
fn a_delay_goes_with_swapdb_and_back() {
    let s = Server::new();
    let mut c = s.conn();
    policy(&mut c, "sw");
    let id = add_and_take(&mut c, "sw");
    let before = park(&mut c, "sw", &id, 3000);
    let _: () = q(&mut c, &["SWAPDB", "0", "2"]);
    let mut c2 = s.conn_db(2);
    assert!(!exists(&mut c, &delay_key("sw")));
    assert_parked(&mut c2, "sw", &id, 1, before, 3000);
    let _: () = q(&mut c, &["SWAPDB", "2", "0"]);
    assert!(!exists(&mut c2, &delay_key("sw")));
    assert_parked(&mut c, "sw", &id, 1, before, 3000);
    delivered_after(&mut c, "sw", &id, before, 3000, 1);
}

#[test]
fn a_stream_deleted_or_a_group_destroyed_leaves_no_key() {
    let s = Server::new();
    let mut c = s.conn();
    for k in ["del", "destroy"] {
        policy(&mut c, k);
        let id = add_and_take(&mut c, k);
        let _ = park(&mut c, k, &id, 3_600_000);
        let other = add_and_take(&mut c, k);
        let n: i64 = q(
            &mut c,
            &["RECLAIM.NACK", k, "g", "w1", &other, "REASON", "x"],
        );
        assert_eq!(n, 1);
        for key in [delay_key(k), nack_key(k)] {
            assert!(exists(&mut c, &key), "{key}");
        }
    }
    let _: i64 = q(&mut c, &["DEL", "del"]);
    let _: i64 = q(&mut c, &["XGROUP", "DESTROY", "destroy", "g"]);
    for k in ["del", "destroy"] {
        for key in [delay_key(k), nack_key(k)] {
            wait_for(20, "the key deleted", || {
                (!exists(&mut c, &key)).then_some(())
            });
        }
    }
    // The group created again reads the stream from the start: the old entries are new ones,
    // delivered at once, none parked.
    let _: () = q(&mut c, &["XGROUP", "CREATE", "destroy", "g", "0"]);
    assert_eq!(readgroup(&mut c, "destroy", "g", "w2", 10, None).len(), 2);
    assert!(owners(&mut c, "destroy", "g").values().all(|o| o.0 == "w2"));
}
