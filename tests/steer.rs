//! Operators steer live policies: `RECLAIM.POLICY PAUSE` / `RESUME`, the server-wide
//! `reclaim.enabled`, and the `STORM` breaker that stops a dead-letter storm by itself. Each state
//! lives with the policy: it survives a restart (AOF and RDB) and reaches replicas.

use reclaim_testkit::*;

const STORM_OPEN: &str =
    "ERR the STORM breaker of this policy is open: no dead-letters until RECLAIM.POLICY RESUME";

/// The `state` field of `RECLAIM.POLICY GET s g`.
fn state(c: &mut Connection, s: &str, g: &str) -> String {
    let v = get_policy(c, s.as_bytes(), g.as_bytes()).expect("a policy");
    String::from_utf8(v.state).expect("state is text")
}

/// Stream `s` with group `g`: `n` entries read by consumer `dead` (which then never
/// acknowledges), and the delivery count of the first `poison` of them set to `count`. Returns
/// the IDs.
fn delivered(c: &mut Connection, s: &str, n: usize, poison: usize, count: i64) -> Vec<String> {
    ensure_group(c, s.as_bytes(), b"g");
    let ids = add_entries(c, s.as_bytes(), "job", n);
    read_group(c, s.as_bytes(), b"g", b"dead");
    if poison > 0 {
        set_deliveries(c, s.as_bytes(), b"g", b"dead", &ids[..poison], count);
    }
    ids
}

/// A busy policy on stream `witness`: its passes show that the timer kept running.
fn witness(c: &mut Connection) {
    create_group(c, b"witness", b"g");
    set_policy_opts(c, "witness", "g", "MIN-IDLE 100 INTERVAL 50");
}

#[test]
fn pause_stops_moves_and_dead_letters_until_resume() {
    let s = Server::new();
    let mut c = s.conn();
    witness(&mut c);
    let ids = delivered(&mut c, "jobs", 10, 3, 2);
    // SET and PAUSE in one MULTI/EXEC: no timer pass can run between them.
    let _: () = redis::pipe()
        .atomic()
        .cmd("RECLAIM.POLICY")
        .arg("SET")
        .arg(&["jobs", "g"])
        .arg(
            "MIN-IDLE 100 MAX-DELIVERIES 2 DLQ jobs:dlq INTERVAL 50"
                .split(' ')
                .collect::<Vec<_>>(),
        )
        .ignore()
        .cmd("RECLAIM.POLICY")
        .arg(&["PAUSE", "jobs", "g"])
        .ignore()
        .query(&mut c)
        .expect("SET and PAUSE");
    assert_eq!(state(&mut c, "jobs", "g"), "paused");
    assert_eq!(status(&mut c, "jobs", "g"), "paused");
    let before = pel_state(&mut c, "jobs", "g");

    // Every entry is due (3 for the DLQ, 7 for the claimant), and the timer ran many passes.
    wait_idle(&mut c, "jobs", "g", 300);
    wait_passes(&mut c, "witness", "g", 3);
    assert_eq!(
        pel_state(&mut c, "jobs", "g"),
        before,
        "nothing moved while paused"
    );
    assert_eq!(
        xlen(&mut c, "jobs:dlq"),
        0,
        "nothing dead-lettered while paused"
    );
    assert_eq!(stat(&mut c, "jobs", "g", "passes"), 0);

    // Commands that would move or dead-letter say why they do not.
    let e = error_of(&mut c, cmd("RECLAIM.SWEEP").arg("jobs").arg("g"));
    assert_eq!(e, PAUSED);
    let e = error_of(
        &mut c,
        cmd("RECLAIM.TERM").arg(&["jobs", "g", "dead", ids[5].as_str()]),
    );
    assert_eq!(e, PAUSED);
    // A reader gets new entries only: no stale entry is handed over while paused.
    let fresh = add_entries(&mut c, b"jobs", "new", 1);
    let got = readgroup(&mut c, "jobs", "g", "w1", 100, None);
    let got: Vec<String> = got.into_iter().map(|e| e.0).collect();
    assert_eq!(got, fresh);
    // A SET of new options keeps the policy paused.
    set_policy_opts(
        &mut c,
        "jobs",
        "g",
        "MIN-IDLE 100 MAX-DELIVERIES 2 DLQ jobs:dlq INTERVAL 40",
    );
    assert_eq!(state(&mut c, "jobs", "g"), "paused");

    // RESUME: the poison goes to the DLQ, the rest to the claimant's inbox.
    policy_ok(&mut c, &["RESUME", "jobs", "g"]);
    assert_eq!(state(&mut c, "jobs", "g"), "active");
    wait_for(20, "the resumed policy to drain", || {
        (xlen(&mut c, "jobs:dlq") == 3).then_some(())
    });
    let mut dead = dlq_ids(&xrange(&mut c, b"jobs:dlq"));
    dead.sort();
    assert_eq!(dead, ids[..3].to_vec());
    wait_for(20, "the other stale entries in the inbox", || {
        let o = pel_state(&mut c, "jobs", "g");
        o.iter()
            .filter(|(id, _, _)| ids[3..].contains(id))
            .all(|(_, owner, _)| owner == "reclaim")
            .then_some(())
    });
    assert_eq!(status(&mut c, "jobs", "g"), "active");
}

