//! `RECLAIM.SIMULATE`: what one sweep would do now, entry by entry, and what-ifs for a proposed
//! policy. Its plan is what `RECLAIM.SWEEP` then does, entry by entry, for every rule of the
//! sweep's table (docs/design.md, "Sweep rules"); a what-if changes the plan as the proposed
//! options say and leaves the policy, the PEL, the DLQ and the replication offset as they were;
//! it runs on a replica; errors are exact.
//!
//! Timing: entries get exact idle times and counts from fixtures (`XCLAIM ... IDLE ms RETRYCOUNT
//! n JUSTID`), far from every threshold; the policy's timer pass is an hour away
//! (`quiet_policy`), so only `RECLAIM.SWEEP` acts. `LIVENESS` needs one real wait: the consumer
//! `dead` must have been quiet for `LIVENESS` ms, while `alive` keeps talking to the module.

use reclaim_testkit::*;

use std::collections::BTreeMap;

/// `LIVENESS` of the policy under test, ms.
const LIVENESS: u64 = 2000;

/// One entry of a `RECLAIM.SIMULATE` reply.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Planned {
    id: String,
    consumer: String,
    idle: i64,
    deliveries: i64,
    action: String,
    rule: String,
}

/// A `RECLAIM.SIMULATE` reply.
#[derive(Debug, Clone)]
struct Sim {
    policy: PolicyView,
    /// Why no pass runs now (`disabled`, `paused`, `storm`); `None`: a pass runs as planned.
    halted: Option<String>,
    now_ms: i64,
    entries: Vec<Planned>,
    totals: Vec<(String, i64)>,
    delayed: i64,
    next_due_ms: Option<i64>,
    more: i64,
}

impl Sim {
    /// (id, action, rule) of every entry: the plan without the clock.
    fn plan(&self) -> Vec<(String, String, String)> {
        self.entries
            .iter()
            .map(|e| (e.id.clone(), e.action.clone(), e.rule.clone()))
            .collect()
    }

    /// The total of one action.
    fn total(&self, action: &str) -> i64 {
        self.totals.iter().find(|t| t.0 == action).unwrap().1
    }
}

/// Parses a `RECLAIM.SIMULATE` reply (RESP2 or RESP3), checking its fields and their order.
fn parse_sim(v: &Value) -> Sim {
    let top = pairs(v);
    let names: Vec<&str> = top.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "policy",
            "halted",
            "now-ms",
            "entries",
            "totals",
            "more",
            "delayed",
            "next-due-ms"
        ],
        "{v:?}"
    );
    let entries = items(&top[3].1)
        .iter()
        .map(|e| {
            let f = pairs(e);
            let keys: Vec<&str> = f.iter().map(|(k, _)| k.as_str()).collect();
            assert_eq!(
                keys,
                ["id", "consumer", "idle", "deliveries", "action", "rule"],
                "{e:?}"
            );
            Planned {
                id: text(&f[0].1).unwrap(),
                consumer: text(&f[1].1).unwrap(),
                idle: int_of(&f[2].1),
                deliveries: int_of(&f[3].1),
                action: text(&f[4].1).unwrap(),
                rule: text(&f[5].1).unwrap(),
            }
        })
        .collect();
    let totals: Vec<(String, i64)> = pairs(&top[4].1)
        .into_iter()
        .map(|(k, v)| (k, int_of(&v)))
        .collect();
    let order: Vec<&str> = totals.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(order, ["move", "dead-letter", "purge", "none"]);
    Sim {
        policy: PolicyView::from_reply(&top[0].1),
        halted: text(&top[1].1),
        now_ms: int_of(&top[2].1),
        entries,
        totals,
        more: int_of(&top[5].1),
        delayed: int_of(&top[6].1),
        next_due_ms: (top[7].1 != Value::Nil).then(|| int_of(&top[7].1)),
    }
}

/// `RECLAIM.SIMULATE s g <args>`, parsed.
fn simulate(c: &mut Connection, s: &str, g: &str, args: &[&str]) -> Sim {
    let mut a = vec!["RECLAIM.SIMULATE", s, g];
    a.extend_from_slice(args);
    let sim = parse_sim(&run(c, &a));
    // The totals count the entries.
    for (action, n) in &sim.totals {
        let counted = sim.entries.iter().filter(|e| &e.action == action).count();
        assert_eq!(*n, counted as i64, "total of {action}");
    }
    sim
}

/// consumer -> `idle` (ms) of `XINFO CONSUMERS s g`.
fn consumer_idle(c: &mut Connection, s: &str, g: &str) -> BTreeMap<String, i64> {
    let consumers: Vec<Value> = q(c, &["XINFO", "CONSUMERS", s, g]);
    consumers
        .iter()
        .map(|c| (str_field(c, "name"), int_field(c, "idle")))
        .collect()
}

/// What must not move while SIMULATE runs: the policy, the PEL (owners and counts), the DLQ,
/// the policy's counters and cursor, and the replication offset.
#[derive(Debug, PartialEq, Eq)]
struct Untouched {
    policy: Option<PolicyView>,
    pel: BTreeMap<String, (String, i64)>,
    dlq: i64,
    stats: Vec<(String, String)>,
    offset: i64,
}

