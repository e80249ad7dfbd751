//! What one policy's passes saw ([`Health`], the PEL [`Summary`]) and how the policy reports
//! itself: its state word ([`Runtime::state`]), keyspace-event announcements, its status text
//! ([`Runtime::write_status`]; a waiting policy says what it waits for, [`Runtime::wait_for`])
//! and its one server-log notice per wait ([`Runtime::waiting_notice`]).

use std::collections::VecDeque;

use crate::error::ReclaimError;
use crate::metrics::Stat;
use crate::outcome::{Stop, Summary};
use crate::planner::{PassKind, Tally};
use crate::policy::State;

use super::Runtime;

/// Most PEL sizes a policy remembers, one per complete pass ([`Health::sizes`]).
pub(crate) const PEL_HISTORY: usize = 16;

/// What the passes saw, for `RECLAIM.HEALTH` and the per-policy lines of `INFO reclaim`: only
/// figures a pass already had in hand, each with the time it was taken. Bounded: a fixed number
/// of figures ([`PEL_HISTORY`] sizes, at most [`crate::planner::MAX_BUCKETS`] + 1 buckets), whatever the
/// size of the PEL or the number of consumers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Health {
    /// PEL sizes at the end of the last passes, (wall-clock ms, size), oldest first.
    pub sizes: VecDeque<(i64, u64)>,
    /// The entries the last full pass or scan read (a scan reads only those idle for at least
    /// its threshold), and when it ended (wall-clock ms; 0: none yet) and what kind it was.
    pub tally: Tally,
    /// When the pass of [`Health::tally`] ended (wall-clock ms; 0: none yet).
    pub tally_ms: i64,
    /// What kind of pass that was.
    pub tally_kind: Option<PassKind>,
}

impl Runtime {
    /// The PEL at the end of the last complete pass (all zero before one).
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// What the passes saw (`None` until a pass ended).
    pub fn health(&self) -> Option<&Health> {
        self.health.as_deref()
    }

    /// Notes the PEL's summary read at the end of a pass ([`Runtime::summary`],
    /// [`Health::sizes`]).
    pub fn note_summary(&mut self, s: Summary) {
        let h = self.health.get_or_insert_with(Box::default);
        if h.sizes.len() >= PEL_HISTORY {
            h.sizes.pop_front();
        }
        h.sizes.push_back((s.at_ms, s.pending));
        if s.inbox > 0 {
            // Entries may have reached the inbox some other way (a client reading as the claimant).
            self.inbox_empty = false;
        }
        self.summary = s;
    }

    /// Notes what a complete pass of `kind` that ended at wall-clock ms `wall` read
    /// ([`Health::tally`]).
    pub(super) fn note_tally(&mut self, tally: Tally, wall: i64, kind: PassKind) {
        let h = self.health.get_or_insert_with(Box::default);
        h.tally = tally;
        h.tally_ms = wall;
        h.tally_kind = Some(kind);
    }

    /// What the last step found wrong (`None`: nothing).
    pub fn problem(&self) -> Option<&Stop> {
        self.problem.as_ref()
    }

    /// Whether the last step stopped at a problem (no stream, no group, an error...).
    pub fn has_problem(&self) -> bool {
        self.problem.is_some()
    }

    /// Notes the state the policy is stored in ([`Runtime::state`] shows `paused` and `storm`).
    pub fn hold(&mut self, state: State) {
        self.held = state;
    }

    /// Notes why the stored policy cannot run where it is (`None`: it can).
    pub fn set_fault(&mut self, fault: Option<ReclaimError>) {
        self.fault = fault;
    }

