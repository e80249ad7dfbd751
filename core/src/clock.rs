//! The module's clocks: monotonic time for schedules, wall-clock time for what Redis computes idle
//! times with (`mstime()`). A leaf: calls nothing else in the crate.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

lazy_static::lazy_static! {
    static ref EPOCH: Instant = Instant::now();
}

/// Monotonic microseconds since the module was loaded.
pub fn now_us() -> u64 {
    EPOCH.elapsed().as_micros() as u64
}

/// Monotonic milliseconds since the module was loaded.
pub fn now_ms() -> u64 {
    EPOCH.elapsed().as_millis() as u64
}

/// Wall-clock milliseconds since the Unix epoch (0 if the clock is before it).
pub fn epoch_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
