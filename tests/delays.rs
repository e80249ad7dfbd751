//! `RECLAIM.NACK ... DELAY ms` longer than the lease (`MIN-IDLE`): the entry is parked at
//! `<claimant>:parked` with its due time in the stream's delay key (`reclaim:delay:{TAG}:STREAM`,
//! a sorted set), is not delivered to anyone before that time and is delivered once due, across
//! `DEBUG RELOAD`, an AOF restart and a replica promotion; records of a stream or group that is
//! gone go, and the key with them.

use reclaim_testkit::*;

/// A policy on stream `s`, group `g`: MIN-IDLE 500, MAX-DELIVERIES `max`, DLQ `s:dlq`, INTERVAL
/// `interval`.
fn policy_every(c: &mut Connection, s: &str, max: i64, interval: i64) {
    create_group(c, s.as_bytes(), b"g");
    let opts = format!("MIN-IDLE 500 MAX-DELIVERIES {max} DLQ {s}:dlq INTERVAL {interval}");
    set_policy_opts(c, s, "g", &opts);
}

/// [`policy_every`] at INTERVAL 100.
fn policy(c: &mut Connection, s: &str, max: i64) {
    policy_every(c, s, max, 100);
}

/// (owner, delivery count) of entry `id` of group `g`, or `None` when it is not pending.
fn owner(c: &mut Connection, s: &str, id: &str) -> Option<(String, i64)> {
    pending_of(c, s, "g", id)
}

/// One entry added to `s` and taken by `w1`: its ID.
fn add_and_take(c: &mut Connection, s: &str) -> String {
    let id: String = q(c, &["XADD", s, "*", "job", "x"]);
    let got = readgroup(c, s, "g", "w1", 1, None);
    assert_eq!(got.len(), 1);
    id
}

/// A policy on `s` (MAX-DELIVERIES 10), one entry taken by `w1` and given back with `DELAY ms`:
/// its ID and the server time just before the NACK.
fn parked(c: &mut Connection, s: &str, ms: i64) -> (String, i64) {
    policy(c, s, 10);
    let id = add_and_take(c, s);
    let before = server_ms(c);
    assert_eq!(nack(c, s, &id, ms, &[]), 1);
    (id, before)
}

/// `RECLAIM.NACK s g w1 id DELAY ms [extra...]`: the entries released.
fn nack(c: &mut Connection, s: &str, id: &str, ms: i64, extra: &[&str]) -> i64 {
    cmd("RECLAIM.NACK")
        .arg(&[s, "g", "w1", id, "DELAY", &ms.to_string()])
        .arg(extra)
        .query(c)
        .expect("RECLAIM.NACK")
}

/// The error of `RECLAIM.NACK <args...>`.
fn nack_error(c: &mut Connection, args: &[&str]) -> String {
    error_of(c, cmd("RECLAIM.NACK").arg(args))
}

/// A connection of `s` as user `worker`, with every command on the keys `keys` and the policy
/// keys only.
fn worker_on(s: &Server, keys: &str) -> Connection {
    let mut admin = s.conn();
    acl_user(&mut admin, "worker", &["+@all", keys, "~reclaim:policy:*"]);
    s.conn_as("worker")
}

/// Reads with `RECLAIM.READGROUP` as `w2` until the entry comes (at most 20 s), and asserts
/// that it came at or after the server time `before` + `ms` (the due time is wall-clock: the
/// server's clock, not the test's, which may run at another rate).
fn delivered_after(c: &mut Connection, s: &str, id: &str, before: i64, ms: i64) {
    let got = wait_for(20, "the parked entry", || {
        readgroup(c, s, "g", "w2", 10, Some(50)).into_iter().next()
    });
    assert_eq!(got.0, id);
    let at = server_ms(c);
    assert!(
        at >= before + ms,
        "delivered at {at}, due at {} or later",
        before + ms
    );
}

/// The parked entry is at `reclaim:parked` with its count, and the delay key holds its record,
/// due about `ms` after the server time `before` (set before the NACK).
fn assert_parked(c: &mut Connection, s: &str, id: &str, count: i64, before: i64, ms: i64) {
    assert_eq!(owner(c, s, id), Some(("reclaim:parked".into(), count)));
    let due = delay_due(c, s, "g", id).expect("the delay record");
    let after = server_ms(c);
    assert!(
        due >= before + ms && due <= after + ms,
        "{before} {due} {after}"
    );
}

fn exists(c: &mut Connection, key: &str) -> bool {
    q::<i64>(c, &["EXISTS", key]) == 1
}

