//! Section 6, many policies with nothing to do: the server's CPU time and another client's `PING`
//! round trips with 1,000 / 5,000 policies at `INTERVAL 1000` and 50,000 at `INTERVAL 10000`,
//! against a server without the module holding the same data; the longest tick. Writes
//! `target/bench/many.csv` for the plot.

use super::*;

// ---------------------------------------------------------------------------------------------
// Measurement

/// Round trips of one client's closed `PING` loop over a window, µs.
#[derive(Clone, Default)]
pub struct Pings {
    pub n: usize,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

pub struct ManyRow {
    pub policies: usize,
    pub interval_ms: u64,
    pub window_s: f64,
    /// Server CPU share of one core over the window, without and with the module (no client).
    pub cpu_base: f64,
    pub cpu_module: f64,
    pub ping_base: Pings,
    pub ping_module: Pings,
    pub passes: i64,
    pub max_tick_cpu_us: i64,
    pub over_budget: i64,
    pub setup_s: f64,
}

/// `n` streams `p:<i>`, each with 2 entries delivered to consumer `c` of group `g` (so 2 fresh
/// pending entries), in EVAL chunks.
fn build_streams(con: &mut Connection, n: usize) -> Res<()> {
    let lua = "for i=tonumber(ARGV[1]),tonumber(ARGV[2]) do local k='p:'..i \
               redis.call('XADD',k,'*','f','v') redis.call('XADD',k,'*','f','v') \
               redis.call('XGROUP','CREATE',k,'g','0') \
               redis.call('XREADGROUP','GROUP','g','c','STREAMS',k,'>') end";
    let mut i = 1;
    while i <= n {
        let j = (i + 4_999).min(n);
        let _: Value = cmd("EVAL").arg(lua).arg(0).arg(i).arg(j).query(con)?;
        i = j + 1;
    }
    Ok(())
}

/// Server CPU share of one core over `window` (`used_cpu_user + used_cpu_sys`).
fn cpu_share(con: &mut Connection, window: Duration) -> Res<f64> {
    let c0 = server_cpu(con)?;
    thread::sleep(window);
    Ok((server_cpu(con)? - c0) / window.as_secs_f64())
}

/// A closed `PING` loop on a connection of its own for `window`, appending each round trip (µs)
/// to `lat`.
fn ping_loop(c: &mut Connection, window: Duration, lat: &mut Vec<f64>) -> Res<()> {
    let t = Instant::now();
    while t.elapsed() < window {
        let s = Instant::now();
        let _: String = cmd("PING").query(c)?;
        lat.push(s.elapsed().as_secs_f64() * 1e6);
    }
    Ok(())
}

/// The percentiles of round trips `lat`.
fn pings(mut lat: Vec<f64>) -> Pings {
    lat.sort_by(|a, b| a.total_cmp(b));
    if lat.is_empty() {
        return Pings::default();
    }
    let at = |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)];
    Pings {
        n: lat.len(),
        p50: at(0.5),
        p99: at(0.99),
        max: lat.last().copied().unwrap_or(0.0),
    }
}

/// Rounds of `PING` windows on the two servers, alternating (the baseline first), `window` on
/// each in all: what the machine does meanwhile falls on both alike.
const PING_ROUNDS: u32 = 4;

