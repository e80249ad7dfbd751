//! The server-wide counters of the module's own work (ticks, drain slices, skipped ticks, tick
//! times, blocked reads), which the scheduler, the guards and the commands add to, and the
//! `INFO reclaim` section's fields in order ([`fields`]). The counters the core's rules keep (the
//! sums of each policy's [`Stat`]s, `steps`, `tracking_overflows`) stay in
//! `crate::model::metrics`; the panics caught at the FFI boundary are `crate::ffi::PANICS`.

use crate::model::metrics::{self, Counter, Stat};

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
/// Ticks skipped because the Redis Cluster was down (`cluster_state:fail`).
pub static SKIPPED_CLUSTER_DOWN: Counter = Counter::new();
/// Duration of the last tick or slice that did work, µs.
pub static LAST_TICK_US: Counter = Counter::new();
/// Longest tick or slice since load, µs.
pub static MAX_TICK_US: Counter = Counter::new();
/// Most CPU time the main thread spent in one tick or slice since load, µs: unlike
/// [`MAX_TICK_US`] (wall time), it leaves out the time the OS did not run the server.
pub static MAX_TICK_CPU_US: Counter = Counter::new();
/// Ticks or slices that ran longer than `reclaim.tick-budget-us`.
pub static OVER_BUDGET: Counter = Counter::new();
/// Longest round of `RECLAIM.REDRIVE` steps (one per tick, with a budget of its own) since load,
/// µs (wall time); also counted in [`MAX_TICK_US`].
pub static REDRIVE_MAX_ROUND_US: Counter = Counter::new();
/// Rounds of `RECLAIM.REDRIVE` steps that ran longer than `reclaim.tick-budget-us`; also counted
/// in [`OVER_BUDGET`].
pub static REDRIVE_OVER_BUDGET: Counter = Counter::new();
/// `RECLAIM.READGROUP ... BLOCK` calls that found nothing for the reader and waited.
pub static READS_BLOCKED: Counter = Counter::new();

/// Name/value pairs of the `INFO reclaim` section, in order; `state` are the figures about the
/// module's state now (policies, memory), which come first.
pub fn fields(state: &[(&'static str, u64)]) -> Vec<(&'static str, u64)> {
    let mut f = state.to_vec();
    f.extend([
        ("ticks", TICKS.get()),
        ("slices", SLICES.get()),
        ("slice_gaps", GAPS.get()),
        ("ticks_skipped_replica", SKIPPED_REPLICA.get()),
        ("ticks_skipped_loading", SKIPPED_LOADING.get()),
        ("ticks_skipped_paused", SKIPPED_PAUSED.get()),
        ("ticks_skipped_oom", SKIPPED_OOM.get()),
        ("ticks_skipped_cluster_down", SKIPPED_CLUSTER_DOWN.get()),
        ("steps", metrics::STEPS.get()),
        ("reads_blocked", READS_BLOCKED.get()),
    ]);
    f.extend(
        Stat::ALL
            .iter()
            .map(|s| (s.info_name(), metrics::total(*s))),
    );
    f.extend([
        ("last_tick_us", LAST_TICK_US.get()),
        ("max_tick_us", MAX_TICK_US.get()),
        ("max_tick_cpu_us", MAX_TICK_CPU_US.get()),
        ("ticks_over_budget", OVER_BUDGET.get()),
        ("redrive_max_round_us", REDRIVE_MAX_ROUND_US.get()),
        ("redrive_rounds_over_budget", REDRIVE_OVER_BUDGET.get()),
        ("tracking_overflows", metrics::TRACKING_OVERFLOWS.get()),
        ("panics", crate::ffi::PANICS.get()),
    ]);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_in_order() {
        let names: Vec<&str> = fields(&[("policies", 2)]).iter().map(|f| f.0).collect();
        assert_eq!(names[0], "policies");
        assert_eq!((names[1], names[10]), ("ticks", "reads_blocked"));
        assert_eq!(names[11], Stat::ALL[0].info_name());
        assert_eq!(names.last(), Some(&"panics"));
        assert!(names.contains(&"dead_lettered") && names.contains(&"max_tick_cpu_us"));
        assert_eq!(names.len(), 1 + 10 + Stat::ALL.len() + 8);
    }
}