fn untouched(c: &mut Connection, s: &str) -> Untouched {
    let st = stats(c, s, "g");
    Untouched {
        policy: get_policy(c, s.as_bytes(), b"g"),
        pel: owners(c, s, "g"),
        dlq: xlen(c, format!("{s}:dlq")),
        stats: pairs(&st)
            .into_iter()
            .filter(|(k, _)| k != "inbox" && k != "status")
            .map(|(k, v)| (k, show(&v)))
            .collect(),
        offset: info_int(c, "replication", "master_repl_offset"),
    }
}

/// The stream `s` of group `g` with every kind of pending entry, under the policy `MIN-IDLE
/// 10000 MAX-DELIVERIES 3 DLQ s:dlq BACKOFF EXPONENTIAL 1000000 LIVENESS 2000` (due after 10 s
/// at count 1, 20 s at 2, 40 s at 3). Returns the rule SIMULATE must give each entry:
/// (id, action, rule), in PEL order. Consumer `dead` has been quiet for LIVENESS when it
/// returns; `alive` has just called `RECLAIM.NACK`.
fn every_kind(c: &mut Connection, s: &str) -> Vec<(String, String, String)> {
    let _: () = q(c, &["XGROUP", "CREATE", s, "g", "0", "MKSTREAM"]);
    quiet_policy(
        c,
        s,
        "g",
        &format!("MIN-IDLE 10000 MAX-DELIVERIES 3 DLQ {s}:dlq BACKOFF EXPONENTIAL 1000000 LIVENESS {LIVENESS}"),
    );
    for i in 1..=16 {
        let id = format!("{i}-0");
        let got: String = q(c, &["XADD", s, &id, "n", &i.to_string()]);
        assert_eq!(got, id);
    }
    deliver(c, s, "g", "dead", None);
    let mut want = Vec::new();
    let mut kind = |id: &str, action: &str, rule: &str| {
        want.push((id.to_string(), action.to_string(), rule.to_string()))
    };
    // Trimmed: purged whatever its idle time or count.
    set_pending(c, (s, "g"), "dead", &["1-0"], 0, 7);
    kind("1-0", "purge", "trimmed");
    set_pending(c, (s, "g"), "dead", &["2-0"], 120_000, 1);
    kind("2-0", "purge", "trimmed");
    set_pending(c, (s, "g"), "dead", &["3-0"], 0, 1);
    kind("3-0", "none", "fresh");
    set_pending(c, (s, "g"), "dead", &["4-0"], 60_000, 1);
    kind("4-0", "move", "stale");
    // Over the limit while fresh; stale at the limit.
    set_pending(c, (s, "g"), "dead", &["5-0"], 0, 4);
    kind("5-0", "dead-letter", "over-delivered");
    set_pending(c, (s, "g"), "dead", &["6-0"], 60_000, 3);
    kind("6-0", "dead-letter", "over-delivered");
    // XDEL'd from the middle: found when moved or dead-lettered, removed from the PEL only.
    set_pending(c, (s, "g"), "dead", &["7-0"], 60_000, 1);
    kind("7-0", "purge", "deleted");
    set_pending(c, (s, "g"), "dead", &["8-0"], 0, 5);
    kind("8-0", "purge", "deleted");
    set_pending(c, (s, "g"), "reclaim", &["9-0"], 600_000, 1);
    kind("9-0", "none", "in-inbox");
    // Stale, and at the limit, but its owner is alive.
    set_pending(c, (s, "g"), "alive", &["10-0"], 60_000, 1);
    kind("10-0", "none", "held");
    set_pending(c, (s, "g"), "alive", &["11-0"], 60_000, 3);
    kind("11-0", "none", "held");
    // Stale for MIN-IDLE, but its second attempt is due at 20 s (BACKOFF).
    set_pending(c, (s, "g"), "dead", &["12-0"], 15_000, 2);
    kind("12-0", "none", "backoff");
    // Given back with NACK ... DELAY: 13-0 due in 10 s, 14-0 due 1 ms after its NACK.
    set_pending(c, (s, "g"), "alive", &["13-0", "14-0"], 0, 1);
    kind("13-0", "none", "delayed");
    kind("14-0", "move", "stale");
    // Over the limit: dead-lettered, alive or not.
    set_pending(c, (s, "g"), "alive", &["15-0"], 0, 9);
    kind("15-0", "dead-letter", "over-delivered");
    // Given back with a NACK ... DELAY longer than its due idle (100 s): parked, never stale.
    set_pending(c, (s, "g"), "alive", &["16-0"], 0, 1);
    kind("16-0", "none", "parked");
    let _: i64 = q(c, &["XDEL", s, "7-0", "8-0"]);
    let _: i64 = q(c, &["XTRIM", s, "MINID", "3"]);
    let nack = |c: &mut Connection, id: &str, delay: &str| {
        let n: i64 = q(c, &["RECLAIM.NACK", s, "g", "alive", id, "DELAY", delay]);
        assert_eq!(n, 1, "NACK {id}");
    };
    nack(c, "14-0", "1");
    // `dead` (and `alive`, by XINFO) go quiet; `alive` talks to the module again at once.
    let quiet = (LIVENESS + 200) as i64;
    wait_for(
        20,
        "dead and alive quiet for LIVENESS (XINFO CONSUMERS)",
        || {
            let idle = consumer_idle(c, s, "g");
            (idle["dead"] >= quiet && idle["alive"] >= quiet).then_some(())
        },
    );
    nack(c, "13-0", "10000");
    nack(c, "16-0", "100000");
    want
}

