//! `make bench`: how fast the module claims and dead-letters a stale PEL compared with what a
//! client (or a Lua script) can do without it, what a drain costs other clients in latency, and
//! what the sweep costs when there is nothing to do. It reports; it never asserts.
//!
//! Every section starts its own redis-server with the module on a free loopback port, in a
//! temporary directory, with `--save ""` (the test kit's launcher, killed on drop).
//!
//! Layout: one file per section, owning its measurement and its parts of the report:
//! `throughput.rs` (1), `latency.rs` (2), `fresh.rs` (3), `policies.rs` (4); `report.rs` puts the
//! report together (header, targets, the sections' paragraphs, observations, gaps);
//! `fixtures.rs` builds streams and PELs with the Lua scripts of `lua/`; `common.rs` holds the
//! server settings and the readings every section uses; `machine.rs` describes the machine. It writes `docs/performance.md` and the
//! latency time series `target/bench/latency.csv`, which `bench/plot.py` turns into
//! `docs/bench-latency.png`.
//!
//! Environment:
//! - `BENCH_N`: PEL sizes of the throughput section, comma or space separated (default
//!   `10000,100000`); `BENCH_FULL=1` adds `1000000`. The latency section uses the largest size.
//! - `BENCH_FRESH_N`: PEL sizes of the all-fresh pass section (default `100000,1000000`).
//! - `BENCH_REPS`: runs of each fast method in the throughput section, the best kept (default 3).
//! - `BENCH_POLICIES`: policy counts of the scaling section (default `1,100,10000`);
//!   `BENCH_CPU_WINDOW_S`: its measuring window in seconds (default 10).
//! - `REDIS_SERVER` (default `redis-server`), `RECLAIM_MODULE` (default
//!   `target/release/libredis_reclaim.so` under the crate directory), as for the tests.
//! - `BENCH_READ_PEL`: PEL sizes of the `RECLAIM.READGROUP` per-call comparison (default
//!   `0,20000,200000`; `BENCH_FULL=1` adds `1000000`); `BENCH_READ_BACKLOG`: the backlogs of
//!   its redelivery comparison (default `20000,200000`).
//! - `BENCH_MANY`: policy counts of the many-policies section, each `count` or `count@interval_ms`
//!   (default `1000@1000,5000@1000,50000@10000`).
//! - `BENCH_SECTIONS`: which sections to run, comma separated (default all: `throughput`,
//!   `latency`, `fresh`, `policies`, `readgroup`, `many`); a partial run writes a partial report.
//! - `BENCH_OUT` (default `docs/performance.md`), `BENCH_DATA` (default `target/bench`).

mod common;
mod fixtures;
mod fresh;
mod latency;
mod machine;
mod many;
mod policies;
mod readgroup;
mod report;
mod throughput;

use std::collections::HashMap;
use std::error::Error;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use reclaim_testkit::*;

type Res<T> = Result<T, Box<dyn Error + Send + Sync>>;

/// Entries per EVAL while building streams and PELs.
const CHUNK: usize = 10_000;
/// MIN-IDLE of the client loops (ms): every entry has been idle longer when they start.
const CLIENT_MIN_IDLE: u64 = 100;
/// MIN-IDLE of the module's policies in the throughput and latency sections (ms).
const MODULE_MIN_IDLE: u64 = 50;
/// How often the bench polls INFO / RECLAIM.STATS while the module works.
const POLL: Duration = Duration::from_millis(5);
/// An INTERVAL long enough that no second pass starts during a measurement.
const LONG_INTERVAL: &str = "3600000";
/// The consumer that "crashed" with everything pending.
const DEAD: &str = "dead";
/// The consumer the client loops claim for.
const WORKER: &str = "worker";
/// Every entry's body: `n <i> body <BODY>`.
const BODY: &str = "order-payload-0123456789abcdef0123456789abcdef0123456789abcdef012345";
/// Give-up time for any single wait.
const TIMEOUT: Duration = Duration::from_secs(900);

use common::*;
use fixtures::*;
use fresh::*;
use latency::*;
use machine::*;
use many::ManyRow;
use policies::*;
use readgroup::*;
use report::*;
use throughput::*;

// ---------------------------------------------------------------------------------------------
// Settings

fn sizes_from(var: &str, default: &[usize]) -> Vec<usize> {
    match std::env::var(var) {
        Ok(s) if !s.trim().is_empty() => {
            let mut v: Vec<usize> = s
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|x| !x.is_empty())
                .filter_map(|x| x.replace('_', "").parse().ok())
                .filter(|&x| x > 0)
                .collect();
            v.sort_unstable();
            v.dedup();
            if v.is_empty() {
                default.to_vec()
            } else {
                v
            }
        }
        _ => default.to_vec(),
    }
}

