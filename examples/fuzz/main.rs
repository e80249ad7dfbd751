//! `make fuzz`: a differential fuzzer of the module against the server it runs in.
//!
//! Each sequence (a pure function of its seed, see `gen.rs`) of module, stream, keyspace and admin
//! commands runs twice on fresh servers, a primary and its replica: once with the module loaded,
//! once without it (commands the plain server does not have are skipped there). After every
//! `DEBUG RELOAD`, `DEBUG LOADAOF`, restart (RDB, AOF with and without the RDB preamble) and
//! (re)sync, and at checks in between, each run compares its primary's dataset key by key with
//! what it was before, and with its replica's; the two runs are compared on the plain keys (those
//! no module command names) and on the database the main client is in after every operation. On
//! a difference it replays ever shorter windows of the sequence on fresh servers and prints the
//! seed and the shortest window that still shows it.
//!
//! ```text
//! cargo run --release --example fuzz -- [--secs 60] [--seed N] [--seqs N] [--ops 120]
//!     [--known] [--evict] [--evict-burst] [--no-shrink] [--shrink-secs 180]
//! ```
//! `--evict-burst` (implies `--evict`) adds eviction bursts: readers blocked in
//! `RECLAIM.READGROUP` on several streams, `maxmemory` dropped to 1 byte / 100kb / 1mb under an
//! `allkeys-*` policy at run time, and writes, while the policies' timer sweeps (issue 29).
//! `REDIS_SERVER` selects the server (as for the tests). Exit status 0: no difference; 1: a
//! difference (the report on stdout); 2: bad arguments.

mod gen;
mod run;

use std::time::{Duration, Instant};

use gen::Op;
use run::{Failure, Record, Setup};

struct Args {
    secs: u64,
    seed: u64,
    seqs: Option<u64>,
    ops: usize,
    known: bool,
    evict: bool,
    burst: bool,
    shrink: bool,
    shrink_secs: u64,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        secs: 60,
        seed: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() % 1_000_000)
            .unwrap_or(1),
        seqs: None,
        ops: 120,
        known: false,
        evict: false,
        burst: false,
        shrink: true,
        shrink_secs: 180,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut num = |name: &str| -> Result<u64, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{name} needs a number"))
        };
        match k.as_str() {
            "--secs" => a.secs = num("--secs")?,
            "--seed" => a.seed = num("--seed")?,
            "--seqs" => a.seqs = Some(num("--seqs")?),
            "--ops" => a.ops = num("--ops")? as usize,
            "--shrink-secs" => a.shrink_secs = num("--shrink-secs")?,
            "--known" => a.known = true,
            "--evict" => a.evict = true,
            "--evict-burst" => {
                a.evict = true;
                a.burst = true;
            }
            "--no-shrink" => a.shrink = false,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    Ok(a)
}

/// A difference one sequence showed: in which run (`with the module`, `without the module`, or
/// `between the runs`), its kind, where.
#[derive(Debug, Clone)]
struct Finding {
    run: &'static str,
    failure: Failure,
}

impl Finding {
    fn same_defect(&self, other: &Finding) -> bool {
        self.run == other.run && self.failure.kind == other.failure.kind
    }
}

/// The first difference between the two runs' records: the main client's database after an
/// operation, then the plain keys at a check both reached.
fn cross(a: &Record, b: &Record, ops: &[Op]) -> Option<Failure> {
    let mut first: Option<Failure> = None;
    for (i, (x, y)) in a.client_db.iter().zip(b.client_db.iter()).enumerate() {
        if let (Some(x), Some(y)) = (x, y) {
            if x != y {
                first = Some(Failure {
                    at: i,
                    kind: "client database differs".into(),
                    detail: format!(
                        "after `{}` the main client is in database {x} with the module, {y} without it",
                        gen::show(&ops[i])
                    ),
                });
                break;
            }
        }
    }
    for (at, pa, ta) in &a.plain {
        if first.as_ref().is_some_and(|f| f.at <= *at) {
            break;
        }
        let Some((_, pb, tb)) = b.plain.iter().find(|(bt, _, _)| bt == at) else {
            continue;
        };
        if *ta || *tb {
            continue;
        }
        let d = reclaim_testkit::dataset::diff(pa, pb, |_, _| true, 12);
        if !d.is_empty() {
            first = Some(Failure {
                at: *at,
                kind: "plain keys differ".into(),
                detail: format!(
                    "with the module (first) vs without (second):\n  {}",
                    d.join("\n  ")
                ),
            });
            break;
        }
    }
    first
}