/// SIMULATE's plan is what SWEEP then does, entry by entry, for every rule; what-ifs change the
/// plan as the proposed options say and change nothing; a replica simulates too.
#[test]
fn simulate_plans_what_sweep_then_does_and_what_ifs_change_nothing() {
    let p = Server::start(&["--repl-ping-replica-period", "3600"]);
    let r = p.replica(&[]);
    let mut c = p.conn();
    let want = every_kind(&mut c, "s");
    replica_acked(&mut c);
    let before = untouched(&mut c, "s");
    let live = before.policy.clone().unwrap();

    // The live policy over the whole PEL (LIMIT above its 14 entries).
    let server_ms = server_ms(&mut c);
    let sim = simulate(&mut c, "s", "g", &["LIMIT", "100"]);
    assert_eq!(sim.plan(), want);
    assert_eq!(sim.more, 0);
    // 13-0 delayed, 16-0 parked (due 100 s after its NACK).
    assert_eq!(sim.delayed, 2);
    let due = sim.next_due_ms.expect("the parked entry's due time");
    assert!(
        due > server_ms + 90_000 && due <= server_ms + 100_000,
        "{due} {server_ms}"
    );
    assert_eq!(sim.policy, live);
    assert_eq!(sim.halted, None);
    assert!(
        (sim.now_ms - server_ms).abs() < 5000,
        "now-ms {} vs TIME {server_ms}",
        sim.now_ms
    );
    // Every pending entry, in PEL order, with its owner and count.
    let ids: Vec<String> = sim.entries.iter().map(|e| e.id.clone()).collect();
    let in_pel: Vec<String> = pending(&mut c, "s", "g")
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(ids, in_pel);
    for e in &sim.entries {
        assert_eq!(
            before.pel[&e.id],
            (e.consumer.clone(), e.deliveries),
            "{e:?}"
        );
    }
    let e4 = sim.entries.iter().find(|e| e.id == "4-0").unwrap();
    assert!(e4.idle >= 60_000 && e4.idle < 120_000, "{e4:?}");
    assert_eq!(
        sim.totals,
        [
            ("move".to_string(), 2),
            ("dead-letter".to_string(), 3),
            ("purge".to_string(), 4),
            ("none".to_string(), 7)
        ]
    );
    // The default LIMIT is COUNT (100); LIMIT 3: the first three, and more to come.
    assert_eq!(simulate(&mut c, "s", "g", &[]).plan(), want);
    let head = simulate(&mut c, "s", "g", &["LIMIT", "3"]);
    assert_eq!(head.plan(), want[..3]);
    assert_eq!(head.more, 1);
    assert_eq!(
        simulate(&mut c, "s", "g", &["COUNT", "2"]).plan(),
        want[..2]
    );

    // What if MAX-DELIVERIES were 2: the alive owner's entry at 3 deliveries is over it (held
    // no more); 12-0 at 2 deliveries is not due, so not dead-lettered yet.
    let what_if = simulate(&mut c, "s", "g", &["MAX-DELIVERIES", "2", "LIMIT", "100"]);
    assert_eq!(
        what_if.policy,
        PolicyView {
            max_deliveries: 2,
            ..live.clone()
        }
    );
    let changed = |w: &Sim| -> Vec<(String, String, String)> {
        w.plan().into_iter().filter(|e| !want.contains(e)).collect()
    };
    let t = |id: &str, a: &str, r: &str| (id.to_string(), a.to_string(), r.to_string());
    assert_eq!(
        changed(&what_if),
        [t("11-0", "dead-letter", "over-delivered")]
    );
    // What if MIN-IDLE were 100 s: nothing is stale any more; what is over the limit or gone
    // from the stream stays so.
    let what_if = simulate(&mut c, "s", "g", &["min-idle", "100000", "LIMIT", "100"]);
    assert_eq!(what_if.policy.min_idle, 100_000);
    assert_eq!(
        changed(&what_if),
        [
            t("4-0", "none", "fresh"),
            t("6-0", "none", "fresh"),
            t("7-0", "none", "fresh"),
            t("10-0", "none", "fresh"),
            t("11-0", "none", "fresh"),
            t("12-0", "none", "fresh"),
            t("14-0", "none", "delayed"),
        ]
    );
    // What if there were no LIVENESS: the alive owner's stale entries are taken.
    let what_if = simulate(&mut c, "s", "g", &["LIVENESS", "0", "LIMIT", "100"]);
    assert_eq!(
        changed(&what_if),
        [
            t("10-0", "move", "stale"),
            t("11-0", "dead-letter", "over-delivered")
        ]
    );
    // What if BACKOFF were FIXED: 12-0's second attempt is due at MIN-IDLE.
    let what_if = simulate(&mut c, "s", "g", &["BACKOFF", "FIXED", "LIMIT", "100"]);
    assert_eq!(what_if.policy.backoff, b"FIXED");
    assert_eq!(changed(&what_if), [t("12-0", "move", "stale")]);
    // Nothing was written, propagated or counted; the live policy is as it was.
    assert_eq!(untouched(&mut c, "s"), before);

    // A replica simulates too (it cannot sweep). It knows no sightings (they are per server):
    // by XINFO CONSUMERS alone `alive` is quiet, so its stale entries would be taken there.
    let mut rc = r.conn();
    // The replica's `idle` counts from when it applied the writes: a replica still waiting to
    // stream after its full sync (Valkey waits for its first REPLCONF ACK) applies them late.
    wait_for(10, "both owners quiet for LIVENESS on the replica", || {
        let idle = consumer_idle(&mut rc, "s", "g");
        ["dead", "alive"]
            .iter()
            .all(|c| idle.get(*c).is_some_and(|i| *i >= LIVENESS as i64))
            .then_some(())
    });
    let on_replica = simulate(&mut rc, "s", "g", &["LIMIT", "100"]);
    let same: Vec<(&String, &String, i64)> = on_replica
        .entries
        .iter()
        .map(|e| (&e.id, &e.consumer, e.deliveries))
        .collect();
    let primary: Vec<(&String, &String, i64)> = sim
        .entries
        .iter()
        .map(|e| (&e.id, &e.consumer, e.deliveries))
        .collect();
    assert_eq!(same, primary);
    assert_eq!(
        changed(&on_replica),
        [
            t("10-0", "move", "stale"),
            t("11-0", "dead-letter", "over-delivered")
        ]
    );
    assert_eq!(
        error_of(&mut rc, cmd("RECLAIM.SWEEP").arg("s").arg("g")),
        "READONLY You can't write against a read only replica."
    );
    assert_eq!(untouched(&mut c, "s"), before);

    // SWEEP does what SIMULATE said, entry by entry (alive seen again: its entries stay held).
    let renewed: Vec<String> = q(&mut c, &["RECLAIM.EXTEND", "s", "g", "alive", "0-1"]);
    assert!(renewed.is_empty());
    let plan = simulate(&mut c, "s", "g", &["LIMIT", "100"]);
    assert_eq!(plan.plan(), want);
    let done = sweep(&mut c, "s", "g");
    assert_eq!(
        done,
        (
            plan.total("move"),
            plan.total("dead-letter"),
            plan.total("purge")
        )
    );
    let after = owners(&mut c, "s", "g");
    let dlq = xrange_text(&mut c, "s:dlq");
    let in_dlq = |id: &str| {
        dlq.iter()
            .filter(|(_, f)| f.iter().any(|(k, v)| k == "reclaim-id" && v == id))
            .map(|(_, f)| without_moved_ms(f))
            .collect::<Vec<_>>()
    };
    for e in &plan.entries {
        let was = &before.pel[&e.id];
        match e.action.as_str() {
            "move" => {
                assert_eq!(after.get(&e.id), Some(&("reclaim".into(), was.1)), "{e:?}");
                assert!(in_dlq(&e.id).is_empty(), "{e:?}");
            }
            "dead-letter" => {
                assert_eq!(after.get(&e.id), None, "acknowledged: {e:?}");
                let got = in_dlq(&e.id);
                assert_eq!(got.len(), 1, "{e:?}");
                let n = e.id.split('-').next().unwrap();
                let count = was.1.to_string();
                let fields: Vec<(&str, &str)> = got[0]
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                assert_eq!(
                    fields,
                    [
                        ("n", n),
                        ("reclaim-stream", "s"),
                        ("reclaim-group", "g"),
                        ("reclaim-id", e.id.as_str()),
                        ("reclaim-consumer", was.0.as_str()),
                        ("reclaim-deliveries", count.as_str()),
                        ("reclaim-reason", "max-deliveries"),
                    ]
                );
            }
            "purge" => {
                assert_eq!(after.get(&e.id), None, "acknowledged: {e:?}");
                assert!(in_dlq(&e.id).is_empty(), "{e:?}");
            }
            "none" => assert_eq!(after.get(&e.id), Some(was), "{e:?}"),
            other => panic!("action {other}"),
        }
    }
    assert_eq!(dlq.len() as i64, plan.total("dead-letter"));
    assert_eq!(after.len() as i64, plan.total("move") + plan.total("none"));
    // What is left: the moved entries wait in the inbox, the others as they were.
    let next = simulate(&mut c, "s", "g", &[]);
    let rules: Vec<(&str, &str)> = next
        .entries
        .iter()
        .map(|e| (e.id.as_str(), e.rule.as_str()))
        .collect();
    assert_eq!(
        rules,
        [
            ("3-0", "fresh"),
            ("4-0", "in-inbox"),
            ("9-0", "in-inbox"),
            ("10-0", "held"),
            ("11-0", "held"),
            ("12-0", "backoff"),
            ("13-0", "delayed"),
            ("14-0", "in-inbox"),
            ("16-0", "parked"),
        ]
    );
}

