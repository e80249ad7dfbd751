//! The monitoring stack of contrib/, for real. `make test` runs the collect script
//! contrib/prometheus/reclaim.lua with `EVAL` against a server with the module, as the exporter
//! does; `make test-monitoring` also runs the tests that need Debian's `prometheus` and
//! `prometheus-redis-exporter` (ignored otherwise; it installs them):
//! - `promtool` checks contrib/prometheus/prometheus.yml and reclaim-rules.yml, and runs the unit
//!   tests of every alert (reclaim-rules.test.yml);
//! - prometheus-redis-exporter 1.45 with `-script contrib/prometheus/reclaim.lua` on a loopback
//!   port, against a server with the module, and Prometheus scraping it with the shipped
//!   relabelling: the per-policy series move after a `RECLAIM.SWEEP`, the rules load, and every
//!   query of the Grafana dashboard runs.

use reclaim_testkit::*;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn contrib(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("contrib")
        .join(p)
}

/// Runs `promtool args...`; its output, or a panic with it when it fails.
fn promtool(args: &[&str]) -> String {
    let out = Command::new("promtool")
        .args(args)
        .output()
        .expect("promtool (apt-get install prometheus; make test-monitoring does)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?}:\n{text}");
    text
}

/// The script's reply, as the exporter gets it: (name, value) pairs.
fn collect(c: &mut Connection) -> Vec<(String, String)> {
    let script = std::fs::read_to_string(contrib("prometheus/reclaim.lua")).unwrap();
    let flat: Vec<String> = cmd("EVAL").arg(script).arg(0).query(c).unwrap();
    flat.chunks(2)
        .map(|p| (p[0].clone(), p.get(1).cloned().unwrap_or_default()))
        .collect()
}

