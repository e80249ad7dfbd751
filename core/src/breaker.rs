//! The poison-storm breaker's count (pure: no Redis calls, unit-tested without a server).
//!
//! A policy with `STORM n window-ms` may dead-letter at most n entries within any window of
//! window-ms; the entry that would be the (n+1)-th opens the breaker (the policy's state becomes
//! `storm`, see [`crate::policy::State`]). The count is kept in [`SLICES`] slices of the window
//! (at least 1 ms each), so it covers between the window less one slice and the window: constant
//! memory per policy, whatever the rate.

use crate::policy::Storm;

/// Slices of one window.
const SLICES: usize = 16;

/// Dead-letters of one policy in its recent window, and the grace after a `RESUME`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Breaker {
    /// Dead-letters per slice (a ring, indexed by slice number modulo [`SLICES`]).
    counts: [u64; SLICES],
    /// The slice number (monotonic ms / slice width) each ring slot counts for.
    slice_of: [u64; SLICES],
    /// The window (ms) the ring was built for: another window starts a new count.
    window_ms: i64,
    /// Monotonic ms before which the breaker does not open (after `RECLAIM.POLICY RESUME`).
    grace_until_ms: u64,
}

impl Breaker {
    /// Width of one slice, ms (at least 1).
    fn slice_ms(s: Storm) -> u64 {
        (s.window_ms.max(1) as u64).div_ceil(SLICES as u64)
    }

    /// How many slices the window spans: [`SLICES`], or fewer when the window is shorter than
    /// [`SLICES`] ms (a slice is at least 1 ms wide: `STORM 1 1` counts 1 ms, not 16).
    fn slices_in_window(s: Storm) -> u64 {
        (s.window_ms.max(1) as u64)
            .div_ceil(Self::slice_ms(s))
            .clamp(1, SLICES as u64)
    }

    /// Dead-letters counted in the window that ends at monotonic ms `now`.
    fn count(&self, s: Storm, now: u64) -> u64 {
        if self.window_ms != s.window_ms {
            return 0;
        }
        let current = now / Self::slice_ms(s);
        let oldest = current.saturating_sub(Self::slices_in_window(s) - 1);
        (0..SLICES)
            .filter(|&i| (oldest..=current).contains(&self.slice_of[i]))
            .map(|i| self.counts[i])
            .sum()
    }

    /// How many more entries may be dead-lettered now before the breaker opens: unlimited
    /// (`u64::MAX`) without `STORM` or during the grace after a `RESUME`.
    pub fn allowance(&self, storm: Option<Storm>, now: u64) -> u64 {
        match storm {
            Some(s) if now >= self.grace_until_ms => {
                (s.max.max(0) as u64).saturating_sub(self.count(s, now))
            }
            _ => u64::MAX,
        }
    }

    /// Counts `n` dead-letters made at monotonic ms `now` (nothing without `STORM`).
    pub(crate) fn record(&mut self, storm: Option<Storm>, now: u64, n: u64) {
        let Some(s) = storm else {
            return;
        };
        if n == 0 {
            return;
        }
        if self.window_ms != s.window_ms {
            let grace = self.grace_until_ms;
            *self = Breaker {
                window_ms: s.window_ms,
                grace_until_ms: grace,
                ..Breaker::default()
            };
        }
        let slice = now / Self::slice_ms(s);
        let slot = (slice % SLICES as u64) as usize;
        if self.slice_of[slot] != slice {
            self.slice_of[slot] = slice;
            self.counts[slot] = 0;
        }
        self.counts[slot] = self.counts[slot].saturating_add(n);
    }

    /// `RECLAIM.POLICY RESUME` at monotonic ms `now`: the count starts again, and the breaker
    /// does not open for one window, so the entries it held back can be dead-lettered.
    pub fn resume(&mut self, storm: Option<Storm>, now: u64) {
        let window = storm.map_or(0, |s| s.window_ms.max(0) as u64);
        *self = Breaker {
            grace_until_ms: now.saturating_add(window),
            ..Breaker::default()
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Storm = Storm {
        max: 10,
        window_ms: 1600,
    };

    #[test]
    fn unlimited_without_storm() {
        let mut b = Breaker::default();
        b.record(None, 5, 1_000);
        assert_eq!(b.allowance(None, 5), u64::MAX);
    }

    #[test]
    fn counts_the_window_and_forgets_older_slices() {
        let mut b = Breaker::default();
        b.record(Some(S), 1_000, 4);
        b.record(Some(S), 1_150, 3);
        assert_eq!(b.allowance(Some(S), 1_200), 3);
        // 100 ms slices: still counted 1.5 s later (15 slices on), gone after 16.
        assert_eq!(b.count(S, 2_550), 7);
        assert_eq!(b.count(S, 2_600), 3);
        assert_eq!(b.count(S, 2_700), 0);
        assert_eq!(b.allowance(Some(S), 2_700), 10);
    }

    #[test]
    fn never_below_zero_and_a_new_window_starts_again() {
        let mut b = Breaker::default();
        b.record(Some(S), 0, 25);
        assert_eq!(b.allowance(Some(S), 10), 0);
        let other = Storm {
            max: 10,
            window_ms: 500,
        };
        assert_eq!(b.allowance(Some(other), 10), 10);
        b.record(Some(other), 10, 2);
        assert_eq!(b.allowance(Some(other), 10), 8);
    }

    #[test]
    fn resume_gives_one_window_of_grace() {
        let mut b = Breaker::default();
        b.record(Some(S), 0, 10);
        assert_eq!(b.allowance(Some(S), 100), 0);
        b.resume(Some(S), 100);
        b.record(Some(S), 200, 50);
        assert_eq!(b.allowance(Some(S), 1_699), u64::MAX);
        // After the grace, the window counts again: the 50 are still in it.
        assert_eq!(b.allowance(Some(S), 1_700), 0);
        assert_eq!(b.allowance(Some(S), 3_900), 10);
    }

    proptest::proptest! {
        /// Dead-lettering only what the allowance gives, no window ever counts more than `n`,
        /// and a window with no dead-letter gives the whole allowance back.
        #[test]
        fn never_more_than_the_allowance_in_a_window(
            max in 1i64..50,
            window_ms in 1i64..5_000,
            steps in proptest::collection::vec((0u64..400, 0u64..80), 0..60),
        ) {
            let s = Storm { max, window_ms };
            let mut b = Breaker::default();
            let mut now = 1_000_000u64;
            for (dt, want) in steps {
                now += dt;
                let allowed = b.allowance(Some(s), now);
                proptest::prop_assert!(allowed <= max as u64);
                b.record(Some(s), now, want.min(allowed));
                proptest::prop_assert!(b.count(s, now) <= max as u64);
            }
            let later = now + 2 * window_ms as u64 + 1;
            proptest::prop_assert_eq!(b.allowance(Some(s), later), max as u64);
        }
    }
}
