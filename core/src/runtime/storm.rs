//! The glue between one policy and its `STORM` window ([`crate::breaker::Breaker`]): how many
//! dead-letters it may make now, noting them, the breaker opening and `RESUME` closing it.

use crate::metrics::Stat;
use crate::outcome::Stop;
use crate::policy::{Policy, State, Storm};

use super::Runtime;

impl Runtime {
    /// How many entries `policy` may dead-letter at monotonic ms `now` before its `STORM` breaker
    /// opens: 0 unless the policy is active, unlimited (`u64::MAX`) without `STORM`.
    pub fn dead_letter_allowance(&self, policy: &Policy, now: u64) -> u64 {
        match policy.state {
            State::Active => self.breaker.allowance(policy.storm, now),
            _ => 0,
        }
    }

    /// Notes `n` dead-letters made at monotonic ms `now` in the `STORM` window (`storm`: the
    /// policy's `STORM`; nothing without it).
    pub fn note_dead_letters(&mut self, storm: Option<Storm>, now: u64, n: u64) {
        self.breaker.record(storm, now, n);
    }

    /// The `STORM` breaker opened (the stored state is `storm`, announced by its event): counted
    /// in `storms`.
    pub fn storm_opened(&mut self) {
        self.held = State::Storm;
        self.announced = State::Storm.name();
        self.counters.add(Stat::Storms, 1);
    }

    /// `RECLAIM.POLICY PAUSE` or `RESUME` changed the stored state to `state` (announced by its
    /// event): `RESUME` closes the `STORM` breaker (`storm`: the policy's) at monotonic `now`.
    pub fn state_changed(&mut self, state: State, storm: Option<Storm>, now: u64) {
        if state == State::Active {
            self.breaker.resume(storm, now);
            if self.problem == Some(Stop::Storm) {
                // The breaker held dead-letters back; it no longer does.
                self.problem = None;
            }
        }
        self.held = state;
        self.announced = state.name();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Stat;

    #[test]
    fn the_storm_window_allows_dead_letters_until_it_opens_and_resume_closes_it() {
        let storm = Storm {
            max: 3,
            window_ms: 1_000,
        };
        let mut p = Policy {
            storm: Some(storm),
            ..Policy::default()
        };
        let mut rt = Runtime::new(0);
        assert_eq!(rt.dead_letter_allowance(&p, 0), 3);
        rt.note_dead_letters(p.storm, 10, 3);
        assert_eq!(rt.dead_letter_allowance(&p, 20), 0);
        rt.storm_opened();
        assert_eq!(rt.state(), "storm");
        assert_eq!(rt.counters().get(Stat::Storms), 1);
        assert_eq!(rt.announce(), None, "its own event announced it");
        // Paused: no dead-letter at all.
        p.state = State::Paused;
        assert_eq!(rt.dead_letter_allowance(&p, 5_000), 0);
        // RESUME: the breaker lets what it held back go for one window.
        rt.problem = Some(Stop::Storm);
        p.state = State::Active;
        rt.state_changed(State::Active, p.storm, 30);
        assert_eq!((rt.state(), rt.problem()), ("active", None));
        assert_eq!(rt.dead_letter_allowance(&p, 30), u64::MAX);
        assert_eq!(rt.dead_letter_allowance(&p, 1_030), 3);
        // Without STORM: no limit.
        assert_eq!(rt.dead_letter_allowance(&Policy::default(), 0), u64::MAX);
    }
}