fn value<'a>(pairs: &'a [(String, String)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

#[test]
fn the_collect_script_turns_info_reclaim_into_named_values() {
    let s = Server::new();
    let mut c = s.conn();
    create_group(&mut c, b"orders", b"billing");
    // The policy's one timer pass first, on the empty group: what follows is left to SWEEP.
    quiet_policy(&mut c, "orders", "billing", "MIN-IDLE 100");
    add_entries(&mut c, b"orders", "o", 3);
    read_group(&mut c, b"orders", b"billing", b"w1");
    // A binary name: escaped by the module, so it never holds the ':' the names are split on.
    set_policy(&mut c, b"odd:\xff name", b"g", &PolicyView::new(1000, 50));
    set_policy(&mut c, b"p", b"g", &PolicyView::new(1000, 50));
    run(&mut c, &["RECLAIM.POLICY", "PAUSE", "p", "g"]);
    // w1's entries stale (MIN-IDLE 100), and the binary one's first pass found no stream.
    wait_idle(&mut c, "orders", "billing", 150);
    wait_for(10, "the binary policy waiting for its stream", || {
        policy_lines(&mut c)
            .iter()
            .any(|l| {
                l["stream"] == "odd%3A%FF%20name"
                    && l["status"] == "waiting: no stream odd%3A%FF%20name"
            })
            .then_some(())
    });
    let swept = run(&mut c, &["RECLAIM.SWEEP", "orders", "billing"]);
    assert_eq!(int_field(&swept, "claimed"), 3);
    let v = collect(&mut c);
    // Totals, and every number of each policy line, and a status flag.
    assert_eq!(value(&v, "claimed"), Some("3"), "{v:?}");
    assert_eq!(value(&v, "policies"), Some("3"), "{v:?}");
    assert_eq!(
        value(&v, "policy_claimed:0:orders:billing"),
        Some("3"),
        "{v:?}"
    );
    assert_eq!(
        value(&v, "policy_pending:0:orders:billing"),
        Some("3"),
        "{v:?}"
    );
    assert_eq!(
        value(&v, "policy_inbox:0:orders:billing"),
        Some("3"),
        "{v:?}"
    );
    assert_eq!(
        value(&v, "policy_status:0:orders:billing:active"),
        Some("1"),
        "{v:?}"
    );
    assert_eq!(value(&v, "policy_status:0:p:g:paused"), Some("1"), "{v:?}");
    // The status word only (`waiting`, not what it waits for): one series per state.
    assert_eq!(
        value(&v, "policy_status:0:odd%3A%FF%20name:g:waiting"),
        Some("1"),
        "{v:?}"
    );
    // Every name the relabelling can split: policy_<field>:<db>:<stream>:<group>[:<status>].
    for (name, val) in &v {
        assert!(val.parse::<u64>().is_ok(), "{name} = {val}");
        if let Some(rest) = name.strip_prefix("policy_") {
            let parts = rest.split(':').count();
            let want = if rest.starts_with("status:") { 5 } else { 4 };
            assert_eq!(parts, want, "{name}");
        }
    }
    // Without the module's section (another server), an empty reply, never an error.
    let plain = Server::start_without_module(&[]);
    let mut pc = plain.conn();
    assert!(collect(&mut pc).is_empty());
}

#[test]
#[ignore = "needs promtool (Debian's prometheus): make test-monitoring"]
fn promtool_checks_the_config_and_unit_tests_every_alert() {
    let rules = contrib("prometheus/reclaim-rules.yml");
    let tests = contrib("prometheus/reclaim-rules.test.yml");
    let out = promtool(&["check", "rules", rules.to_str().unwrap()]);
    assert!(out.contains("SUCCESS"), "{out}");
    let out = promtool(&[
        "check",
        "config",
        contrib("prometheus/prometheus.yml").to_str().unwrap(),
    ]);
    assert!(out.contains("SUCCESS"), "{out}");
    let out = promtool(&["test", "rules", tests.to_str().unwrap()]);
    assert!(out.contains("SUCCESS"), "{out}");
    // Every alert has a case where it fires (a non-empty exp_alerts after its name).
    let rules_text = std::fs::read_to_string(&rules).unwrap();
    let tests_text = std::fs::read_to_string(&tests).unwrap();
    let alerts: Vec<&str> = rules_text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .collect();
    assert_eq!(alerts.len(), 13, "{alerts:?}");
    for a in alerts {
        let fires = tests_text
            .split(&format!("alertname: {a}\n"))
            .skip(1)
            .any(|rest| {
                let block = rest.trim_start();
                block.starts_with("exp_alerts:\n") && !block.starts_with("exp_alerts: []")
            });
        assert!(fires, "no test where {a} fires");
    }
}

/// A child process killed on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(what: &'static str, cmd: &mut Command) -> Proc {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: {e} (make test-monitoring installs it)"));
    Proc(child)
}

/// `GET path` on 127.0.0.1:`port`: (status code, body); `None` when nothing answers.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut all = String::new();
    s.read_to_string(&mut all).ok()?;
    let (head, body) = all.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body.to_string()))
}

/// `s` percent-encoded for a URL query.
fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Runs the instant query `q` on Prometheus: the JSON reply (panics when it is not a success).
fn query(port: u16, q: &str) -> String {
    let (code, body) = get(port, &format!("/api/v1/query?query={}", urlencode(q)))
        .unwrap_or_else(|| panic!("no answer from Prometheus to {q}"));
    assert!(
        code == 200 && body.contains("\"status\":\"success\""),
        "{q}: {code} {body}"
    );
    body
}

/// The sample values of a query reply (`"value":[<time>,"<value>"]`), as text.
fn values(body: &str) -> Vec<String> {
    body.split("\"value\":[")
        .skip(1)
        .filter_map(|rest| {
            let v = rest.split_once(",\"")?.1;
            Some(v.split_once('"')?.0.to_string())
        })
        .collect()
}

/// Waits until query `q` gives exactly the one value `want`.
fn wait_value(port: u16, q: &str, want: &str) {
    let mut last = String::new();
    wait_for(60, &format!("{q} == {want} in Prometheus"), || {
        last = query(port, q);
        (values(&last) == [want]).then_some(())
    });
}