/// A what-if without a policy evaluates the options over the defaults (the policy SET would
/// create), and registers nothing; RESP3 gets maps; a missing stream or group gives an empty
/// plan.
#[test]
fn what_if_without_a_policy_and_resp3() {
    let s = Server::new();
    let mut c = s.conn();
    let _: () = q(&mut c, &["XGROUP", "CREATE", "o", "g", "0", "MKSTREAM"]);
    let _: String = q(&mut c, &["XADD", "o", "1-0", "n", "1"]);
    let _: String = q(&mut c, &["XADD", "o", "2-0", "n", "2"]);
    deliver(&mut c, "o", "g", "w", None);
    set_pending(&mut c, ("o", "g"), "w", &["1-0"], 5000, 1);
    let policies = reclaim_info(&mut c, "policies");
    let sim = simulate(&mut c, "o", "g", &["MIN-IDLE", "1000", "LIMIT", "1"]);
    assert_eq!(sim.policy, PolicyView::new(1000, 10_000));
    assert_eq!(
        sim.plan(),
        [("1-0".to_string(), "move".to_string(), "stale".to_string())]
    );
    assert_eq!(sim.more, 1);
    assert_eq!(get_policy(&mut c, b"o", b"g"), None);
    assert_eq!(reclaim_info(&mut c, "policies"), policies);
    assert_eq!(owners(&mut c, "o", "g")["1-0"], ("w".to_string(), 1));

    // RESP3: maps all the way down.
    let mut c3 = s.conn3();
    let v: Value = cmd("RECLAIM.SIMULATE")
        .arg(&["o", "g", "MIN-IDLE", "1000"])
        .query(&mut c3)
        .unwrap();
    let Value::Map(top) = &v else {
        panic!("not a map: {v:?}")
    };
    assert!(matches!(top[0].1, Value::Map(_)), "policy: {v:?}");
    let sim3 = parse_sim(&v);
    assert_eq!(
        sim3.plan(),
        [
            ("1-0".to_string(), "move".to_string(), "stale".to_string()),
            ("2-0".to_string(), "none".to_string(), "fresh".to_string())
        ]
    );
    assert_eq!(top[1].1, Value::Nil, "halted: {v:?}");
    assert!(matches!(items(&top[3].1)[0], Value::Map(_)), "entry: {v:?}");

    // A missing group, or stream: nothing to do, as SWEEP's zeros.
    for (key, group) in [("o", "nogroup"), ("nostream", "g")] {
        let sim = simulate(&mut c, key, group, &["MIN-IDLE", "1"]);
        assert!(sim.entries.is_empty() && sim.more == 0, "{key} {group}");
        assert!(sim.totals.iter().all(|t| t.1 == 0));
    }
    set_policy_opts(&mut c, "nostream", "g", "MIN-IDLE 5");
    assert!(simulate(&mut c, "nostream", "g", &[]).entries.is_empty());
}

