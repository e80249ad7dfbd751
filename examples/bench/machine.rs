//! The machine the bench ran on, for the report's first table: CPU, memory, server, commit,
//! load average, scheduling jitter.

use super::*;

pub fn read(path: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

pub fn output_of(prog: &str, args: &[&str]) -> String {
    Command::new(prog)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

pub struct Machine {
    pub cpu: String,
    pub nproc: String,
    pub mem: String,
    pub server: String,
    pub commit: String,
    pub date: String,
}

pub fn machine() -> Machine {
    let cpuinfo = read("/proc/cpuinfo");
    let cpu = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    let mut nproc = output_of("nproc", &[]);
    if nproc.is_empty() {
        nproc = thread::available_parallelism()
            .map(|n| n.to_string())
            .unwrap_or_default();
    }
    let mem = read("/proc/meminfo")
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| format!("{:.1} GiB", kb / 1024.0 / 1024.0))
        .unwrap_or_else(|| "unknown".into());
    let server = output_of(&server_binary(), &["--version"]);
    let commit = output_of("git", &["rev-parse", "--short", "HEAD"]);
    let date = output_of("date", &["-u", "+%Y-%m-%d %H:%M UTC"]);
    Machine {
        cpu,
        nproc,
        mem,
        server,
        commit,
        date,
    }
}

/// The machine's scheduling jitter, as `redis-cli --intrinsic-latency` measures it: a busy loop
/// reads the clock for `d` and keeps the longest gap between two reads (time the thread did not
/// run). Returns (longest gap µs, gaps of 1 ms or more).
pub fn intrinsic_latency(d: Duration) -> (u64, u64) {
    let start = Instant::now();
    let mut prev = start;
    let (mut max, mut over) = (0u64, 0u64);
    while prev.duration_since(start) < d {
        let now = Instant::now();
        let gap = now.duration_since(prev).as_micros() as u64;
        max = max.max(gap);
        if gap >= 1000 {
            over += 1;
        }
        prev = now;
    }
    (max, over)
}

pub fn loadavg() -> String {
    read("/proc/loadavg")
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// What the machine adds to a thread's CPU time: a busy loop reads its own thread's CPU clock
/// (`CLOCK_THREAD_CPUTIME_ID`, the clock of `reclaim_max_tick_cpu_us`) for `d` and keeps the
/// gaps between two reads, time charged to the thread while it ran nothing of its own
/// (interrupts, a virtual CPU descheduled by its host). Returns (longest gap µs, gaps of 100 µs
/// or more, gaps of 200 µs or more).
pub fn cpu_clock_gaps(d: Duration) -> (u64, u64, u64) {
    let cpu = || {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime only writes the timespec it is given.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
    };
    let start = Instant::now();
    let mut prev = cpu();
    let (mut max, mut o100, mut o200) = (0u64, 0u64, 0u64);
    while start.elapsed() < d {
        let now = cpu();
        let gap = now.saturating_sub(prev);
        max = max.max(gap);
        o100 += u64::from(gap >= 100);
        o200 += u64::from(gap >= 200);
        prev = now;
    }
    (max, o100, o200)
}