#[test]
fn pause_and_storm_errors() {
    let s = Server::new();
    let mut c = s.conn();
    let e = error_of(&mut c, cmd("RECLAIM.POLICY").arg(&["PAUSE", "nope", "g"]));
    assert_eq!(e, NO_POLICY);
    let e = error_of(&mut c, cmd("RECLAIM.POLICY").arg(&["RESUME", "nope", "g"]));
    assert_eq!(e, NO_POLICY);
    create_group(&mut c, b"s", b"g");
    set_policy_opts(&mut c, "s", "g", "");
    for extra in [&["NOW"][..], &["STORM", "x"][..]] {
        let e = error_of(
            &mut c,
            cmd("RECLAIM.POLICY").arg(&["PAUSE", "s", "g"]).arg(extra),
        );
        assert_eq!(e, PAUSE_SYNTAX);
    }
    let e = error_of(
        &mut c,
        cmd("RECLAIM.POLICY").arg(&["RESUME", "s", "g", "x"]),
    );
    assert!(e.starts_with("ERR wrong number of arguments"), "{e}");
    let bad =
        "ERR STORM must be two positive integers: the most dead-letters, then the window (ms)";
    for opts in [
        &["STORM", "0", "100"][..],
        &["STORM", "5", "0"],
        &["STORM", "5"],
        &["STORM", "a", "1"],
    ] {
        let e = error_of(
            &mut c,
            cmd("RECLAIM.POLICY").arg(&["SET", "s", "g"]).arg(opts),
        );
        assert_eq!(e, bad, "{opts:?}");
    }
    assert_eq!(
        state(&mut c, "s", "g"),
        "active",
        "a refused SET changes nothing"
    );
    // PAUSE and RESUME are idempotent.
    policy_ok(&mut c, &["PAUSE", "s", "g"]);
    policy_ok(&mut c, &["PAUSE", "s", "g"]);
    assert_eq!(state(&mut c, "s", "g"), "paused");
    policy_ok(&mut c, &["RESUME", "s", "g"]);
    policy_ok(&mut c, &["RESUME", "s", "g"]);
    assert_eq!(state(&mut c, "s", "g"), "active");
}

#[test]
fn the_storm_breaker_stops_a_dead_letter_storm_and_resume_drains_it() {
    let s = Server::new();
    let mut c = s.conn();
    let replica = s.replica(&[]);
    let mut rc = replica.conn();
    witness(&mut c);
    // 30 poison entries (deliveries used up) and 4 others that are only stale.
    let ids = delivered(&mut c, "orders", 34, 30, 2);
    set_policy_opts(
        &mut c,
        "orders",
        "g",
        "MIN-IDLE 100 MAX-DELIVERIES 2 DLQ orders:dlq INTERVAL 50 STORM 10 600000",
    );
    wait_for(20, "the breaker to open", || {
        (state(&mut c, "orders", "g") == "storm").then_some(())
    });
    // At most 10 within the window: the 11th would have opened it.
    assert_eq!(xlen(&mut c, "orders:dlq"), 10);
    assert_eq!(status(&mut c, "orders", "g"), "storm");
    assert_eq!(stat(&mut c, "orders", "g", "storms"), 1);
    assert_eq!(reclaim_info(&mut c, "storms"), 1);
    // Moves go on: the 4 stale entries reach the inbox; the poison stays pending.
    wait_for(20, "the stale entries in the inbox", || {
        let o = pel_state(&mut c, "orders", "g");
        o.iter()
            .filter(|(id, _, _)| ids[30..].contains(id))
            .all(|(_, owner, _)| owner == "reclaim")
            .then_some(())
    });
    wait_passes(&mut c, "orders", "g", 3);
    assert_eq!(xlen(&mut c, "orders:dlq"), 10, "the breaker holds");
    assert_eq!(pel_total(&mut c, "orders", "g"), 24);
    let e = error_of(
        &mut c,
        cmd("RECLAIM.TERM").arg(&["orders", "g", "dead", ids[20].as_str()]),
    );
    assert_eq!(e, STORM_OPEN);
    // The replica holds the same state (replicated as PAUSE ... STORM with the dead-letters).
    replica_acked(&mut c);
    assert_eq!(state(&mut rc, "orders", "g"), "storm");
    assert_eq!(xlen(&mut rc, "orders:dlq"), 10);

    // RESUME closes it, and what it held back drains.
    policy_ok(&mut c, &["RESUME", "orders", "g"]);
    wait_for(20, "the held-back poison to drain", || {
        (xlen(&mut c, "orders:dlq") == 30).then_some(())
    });
    let mut dead = dlq_ids(&xrange(&mut c, b"orders:dlq"));
    dead.sort();
    let mut poison = ids[..30].to_vec();
    poison.sort();
    assert_eq!(dead, poison, "every poison entry exactly once");
    assert_eq!(state(&mut c, "orders", "g"), "active");
    assert_eq!(pel_total(&mut c, "orders", "g"), 4);
}