/// Every error, exactly, in the order checked; and the command's flags and keys.
#[test]
fn simulate_errors_flags_and_keys() {
    let s = Server::new();
    let mut c = s.conn();
    let _: () = q(&mut c, &["XGROUP", "CREATE", "e", "g", "0", "MKSTREAM"]);
    set_policy_opts(&mut c, "e", "g", "MIN-IDLE 10000 INTERVAL 3600000");
    let sim = |args: &[&str]| {
        let mut k = cmd("RECLAIM.SIMULATE");
        k.arg(args);
        k
    };
    let cases: &[(&[&str], &str)] = &[
        (
            &["e"],
            "ERR wrong number of arguments for 'reclaim.simulate' command",
        ),
        (&["e", "g", "FOO", "1"], "ERR unknown option 'FOO'"),
        (&["e", "g", "LIMIT"], "ERR option LIMIT needs a value"),
        (
            &["e", "g", "LIMIT", "1", "LIMIT", "1"],
            "ERR option LIMIT given more than once",
        ),
        (
            &["e", "g", "LIMIT", "0"],
            "ERR LIMIT must be an integer from 1 to 10000",
        ),
        (
            &["e", "g", "LIMIT", "10001"],
            "ERR LIMIT must be an integer from 1 to 10000",
        ),
        (
            &["e", "g", "MIN-IDLE", "0"],
            "ERR MIN-IDLE must be a positive integer (ms)",
        ),
        (
            &["e", "g", "BACKOFF", "SLOW"],
            "ERR BACKOFF takes FIXED, EXPONENTIAL max-ms or LIST ms [ms ...]",
        ),
        (
            &["none", "g"],
            "ERR no reclaim policy for this key and group",
        ),
        (
            &["none", "g", "LIMIT", "5"],
            "ERR no reclaim policy for this key and group",
        ),
        // The proposed policy must be one SET accepts (over the live one: MIN-IDLE 10000).
        (
            &["e", "g", "BACKOFF", "EXPONENTIAL", "5000"],
            "ERR BACKOFF EXPONENTIAL max-ms must be at least MIN-IDLE",
        ),
        (
            &["e", "g", "MAX-DELIVERIES", "2"],
            "ERR MAX-DELIVERIES above 0 needs a DLQ key",
        ),
        (
            &["e", "g", "DLQ", "e"],
            "ERR the DLQ key must differ from the stream key",
        ),
        (
            &["e", "g", "DLQ", "reclaim:policy:{e}:e"],
            "ERR the DLQ key is a key the module keeps for itself (reclaim:policy:..., reclaim:redrive:..., reclaim:redrive-moved:...)",
        ),
        (
            &["e", "g", "DLQ", "reclaim:redrive-moved:{e}:e"],
            "ERR the DLQ key is a key the module keeps for itself (reclaim:policy:..., reclaim:redrive:..., reclaim:redrive-moved:...)",
        ),
    ];
    for (args, want) in cases {
        assert_eq!(error_of(&mut c, &sim(args)), *want, "{args:?}");
    }
    // A DLQ, proposed or live, of the wrong type; a stream key of the wrong type.
    let _: () = q(&mut c, &["SET", "str", "x"]);
    assert_eq!(
        error_of(
            &mut c,
            &sim(&["e", "g", "MAX-DELIVERIES", "2", "DLQ", "str"])
        ),
        "WRONGTYPE the DLQ key holds the wrong kind of value (it must be a stream)"
    );
    set_policy_opts(&mut c, "w", "g", "MIN-IDLE 10000");
    let _: () = q(&mut c, &["SET", "w", "x"]);
    assert_eq!(
        error_of(&mut c, &sim(&["w", "g"])),
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    );

    // Flags: read-only (so it runs on replicas); the stream is its only key (RO), whatever DLQ
    // a what-if names.
    let info: Value = cmd("COMMAND")
        .arg("INFO")
        .arg("RECLAIM.SIMULATE")
        .query(&mut c)
        .unwrap();
    let entry = &items(&info)[0];
    let e = items(entry);
    assert_eq!(text(&e[0]).as_deref(), Some("reclaim.simulate"));
    assert_eq!(e[1], Value::Int(-3));
    let flags: Vec<String> = match &e[2] {
        Value::Array(f) | Value::Set(f) => f.iter().filter_map(text).collect(),
        other => panic!("flags: {other:?}"),
    };
    assert!(flags.contains(&"readonly".to_string()), "{flags:?}");
    assert!(!flags.contains(&"write".to_string()), "{flags:?}");
    let keys: Vec<String> = cmd("COMMAND")
        .arg(&[
            "GETKEYS",
            "RECLAIM.SIMULATE",
            "e",
            "g",
            "DLQ",
            "d",
            "LIMIT",
            "5",
        ])
        .query(&mut c)
        .unwrap();
    assert_eq!(keys, ["e"]);

    // ACL: read access to the stream is enough; none is refused.
    let _: () = q(
        &mut c,
        &["ACL", "SETUSER", "ro", "on", "nopass", "%R~e", "+@all"],
    );
    let _: () = q(
        &mut c,
        &["ACL", "SETUSER", "no", "on", "nopass", "~x", "+@all"],
    );
    let mut ro = s.conn();
    let _: () = q(&mut ro, &["AUTH", "ro", "x"]);
    assert!(simulate(&mut ro, "e", "g", &[]).entries.is_empty());
    let mut no = s.conn();
    let _: () = q(&mut no, &["AUTH", "no", "x"]);
    let e = error_of(&mut no, &sim(&["e", "g"]));
    assert!(e.starts_with("NOPERM"), "{e}");
}