fn env_set(var: &str) -> Option<String> {
    std::env::var(var).ok().filter(|v| !v.trim().is_empty())
}

/// The command line that reproduces this run.
fn repro_command() -> String {
    let mut parts = Vec::new();
    for v in [
        "BENCH_N",
        "BENCH_FULL",
        "BENCH_FRESH_N",
        "BENCH_POLICIES",
        "BENCH_CPU_WINDOW_S",
        "BENCH_REPS",
        "BENCH_READ_PEL",
        "BENCH_READ_BACKLOG",
        "BENCH_MANY",
        "BENCH_SECTIONS",
        "REDIS_SERVER",
        "RECLAIM_MODULE",
    ] {
        if let Some(x) = env_set(v) {
            if v == "REDIS_SERVER" && x == "redis-server" {
                continue;
            }
            if v == "BENCH_FULL" && x != "1" {
                continue;
            }
            let q = if x.contains(|c: char| c.is_whitespace() || c == ',') {
                format!("'{x}'")
            } else {
                x
            };
            parts.push(format!("{v}={q}"));
        }
    }
    parts.push("make bench".into());
    parts.join(" ")
}

// ---------------------------------------------------------------------------------------------

/// `BENCH_MANY`: `count` or `count@interval_ms`, comma separated.
fn many_from_env() -> Vec<(usize, u64)> {
    let default = vec![(1_000, 1_000), (5_000, 1_000), (50_000, 10_000)];
    let Some(v) = env_set("BENCH_MANY") else {
        return default;
    };
    let parsed: Vec<(usize, u64)> = v
        .split(',')
        .filter_map(|x| {
            let mut it = x.trim().splitn(2, '@');
            let n = it.next()?.replace('_', "").parse().ok()?;
            let iv = it.next().map_or(Some(1_000), |i| i.parse().ok())?;
            Some((n, iv))
        })
        .collect();
    if parsed.is_empty() {
        default
    } else {
        parsed
    }
}

/// What the environment asks for (see the module docs).
struct Settings {
    sizes: Vec<usize>,
    fresh_sizes: Vec<usize>,
    policy_counts: Vec<usize>,
    read_pels: Vec<usize>,
    read_backlogs: Vec<usize>,
    many: Vec<(usize, u64)>,
    reps: usize,
    window_s: u64,
    out: PathBuf,
    data: PathBuf,
    sections: Option<String>,
}

impl Settings {
    fn from_env() -> Settings {
        let mut sizes = sizes_from("BENCH_N", &[10_000, 100_000]);
        if env_set("BENCH_FULL").as_deref() == Some("1") && !sizes.contains(&1_000_000) {
            sizes.push(1_000_000);
        }
        let full = env_set("BENCH_FULL").as_deref() == Some("1");
        let mut read_pels = sizes_from("BENCH_READ_PEL", &[0, 20_000, 200_000]);
        if full && env_set("BENCH_READ_PEL").is_none() {
            read_pels.push(1_000_000);
        }
        // 0 (an empty PEL) is a size of its own, which `sizes_from` leaves out.
        let zero = env_set("BENCH_READ_PEL").map_or(true, |v| {
            v.split(|c: char| c == ',' || c.is_whitespace())
                .any(|x| x == "0")
        });
        if zero && !read_pels.contains(&0) {
            read_pels.insert(0, 0);
        }
        Settings {
            sizes,
            fresh_sizes: sizes_from("BENCH_FRESH_N", &[100_000, 1_000_000]),
            policy_counts: sizes_from("BENCH_POLICIES", &[1, 100, 10_000]),
            read_pels,
            read_backlogs: sizes_from("BENCH_READ_BACKLOG", &[20_000, 200_000]),
            many: many_from_env(),
            reps: env_set("BENCH_REPS")
                .and_then(|s| s.parse().ok())
                .filter(|&r| r > 0)
                .unwrap_or(3),
            window_s: env_set("BENCH_CPU_WINDOW_S")
                .and_then(|s| s.parse().ok())
                .unwrap_or(10),
            out: PathBuf::from(
                env_set("BENCH_OUT").unwrap_or_else(|| "docs/performance.md".into()),
            ),
            data: PathBuf::from(env_set("BENCH_DATA").unwrap_or_else(|| "target/bench".into())),
            // BENCH_SECTIONS (default all): throughput, latency, fresh, policies, readgroup.
            sections: env_set("BENCH_SECTIONS"),
        }
    }