#[test]
fn term_counts_toward_the_breaker() {
    let s = Server::new();
    let mut c = s.conn();
    let ids = delivered(&mut c, "t", 5, 0, 1);
    set_policy_opts(
        &mut c,
        "t",
        "g",
        "MIN-IDLE 600000 MAX-DELIVERIES 5 DLQ t:dlq STORM 3 600000",
    );
    // Four at once: three are dead-lettered, the fourth would open the breaker and stays.
    let n: i64 = cmd("RECLAIM.TERM")
        .arg(&["t", "g", "dead"])
        .arg(&ids[..4])
        .query(&mut c)
        .unwrap();
    assert_eq!(n, 3);
    assert_eq!(state(&mut c, "t", "g"), "storm");
    let left: Vec<String> = pending(&mut c, "t", "g")
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(left, ids[3..].to_vec());
    let e = error_of(
        &mut c,
        cmd("RECLAIM.TERM").arg(&["t", "g", "dead", ids[4].as_str()]),
    );
    assert_eq!(e, STORM_OPEN);
}

#[test]
fn reclaim_enabled_no_stops_every_policy() {
    let s = Server::new();
    let mut c = s.conn();
    let ids = delivered(&mut c, "a", 4, 1, 2);
    delivered(&mut c, "b", 3, 0, 1);
    // Disabled first: a new policy's first pass is due at once.
    let _: () = cmd("CONFIG")
        .arg(&["SET", "reclaim.enabled", "no"])
        .query(&mut c)
        .unwrap();
    assert_eq!(config_get(&mut c, "reclaim.enabled"), "no");
    for k in ["a", "b"] {
        set_policy_opts(
            &mut c,
            k,
            "g",
            &format!("MIN-IDLE 100 MAX-DELIVERIES 2 DLQ {k}:dlq INTERVAL 50"),
        );
    }
    let (a0, b0) = (pel_state(&mut c, "a", "g"), pel_state(&mut c, "b", "g"));
    assert_eq!(status(&mut c, "a", "g"), "disabled");
    // Long past due: at least ten INTERVALs.
    wait_idle(&mut c, "a", "g", 600);
    wait_idle(&mut c, "b", "g", 600);
    assert_eq!(
        (pel_state(&mut c, "a", "g"), pel_state(&mut c, "b", "g")),
        (a0, b0)
    );
    assert_eq!(xlen(&mut c, "a:dlq"), 0);
    let e = error_of(&mut c, cmd("RECLAIM.SWEEP").arg(&["a", "g"]));
    assert_eq!(e, DISABLED);
    let e = error_of(
        &mut c,
        cmd("RECLAIM.TERM").arg(&["a", "g", "dead", ids[1].as_str()]),
    );
    assert_eq!(e, DISABLED);
    let e = error_of(
        &mut c,
        cmd("CONFIG").arg(&["SET", "reclaim.enabled", "maybe"]),
    );
    assert!(e.contains("argument must be 'yes' or 'no'"), "{e}");

    let _: () = cmd("CONFIG")
        .arg(&["SET", "reclaim.enabled", "yes"])
        .query(&mut c)
        .unwrap();
    wait_for(20, "both policies to run again", || {
        let a = pel_state(&mut c, "a", "g");
        let b = pel_state(&mut c, "b", "g");
        (xlen(&mut c, "a:dlq") == 1
            && a.iter().all(|(_, o, _)| o == "reclaim")
            && b.iter().all(|(_, o, _)| o == "reclaim"))
        .then_some(())
    });
}