/// What the PEL of `s` is once `plan` is done over `before`: moved entries wait in the
/// claimant's inbox (`reclaim`, count unchanged), dead-lettered and purged ones are gone, the
/// others are as they were.
fn pel_after(
    before: &BTreeMap<String, (String, i64)>,
    plan: &Sim,
) -> BTreeMap<String, (String, i64)> {
    let mut after = before.clone();
    for e in &plan.entries {
        match e.action.as_str() {
            "move" => {
                let n = before[&e.id].1;
                after.insert(e.id.clone(), ("reclaim".into(), n));
            }
            "dead-letter" | "purge" => {
                after.remove(&e.id);
            }
            "none" => {}
            other => panic!("action {other}"),
        }
    }
    after
}

/// The `reclaim-id` of every entry of the DLQ `d`, in order.
fn dead_lettered(c: &mut Connection, d: &str) -> Vec<String> {
    dlq_ids(&xrange(c, d.as_bytes()))
}

/// The IDs `plan` dead-letters, in PEL order.
fn to_dlq(plan: &Sim) -> Vec<String> {
    plan.entries
        .iter()
        .filter(|e| e.action == "dead-letter")
        .map(|e| e.id.clone())
        .collect()
}

/// (id, action, rule), for expected plans.
fn t(id: &str, action: &str, rule: &str) -> (String, String, String) {
    (id.to_string(), action.to_string(), rule.to_string())
}

/// `n` entries `1-0` .. `n-0` in stream `s`, group `g`, all delivered to consumer `w`.
fn delivered_to_w(c: &mut Connection, s: &str, n: usize) {
    for i in 1..=n {
        let id = format!("{i}-0");
        let got: String = q(c, &["XADD", s, &id, "n", &i.to_string()]);
        assert_eq!(got, id);
    }
    deliver(c, s, "g", "w", None);
}