/// Runs `ops` with the module (`with`), without it (`without`), compares, and returns the first
/// difference.
fn evaluate(ops: &[Op], setup: &Setup, with: bool, without: bool) -> Option<Finding> {
    let a = with.then(|| run::run(ops, true, setup, &[]));
    let aborted = a.as_ref().map(|r| r.aborted.clone()).unwrap_or_default();
    let b = without.then(|| run::run(ops, false, setup, &aborted));
    for r in a.iter().chain(b.iter()) {
        for u in &r.unparsable {
            eprintln!("  note: a reply the client library could not parse: {u}");
        }
    }
    let mut found: Vec<Finding> = Vec::new();
    if let Some(f) = a.as_ref().and_then(|r| r.failure.clone()) {
        found.push(Finding {
            run: "with the module",
            failure: f,
        });
    }
    if let Some(f) = b.as_ref().and_then(|r| r.failure.clone()) {
        found.push(Finding {
            run: "without the module",
            failure: f,
        });
    }
    if let (Some(a), Some(b)) = (&a, &b) {
        if let Some(f) = cross(a, b, ops) {
            found.push(Finding {
                run: "between the runs",
                failure: f,
            });
        }
    }
    if let Some(a) = &a {
        EVICTED.fetch_add(a.evicted, std::sync::atomic::Ordering::Relaxed);
    }
    found.into_iter().min_by_key(|f| f.failure.at)
}

/// Keys the primaries with the module evicted, over the sequences run (a check that `--evict`
/// evicts).
static EVICTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The shortest window of `ops` (original indices kept) that still shows `target`, within
/// `budget`: first the latest start that still fails, then operations left out one chunk at a
/// time.
fn shrink(ops: &[Op], setup: &Setup, target: &Finding, budget: Duration) -> Vec<usize> {
    let deadline = Instant::now() + budget;
    let with = target.run != "without the module";
    let without = target.run != "with the module";
    let end = target.failure.at.min(ops.len() - 1);
    let mut tries = 0;
    let mut reproduces = |idx: &[usize]| -> bool {
        tries += 1;
        let seq: Vec<Op> = idx.iter().map(|&i| ops[i].clone()).collect();
        let f = evaluate(&seq, setup, with, without);
        let ok = f.as_ref().is_some_and(|f| f.same_defect(target));
        eprintln!(
            "  shrink try {tries}: {} operations: {}",
            idx.len(),
            if ok { "still fails" } else { "passes" }
        );
        ok
    };
    let mut idx: Vec<usize> = (0..=end).collect();
    // The latest start that still fails.
    let (mut lo, mut hi) = (0usize, end);
    while lo < hi && Instant::now() < deadline {
        let mid = (lo + hi).div_ceil(2);
        if reproduces(&idx[mid..]) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    idx = idx[lo..].to_vec();
    // Then leave out chunks (the last operation, where it showed, stays).
    let mut chunk = (idx.len() / 2).max(1);
    while chunk >= 1 && Instant::now() < deadline {
        let mut i = 0;
        while i + 1 < idx.len() && Instant::now() < deadline {
            let stop = (i + chunk).min(idx.len() - 1);
            let cand: Vec<usize> = idx[..i].iter().chain(idx[stop..].iter()).copied().collect();
            if reproduces(&cand) {
                idx = cand;
            } else {
                i = stop;
            }
        }
        if chunk == 1 {
            break;
        }
        chunk /= 2;
    }
    idx
}

/// SIGINT, SIGTERM or SIGHUP (Ctrl-C, `timeout`, a closed terminal) stop the servers the
/// fuzzer started before it exits: they are its child processes (the test kit's guards, which
/// kill them on drop, do not run when a signal ends the process). The signals are blocked in
/// every thread and taken by one that waits for them.
fn stop_servers_on_signal() {
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, s);
        }
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return;
        }
        std::thread::spawn(move || {
            let mut sig: libc::c_int = 0;
            if libc::sigwait(&set, &mut sig) != 0 {
                return;
            }
            eprintln!("fuzz: signal {sig}: stopping the servers");
            kill_children(std::process::id(), 0);
            std::process::exit(128 + sig);
        });
    }
}

/// SIGKILL to every descendant of `pid` (a server and a BGSAVE or sync it forked).
fn kill_children(pid: u32, depth: u32) {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    for t in tasks.flatten() {
        let list = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
        for child in list
            .split_whitespace()
            .filter_map(|c| c.parse::<u32>().ok())
        {
            if depth < 3 {
                kill_children(child, depth + 1);
            }
            unsafe {
                libc::kill(child as libc::pid_t, libc::SIGKILL);
            }
        }
    }
}