/// The `expr` strings of a Grafana dashboard (JSON string escapes undone).
fn dashboard_exprs(json: &str) -> Vec<String> {
    json.lines()
        .filter_map(|l| l.trim().strip_prefix("\"expr\": \""))
        .map(|l| {
            l.trim_end_matches(',')
                .trim_end_matches('"')
                .replace("\\\"", "\"")
                .replace("\\\\", "\\")
        })
        .collect()
}

/// prometheus-redis-exporter with the collect script, for the server on `redis_port`: the process
/// and the port of its `/metrics`.
fn exporter(redis_port: u16) -> (Proc, u16) {
    let port = free_port();
    let p = spawn(
        "prometheus-redis-exporter",
        Command::new("prometheus-redis-exporter")
            .arg("-redis.addr")
            .arg(format!("redis://127.0.0.1:{redis_port}"))
            .arg("-web.listen-address")
            .arg(format!("127.0.0.1:{port}"))
            .arg("-script")
            .arg(contrib("prometheus/reclaim.lua")),
    );
    (p, port)
}

/// Prometheus with the shipped config (its rules, its relabelling) scraping the exporters on
/// `exporter_ports`, scraped and evaluated every second, its data in `dir`; the process and its
/// port, once it is ready.
fn prometheus(dir: &Path, exporter_ports: &[u16]) -> (Proc, u16) {
    let targets: Vec<String> = exporter_ports
        .iter()
        .map(|p| format!("\"127.0.0.1:{p}\""))
        .collect();
    let config = std::fs::read_to_string(contrib("prometheus/prometheus.yml"))
        .unwrap()
        .replace("\"127.0.0.1:9121\"", &targets.join(", "))
        .replace("scrape_interval: 15s", "scrape_interval: 1s")
        .replace("evaluation_interval: 15s", "evaluation_interval: 1s")
        .replace(
            "- reclaim-rules.yml",
            &format!("- {}", contrib("prometheus/reclaim-rules.yml").display()),
        );
    let config_path = dir.join("prometheus.yml");
    std::fs::write(&config_path, config).unwrap();
    let port = free_port();
    let p = spawn(
        "prometheus",
        Command::new("prometheus")
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}")),
    );
    wait_for(60, "Prometheus ready", || {
        get(port, "/-/ready").and_then(|(code, _)| (code == 200).then_some(()))
    });
    (p, port)
}

/// The dashboard's query whose expression contains `part` (`$instance`: every node).
fn dashboard_query(part: &str) -> String {
    let dashboard = std::fs::read_to_string(contrib("grafana/reclaim-dashboard.json")).unwrap();
    dashboard_exprs(&dashboard)
        .into_iter()
        .find(|e| e.contains(part))
        .unwrap_or_else(|| panic!("no dashboard query with {part}"))
        .replace("$instance", ".*")
}