/// A paused policy (and one stopped by `reclaim.enabled no`): SIMULATE says why no pass runs
/// and shows the plan of the pass that runs once it is resumed, changing nothing; that pass (the
/// timer's, made due by RESUME) then does exactly that.
#[test]
fn a_halted_policy_shows_the_plan_after_resume_and_changes_nothing() {
    let s = Server::new();
    let mut c = s.conn();
    let _: () = q(&mut c, &["XGROUP", "CREATE", "h", "g", "0", "MKSTREAM"]);
    quiet_policy(
        &mut c,
        "h",
        "g",
        "MIN-IDLE 60000 MAX-DELIVERIES 2 DLQ h:dlq",
    );
    delivered_to_w(&mut c, "h", 5);
    // Stale or over the limit: idle far past MIN-IDLE, so every kind of pass finds them.
    set_pending(&mut c, ("h", "g"), "w", &["1-0"], 120_000, 1);
    set_pending(&mut c, ("h", "g"), "w", &["2-0"], 120_000, 3);
    set_pending(&mut c, ("h", "g"), "w", &["3-0"], 120_000, 1);
    set_pending(&mut c, ("h", "g"), "w", &["4-0"], 0, 1);
    set_pending(&mut c, ("h", "g"), "reclaim", &["5-0"], 120_000, 1);
    let _: i64 = q(&mut c, &["XTRIM", "h", "MINID", "2"]);
    let want = vec![
        t("1-0", "purge", "trimmed"),
        t("2-0", "dead-letter", "over-delivered"),
        t("3-0", "move", "stale"),
        t("4-0", "none", "fresh"),
        t("5-0", "none", "in-inbox"),
    ];
    let _: () = q(&mut c, &["RECLAIM.POLICY", "PAUSE", "h", "g"]);
    let before = untouched(&mut c, "h");
    let paused = before.policy.clone().unwrap();
    assert_eq!(paused.state, b"paused");

    let sim = simulate(&mut c, "h", "g", &[]);
    assert_eq!(sim.halted.as_deref(), Some("paused"));
    assert_eq!(sim.policy, paused, "the live state, as GET shows it");
    assert_eq!(sim.plan(), want);
    // A what-if of a paused policy: the plan after RESUME under the proposed options.
    let what_if = simulate(&mut c, "h", "g", &["MAX-DELIVERIES", "5"]);
    assert_eq!(what_if.halted.as_deref(), Some("paused"));
    assert_eq!(what_if.policy.state, b"paused");
    assert_eq!(what_if.plan()[1], t("2-0", "move", "stale"));
    // SWEEP refuses; the timer does nothing; SIMULATE changed nothing.
    assert_eq!(
        error_of(&mut c, cmd("RECLAIM.SWEEP").arg("h").arg("g")),
        "ERR the policy of this key and group is paused (RECLAIM.POLICY RESUME resumes it)"
    );
    assert_eq!(untouched(&mut c, "h"), before);

    // reclaim.enabled no is named first: RESUME alone would not run a pass.
    let _: () = q(&mut c, &["CONFIG", "SET", "reclaim.enabled", "no"]);
    let sim = simulate(&mut c, "h", "g", &[]);
    assert_eq!(sim.halted.as_deref(), Some("disabled"));
    assert_eq!(sim.plan(), want);
    let _: () = q(&mut c, &["RECLAIM.POLICY", "RESUME", "h", "g"]);
    let sim = simulate(&mut c, "h", "g", &[]);
    assert_eq!(sim.halted.as_deref(), Some("disabled"));
    assert_eq!(sim.policy.state, b"active");
    assert_eq!(sim.plan(), want);
    assert_eq!(
        error_of(&mut c, cmd("RECLAIM.SWEEP").arg("h").arg("g")),
        "ERR reclaim is disabled on this server (CONFIG SET reclaim.enabled yes enables it)"
    );
    assert_eq!(owners(&mut c, "h", "g"), before.pel);
    assert_eq!(xlen(&mut c, "h:dlq"), 0);

    // Enabled again: the pass RESUME made due does what SIMULATE showed.
    let _: () = q(&mut c, &["CONFIG", "SET", "reclaim.enabled", "yes"]);
    let expected = pel_after(&before.pel, &sim);
    wait_for(20, "the resumed pass", || {
        (owners(&mut c, "h", "g") == expected).then_some(())
    });
    assert_eq!(dead_lettered(&mut c, "h:dlq"), to_dlq(&sim));
    let next = simulate(&mut c, "h", "g", &[]);
    assert_eq!(next.halted, None);
    assert_eq!(
        next.plan(),
        [
            t("3-0", "none", "in-inbox"),
            t("4-0", "none", "fresh"),
            t("5-0", "none", "in-inbox"),
        ]
    );
}