fn server_version() -> String {
    let bin = reclaim_testkit::server_binary();
    std::process::Command::new(&bin)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or(bin)
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("fuzz: {e}");
            std::process::exit(2);
        }
    };
    // Panics of the test kit are turned into failures of a run, reported below.
    std::panic::set_hook(Box::new(|_| {}));
    stop_servers_on_signal();
    let version = server_version();
    println!(
        "fuzz: {version}; seeds from {}, {} s{}, {} operations each",
        args.seed,
        args.secs,
        args.seqs
            .map(|n| format!(" or {n} sequences"))
            .unwrap_or_default(),
        args.ops
    );
    let opts = gen::Options {
        known: args.known,
        copy_db: args.known || !version.contains("Valkey server v=8.1."),
        evict: args.evict,
        burst: args.burst,
    };
    let start = Instant::now();
    let mut n = 0u64;
    let mut total_ops = 0usize;
    loop {
        if start.elapsed() >= Duration::from_secs(args.secs) && n > 0 {
            break;
        }
        if args.seqs.is_some_and(|max| n >= max) {
            break;
        }
        let seed = args.seed.wrapping_add(n);
        let ops = gen::sequence(seed, args.ops, opts);
        let setup = Setup::of(seed);
        let t = Instant::now();
        let found = evaluate(&ops, &setup, true, true);
        n += 1;
        total_ops += ops.len();
        match found {
            None => println!(
                "  seed {seed}: {} operations, {:?}: same dataset everywhere ({:.1} s)",
                ops.len(),
                setup,
                t.elapsed().as_secs_f64()
            ),
            Some(f) => {
                report(&args, &version, seed, &ops, &setup, &f);
                std::process::exit(1);
            }
        }
    }
    println!(
        "fuzz: {n} sequences (seeds {}..={}), {total_ops} operations, {:.0} s, {} keys evicted: no difference",
        args.seed,
        args.seed.wrapping_add(n.saturating_sub(1)),
        start.elapsed().as_secs_f64(),
        EVICTED.load(std::sync::atomic::Ordering::Relaxed)
    );
}

/// The `FUZZ_ARGS=...` that draws the same sequences (empty when none is needed).
fn fuzz_args(args: &Args) -> String {
    let mut a = Vec::new();
    if args.known {
        a.push("--known");
    }
    if args.burst {
        a.push("--evict-burst");
    } else if args.evict {
        a.push("--evict");
    }
    match a.len() {
        0 => String::new(),
        1 => format!(" FUZZ_ARGS={}", a[0]),
        _ => format!(" FUZZ_ARGS='{}'", a.join(" ")),
    }
}

fn report(args: &Args, version: &str, seed: u64, ops: &[Op], setup: &Setup, f: &Finding) {
    println!("\nFUZZ FAILURE on {version}");
    println!("seed {seed} ({:?}), {} operations", setup, ops.len());
    println!(
        "{} {}: {} at operation {}",
        f.failure.kind,
        f.run,
        gen::show(&ops[f.failure.at.min(ops.len() - 1)]),
        f.failure.at
    );
    println!("{}", f.failure.detail);
    if f.run == "with the module" {
        // Redis's own, or the module's?
        let plain = evaluate(&ops[..=f.failure.at.min(ops.len() - 1)], setup, false, true);
        match plain {
            Some(p) if p.failure.kind == f.failure.kind => {
                println!(
                    "\nthe run without the module fails the same way: the server's own defect ({})",
                    p.failure.detail.lines().next().unwrap_or("")
                )
            }
            _ => println!("\nthe run without the module does not show it"),
        }
    }
    let window: Vec<usize> = if args.shrink {
        eprintln!("shrinking (at most {} s)...", args.shrink_secs);
        shrink(ops, setup, f, Duration::from_secs(args.shrink_secs))
    } else {
        (0..=f.failure.at.min(ops.len() - 1)).collect()
    };
    println!("\nshortest window found: {} operations, replayed on fresh servers (index in the sequence, operation):", window.len());
    for i in &window {
        println!("  [{i}] {}", gen::show(&ops[*i]));
    }
    println!(
        "\nreproduce: make fuzz FUZZ_SEED={seed} FUZZ_SEQS=1 FUZZ_OPS={} REDIS_SERVER={}{}",
        args.ops,
        reclaim_testkit::server_binary(),
        fuzz_args(args)
    );
}
