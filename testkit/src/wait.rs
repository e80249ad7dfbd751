//! Waiting for a state: polls, never a sleep taken as an assertion.

use std::time::{Duration, Instant};

/// How much slower than usual the server under test runs (`RECLAIM_TEST_SLOWDOWN`, default 1;
/// `make test-valgrind` sets it): every [`wait_for`] deadline is multiplied by it.
pub fn slowdown() -> u64 {
    std::env::var("RECLAIM_TEST_SLOWDOWN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1)
}

/// Polls `f` every 10 ms until it returns `Some`, or panics with `what` after `secs` seconds
/// (times [`slowdown`]).
pub fn wait_for<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let secs = secs * slowdown();
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {secs}s waiting for: {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