/// With `STORM`, the plan dead-letters as many entries as the breaker allows now and no more
/// (rule `storm`, the entries stay pending; moves go on), exactly where SWEEP stops; a what-if
/// `STORM` gets a fresh breaker; an open breaker shows the plan after RESUME.
#[test]
fn storm_cuts_the_plan_where_sweep_stops() {
    let s = Server::new();
    let mut c = s.conn();
    let _: () = q(&mut c, &["XGROUP", "CREATE", "t", "g", "0", "MKSTREAM"]);
    quiet_policy(
        &mut c,
        "t",
        "g",
        "MIN-IDLE 60000 MAX-DELIVERIES 2 DLQ t:dlq STORM 3 3600000",
    );
    delivered_to_w(&mut c, "t", 9);
    for id in ["1-0", "3-0", "4-0", "5-0", "6-0", "7-0"] {
        set_pending(&mut c, ("t", "g"), "w", &[id], 120_000, 5);
    }
    set_pending(&mut c, ("t", "g"), "w", &["2-0", "8-0"], 120_000, 1);
    set_pending(&mut c, ("t", "g"), "w", &["9-0"], 0, 1);
    let _: i64 = q(&mut c, &["XDEL", "t", "4-0", "7-0"]);
    let before = untouched(&mut c, "t");
    let live = before.policy.clone().unwrap();

    // The breaker allows 3: 1-0, 3-0, 5-0 (4-0 is gone from the stream: purged, not counted);
    // 6-0 would open it, and 7-0 after it stays pending though it is gone too.
    let sim = simulate(&mut c, "t", "g", &[]);
    assert_eq!(sim.halted, None);
    let cut = [
        t("6-0", "none", "storm"),
        t("7-0", "none", "storm"),
        t("8-0", "move", "stale"),
        t("9-0", "none", "fresh"),
    ];
    let mut want = vec![
        t("1-0", "dead-letter", "over-delivered"),
        t("2-0", "move", "stale"),
        t("3-0", "dead-letter", "over-delivered"),
        t("4-0", "purge", "deleted"),
        t("5-0", "dead-letter", "over-delivered"),
    ];
    want.extend(cut.clone());
    assert_eq!(sim.plan(), want);
    // What if STORM were 1 in the window: only 1-0.
    let what_if = simulate(&mut c, "t", "g", &["STORM", "1", "3600000"]);
    assert_eq!(what_if.policy, live.clone().with_storm(1, 3_600_000));
    assert_eq!(
        what_if.plan(),
        [
            t("1-0", "dead-letter", "over-delivered"),
            t("2-0", "move", "stale"),
            t("3-0", "none", "storm"),
            t("4-0", "none", "storm"),
            t("5-0", "none", "storm"),
            t("6-0", "none", "storm"),
            t("7-0", "none", "storm"),
            t("8-0", "move", "stale"),
            t("9-0", "none", "fresh"),
        ]
    );
    assert_eq!(untouched(&mut c, "t"), before);

    // One dead-letter made: the live breaker allows 2 more, a fresh one of the same size 3.
    assert_eq!(sweep_limit(&mut c, "t", "g", 1), (0, 1, 0));
    let mid = untouched(&mut c, "t");
    let sim = simulate(&mut c, "t", "g", &[]);
    assert_eq!(sim.plan(), want[1..]);
    let fresh = simulate(&mut c, "t", "g", &["STORM", "3", "3600000"]);
    assert_eq!(fresh.policy, live);
    assert_eq!(
        fresh.plan()[4..6],
        [
            t("6-0", "dead-letter", "over-delivered"),
            t("7-0", "none", "storm")
        ]
    );
    assert_eq!(untouched(&mut c, "t"), mid);

    // SWEEP stops where SIMULATE said, entry by entry; the breaker opens.
    assert_eq!(
        sweep(&mut c, "t", "g"),
        (
            sim.total("move"),
            sim.total("dead-letter"),
            sim.total("purge")
        )
    );
    assert_eq!(owners(&mut c, "t", "g"), pel_after(&mid.pel, &sim));
    assert_eq!(dead_lettered(&mut c, "t:dlq"), ["1-0", "3-0", "5-0"]);
    assert_eq!(stat(&mut c, "t", "g", "storms"), 1);

    // Open: SIMULATE shows the pass after RESUME (the breaker closed, in its grace: no cut);
    // a what-if STORM still gets a fresh breaker of its size.
    let open = untouched(&mut c, "t");
    assert_eq!(open.policy.as_ref().unwrap().state, b"storm");
    let sim = simulate(&mut c, "t", "g", &[]);
    assert_eq!(sim.halted.as_deref(), Some("storm"));
    assert_eq!(sim.policy.state, b"storm");
    let after_resume = [
        t("2-0", "none", "in-inbox"),
        t("6-0", "dead-letter", "over-delivered"),
        t("7-0", "purge", "deleted"),
        t("8-0", "none", "in-inbox"),
        t("9-0", "none", "fresh"),
    ];
    assert_eq!(sim.plan(), after_resume);
    let what_if = simulate(&mut c, "t", "g", &["STORM", "1", "3600000"]);
    assert_eq!(what_if.halted.as_deref(), Some("storm"));
    assert_eq!(
        what_if.plan()[1..3],
        [
            t("6-0", "dead-letter", "over-delivered"),
            t("7-0", "none", "storm")
        ]
    );
    assert_eq!(untouched(&mut c, "t"), open);

    // RESUME: the pass it makes due does what SIMULATE showed.
    let _: () = q(&mut c, &["RECLAIM.POLICY", "RESUME", "t", "g"]);
    let expected = pel_after(&open.pel, &sim);
    wait_for(20, "the resumed pass", || {
        (owners(&mut c, "t", "g") == expected).then_some(())
    });
    assert_eq!(dead_lettered(&mut c, "t:dlq"), ["1-0", "3-0", "5-0", "6-0"]);
    let next = simulate(&mut c, "t", "g", &[]);
    assert_eq!((next.halted, next.policy.state), (None, b"active".to_vec()));
}