    /// The policy's state in one word, as `INFO reclaim` shows it and keyspace events announce
    /// it: `invalid` while the stored policy cannot run where it is (its `fault`, [`Runtime::set_fault`]),
    /// `paused` or `storm` while the policy is held so ([`Runtime::held`]), else the last
    /// step's ([`Stop::state`]): `active`, `waiting`, `oom`, `storm` or `error`.
    pub(crate) fn state(&self) -> &'static str {
        if self.fault.is_some() {
            return "invalid";
        }
        match self.held {
            State::Active => self.problem.as_ref().map_or("active", Stop::state),
            held => held.name(),
        }
    }

    /// The state to announce after a step (`reclaim-<state>`), if it changed; notes it as
    /// announced. `paused` and `storm` are announced where they are set; a new policy, or one just
    /// resumed, is `active` without an event of its own.
    pub fn announce(&mut self) -> Option<&'static str> {
        let state = self.state();
        let quiet = matches!(state, "paused" | "storm")
            || (state == "active" && matches!(self.announced, "" | "paused" | "storm"));
        let fire = (state != self.announced && !quiet).then_some(state);
        self.announced = state;
        fire
    }

    /// After a step: the state to announce (`reclaim-<state>`, [`Runtime::announce`]) and what
    /// the policy now waits for, if it is news ([`Runtime::waiting_notice`]).
    pub fn after_step_notes(&mut self) -> (Option<&'static str>, Option<Stop>) {
        (self.announce(), self.waiting_notice())
    }

    /// The server evicted the policy's stream (keyspace event `evicted`): counted
    /// (`evicted-keys`, this policy's only: the server-wide total counts the key once), and the
    /// policy waits for its stream, its status saying it was evicted, at once. The server log was
    /// told by the eviction's own line, not by the waiting notice.
    pub fn stream_evicted(&mut self) {
        self.counters.add_own(Stat::EvictedKeys, 1);
        self.evicted = true;
        self.problem = Some(Stop::NoStream);
        self.noticed = Some(Stop::NoStream);
    }

    /// The server evicted the policy's DLQ: counted (`evicted-keys`, this policy's only).
    pub fn dlq_evicted(&mut self) {
        self.counters.add_own(Stat::EvictedKeys, 1);
    }

    /// Whether the policy waits for its stream or group since the server evicted its stream.
    pub fn evicted(&self) -> bool {
        self.evicted
    }

    /// The stream or group of the policy is missing now (`RECLAIM.POLICY SET` checked it): the
    /// policy waits, as its first step would find, before that step runs.
    pub fn wait_for(&mut self, missing: Stop) {
        if missing.is_missing() {
            self.problem = Some(missing);
        }
    }

    /// What the policy waits for, when the server log has not been told yet (once per wait: a
    /// policy that runs again and then waits again is told again); notes it as told.
    pub fn waiting_notice(&mut self) -> Option<Stop> {
        let now = self.problem.clone().filter(Stop::is_missing);
        if now == self.noticed {
            return None;
        }
        self.noticed = now.clone();
        now
    }

    /// The policy's status text as `INFO reclaim` and `RECLAIM.HEALTH` show it:
    /// [`Runtime::status`], and for a waiting policy of (`stream`, `group`) what it waits for
    /// ([`Stop::write_status`]: `waiting: no group <group>`, the name written by `name`).
    pub fn write_status(
        &self,
        out: &mut Vec<u8>,
        (enabled, cluster_down): (bool, bool),
        stream: &[u8],
        group: &[u8],
        name: impl FnMut(&mut Vec<u8>, &[u8]),
    ) {
        let word = self.status(enabled, cluster_down);
        match &self.problem {
            Some(p) if word == "waiting" && self.evicted && p.is_missing() => {
                p.write_evicted_status(out, group, name)
            }
            Some(p) if word == "waiting" && p.state() == "waiting" => {
                p.write_status(out, stream, group, name)
            }
            _ => out.extend_from_slice(word.as_bytes()),
        }
    }

    /// The policy's status as `INFO reclaim` and `RECLAIM.HEALTH` show it: `disabled` while the
    /// server-wide config `reclaim.enabled` is `no` (`enabled` false), `cluster-down` while this
    /// Redis Cluster node sees its cluster down (`cluster_down`: sweeps wait), else
    /// [`Runtime::state`].
    pub fn status(&self, enabled: bool, cluster_down: bool) -> &'static str {
        if !enabled {
            "disabled"
        } else if cluster_down {
            "cluster-down"
        } else {
            self.state()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_is_told_once_until_the_policy_runs() {
        let mut rt = Runtime::new(0);
        assert_eq!(rt.waiting_notice(), None);
        rt.wait_for(Stop::NoGroup);
        assert_eq!(rt.waiting_notice(), Some(Stop::NoGroup));
        assert_eq!(rt.waiting_notice(), None, "once");
        // Set again while it waits: not told again.
        rt.reset(0);
        rt.wait_for(Stop::NoGroup);
        assert_eq!(rt.waiting_notice(), None);
        // Now the stream is gone too: what it waits for changed.
        rt.wait_for(Stop::NoStream);
        assert_eq!(rt.waiting_notice(), Some(Stop::NoStream));
        let mut out = vec![];
        let raw = |o: &mut Vec<u8>, n: &[u8]| o.extend_from_slice(n);
        rt.write_status(&mut out, (true, false), b"orders", b"g", raw);
        assert_eq!(out, b"waiting: no stream orders".to_vec());
        out.clear();
        rt.write_status(&mut out, (false, false), b"orders", b"g", raw);
        assert_eq!(out, b"disabled".to_vec());
        out.clear();
        rt.write_status(&mut out, (true, true), b"orders", b"g", raw);
        assert_eq!(out, b"cluster-down".to_vec());
        // A policy waiting for its slot (a migration in Redis Cluster) says so too.
        out.clear();
        rt.wait_for(Stop::NotServed);
        rt.write_status(&mut out, (true, false), b"orders", b"g", raw);
        assert_eq!(
            out,
            b"waiting: no stream orders".to_vec(),
            "wait_for notes only what is missing"
        );
        // It runs: the next wait is told again.
        rt.reset(0);
        assert_eq!(rt.waiting_notice(), None);
        rt.wait_for(Stop::NoGroup);
        assert_eq!(rt.waiting_notice(), Some(Stop::NoGroup));
        // Only a missing stream or group is a wait.
        rt.wait_for(Stop::Oom);
        assert_eq!(rt.waiting_notice(), None);
    }

    #[test]
    fn the_pel_history_is_bounded_and_a_filled_inbox_is_looked_at() {
        let mut rt = Runtime::new(0);
        assert!(rt.health().is_none());
        rt.note_inbox_empty();
        let n = PEL_HISTORY as u64 + 3;
        for i in 0..n {
            rt.note_summary(Summary {
                at_ms: i as i64,
                pending: i,
                ..Summary::default()
            });
        }
        let h = rt.health().unwrap();
        assert_eq!(h.sizes.len(), PEL_HISTORY);
        assert_eq!(h.sizes.front(), Some(&(3, 3)));
        assert_eq!(h.sizes.back(), Some(&(n as i64 - 1, n - 1)));
        assert_eq!(rt.summary().pending, n - 1);
        assert!(!rt.begin_read(b"c", Default::default(), 0).inbox);
        rt.note_summary(Summary {
            inbox: 1,
            ..Summary::default()
        });
        assert!(rt.begin_read(b"c", Default::default(), 0).inbox);
    }
}
