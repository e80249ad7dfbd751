//! Server-wide counters, published as the `reclaim` section of `INFO` (`INFO reclaim`).
//! Per-policy counters are in [`crate::registry`] and `RECLAIM.STATS`.

use std::sync::atomic::{AtomicU64, Ordering};

/// One counter.
pub struct Counter(AtomicU64);

impl Counter {
    const fn new() -> Self {
        Counter(AtomicU64::new(0))
    }
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    /// Sets to `n`.
    pub fn set(&self, n: u64) {
        self.0.store(n, Ordering::Relaxed);
    }
    /// Raises to `n` if `n` is larger.
    pub fn max(&self, n: u64) {
        self.0.fetch_max(n, Ordering::Relaxed);
    }
    /// Current value.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Timer ticks that did sweep work (or looked for it).
pub static TICKS: Counter = Counter::new();
/// Event-loop slices that did sweep work while a backlog was draining.
pub static SLICES: Counter = Counter::new();
/// Event-loop iterations left to clients between two drain slices (clients were active).
pub static GAPS: Counter = Counter::new();
/// Ticks skipped because this server is a replica.
pub static SKIPPED_REPLICA: Counter = Counter::new();
/// Ticks skipped while loading (RDB/AOF/full sync).
pub static SKIPPED_LOADING: Counter = Counter::new();
/// Ticks skipped while writes are paused (CLIENT PAUSE WRITE, FAILOVER).
pub static SKIPPED_PAUSED: Counter = Counter::new();
/// Ticks skipped because the server was out of memory (maxmemory reached).
pub static SKIPPED_OOM: Counter = Counter::new();
/// Steps run (timer and RECLAIM.SWEEP).
pub static STEPS: Counter = Counter::new();
/// Complete passes.
pub static PASSES: Counter = Counter::new();
/// Complete passes that paged every pending entry to check delivery counts.
pub static FULL_PASSES: Counter = Counter::new();
/// Complete passes that only purged trimmed entries (no entry could be stale yet).
pub static SCANS_SKIPPED: Counter = Counter::new();
/// Consumers' PELs paged to check delivery counts after a command that could raise them.
pub static CONSUMER_CHECKS: Counter = Counter::new();
/// Entries claimed.
pub static CLAIMED: Counter = Counter::new();
/// Entries dead-lettered.
pub static DEAD_LETTERED: Counter = Counter::new();
/// Deleted entries removed from PELs.
pub static DELETED: Counter = Counter::new();
/// Dead-letter moves skipped for OOM.
pub static OOM_SKIPS: Counter = Counter::new();
/// Steps that ended in an error.
pub static ERRORS: Counter = Counter::new();
/// Duration of the last tick or slice that did work, µs.
pub static LAST_TICK_US: Counter = Counter::new();
/// Longest tick or slice since load, µs.
pub static MAX_TICK_US: Counter = Counter::new();
/// Most CPU time the main thread spent in one tick or slice since load, µs: unlike
/// [`MAX_TICK_US`] (wall time), it leaves out the time the OS did not run the server.
pub static MAX_TICK_CPU_US: Counter = Counter::new();
/// Panics caught at the FFI boundary (should stay 0; each one is logged).
pub static PANICS: Counter = Counter::new();

/// Name/value pairs of the `INFO reclaim` section, in order.
pub fn fields() -> Vec<(&'static str, u64)> {
    vec![
        ("policies", crate::registry::len() as u64),
        ("ticks", TICKS.get()),
        ("slices", SLICES.get()),
        ("slice_gaps", GAPS.get()),
        ("ticks_skipped_replica", SKIPPED_REPLICA.get()),
        ("ticks_skipped_loading", SKIPPED_LOADING.get()),
        ("ticks_skipped_paused", SKIPPED_PAUSED.get()),
        ("ticks_skipped_oom", SKIPPED_OOM.get()),
        ("steps", STEPS.get()),
        ("passes", PASSES.get()),
        ("full_passes", FULL_PASSES.get()),
        ("scans_skipped", SCANS_SKIPPED.get()),
        ("consumer_checks", CONSUMER_CHECKS.get()),
        ("claimed", CLAIMED.get()),
        ("dead_lettered", DEAD_LETTERED.get()),
        ("deleted", DELETED.get()),
        ("oom_skips", OOM_SKIPS.get()),
        ("errors", ERRORS.get()),
        ("last_tick_us", LAST_TICK_US.get()),
        ("max_tick_us", MAX_TICK_US.get()),
        ("max_tick_cpu_us", MAX_TICK_CPU_US.get()),
        ("panics", PANICS.get()),
    ]
}

/// CPU time the calling thread has used, µs (`CLOCK_THREAD_CPUTIME_ID`; 0 if unavailable).
pub fn thread_cpu_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec it is given.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000)
        .saturating_add(ts.tv_nsec as u64 / 1000)
}
