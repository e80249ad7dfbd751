//! Section 3, the cost of passes when nothing is stale (all-fresh PELs): per-pass costs and one
//! window at the default INTERVAL; its target, its paragraph and its gap in the report.

use super::*;

// ---------------------------------------------------------------------------------------------
// Measurement

pub struct FreshRow {
    pub n: usize,
    /// `scan`, `full` or `trim-only`.
    pub kind: &'static str,
    pub config: String,
    pub pass_us: Vec<i64>,
    pub max_tick_us: i64,
    pub status: String,
}

impl FreshRow {
    pub fn median_us(&self) -> i64 {
        let mut v = self.pass_us.clone();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    }
}

/// The server's CPU over a window with a default policy on a freshly delivered PEL, and over the
/// same window with no policy.
pub struct FreshWindow {
    pub n: usize,
    pub baseline_cpu_s: f64,
    pub baseline_s: f64,
    pub cpu_s: f64,
    pub window_s: f64,
    pub passes: i64,
    pub scans_skipped: i64,
    pub full_passes: i64,
    pub touched: i64,
}

impl FreshWindow {
    /// Share of one core over the baseline, %.
    pub fn share(&self) -> f64 {
        (self.cpu_s / self.window_s - self.baseline_cpu_s / self.baseline_s) * 100.0
    }
}

pub const FRESH_PASSES: usize = 3;
pub const DEFAULT_INTERVAL_MS: f64 = 10_000.0;
/// Just under three default INTERVALs: a pass at SET and the two after it, never a fourth.
pub const FRESH_WINDOW: Duration = Duration::from_millis(29_000);

/// Sets a policy (which starts a new pass at once) and waits for that pass; returns the policy's
/// stats after it.
pub fn set_and_wait_pass(
    con: &mut Connection,
    key: &str,
    group: &str,
    args: &[&str],
) -> Res<HashMap<String, Value>> {
    let before = stats_fields(con, key, group)
        .map(|s| field_int(&s, "passes"))
        .unwrap_or(0);
    let t0 = Instant::now();
    bench_policy_set(con, key, group, args)?;
    wait_pass(con, key, group, before, t0)
}

pub fn wait_pass(
    con: &mut Connection,
    key: &str,
    group: &str,
    before: i64,
    t0: Instant,
) -> Res<HashMap<String, Value>> {
    loop {
        thread::sleep(POLL);
        if let Some(s) = stats_fields(con, key, group) {
            if field_int(&s, "passes") > before {
                return Ok(s);
            }
        }
        if t0.elapsed() > TIMEOUT {
            return Err("timed out waiting for a pass".into());
        }
    }
}

pub fn status_of(s: &HashMap<String, Value>) -> String {
    let st = s.get("status").and_then(text).unwrap_or_default();
    let touched = field_int(s, "claimed") + field_int(s, "dead-lettered");
    if touched > 0 {
        format!("{st} (touched {touched}!)")
    } else {
        st
    }
}

