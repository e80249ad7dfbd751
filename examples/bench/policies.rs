//! Section 4, the cost vs the number of policies: server CPU over a window with 1, 100, 10,000
//! policies on all-fresh streams, and what one `INFO reclaim` (a line per policy) costs with
//! them; its paragraph, its target and its observation in the report.

use super::*;

// ---------------------------------------------------------------------------------------------
// Measurement

pub struct PolicyRow {
    pub policies: usize,
    pub cpu_s: f64,
    pub window_s: f64,
    pub passes: i64,
    pub steps: i64,
    pub max_tick_us: i64,
    pub setup_s: f64,
    /// `INFO reclaim`: the server's own time per call (µs, `INFO commandstats`), the best
    /// client round trip (µs), the reply's size (bytes).
    pub info: InfoCost,
}

pub const PER_STREAM: usize = 100;

/// `INFO reclaim` calls per measurement.
const INFO_CALLS: u32 = 50;
/// What `INFO reclaim` should cost the server with 10,000 policies, at most (µs).
const INFO_TARGET_US: f64 = 5000.0;

#[derive(Default, Clone, Copy)]
pub struct InfoCost {
    pub server_us: f64,
    pub best_rtt_us: f64,
    pub bytes: usize,
}

/// `INFO_CALLS` calls of `INFO reclaim` after `CONFIG RESETSTAT`: the server's mean time per
/// call (`cmdstat_info`'s `usec_per_call`), the best round trip and the reply's size.
fn info_cost(con: &mut Connection) -> Res<InfoCost> {
    let _: () = cmd("CONFIG").arg("RESETSTAT").query(con)?;
    let mut best = f64::MAX;
    let mut bytes = 0;
    for _ in 0..INFO_CALLS {
        let t = Instant::now();
        let s: String = cmd("INFO").arg("reclaim").query(con)?;
        best = best.min(t.elapsed().as_secs_f64() * 1e6);
        bytes = s.len();
    }
    let stats: String = cmd("INFO").arg("commandstats").query(con)?;
    let server_us = stats
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_info:"))
        .and_then(|l| {
            l.split(',')
                .find_map(|kv| kv.strip_prefix("usec_per_call="))
                .and_then(|v| v.trim().parse().ok())
        })
        .ok_or("no cmdstat_info in INFO commandstats")?;
    Ok(InfoCost {
        server_us,
        best_rtt_us: best,
        bytes,
    })
}