/// Waits until `key` is deleted.
fn wait_gone(c: &mut Connection, key: &str, what: &str) {
    wait_for(20, what, || (!exists(c, key)).then_some(()));
}

#[test]
fn a_delay_longer_than_the_lease_is_kept_then_delivered_and_the_key_goes() {
    let s = Server::new();
    let mut c = s.conn();
    let (id, before) = parked(&mut c, "d", 2500);
    assert_parked(&mut c, "d", &id, 1, before, 2500);
    assert_eq!(q::<String>(&mut c, &["TYPE", &delay_key("d")]), "zset");
    // RECLAIM.HEALTH counts it apart, with its due time.
    let health = run(&mut c, &["RECLAIM.HEALTH", "d", "g"]);
    let live = field(&health, "live");
    assert_eq!(int_field(&live, "delayed"), 1);
    let due = delay_due(&mut c, "d", "g", &id);
    assert_eq!(Some(int_field(&live, "next-due-ms")), due);
    // Five leases later it is still parked: the sweep leaves it alone.
    delivered_after(&mut c, "d", &id, before, 2500);
    assert_eq!(owner(&mut c, "d", &id), Some(("w2".into(), 2)));
    assert!(!exists(&mut c, &delay_key("d")), "the delay key stays");
    // A due parked entry nobody reads goes into the inbox within an INTERVAL or so.
    assert_eq!(
        cmd("RECLAIM.NACK")
            .arg(&["d", "g", "w2", &id, "DELAY", "800"])
            .query::<i64>(&mut c)
            .unwrap(),
        1
    );
    assert_eq!(owner(&mut c, "d", &id), Some(("reclaim:parked".into(), 2)));
    let inbox = Some(("reclaim".into(), 2));
    wait_for(20, "the inbox", || {
        (owner(&mut c, "d", &id) == inbox).then_some(())
    });
    assert!(!exists(&mut c, &delay_key("d")));
}

#[test]
fn a_delay_survives_debug_reload_and_an_aof_restart() {
    let mut s = Server::with_aof_and_debug();
    let mut c = s.conn();
    let (id, before) = parked(&mut c, "r", 4000);
    let _: () = cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    assert_parked(&mut c, "r", &id, 1, before, 4000);
    s.restart();
    let mut c = s.conn();
    assert_parked(&mut c, "r", &id, 1, before, 4000);
    delivered_after(&mut c, "r", &id, before, 4000);
    assert_eq!(owner(&mut c, "r", &id), Some(("w2".into(), 2)));
    assert!(!exists(&mut c, &delay_key("r")));
}

#[test]
fn a_promoted_replica_delivers_a_delay_its_primary_took() {
    let mut p = Server::new();
    let r = p.replica(&[]);
    let mut c = p.conn();
    let (id, before) = parked(&mut c, "f", 3000);
    replica_acked(&mut c);
    p.kill();
    let mut rc = r.conn();
    assert_parked(&mut rc, "f", &id, 1, before, 3000);
    promote(&mut rc);
    delivered_after(&mut rc, "f", &id, before, 3000);
    assert!(!exists(&mut rc, &delay_key("f")));
}

#[test]
fn a_delay_moves_with_swapdb() {
    let s = Server::new();
    let mut c = s.conn();
    let (id, before) = parked(&mut c, "w", 1500);
    let _: () = q(&mut c, &["SWAPDB", "0", "1"]);
    assert!(!exists(&mut c, &delay_key("w")));
    let mut c1 = s.conn_db(1);
    assert_parked(&mut c1, "w", &id, 1, before, 1500);
    delivered_after(&mut c1, "w", &id, before, 1500);
    assert!(!exists(&mut c1, &delay_key("w")));
}

#[test]
fn nothing_stays_parked_for_a_stream_or_group_that_is_gone() {
    let s = Server::new();
    let mut c = s.conn();
    for k in ["gone", "nogroup", "flushed"] {
        policy(&mut c, k, 10);
        let id = add_and_take(&mut c, k);
        assert_eq!(nack(&mut c, k, &id, 7 * 24 * 3600 * 1000, &[]), 1);
        assert!(exists(&mut c, &delay_key(k)));
    }
    let _: i64 = q(&mut c, &["DEL", "gone"]);
    let _: i64 = q(&mut c, &["XGROUP", "DESTROY", "nogroup", "g"]);
    for k in ["gone", "nogroup"] {
        wait_gone(&mut c, &delay_key(k), "the delay key deleted");
    }
    let _: () = q(&mut c, &["FLUSHALL"]);
    assert!(!exists(&mut c, &delay_key("flushed")));
    // A new stream of the same name starts clean: nothing of the old delay comes back.
    policy(&mut c, "flushed", 10);
    let id = add_and_take(&mut c, "flushed");
    assert_eq!(nack(&mut c, "flushed", &id, 0, &[]), 1);
    assert_eq!(owner(&mut c, "flushed", &id), Some(("reclaim".into(), 1)));
}