#[test]
#[ignore = "needs prometheus and prometheus-redis-exporter: make test-monitoring"]
fn exporter_and_prometheus_see_each_policy_move_after_a_sweep() {
    let s = Server::new();
    let mut c = s.conn();
    // Five entries held by a crashed worker, two of them at their last delivery; and a policy
    // whose stream name needs escaping, waiting for its stream.
    create_group(&mut c, b"orders", b"billing");
    let ids = add_entries(&mut c, b"orders", "o", 5);
    read_group(&mut c, b"orders", b"billing", b"w1");
    set_deliveries(&mut c, b"orders", b"billing", b"w1", &ids[..2], 3);
    // The policy's one timer pass sees the five fresh (MIN-IDLE leaves it 2 s to run).
    quiet_policy(
        &mut c,
        "orders",
        "billing",
        "MIN-IDLE 2000 MAX-DELIVERIES 3 DLQ orders:dlq",
    );

    set_policy_opts(&mut c, "odd name:1", "g", "MIN-IDLE 1000");

    let (_exporter, exporter_port) = exporter(s.port);
    let metrics = || get(exporter_port, "/metrics").map(|(_, b)| b);
    let m = wait_for(20, "the exporter's /metrics", metrics);
    assert!(m.contains("redis_up 1"), "{m}");
    let claimed_key = "redis_script_values{key=\"policy_claimed:0:orders:billing\"}";
    assert!(m.contains(&format!("{claimed_key} 0\n")), "{m}");
    assert!(
        m.contains("redis_script_values{key=\"policy_status:0:odd%20name%3A1:g:waiting\"} 1"),
        "{m}"
    );

    // Prometheus with the shipped config: this exporter, scraped and evaluated every second.
    let dir = tempfile::tempdir().unwrap();
    let (_prometheus, prom_port) = prometheus(dir.path(), &[exporter_port]);
    let policy = "{db=\"0\",stream=\"orders\",group=\"billing\"}";
    wait_value(prom_port, &format!("reclaim_policy_pending{policy}"), "5");
    wait_value(prom_port, &format!("reclaim_policy_claimed{policy}"), "0");
    wait_value(
        prom_port,
        "reclaim_policy_status{stream=\"orders\",status=\"active\"}",
        "1",
    );
    wait_value(
        prom_port,
        "reclaim_policy_status{stream=\"odd%20name%3A1\",group=\"g\",status=\"waiting\"}",
        "1",
    );

    // The entries go stale; one sweep moves three to the inbox and dead-letters two.
    wait_idle(&mut c, "orders", "billing", 2050);
    let swept = run(&mut c, &["RECLAIM.SWEEP", "orders", "billing"]);
    assert_eq!(int_field(&swept, "claimed"), 3);
    assert_eq!(int_field(&swept, "dead-lettered"), 2);
    let m = wait_for(20, "the exporter sees the sweep", || {
        metrics().filter(|m| m.contains(&format!("{claimed_key} 3\n")))
    });
    assert!(
        m.contains("redis_script_values{key=\"policy_dead_lettered:0:orders:billing\"} 2\n"),
        "{m}"
    );
    wait_value(prom_port, &format!("reclaim_policy_claimed{policy}"), "3");
    wait_value(
        prom_port,
        &format!("reclaim_policy_dead_lettered{policy}"),
        "2",
    );
    wait_value(prom_port, &format!("reclaim_policy_inbox{policy}"), "3");
    wait_value(prom_port, &format!("reclaim_policy_pending{policy}"), "3");
    wait_value(prom_port, "reclaim_dead_lettered", "2");
    wait_value(prom_port, "reclaim_policies", "2");

    // The rules loaded, and every query of the dashboard runs.
    let (_, rules) = get(prom_port, "/api/v1/rules").expect("rules");
    for a in [
        "ReclaimPelGrowing",
        "ReclaimStormBreakerOpen",
        "ReclaimTicksOverBudget",
    ] {
        assert!(rules.contains(a), "{a} not loaded: {rules}");
    }
    assert!(!rules.contains("\"health\":\"err\""), "{rules}");
    let dashboard = std::fs::read_to_string(contrib("grafana/reclaim-dashboard.json")).unwrap();
    let exprs = dashboard_exprs(&dashboard);
    assert!(exprs.len() >= 10, "{exprs:?}");
    for e in &exprs {
        let body = query(prom_port, &e.replace("$instance", ".*"));
        if e.contains("(reclaim_policy_pending{") {
            assert_eq!(values(&body).len(), 2, "{e}: {body}");
        }
    }
}

