//! Eviction is never silent: a server whose `maxmemory-policy` can evict the module's keys says
//! so (one log warning per change, `INFO reclaim`, `RECLAIM.HEALTH`, `RECLAIM.POLICY GET`), and
//! a key of the module the server does evict is logged, counted, announced with
//! `reclaim-evicted`, and its policies say what happened. Real servers with a tiny `maxmemory`.

use std::sync::mpsc;
use std::time::Duration;

use reclaim_testkit::*;

const ALLKEYS_REASON: &str = "yes: maxmemory-policy allkeys-lru with maxmemory 20971520 can evict policy keys, streams under a policy, DLQs and redrive keys";

/// How many lines of the server log contain `text`.
fn log_count(s: &Server, text: &str) -> usize {
    s.log().lines().filter(|l| l.contains(text)).count()
}

/// Waits until `INFO reclaim` shows `reclaim_eviction_risk` as `risk`.
fn wait_risk(c: &mut Connection, risk: i64) {
    wait_for(10, &format!("reclaim_eviction_risk:{risk}"), || {
        (reclaim_info(c, "eviction_risk") == risk).then_some(())
    });
}

#[test]
fn allkeys_eviction_is_told_once_and_config_set_noeviction_clears_it() {
    let s = Server::start(&["--maxmemory", "20mb", "--maxmemory-policy", "allkeys-lru"]);
    let mut c = s.conn();
    create_group(&mut c, b"orders", b"workers");
    set_policy_opts(&mut c, "orders", "workers", "MIN-IDLE 1000 INTERVAL 100");
    wait_risk(&mut c, 1);
    assert_eq!(
        info_field(&mut c, "reclaim", "reclaim_maxmemory_policy"),
        "allkeys-lru"
    );
    let warning = "reclaim: eviction risk: maxmemory-policy allkeys-lru with maxmemory 20971520 lets the server evict policy keys (their policies are lost)";
    wait_for(10, "the warning in the log", || {
        (log_count(&s, warning) == 1).then_some(())
    });
    assert!(
        log_count(
            &s,
            "set maxmemory-policy noeviction, or a volatile-* policy with no TTL on these keys"
        ) == 1,
        "{}",
        s.log_tail(20)
    );
    let get = policy_reply(&mut c, b"orders", b"workers");
    assert_eq!(str_field(&get, "eviction-risk"), ALLKEYS_REASON);
    let h = run(&mut c, &["RECLAIM.HEALTH", "orders", "workers"]);
    assert_eq!(str_field(&h, "eviction-risk"), ALLKEYS_REASON);
    // RESP3: the same field in the map.
    let mut c3 = s.conn3();
    let h3 = run(&mut c3, &["RECLAIM.HEALTH", "orders", "workers"]);
    assert_eq!(str_field(&h3, "eviction-risk"), ALLKEYS_REASON);

    // Another limit under the same policy: the same risk, nothing new in the log. The passes of
    // the policy (INTERVAL 100) show ticks went by, and with them more than a second of re-reads.
    run(&mut c, &["CONFIG", "SET", "maxmemory", "30mb"]);
    let passes = stat(&mut c, "orders", "workers", "passes");
    wait_passes(&mut c, "orders", "workers", passes + 12);
    assert_eq!(
        log_count(&s, "reclaim: eviction risk: "),
        1,
        "{}",
        s.log_tail(20)
    );
    assert_eq!(
        str_field(&h_of(&mut c), "eviction-risk"),
        ALLKEYS_REASON.replace("20971520", "31457280")
    );

    // noeviction: the risk is gone, told once at notice level.
    run(&mut c, &["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    wait_risk(&mut c, 0);
    assert_eq!(
        info_field(&mut c, "reclaim", "reclaim_maxmemory_policy"),
        "noeviction"
    );
    assert_eq!(str_field(&h_of(&mut c), "eviction-risk"), "no");
    assert_eq!(
        str_field(
            &policy_reply(&mut c, b"orders", b"workers"),
            "eviction-risk"
        ),
        "no"
    );
    wait_for(10, "the notice that the risk is gone", || {
        (log_count(
            &s,
            "reclaim: eviction risk gone: maxmemory-policy noeviction with maxmemory 31457280 cannot evict the module's keys",
        ) == 1)
            .then_some(())
    });
    // maxmemory 0 under allkeys-*: nothing can be evicted either. The limit goes first: the other
    // order is a real risk for the time between the two commands, which a tick may see and tell.
    run(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
    run(
        &mut c,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"],
    );
    let passes = stat(&mut c, "orders", "workers", "passes");
    wait_passes(&mut c, "orders", "workers", passes + 3);
    assert_eq!(
        info_field(&mut c, "reclaim", "reclaim_maxmemory_policy"),
        "allkeys-lfu"
    );
    assert_eq!(reclaim_info(&mut c, "eviction_risk"), 0);
    assert_eq!(
        log_count(&s, "reclaim: eviction risk: "),
        1,
        "{}",
        s.log_tail(20)
    );
}

fn h_of(c: &mut Connection) -> Value {
    run(c, &["RECLAIM.HEALTH", "orders", "workers"])
}

#[test]
fn no_risk_without_maxmemory_or_with_noeviction() {
    let s = Server::start(&["--maxmemory", "20mb", "--maxmemory-policy", "noeviction"]);
    let mut c = s.conn();
    create_group(&mut c, b"orders", b"workers");
    set_policy_opts(&mut c, "orders", "workers", "MIN-IDLE 1000 INTERVAL 100");
    wait_passes(&mut c, "orders", "workers", 2);
    assert_eq!(reclaim_info(&mut c, "eviction_risk"), 0);
    assert_eq!(
        info_field(&mut c, "reclaim", "reclaim_maxmemory_policy"),
        "noeviction"
    );
    assert_eq!(str_field(&h_of(&mut c), "eviction-risk"), "no");
    assert_eq!(log_count(&s, "eviction risk"), 0, "{}", s.log_tail(20));
}

#[test]
fn volatile_eviction_is_a_risk_only_while_a_key_of_the_module_has_a_ttl() {
    let s = Server::start(&["--maxmemory", "50mb", "--maxmemory-policy", "volatile-lru"]);
    let mut c = s.conn();
    create_group(&mut c, b"orders", b"workers");
    run(&mut c, &["XADD", "orders:dlq", "*", "f", "v"]);
    set_policy_opts(
        &mut c,
        "orders",
        "workers",
        "MIN-IDLE 1000 DLQ orders:dlq INTERVAL 100",
    );
    run(&mut c, &["SET", "other", "x", "EX", "1000"]);
    wait_passes(&mut c, "orders", "workers", 2);
    assert_eq!(reclaim_info(&mut c, "eviction_risk"), 0);
    assert_eq!(str_field(&h_of(&mut c), "eviction-risk"), "no");
    // A TTL on the stream (the `expire` event): a risk at once.
    run(&mut c, &["EXPIRE", "orders", "100000"]);
    wait_risk(&mut c, 1);
    assert_eq!(
        str_field(&h_of(&mut c), "eviction-risk"),
        "yes: maxmemory-policy volatile-lru with maxmemory 52428800 can evict 'orders' (db 0), which has a TTL"
    );
    wait_for(10, "the warning", || {
        (log_count(&s, "reclaim: eviction risk: maxmemory-policy volatile-lru with maxmemory 52428800 lets the server evict keys with a TTL, and the module's key 'orders' (db 0) has one") == 1).then_some(())
    });
    run(&mut c, &["PERSIST", "orders"]);
    wait_risk(&mut c, 0);
    // A TTL on the DLQ, which no event names as the module's: the policy's next visit finds it.
    run(&mut c, &["EXPIRE", "orders:dlq", "100000"]);
    wait_risk(&mut c, 1);
    assert_eq!(
        str_field(&h_of(&mut c), "eviction-risk"),
        "yes: maxmemory-policy volatile-lru with maxmemory 52428800 can evict 'orders:dlq' (db 0), which has a TTL"
    );
    wait_for(10, "the second warning", || {
        (log_count(&s, "reclaim: eviction risk: ") == 2).then_some(())
    });
    run(&mut c, &["PERSIST", "orders:dlq"]);
    let passes = stat(&mut c, "orders", "workers", "passes");
    wait_passes(&mut c, "orders", "workers", passes + 2);
    wait_risk(&mut c, 0);
    // A TTL on the policy key.
    run(
        &mut c,
        &["EXPIRE", "reclaim:policy:{orders}:orders", "100000"],
    );
    wait_risk(&mut c, 1);
    assert_eq!(
        log_count(&s, "reclaim: eviction risk gone: "),
        2,
        "{}",
        s.log_tail(20)
    );
}

/// The `reclaim-evicted` events until all of `keys` had one (panics after a deadline).
fn wait_evicted_events(rx: &mpsc::Receiver<(String, String)>, keys: &[&str]) -> Vec<String> {
    let mut got: Vec<String> = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(10 * slowdown());
    while std::time::Instant::now() < deadline {
        if keys.iter().all(|k| got.iter().any(|g| g == k)) {
            got.sort();
            return got;
        }
        if let Ok((k, e)) = rx.recv_timeout(Duration::from_millis(100)) {
            if e == "reclaim-evicted" {
                got.push(k);
            }
        }
    }
    panic!("reclaim-evicted on {keys:?}: got {got:?}");
}

#[test]
fn evicted_keys_are_logged_counted_announced_and_shown_in_the_status() {
    // volatile-lru and a TTL on exactly the keys to lose: the server evicts those and no other.
    let s = Server::start(&["--maxmemory-policy", "volatile-lru"]);
    let mut c = s.conn();
    run(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Kt"]);
    // a: its stream goes. b: its policy key goes. d: its DLQ goes.
    for k in ["a", "b", "d"] {
        create_group(&mut c, k.as_bytes(), b"workers");
        add_entries(&mut c, k.as_bytes(), "x", 2);
        read_group(&mut c, k.as_bytes(), b"workers", b"w1");
        run(&mut c, &["XADD", &format!("{k}:dlq"), "*", "f", "v"]);
        set_policy_opts(
            &mut c,
            k,
            "workers",
            &format!("MIN-IDLE 600000 DLQ {k}:dlq INTERVAL 100"),
        );
        wait_passes(&mut c, k, "workers", 1);
    }
    create_group(&mut c, b"b", b"audit");
    set_policy_opts(&mut c, "b", "audit", "MIN-IDLE 600000 INTERVAL 100");
    let rx = listen(&s);
    // A redrive task's key (the module's namespace; its content does not matter here).
    run(&mut c, &["HSET", "reclaim:redrive:{r}:r", "phase", "done"]);
    for k in [
        "a",
        "reclaim:policy:{b}:b",
        "d:dlq",
        "reclaim:redrive:{r}:r",
    ] {
        run(&mut c, &["EXPIRE", k, "100000"]);
    }
    // Every key with a TTL must go, and only those.
    run(&mut c, &["CONFIG", "SET", "maxmemory", "1"]);
    wait_for(10, "the four keys evicted", || {
        let _ = run(&mut c, &["PING"]);
        let left: i64 = q(
            &mut c,
            &[
                "EXISTS",
                "a",
                "reclaim:policy:{b}:b",
                "d:dlq",
                "reclaim:redrive:{r}:r",
            ],
        );
        (left == 0).then_some(())
    });
    run(&mut c, &["CONFIG", "SET", "maxmemory", "0"]);
    let all = [
        "a",
        "d:dlq",
        "reclaim:policy:{b}:b",
        "reclaim:redrive:{r}:r",
    ];
    let got = wait_evicted_events(&rx, &all);
    assert_eq!(got, all);
    assert_eq!(reclaim_info(&mut c, "evicted_keys"), 4);
    let mut keys: Vec<String> = q(&mut c, &["KEYS", "*"]);
    keys.sort();
    assert_eq!(
        keys,
        [
            "a:dlq",
            "b",
            "b:dlq",
            "d",
            "reclaim:policy:{a}:a",
            "reclaim:policy:{d}:d"
        ]
    );

    // The log: one line per key, each saying what was lost.
    let log = s.log();
    let lines = |needle: &str| log.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(
        lines("reclaim: the server evicted stream 'a' (db 0) with the policies of 1 group(s): its groups and pending entries are lost; the policies wait for it (status 'waiting: stream evicted'). Set maxmemory-policy noeviction (now volatile-lru) to keep the module's keys"),
        1,
        "{log}"
    );
    assert_eq!(
        lines("reclaim: the server evicted the policy key 'reclaim:policy:{b}:b' (db 0): the policies of stream 'b' for groups 'audit', 'workers' are lost; restore them with RECLAIM.POLICY IMPORT (from an EXPORT) or RECLAIM.POLICY SET."),
        1,
        "{log}"
    );
    assert_eq!(
        lines("reclaim: the server evicted the DLQ 'd:dlq' (db 0) of the policy of stream 'd' group 'workers': its dead letters are lost."),
        1,
        "{log}"
    );
    assert_eq!(
        lines("reclaim: the server evicted the redrive key 'reclaim:redrive:{r}:r' (db 0): the redrive task of its DLQ stops (RECLAIM.REDRIVE starts it again)."),
        1,
        "{log}"
    );
    assert_eq!(lines("reclaim: the server evicted "), 4, "{log}");

    // b's policies are gone.
    assert_eq!(policy_reply(&mut c, b"b", b"workers"), Value::Nil);
    assert_eq!(policy_reply(&mut c, b"b", b"audit"), Value::Nil);
    // a waits, saying its stream was evicted, everywhere its status shows.
    let evicted = "waiting: stream evicted";
    assert_eq!(status(&mut c, "a", "workers"), evicted);
    assert_eq!(
        str_field(&policy_reply(&mut c, b"a", b"workers"), "status"),
        evicted
    );
    let h = run(&mut c, &["RECLAIM.HEALTH", "a", "workers"]);
    assert_eq!(str_field(&h, "status"), evicted);
    let line = policy_lines(&mut c)
        .into_iter()
        .find(|l| l["stream"] == "a")
        .expect("a's line");
    assert_eq!(line["status"], evicted);
    assert_eq!(line["evicted_keys"], "1");
    assert_eq!(stat(&mut c, "a", "workers", "evicted-keys"), 1);
    // d counts its DLQ and goes on.
    assert_eq!(stat(&mut c, "d", "workers", "evicted-keys"), 1);
    assert_eq!(status(&mut c, "d", "workers"), "active");

    // A producer's XADD makes the stream again, without its group: not "a typo?".
    run(&mut c, &["XADD", "a", "*", "f", "v"]);
    let again = "waiting: stream evicted and recreated without group workers";
    assert_eq!(status(&mut c, "a", "workers"), again);
    wait_for(10, "the line's status", || {
        let l = policy_lines(&mut c);
        let a = l.iter().find(|l| l["stream"] == "a")?;
        (a["status"] == "waiting: stream evicted and recreated without group workers").then_some(())
    });
    wait_for(10, "the notice", || {
        s.log()
            .contains("reclaim: the policy of stream 'a' group 'workers' (db 0) is waiting: the server evicted the stream (maxmemory-policy), and it is back without group 'workers'")
            .then_some(())
    });
    assert!(!s.log().contains("a typo?"), "{}", s.log());
    // The group back: active again, and the eviction is history.
    create_group(&mut c, b"a", b"workers");
    let passes = stat(&mut c, "a", "workers", "passes");
    wait_passes(&mut c, "a", "workers", passes + 1);
    assert_eq!(status(&mut c, "a", "workers"), "active");
    run(&mut c, &["XGROUP", "DESTROY", "a", "workers"]);
    wait_for(10, "a plain wait", || {
        (status(&mut c, "a", "workers") == "waiting: no group workers").then_some(())
    });
}