#[test]
fn bad_delays_and_a_delay_key_of_another_type_change_nothing() {
    let s = Server::new();
    let mut c = s.conn();
    policy(&mut c, "b", 10);
    let id = add_and_take(&mut c, "b");
    let range = "ERR DELAY must be an integer from 0 to 2592000000 (ms, 30 days)";
    let over = nack_error(&mut c, &["b", "g", "w1", &id, "DELAY", "2592000001"]);
    assert_eq!(
        over,
        "ERR DELAY 2592000001 is longer than 500, the idle (ms) after which the entry is due, and than 2592000000 (30 days), the longest delay"
    );
    let e = nack_error(&mut c, &["b", "g", "w9", &id, "DELAY", "2592000001"]);
    assert_eq!(e, range, "nothing of w9's: no due idle to name");
    for bad in ["-1", "soon", "1.5", ""] {
        let e = nack_error(&mut c, &["b", "g", "w1", &id, "DELAY", bad]);
        assert_eq!(e, range, "{bad}");
    }
    let twice = ["b", "g", "w1", &id, "DELAY", "5", "DELAY", "6"];
    let e = nack_error(&mut c, &twice);
    assert_eq!(e, "ERR option DELAY given more than once");
    let e = nack_error(&mut c, &["b", "g", "w1", &id, "SOON", "5"]);
    assert_eq!(
        e,
        "ERR Invalid stream ID specified as stream command argument"
    );
    assert_eq!(owner(&mut c, "b", &id), Some(("w1".into(), 1)));
    // The delay key holds a string: a delay that parks is refused, a short one still works.
    let _: () = q(&mut c, &["SET", &delay_key("b"), "not a zset"]);
    let e = nack_error(&mut c, &["b", "g", "w1", &id, "DELAY", "5000"]);
    assert_eq!(
        e,
        "WRONGTYPE the delay key of this stream (reclaim:delay:{...}) holds a value that is not a sorted set"
    );
    assert_eq!(owner(&mut c, "b", &id), Some(("w1".into(), 1)));
    wait_passes(&mut c, "b", "g", 2);
    assert_eq!(q::<String>(&mut c, &["GET", &delay_key("b")]), "not a zset");
    assert!(s.log().contains("holds a value that is not a sorted set"));
    assert_eq!(nack(&mut c, "b", &id, 100, &[]), 1);
    assert_eq!(owner(&mut c, "b", &id), Some(("reclaim:delayed".into(), 1)));
    // Members a client wrote that are no parked entry's are dropped; the key then goes.
    let _: i64 = q(&mut c, &["DEL", &delay_key("b")]);
    let _: i64 = q(
        &mut c,
        &["ZADD", &delay_key("b"), "0", "garbage", "1", "g\x001-1"],
    );
    wait_gone(&mut c, &delay_key("b"), "the garbage dropped");
}

#[test]
fn parking_needs_the_right_to_write_the_delay_key() {
    let s = Server::new();
    let mut c = s.conn();
    policy(&mut c, "a", 10);
    let id = add_and_take(&mut c, "a");
    let mut c = worker_on(&s, "~a");
    let e = nack_error(&mut c, &["a", "g", "w1", &id, "DELAY", "5000"]);
    assert_eq!(
        e,
        "NOPERM this user has no permissions to run ZADD on the delay key"
    );
    assert_eq!(owner(&mut c, "a", &id), Some(("w1".into(), 1)));
    // Within the lease no delay key is written: allowed.
    assert_eq!(nack(&mut c, "a", &id, 300, &[]), 1);
    assert_eq!(owner(&mut c, "a", &id), Some(("reclaim:delayed".into(), 1)));
}

/// The fields of the DLQ entries of `dlq`, raw and flat.
fn dlq_fields(c: &mut Connection, dlq: &str) -> Vec<Vec<Vec<u8>>> {
    xrange(c, dlq.as_bytes()).into_iter().map(|e| e.1).collect()
}

/// `RECLAIM.NACK s g <w> id DELAY ms REASON <reason>` (binary reason).
fn nack_why(c: &mut Connection, s: &str, w: &str, id: &str, ms: i64, reason: &[u8]) -> i64 {
    cmd("RECLAIM.NACK")
        .arg(&[s, "g", w, id, "DELAY", &ms.to_string(), "REASON"])
        .arg(reason)
        .query(c)
        .expect("RECLAIM.NACK ... REASON")
}