/// Section 4: server CPU over `window` with each count of policies on all-fresh streams.
/// Long on purpose: one measurement from setup to reading, in the order it runs; splitting it
/// would scatter what is timed and what is not.
pub fn policy_scaling(counts: &[usize], window: Duration) -> Res<Vec<PolicyRow>> {
    let max = counts.iter().copied().max().unwrap_or(0);
    eprintln!("== cost vs number of policies ({max} streams of {PER_STREAM} pending)");
    let srv = start_server()?;
    let mut con = bench_conn(&srv)?;
    let sha = load_script(&mut con, MANY)?;
    let per_call = (CHUNK / PER_STREAM).max(1);
    in_chunks(max, per_call, |made, k| {
        let _: i64 = cmd("EVALSHA")
            .arg(&sha)
            .arg(&[0, made, k, PER_STREAM])
            .arg(BODY)
            .query(&mut con)?;
        Ok(())
    })?;
    thread::sleep(Duration::from_secs(1));
    let measure = |con: &mut Connection, policies: usize, setup_s: f64| -> Res<PolicyRow> {
        let c0 = server_cpu(con)?;
        let p0 = reclaim_info(con, "passes");
        let s0 = reclaim_info(con, "steps");
        let t0 = Instant::now();
        thread::sleep(window);
        let c1 = server_cpu(con)?;
        let window_s = t0.elapsed().as_secs_f64();
        let info = info_cost(con)?;
        Ok(PolicyRow {
            policies,
            cpu_s: c1 - c0,
            window_s,
            passes: reclaim_info(con, "passes") - p0,
            steps: reclaim_info(con, "steps") - s0,
            max_tick_us: reclaim_info(con, "max_tick_us"),
            setup_s,
            info,
        })
    };
    let mut rows = vec![measure(&mut con, 0, 0.0)?];
    eprintln!(
        "   0 policies: {:.3}s CPU in {:.1}s",
        rows[0].cpu_s, rows[0].window_s
    );
    let mut have = 0;
    let mut sorted: Vec<usize> = counts.iter().copied().filter(|&c| c > 0).collect();
    sorted.sort_unstable();
    sorted.dedup();
    for target in sorted {
        let t = Instant::now();
        let p0 = reclaim_info(&mut con, "passes");
        let mut i = have;
        while i < target {
            let mut pipe = redis::pipe();
            for s in i..target.min(i + 1000) {
                pipe.cmd("RECLAIM.POLICY")
                    .arg("SET")
                    .arg(format!("pol:{s}"))
                    .arg("g")
                    .arg("MIN-IDLE")
                    .arg(3_600_000)
                    .ignore();
            }
            let _: () = pipe.query(&mut con)?;
            i = target.min(i + 1000);
        }
        // Wait for the new policies' first passes (due at once), then measure steady state.
        while reclaim_info(&mut con, "passes") - p0 < (target - have) as i64
            && t.elapsed() < TIMEOUT
        {
            thread::sleep(Duration::from_millis(20));
        }
        have = target;
        let setup_s = t.elapsed().as_secs_f64();
        // Start the window half an INTERVAL after the first passes: every policy's second pass
        // (due INTERVAL after its first) then falls inside it, none on its edges.
        thread::sleep(Duration::from_millis(DEFAULT_INTERVAL_MS as u64 / 2));
        let row = measure(&mut con, target, setup_s)?;
        eprintln!(
            "   {target} policies: {:.3}s CPU in {:.1}s, {} passes; INFO reclaim {:.0} µs server, {} bytes",
            row.cpu_s, row.window_s, row.passes, row.info.server_us, row.info.bytes
        );
        rows.push(row);
    }
    Ok(rows)
}

// ---------------------------------------------------------------------------------------------
// Report

/// The target row of section 4: `INFO reclaim` with the most policies measured (10,000 by
/// default) within [`INFO_TARGET_US`] of server time.
pub fn info_target(o: &mut String, rows: &[PolicyRow], missed: &mut Vec<&'static str>) {
    let Some(r) = rows.iter().max_by_key(|r| r.policies) else {
        return;
    };
    let met = r.info.server_us <= INFO_TARGET_US;
    let _ = writeln!(
        o,
        "| `INFO reclaim` with {} policies (a line each) within {:.0} ms of server time | {:.0} µs per call (mean of {INFO_CALLS}, `cmdstat_info`), {} KiB reply, best round trip {:.0} µs | {} |",
        thousands(r.policies as f64),
        INFO_TARGET_US / 1000.0,
        r.info.server_us,
        r.info.bytes / 1024,
        r.info.best_rtt_us,
        if met { "**met**" } else { "**missed**" }
    );
    if !met {
        missed.push("info");
    }
}

/// What would bring `INFO reclaim` with many policies under its target.
pub fn info_gap(o: &mut String, rows: &[PolicyRow]) {
    let Some(r) = rows.iter().max_by_key(|r| r.policies) else {
        return;
    };
    let _ = writeln!(
        o,
        "**`INFO reclaim` with {} policies** took {:.0} µs of server time, {:.2} µs per policy \
         line ({} bytes each). The module's part is one pass over its registry in a cached \
         order, writing numbers without the formatting machinery; what is left there is memory \
         traffic (each policy's run-time state is its own allocation). The server's part is \
         building and copying a {:.1} MB reply (`sdscatfmt` per line, the reply buffers, the \
         socket write), which grows with the bytes, not the work. Shorter lines (fewer fields, \
         or a second section for the rarely graphed ones) cut both; so would a line kept \
         ready per policy, rebuilt when its figures change. `usec_per_call` is wall time: \
         on this shared machine it includes time the OS did not run the server (compare the \
         best round trip, {:.0} µs).\n",
        thousands(r.policies as f64),
        r.info.server_us,
        r.info.server_us / r.policies.max(1) as f64,
        r.info.bytes / r.policies.max(1),
        r.info.bytes as f64 / 1e6,
        r.info.best_rtt_us
    );
}

