//! Module configs (Redis 7.0 `RM_RegisterNumericConfig`), exposed as `reclaim.<name>`: settable in
//! redis.conf, on the `loadmodule` line (`tick-interval-ms 5`), with `MODULE LOADEX ... CONFIG`, and
//! at run time with `CONFIG SET`/`CONFIG GET`. Redis validates the ranges below.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

/// `reclaim.tick-interval-ms`: ms between two sweep ticks. Default 10, range 1..=1000.
pub static TICK_INTERVAL_MS: AtomicI64 = AtomicI64::new(DEFAULT_TICK_INTERVAL_MS);
/// Default of `reclaim.tick-interval-ms`.
pub const DEFAULT_TICK_INTERVAL_MS: i64 = 10;
/// Smallest `reclaim.tick-interval-ms`.
pub const MIN_TICK_INTERVAL_MS: i64 = 1;
/// Largest `reclaim.tick-interval-ms`.
pub const MAX_TICK_INTERVAL_MS: i64 = 1000;

/// `reclaim.tick-budget-us`: µs of sweep work one tick may do (all policies together); a step
/// that starts before the budget ends finishes its current batch. Default 500, range 50..=100000.
pub static TICK_BUDGET_US: AtomicI64 = AtomicI64::new(DEFAULT_TICK_BUDGET_US);
/// Default of `reclaim.tick-budget-us`.
pub const DEFAULT_TICK_BUDGET_US: i64 = 500;
/// Smallest `reclaim.tick-budget-us`.
pub const MIN_TICK_BUDGET_US: i64 = 50;
/// Largest `reclaim.tick-budget-us`.
pub const MAX_TICK_BUDGET_US: i64 = 100_000;

/// `reclaim.enabled`: `no` stops every policy at once (no sweeps, no redeliveries, no
/// dead-letters; new entries are still read), `yes` lets them run. Default `yes`. Not
/// replicated: each server has its own (a replica never sweeps anyway).
pub static ENABLED: AtomicBool = AtomicBool::new(true);
/// Name of the `reclaim.enabled` config (without the module prefix).
pub const ENABLED_NAME: &str = "enabled";

/// Name of the `reclaim.tick-interval-ms` config (without the module prefix).
pub const TICK_INTERVAL: &str = "tick-interval-ms";
/// Name of the `reclaim.tick-budget-us` config (without the module prefix).
pub const TICK_BUDGET: &str = "tick-budget-us";

/// One numeric config: name (without `reclaim.`), its variable, default, min, max.
pub struct Numeric {
    /// Name, as in `CONFIG SET reclaim.<name>` and on the `loadmodule` line.
    pub name: &'static str,
    /// The variable Redis sets.
    pub var: &'static AtomicI64,
    /// Value when not configured.
    pub default: i64,
    /// Smallest accepted value.
    pub min: i64,
    /// Largest accepted value.
    pub max: i64,
}

/// Every config of the module, registered in this order.
pub const NUMERIC: [Numeric; 2] = [
    Numeric {
        name: TICK_INTERVAL,
        var: &TICK_INTERVAL_MS,
        default: DEFAULT_TICK_INTERVAL_MS,
        min: MIN_TICK_INTERVAL_MS,
        max: MAX_TICK_INTERVAL_MS,
    },
    Numeric {
        name: TICK_BUDGET,
        var: &TICK_BUDGET_US,
        default: DEFAULT_TICK_BUDGET_US,
        min: MIN_TICK_BUDGET_US,
        max: MAX_TICK_BUDGET_US,
    },
];

/// One yes/no config: name (without `reclaim.`), its variable, default.
pub struct Boolean {
    /// Name, as in `CONFIG SET reclaim.<name>` and on the `loadmodule` line.
    pub name: &'static str,
    /// The variable Redis sets.
    pub var: &'static AtomicBool,
    /// Value when not configured.
    pub default: bool,
}

/// Every yes/no config of the module, registered after [`NUMERIC`].
pub const BOOLEAN: [Boolean; 1] = [Boolean {
    name: ENABLED_NAME,
    var: &ENABLED,
    default: true,
}];

/// The names of every config, numeric then yes/no.
pub fn names() -> impl Iterator<Item = &'static str> {
    NUMERIC
        .iter()
        .map(|c| c.name)
        .chain(BOOLEAN.iter().map(|c| c.name))
}

/// Whether policies may run now (`reclaim.enabled`).
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Current tick interval, ms.
pub fn tick_interval_ms() -> i64 {
    TICK_INTERVAL_MS
        .load(Ordering::Relaxed)
        .clamp(MIN_TICK_INTERVAL_MS, MAX_TICK_INTERVAL_MS)
}

/// Current per-tick budget, µs.
pub fn tick_budget_us() -> i64 {
    TICK_BUDGET_US
        .load(Ordering::Relaxed)
        .clamp(MIN_TICK_BUDGET_US, MAX_TICK_BUDGET_US)
}