/// Redis Cluster (3 primaries + 3 replicas), one exporter per node, one Prometheus: every node
/// reports the policies it knows (a primary and its replica each have a series), the dashboard
/// sums a policy's figures across the nodes that serve it, leaving out replicas' copies (also
/// the stale ones of an old primary after a `CLUSTER FAILOVER`), and a node whose cluster is
/// down reports its policies as `cluster-down`, with their labels.
#[test]
#[ignore = "needs prometheus and prometheus-redis-exporter: make test-monitoring"]
fn a_cluster_is_scraped_per_node_and_the_dashboard_sums_its_primaries() {
    let cluster = Cluster::start(3, 1, 5000, &[]);
    // One stream per primary, three entries held by a worker that is gone; passes every 100 ms.
    let mut streams = Vec::new();
    for p in cluster.primaries() {
        let st = format!("{}s", tag_for_slot("mon", cluster.lowest_slot(p)));
        let mut c = cluster.conn(p);
        create_group(&mut c, st.as_bytes(), b"g");
        add_entries(&mut c, st.as_bytes(), "e", 3);
        read_group(&mut c, st.as_bytes(), b"g", b"w1");
        set_policy(&mut c, st.as_bytes(), b"g", &PolicyView::new(600_000, 100));
        wait_for(10, "a pass", || {
            (int_field(&stats(&mut c, &st, "g"), "passes") > 0).then_some(())
        });
        streams.push((p, st));
    }
    let exporters: Vec<(Proc, u16)> = cluster.nodes.iter().map(|n| exporter(n.port)).collect();
    let ports: Vec<u16> = exporters.iter().map(|(_, p)| *p).collect();
    let dir = tempfile::tempdir().unwrap();
    let (_prometheus, prom) = prometheus(dir.path(), &ports);

    // Per node: the primary and its replica each report the policy.
    let (p0, s0) = streams[0].clone();
    wait_value(
        prom,
        &format!("count(reclaim_policy_pending{{stream=\"{s0}\"}})"),
        "2",
    );
    wait_value(prom, "count(redis_instance_info{role=\"slave\"})", "3");
    // Summed across nodes, replicas left out: each policy once, with its primary's figure.
    let pending = dashboard_query("(reclaim_policy_pending{");
    let mut last = String::new();
    wait_for(60, "the dashboard's PEL sizes", || {
        last = query(prom, &pending);
        (values(&last) == ["3", "3", "3"]).then_some(())
    });
    let one =
        |st: &str| format!("{pending} and on(stream) reclaim_policy_pending{{stream=\"{st}\"}}");

    // CLUSTER FAILOVER: the replica serves the stream (two more entries pending there); the old
    // primary, a replica now, keeps reporting what it learnt as a primary.
    let r = cluster.replicas_of(p0)[0];
    cluster.failover(r);
    let mut c = cluster.conn(r);
    add_entries(&mut c, s0.as_bytes(), "f", 2);
    read_group(&mut c, s0.as_bytes(), b"g", b"w1");
    wait_for(10, "the new primary's pass", || {
        let line = policy_lines(&mut c)
            .into_iter()
            .find(|l| l["stream"] == s0)?;
        (line["pending"] == "5").then_some(())
    });
    wait_value(
        prom,
        &format!(
            "redis_instance_info{{role=\"slave\",tcp_port=\"{}\"}}",
            cluster.nodes[p0].port
        ),
        "1",
    );
    wait_value(prom, &one(&s0), "5");
    wait_value(
        prom,
        &format!("count(reclaim_policy_pending{{stream=\"{s0}\"}})"),
        "2",
    );
    // The series of every node, the stale one included: the dashboard's sum is not theirs.
    let all = query(
        prom,
        &format!("sum(reclaim_policy_pending{{stream=\"{s0}\"}})"),
    );
    assert_eq!(values(&all), ["8"], "{all}");

    // A primary whose cluster is down (a slot of its own unassigned): its policy's status is
    // cluster-down, with the policy's labels (the relabelling reads the hyphen).
    let (p1, s1) = streams[1].clone();
    let mut c1 = cluster.conn(p1);
    let _: () = cmd("CLUSTER")
        .arg("DELSLOTS")
        .arg(cluster.lowest_slot(p1) + 1)
        .query(&mut c1)
        .expect("DELSLOTS");
    wait_value(
        prom,
        &format!(
            "reclaim_policy_status{{db=\"0\",stream=\"{s1}\",group=\"g\",status=\"cluster-down\"}}"
        ),
        "1",
    );
}