#[test]
fn a_dead_letter_names_the_last_worker_and_its_reason() {
    let s = Server::new();
    let mut c = s.conn();
    let why: &[u8] = b"upstream timed out\0\xff after 5 s";
    // "sw": dead-lettered by the sweep once its parked delay is over; "rg" (INTERVAL 60 s, so no
    // pass comes): by the RECLAIM.READGROUP that finds it due.
    for (k, interval) in [("sw", 100), ("rg", 60_000)] {
        policy_every(&mut c, k, 2, interval);
        let id = add_and_take(&mut c, k);
        assert_eq!(nack_why(&mut c, k, "w1", &id, 0, b"first try"), 1);
        assert_eq!(readgroup(&mut c, k, "g", "w2", 1, None).len(), 1);
        assert_eq!(owner(&mut c, k, &id), Some(("w2".into(), 2)));
        // Its last attempt fails too: parked (800 ms > MIN-IDLE), with w2's reason.
        assert_eq!(nack_why(&mut c, k, "w2", &id, 800, why), 1);
        assert_eq!(owner(&mut c, k, &id), Some(("reclaim:parked".into(), 2)));
        assert_eq!(q::<String>(&mut c, &["TYPE", &nack_key(k)]), "hash");
        let dlq = format!("{k}:dlq");
        wait_for(20, "the dead-letter", || {
            if k == "rg" {
                assert!(readgroup(&mut c, k, "g", "w3", 1, Some(50)).is_empty());
            }
            (xlen(&mut c, dlq.as_str()) == 1).then_some(())
        });
        let dead = dlq_fields(&mut c, &dlq);
        let f = &dead[0];
        assert_eq!(flat_field(f, "reclaim-consumer"), Some(&b"w2"[..]), "{k}");
        assert_eq!(
            flat_field(f, "reclaim-reason"),
            Some(&b"max-deliveries"[..]),
            "{k}"
        );
        assert_eq!(flat_field(f, "reclaim-last-error"), Some(why), "{k}");
        assert_eq!(flat_field(f, "reclaim-deliveries"), Some(&b"2"[..]), "{k}");
        assert!(owners(&mut c, k, "g").is_empty());
        assert!(!exists(&mut c, &nack_key(k)), "{k}: the record stays");
        assert!(
            !exists(&mut c, &delay_key(k)),
            "{k}: the delay record stays"
        );
    }
    // A record of an earlier delivery does not apply: the worker of the last one crashed.
    let opts = "MIN-IDLE 500 MAX-DELIVERIES 2 DLQ sw:dlq INTERVAL 100";
    set_policy_opts(&mut c, "sw", "g", opts);
    let id = add_and_take(&mut c, "sw");
    assert_eq!(nack_why(&mut c, "sw", "w1", &id, 0, b"first try"), 1);
    assert_eq!(readgroup(&mut c, "sw", "g", "w2", 1, None).len(), 1);
    wait_for(20, "the dead-letter", || {
        (xlen(&mut c, "sw:dlq") == 2).then_some(())
    });
    let dead = dlq_fields(&mut c, "sw:dlq");
    assert_eq!(flat_field(&dead[1], "reclaim-consumer"), Some(&b"w2"[..]));
    assert_eq!(flat_field(&dead[1], "reclaim-last-error"), None);
    assert!(!exists(&mut c, "reclaim:nack:{sw}:sw"));
    // Bad reasons change nothing; a reason needs the right to write the record key.
    let id = add_and_take(&mut c, "sw");
    let long = vec![b'x'; 1025];
    let e = error_of(
        &mut c,
        cmd("RECLAIM.NACK")
            .arg(&["sw", "g", "w1", &id, "REASON"])
            .arg(&long[..]),
    );
    assert_eq!(e, "ERR REASON is longer than 1024 bytes");
    let _: () = q(&mut c, &["SET", "reclaim:nack:{sw}:sw", "x"]);
    let e = nack_error(&mut c, &["sw", "g", "w1", &id, "REASON", "r"]);
    assert_eq!(
        e,
        "WRONGTYPE the NACK record key of this stream (reclaim:nack:{...}) holds a value that is not a hash"
    );
    let _: i64 = q(&mut c, &["DEL", "reclaim:nack:{sw}:sw"]);
    let mut c = worker_on(&s, "~sw");
    let e = nack_error(&mut c, &["sw", "g", "w1", &id, "REASON", "r"]);
    assert_eq!(
        e,
        "NOPERM this user has no permissions to run HSET on the NACK record key"
    );
    assert_eq!(owner(&mut c, "sw", &id), Some(("w1".into(), 1)));
}