/// Section 4 of the report.
pub fn report(o: &mut String, res: &Results) {
    let base = res.policies.iter().find(|r| r.policies == 0);
    let base_share = base.map(|b| b.cpu_s / b.window_s).unwrap_or(0.0);
    let _ = writeln!(o, "## 4. Cost vs number of policies\n");
    let _ = writeln!(
        o,
        "{} streams of {PER_STREAM} pending entries each (all fresh), one group each. Policies \
     (`MIN-IDLE 3600000`, default `INTERVAL 10000`) are added, one per stream, up to each \
     count; once the new policies' first passes are done, and another 5 s later (so that each \
     policy's next pass, due 10 s after its first, falls inside the window), the server's CPU \
     time (`used_cpu_user + used_cpu_sys`, `INFO cpu`) is read over a window of ~{} s. The row \
     with 0 policies is the same window before any policy exists (the module's 10 ms timer \
     still runs). After each window, {INFO_CALLS} calls of `INFO reclaim` (the totals and a line \
     per policy, what `prometheus-redis-exporter -script contrib/prometheus/reclaim.lua` reads \
     on every scrape) after `CONFIG RESETSTAT`: the server's mean time per call \
     (`cmdstat_info` `usec_per_call`) and the reply's size.\n",
        thousands(res.policies.iter().map(|r| r.policies).max().unwrap_or(0) as f64),
        res.window_s
    );
    let _ = writeln!(
    o,
    "| policies | server CPU s in window | share of one core | over the baseline | passes in window | steps | µs per pass (over baseline) | setup s | max tick µs so far | `INFO reclaim` µs (server) | `INFO reclaim` bytes |"
);
    let _ = writeln!(
        o,
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for r in &res.policies {
        let share = r.cpu_s / r.window_s;
        let extra = share - base_share;
        let per_pass = if r.passes >= 100 {
            format!(
                "{:.0}",
                (r.cpu_s - base_share * r.window_s) * 1e6 / r.passes as f64
            )
        } else {
            "".into()
        };
        let _ = writeln!(
            o,
            "| {} | {:.3} | {:.2}% | {:+.2}% | {} | {} | {} | {:.1} | {} | {:.0} | {} |",
            thousands(r.policies as f64),
            r.cpu_s,
            share * 100.0,
            extra * 100.0,
            r.passes,
            r.steps,
            per_pass,
            r.setup_s,
            r.max_tick_us,
            r.info.server_us,
            thousands(r.info.bytes as f64)
        );
    }
    let _ = writeln!(
        o,
        "\n`used_cpu_*` has a 10 ms-ish resolution on Linux and counts the whole process, so \
     differences below ~0.2% of a core are noise.\n"
    );
}

/// The section's observation (more than one step per pass), if any.
pub fn observations(res: &Results) -> Vec<String> {
    let mut obs = Vec::new();
    if let Some(r) = res
        .policies
        .iter()
        .filter(|r| r.passes >= 100)
        .max_by_key(|r| r.policies)
    {
        let per = r.steps as f64 / r.passes as f64;
        if per > 1.5 {
            obs.push(format!(
                "With {PER_STREAM} pending entries per policy (exactly `COUNT`), a pass took {per:.1} \
                 steps on average ({} steps for {} passes): a full page does not end the pass, so \
                 a second step reads an empty page (one more `XPENDING`, `XRANGE` and policy-key \
                 lookup per pass).",
                r.steps, r.passes
            ));
        }
    }
    obs
}