#[test]
fn states_survive_restart_reload_and_promotion() {
    let mut s = Server::start(&["--appendonly", "yes", "--enable-debug-command", "yes"]);
    let mut c = s.conn();
    for k in ["p", "q", "r"] {
        create_group(&mut c, k.as_bytes(), b"g");
        set_policy_opts(
            &mut c,
            k,
            "g",
            &format!("MIN-IDLE 100 MAX-DELIVERIES 3 DLQ {k}:dlq STORM 7 5000"),
        );
    }
    policy_ok(&mut c, &["PAUSE", "p", "g"]);
    policy_ok(&mut c, &["PAUSE", "q", "g", "STORM"]);
    let want = |c: &mut Connection| {
        (
            state(c, "p", "g"),
            state(c, "q", "g"),
            state(c, "r", "g"),
            get_policy(c, b"q", b"g").and_then(|p| p.storm),
        )
    };
    let expected = (
        "paused".to_string(),
        "storm".to_string(),
        "active".to_string(),
        Some((7, 5000)),
    );
    assert_eq!(want(&mut c), expected);

    // AOF replay (the commands as written), then an AOF rewrite (PAUSE after SET), then RDB.
    s.restart();
    let mut c = s.conn();
    assert_eq!(want(&mut c), expected, "after an AOF restart");
    let _: Value = cmd("BGREWRITEAOF").query(&mut c).unwrap();
    wait_aof_rewrite_done(&mut c);
    s.restart();
    let mut c = s.conn();
    assert_eq!(want(&mut c), expected, "after a rewritten AOF");
    let _: Value = cmd("DEBUG").arg("RELOAD").query(&mut c).unwrap();
    assert_eq!(want(&mut c), expected, "after an RDB reload");

    // A replica has them; promoted, it keeps the paused policy paused.
    let replica = s.replica(&[]);
    let mut rc = replica.conn();
    assert_eq!(want(&mut rc), expected, "on the replica");
    witness(&mut c);
    let _ = delivered(&mut c, "p", 5, 0, 1);
    replica_acked(&mut c);
    let before = pel_state(&mut rc, "p", "g");
    drop(c);
    s.kill();
    promote(&mut rc);
    wait_idle(&mut rc, "p", "g", 300);
    wait_passes(&mut rc, "witness", "g", 3);
    assert_eq!(
        pel_state(&mut rc, "p", "g"),
        before,
        "promoted: still paused"
    );
    assert_eq!(status(&mut rc, "p", "g"), "paused");
    policy_ok(&mut rc, &["RESUME", "p", "g"]);
    wait_for(20, "the resumed policy to move the stale entries", || {
        pel_state(&mut rc, "p", "g")
            .iter()
            .all(|(_, o, _)| o == "reclaim")
            .then_some(())
    });
}

#[test]
fn readgroup_dead_letters_count_toward_the_breaker() {
    let s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"r", b"g");
    // A long INTERVAL: after its first pass the sweep stays out of the way, so the readers
    // decide.
    set_policy_opts(
        &mut c,
        "r",
        "g",
        "MIN-IDLE 200 MAX-DELIVERIES 1 DLQ r:dlq INTERVAL 600000 STORM 1 600000",
    );
    let ids = add_entries(&mut c, b"r", "job", 3);
    let first = readgroup(&mut c, "r", "g", "w1", 10, None);
    assert_eq!(first.len(), 3);
    wait_idle(&mut c, "r", "g", 250);
    // Every attempt is used up: the first is dead-lettered, the second would open the breaker.
    wait_for(20, "a reader to meet the breaker", || {
        let got = readgroup(&mut c, "r", "g", "w2", 10, None);
        assert!(got.is_empty(), "nothing is handed over: {got:?}");
        (state(&mut c, "r", "g") == "storm").then_some(())
    });
    assert_eq!(xlen(&mut c, "r:dlq"), 1);
    let left: Vec<String> = pending(&mut c, "r", "g")
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(left.len(), 2);
    assert!(left.iter().all(|id| ids.contains(id)));
    let got = readgroup(&mut c, "r", "g", "w2", 10, None);
    assert!(got.is_empty(), "{got:?}");
    assert_eq!(
        xlen(&mut c, "r:dlq"),
        1,
        "the breaker holds for readers too"
    );
}