/// Section 3: per-pass costs of all-fresh PELs of each size (scan, trim-only and full passes),
/// and one CPU window at the default INTERVAL for the largest.
/// Long on purpose: one measurement from setup to reading, in the order it runs; splitting it
/// would scatter what is timed and what is not.
pub fn fresh(sizes: &[usize]) -> Res<(Vec<FreshRow>, Option<FreshWindow>)> {
    let big = sizes.iter().copied().max().unwrap_or(0);
    let mut rows = Vec::new();
    let mut window = None;
    for &n in sizes {
        eprintln!("== all-fresh passes, N = {n}");
        let srv = start_server()?;
        let mut con = bench_conn(&srv)?;
        let key = "fresh";
        build_stream(&mut con, key, n)?;
        build_pel(&mut con, key, "g")?;
        let configs: [(&'static str, &str, Vec<&str>); 2] = [
            ("scan", "MAX-DELIVERIES 0", vec!["MIN-IDLE", "3600000"]),
            (
                "full",
                "MAX-DELIVERIES 3 DLQ",
                vec![
                    "MIN-IDLE",
                    "3600000",
                    "MAX-DELIVERIES",
                    "3",
                    "DLQ",
                    "fresh:dlq",
                ],
            ),
        ];
        for (kind, label, args) in configs {
            let mut row = FreshRow {
                n,
                kind,
                config: label.to_string(),
                pass_us: Vec::new(),
                max_tick_us: 0,
                status: String::new(),
            };
            for _ in 0..FRESH_PASSES {
                let full0 = reclaim_info(&mut con, "full_passes");
                let s = set_and_wait_pass(&mut con, key, "g", &args)?;
                let full = reclaim_info(&mut con, "full_passes") - full0;
                row.pass_us.push(field_int(&s, "last-pass-us"));
                row.status = status_of(&s);
                if (kind == "full") != (full == 1) {
                    row.status = format!("{} (expected a {kind} pass!)", row.status);
                }
            }
            row.max_tick_us = reclaim_info(&mut con, "max_tick_us");
            eprintln!("   {kind} ({label}): passes {:?} us", row.pass_us);
            rows.push(row);
            if kind == "scan" {
                // The passes after a scan that saw nothing within half of MIN-IDLE only check
                // for trimmed entries: wait for one (default INTERVAL), and for its cost.
                let mut trim = FreshRow {
                    n,
                    kind: "trim-only",
                    config: label.to_string(),
                    pass_us: Vec::new(),
                    max_tick_us: 0,
                    status: String::new(),
                };
                let s0 = stats_fields(&mut con, key, "g").ok_or("no policy")?;
                let s = wait_pass(&mut con, key, "g", field_int(&s0, "passes"), Instant::now())?;
                trim.pass_us.push(field_int(&s, "last-pass-us"));
                trim.status = status_of(&s);
                if field_int(&s, "scans-skipped") != field_int(&s0, "scans-skipped") + 1 {
                    trim.status = format!("{} (expected a trim-only pass!)", trim.status);
                }
                trim.max_tick_us = reclaim_info(&mut con, "max_tick_us");
                eprintln!("   trim-only: {:?} us", trim.pass_us);
                rows.push(trim);
            }
            bench_policy_del(&mut con, key, "g")?;
        }
        if n != big {
            continue;
        }
        // The same server over ~3 default INTERVALs: first with no policy, then with a default
        // policy (MIN-IDLE 60000, INTERVAL 10000) on a group whose N entries were just delivered.
        eprintln!(
            "   CPU windows of {:?} (baseline, then a default policy)",
            FRESH_WINDOW
        );
        let c0 = server_cpu(&mut con)?;
        let t0 = Instant::now();
        thread::sleep(FRESH_WINDOW);
        let baseline_cpu_s = server_cpu(&mut con)? - c0;
        let baseline_s = t0.elapsed().as_secs_f64();
        build_pel(&mut con, key, "g2")?;
        let i0 = |con: &mut Connection, f: &str| info_int(con, "reclaim", f);
        let (p0, k0, f0) = (
            i0(&mut con, "reclaim_passes"),
            i0(&mut con, "reclaim_scans_skipped"),
            i0(&mut con, "reclaim_full_passes"),
        );
        let c0 = server_cpu(&mut con)?;
        let t0 = Instant::now();
        bench_policy_set(&mut con, key, "g2", &[])?;
        thread::sleep(FRESH_WINDOW);
        let cpu_s = server_cpu(&mut con)? - c0;
        let window_s = t0.elapsed().as_secs_f64();
        let s = stats_fields(&mut con, key, "g2").ok_or("no policy")?;
        let w = FreshWindow {
            n,
            baseline_cpu_s,
            baseline_s,
            cpu_s,
            window_s,
            passes: i0(&mut con, "reclaim_passes") - p0,
            scans_skipped: i0(&mut con, "reclaim_scans_skipped") - k0,
            full_passes: i0(&mut con, "reclaim_full_passes") - f0,
            touched: field_int(&s, "claimed") + field_int(&s, "dead-lettered"),
        };
        eprintln!(
            "   baseline {:.3}s CPU in {:.1}s; policy {:.3}s in {:.1}s ({} passes, {} skipped): {:.2}% of a core",
            w.baseline_cpu_s, w.baseline_s, w.cpu_s, w.window_s, w.passes, w.scans_skipped, w.share()
        );
        window = Some(w);
    }
    Ok((rows, window))
}

// ---------------------------------------------------------------------------------------------
// Report

/// The section's row of the targets table; pushes "fresh" when missed.
pub fn target(o: &mut String, w: &FreshWindow, rows: &[FreshRow], missed: &mut Vec<&'static str>) {
    let share = w.share();
    let ok = share <= 1.0;
    if !ok {
        missed.push("fresh");
    }
    let scan = rows
        .iter()
        .find(|r| r.n == w.n && r.kind == "scan")
        .map(|r| r.median_us() as f64 / (DEFAULT_INTERVAL_MS * 1e3) * 100.0)
        .unwrap_or(0.0);
    let _ = writeln!(
        o,
        "| all-fresh PEL of {} pending <= 1% of one core at the default INTERVAL (10000) | {:.2}% measured over {:.0} s ({} passes, {} of them trim-only; a scan pass alone is {:.2}% of an INTERVAL) | {} |",
        thousands(w.n as f64),
        share,
        w.window_s,
        w.passes,
        w.scans_skipped,
        scan,
        if ok {
            "**met**".to_string()
        } else {
            format!("**missed**: {:.1}x over", share)
        }
    );
}

/// Section 3 of the report.
/// Long on purpose: its `writeln!`s follow the printed layout of one table or paragraph.
pub fn report(o: &mut String, res: &Results) {
    let _ = writeln!(o, "## 3. Cost of passes when nothing is stale\n");
    let _ = writeln!(
    o,
    "A PEL of N entries delivered once and fresh. A pass is one of three kinds (docs/design.md, \
     \"Passes\"): a **scan** of ID windows with `XPENDING ... IDLE` (fresh entries are not copied \
     out), a **full** pass that pages every entry to check delivery counts (with \
     `MAX-DELIVERIES` above 0: the first pass after SET, load or promotion; after a client's \
     history read or XCLAIM only that consumer's own entries are paged), and a **trim-only** pass when no pending entry can be \
     stale yet (a scan saw nothing idle for more than `MIN-IDLE / 2`). \
     `RECLAIM.POLICY SET` (`MIN-IDLE 3600000`) is sent {FRESH_PASSES} times per policy (each \
     starts a new pass at once) and `last-pass-us` read after each pass; the trim-only pass is \
     the one the default `INTERVAL` (10 s) later. *If every pass* is the pass's cost over \
     one default INTERVAL, which is what a pass of that kind at every INTERVAL would cost.\n"
);
    let _ = writeln!(
    o,
    "| pending | pass | policy | last-pass-us (each pass) | median µs | ns / entry | if every pass | max tick µs so far | status |"
);
    let _ = writeln!(o, "|---:|---|---|---|---:|---:|---:|---:|---|");
    for r in &res.fresh {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {:.1} | {:.3}% | {} | {} |",
            thousands(r.n as f64),
            r.kind,
            r.config,
            r.pass_us
                .iter()
                .map(|u| thousands(*u as f64))
                .collect::<Vec<_>>()
                .join(", "),
            thousands(r.median_us() as f64),
            r.median_us() as f64 * 1e3 / r.n as f64,
            r.median_us() as f64 / (DEFAULT_INTERVAL_MS * 1e3) * 100.0,
            r.max_tick_us,
            r.status
        );
    }
    let _ = writeln!(o);
    if let Some(w) = &res.fresh_window {
        let _ = writeln!(
            o,
            "**Measured at the defaults.** The server's CPU time (`used_cpu_user + used_cpu_sys`) \
         over {:.1} s with no policy, then over {:.1} s from `RECLAIM.POLICY SET fresh g2` with \
         every default (`MIN-IDLE 60000`, `MAX-DELIVERIES 0`, `INTERVAL 10000`) on a group \
         whose {} entries were delivered just before: {:.3} s against {:.3} s, \
         **{:.2}% of one core** over the baseline. The window held {} passes: {} skipped \
         their scan, {} full; entries touched: {}.\n",
            w.baseline_s,
            w.window_s,
            thousands(w.n as f64),
            w.cpu_s,
            w.baseline_cpu_s,
            w.share(),
            w.passes,
            w.scans_skipped,
            w.full_passes,
            w.touched
        );
        let _ = writeln!(
            o,
            "How it goes at the defaults: the first scan looks for entries idle for 30 s or more \
         (`MIN-IDLE / 2`); finding none, it knows that nothing can be stale for 30 s, so the \
         next two passes only check for trimmed entries. While entries stay younger than \
         `MIN-IDLE / 2`, one scan runs every 30 s. Once some entry is older, the next scan is \
         due when it can first be stale, so a PEL with always some entry within one INTERVAL \
         of going stale is scanned at every INTERVAL (the *if every pass* column). With \
         `MAX-DELIVERIES` above 0 the same holds once a full pass has checked the delivery \
         counts; a consumer that re-reads its history (`XREADGROUP ... 0`, like the \
         recovery worker of docs/delivery.md) adds a page through its own entries to the next pass.\n"
        );
    }
}

/// The "fresh" paragraph of "What would close the gaps".
pub fn gap(o: &mut String) {
    let _ = writeln!(
        o,
        "- **All-fresh passes.** A scan of the whole PEL with `XPENDING ... IDLE` costs what the \
     server's own scan costs (section 3, ns / entry); passes are skipped only while no entry \
     can be stale. What would go further: a server-side index of pending entries by delivery \
     time (Redis 8.4's XREADGROUP CLAIM keeps one), which would make a scan cost only the \
     entries it returns.\n"
    );
}