    /// Whether BENCH_SECTIONS selects section `name`.
    fn runs(&self, name: &str) -> bool {
        self.sections
            .as_deref()
            .map_or(true, |v| v.split(',').any(|x| x.trim() == name))
    }
}

/// Runs one section's measurement. A panic in it (a server that would not start, a reply the test
/// kit could not read) becomes that section's error, as an `Err` does, so the others still run.
fn section<T>(f: impl FnOnce() -> Res<T>) -> Res<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panicked".into());
        Err(msg.into())
    })
}

/// The selected sections, in report order; a failed one leaves an error and no result.
fn run_sections(set: &Settings) -> Results {
    let mut res = Results {
        sizes: Vec::new(),
        lat: None,
        fresh: Vec::new(),
        fresh_window: None,
        policies: Vec::new(),
        read: None,
        many: Vec::new(),
        cpu_gaps: Vec::new(),
        window_s: set.window_s,
        reps: set.reps,
        errors: Vec::new(),
    };
    for &n in set.sizes.iter().filter(|_| set.runs("throughput")) {
        match section(|| throughput(n, set.reps)) {
            Ok(r) => res.sizes.push(r),
            Err(e) => res.errors.push(format!("throughput N = {n}: {e}")),
        }
    }
    if let Some(&n) = set.sizes.iter().max().filter(|_| set.runs("latency")) {
        match section(|| latency(n, &set.data)) {
            Ok(l) => res.lat = Some(l),
            Err(e) => res.errors.push(format!("latency N = {n}: {e}")),
        }
    }
    if set.runs("fresh") {
        match section(|| fresh(&set.fresh_sizes)) {
            Ok((r, w)) => {
                res.fresh = r;
                res.fresh_window = w;
            }
            Err(e) => res.errors.push(format!("all-fresh passes: {e}")),
        }
    }
    if set.runs("policies") {
        let window = Duration::from_secs(set.window_s);
        match section(|| policy_scaling(&set.policy_counts, window)) {
            Ok(r) => res.policies = r,
            Err(e) => res.errors.push(format!("policy scaling: {e}")),
        }
    }
    if set.runs("readgroup") {
        match section(|| readgroup_section(&set.read_pels, &set.read_backlogs, set.reps, &set.data))
        {
            Ok(r) => res.read = Some(r),
            Err(e) => res.errors.push(format!("RECLAIM.READGROUP: {e}")),
        }
    }
    if set.runs("many") {
        let window = Duration::from_secs(set.window_s);
        match section(|| many::many_policies(&set.many, window, &set.data)) {
            Ok(r) => res.many = r,
            Err(e) => res.errors.push(format!("many policies: {e}")),
        }
    }
    res
}

fn main() {
    let started = Instant::now();
    let load0 = loadavg();
    eprintln!("bench: measuring scheduling jitter (5 s)");
    let jitter0 = intrinsic_latency(Duration::from_secs(5));
    eprintln!("bench: measuring what the machine adds to a thread's CPU clock (10 s)");
    let gaps0 = cpu_clock_gaps(Duration::from_secs(10));
    let set = Settings::from_env();
    // The test kit's module_path() stops the bench here, saying how to build the module, when
    // it is missing.
    let _ = module_path();
    let m = machine();
    eprintln!(
        "bench: sizes {:?}, fresh {:?}, policies {:?}",
        set.sizes, set.fresh_sizes, set.policy_counts
    );
    let mut res = run_sections(&set);
    let load1 = loadavg();
    eprintln!("bench: measuring scheduling jitter (5 s)");
    let jitter1 = intrinsic_latency(Duration::from_secs(5));
    let gaps1 = cpu_clock_gaps(Duration::from_secs(10));
    res.cpu_gaps = vec![gaps0, gaps1];
    let text = report::report(
        &m,
        &res,
        (&load0, &load1),
        (jitter0, jitter1),
        started.elapsed(),
    );
    write_report(&set.out, &text, started);
    for e in &res.errors {
        eprintln!("bench: error: {e}");
    }
    if !res.errors.is_empty() {
        std::process::exit(1);
    }
}

/// Writes the report to `out` and prints it.
fn write_report(out: &Path, text: &str, started: Instant) {
    if let Some(dir) = out.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Err(e) = std::fs::write(out, text) {
        eprintln!("write {}: {e}", out.display());
        std::process::exit(1);
    }
    println!("{text}");
    eprintln!(
        "bench: wrote {} in {:.0} s",
        out.display(),
        started.elapsed().as_secs_f64()
    );
}