fn reclaim_int(con: &mut Connection, field: &str) -> i64 {
    info(con, "reclaim")
        .into_iter()
        .find(|(k, _)| k == field)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

/// One count: a server without the module and one with it hold the same `n` streams; the module
/// gets a policy on each (`MIN-IDLE 600000 INTERVAL interval`: nothing is ever stale); once every
/// policy has passed once, and `interval` later, the CPU window of each server (no client), then
/// the `PING` window of each (one closed loop), the baseline first.
fn one(n: usize, interval: u64, window: Duration) -> Res<ManyRow> {
    eprintln!("   {n} policies at INTERVAL {interval}");
    let base = Server::start_without_module(&["--appendonly", "no"]);
    let srv = start_server()?;
    let (mut bc, mut mc) = (bench_conn(&base)?, bench_conn(&srv)?);
    let t = Instant::now();
    build_streams(&mut bc, n)?;
    build_streams(&mut mc, n)?;
    let iv = interval.to_string();
    let mut i = 1;
    while i <= n {
        let mut p = redis::pipe();
        for k in i..=(i + 999).min(n) {
            p.cmd("RECLAIM.POLICY")
                .arg(&[
                    "SET",
                    &format!("p:{k}"),
                    "g",
                    "MIN-IDLE",
                    "600000",
                    "INTERVAL",
                    &iv,
                ])
                .ignore();
        }
        let _: () = p.query(&mut mc)?;
        i += 1000;
    }
    while reclaim_int(&mut mc, "reclaim_passes") < n as i64 {
        if t.elapsed() > TIMEOUT {
            return Err("the policies' first passes did not end".into());
        }
        thread::sleep(Duration::from_millis(50));
    }
    let setup_s = t.elapsed().as_secs_f64();
    thread::sleep(Duration::from_millis(interval));
    let _: () = cmd("CONFIG").arg("RESETSTAT").query(&mut mc)?;
    let p0 = reclaim_int(&mut mc, "reclaim_passes");
    let cpu_base = cpu_share(&mut bc, window)?;
    let cpu_module = cpu_share(&mut mc, window)?;
    let (mut lb, mut lm) = (Vec::new(), Vec::new());
    let (mut pb, mut pm) = (bench_conn(&base)?, bench_conn(&srv)?);
    for _ in 0..PING_ROUNDS {
        ping_loop(&mut pb, window / PING_ROUNDS, &mut lb)?;
        ping_loop(&mut pm, window / PING_ROUNDS, &mut lm)?;
    }
    let (ping_base, ping_module) = (pings(lb), pings(lm));
    let passes = reclaim_int(&mut mc, "reclaim_passes") - p0;
    Ok(ManyRow {
        policies: n,
        interval_ms: interval,
        window_s: window.as_secs_f64(),
        cpu_base,
        cpu_module,
        ping_base,
        ping_module,
        passes,
        max_tick_cpu_us: reclaim_int(&mut mc, "reclaim_max_tick_cpu_us"),
        over_budget: reclaim_int(&mut mc, "reclaim_ticks_over_budget"),
        setup_s,
    })
}

/// Section 6: each (count, interval) of `counts`; writes `many.csv` into `data`.
pub fn many_policies(counts: &[(usize, u64)], window: Duration, data: &Path) -> Res<Vec<ManyRow>> {
    eprintln!("== many policies: {counts:?}");
    let mut rows = Vec::new();
    for &(n, iv) in counts {
        let r = one(n, iv, window)?;
        eprintln!(
            "     cpu {:.2}% over {:.2}%, ping p99 {:.0} vs {:.0} µs, max tick cpu {} µs",
            r.cpu_module * 100.0,
            r.cpu_base * 100.0,
            r.ping_module.p99,
            r.ping_base.p99,
            r.max_tick_cpu_us
        );
        rows.push(r);
    }
    std::fs::create_dir_all(data)?;
    let mut s =
        String::from("policies,interval_ms,cpu_over_pct,ping_p99_base_us,ping_p99_module_us\n");
    for r in &rows {
        let _ = writeln!(
            s,
            "{},{},{:.3},{:.1},{:.1}",
            r.policies,
            r.interval_ms,
            (r.cpu_module - r.cpu_base) * 100.0,
            r.ping_base.p99,
            r.ping_module.p99
        );
    }
    std::fs::write(data.join("many.csv"), s)?;
    Ok(rows)
}

// ---------------------------------------------------------------------------------------------
// Report

/// The section's rows in the targets table.
pub fn targets(o: &mut String, rows: &[ManyRow], budget_us: i64, missed: &mut Vec<&'static str>) {
    for r in rows {
        let over = (r.cpu_module - r.cpu_base) * 100.0;
        let dp = (r.ping_module.p99 - r.ping_base.p99) / 1000.0;
        let met = over <= 5.0 && dp <= 1.0;
        let _ = writeln!(
            o,
            "| {} policies at `INTERVAL {}` with nothing to do: within 5% of a core, another client's `PING` p99 within 1 ms of a server without the module | {over:+.2}% of a core; p99 {:.0} µs vs {:.0} µs ({dp:+.2} ms) | {} |",
            thousands(r.policies as f64),
            r.interval_ms,
            r.ping_module.p99,
            r.ping_base.p99,
            if met { "met" } else { "missed" }
        );
        if !met {
            missed.push("many");
        }
    }
    let limit = budget_us * 6 / 5;
    for r in rows {
        let met = r.max_tick_cpu_us <= limit;
        let _ = writeln!(
            o,
            "| ticks within budget with {} policies at `INTERVAL {}`: `reclaim_max_tick_cpu_us` at most 1.2x `reclaim.tick-budget-us` ({limit} µs) since the server started (policies set, first passes, the windows) | {} µs of main-thread CPU; {} ticks or slices over budget | {} |",
            thousands(r.policies as f64),
            r.interval_ms,
            r.max_tick_cpu_us,
            r.over_budget,
            if met { "met" } else { "missed" }
        );
        if !met && !missed.contains(&"many-ticks") {
            missed.push("many-ticks");
        }
    }
}

/// The "many-ticks" paragraph of "What would close the gaps".
pub fn ticks_gap(o: &mut String, rows: &[ManyRow], budget_us: i64) {
    let over: Vec<String> = rows
        .iter()
        .filter(|r| r.max_tick_cpu_us > budget_us * 6 / 5)
        .map(|r| {
            format!(
                "{} µs with {}",
                r.max_tick_cpu_us,
                thousands(r.policies as f64)
            )
        })
        .collect();
    let _ = writeln!(
        o,
        "- **Ticks with many policies** ({}). A tick or slice visits due policies one step at a \
         time and starts no step it predicts would end past its aim (3/4 of the budget, from the \
         step just done); a step with nothing to do is one `XPENDING` summary, tens of µs. The \
         figure is the single longest tick since the server started, so one tick that the \
         machine charged extra CPU time to (see the Machine table) sets it; the count of ticks \
         over budget next to it shows how rare they were.\n",
        over.join(", ")
    );
}

/// Section 6 of the report.
pub fn report(o: &mut String, rows: &[ManyRow], budget_us: i64) {
    let _ = writeln!(o, "## 6. Many policies with nothing to do\n");
    let _ = writeln!(
        o,
        "Two servers hold the same streams `p:<i>`, each with two entries pending (fresh) at a \
         consumer of group `g`: one without the module, one with it and a policy on every \
         stream (`MIN-IDLE 600000`, the `INTERVAL` given: nothing is ever stale, so each pass is \
         a trim-only one, one call into Redis). Once every policy has passed once, and one \
         `INTERVAL` later: the server's CPU time over a window (`used_cpu_user + used_cpu_sys`, \
         no client), the baseline first; then one client's closed `PING` loop on each, in 4 \
         alternating rounds adding up to a window of the same length on each.\n"
    );
    let _ = writeln!(
        o,
        "| policies | INTERVAL ms | window s | CPU without / with the module | over the baseline | passes in the window | PING p50 / p99 / max µs, without | with | `reclaim_max_tick_cpu_us` | ticks over budget | setup s |\n|---:|---:|---:|---|---:|---:|---|---|---:|---:|---:|"
    );
    for r in rows {
        let p = |x: &Pings| format!("{:.0} / {:.0} / {:.0} ({} pings)", x.p50, x.p99, x.max, x.n);
        let _ = writeln!(
            o,
            "| {} | {} | {:.0} | {:.2}% / {:.2}% | **{:+.2}%** | {} | {} | {} | {} | {} | {:.1} |",
            thousands(r.policies as f64),
            r.interval_ms,
            r.window_s,
            r.cpu_base * 100.0,
            r.cpu_module * 100.0,
            (r.cpu_module - r.cpu_base) * 100.0,
            thousands(r.passes as f64),
            p(&r.ping_base),
            p(&r.ping_module),
            r.max_tick_cpu_us,
            r.over_budget,
            r.setup_s
        );
    }
    let _ = writeln!(
        o,
        "\n![CPU over the baseline and PING p99 by number of policies](bench-many.png)\n\n\
         A pass with nothing to do is one `XPENDING key group` (the summary: O(consumers), which \
         also tells whether entries were trimmed from under the PEL) with the policy read from \
         its key and the step's bookkeeping under the registry's lock in one spell. \
         `reclaim_max_tick_cpu_us` is the longest tick or slice of the module since the server \
         started (budget {budget_us} µs; see section 2 on what this machine adds to it).\n"
    );
}
