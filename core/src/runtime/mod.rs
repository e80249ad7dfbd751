//! One policy's run-time state, in one place: its schedule, cursor, counters, the pass in
//! progress and what passes learnt, and what client commands may have undone since (touches).
//! This file holds the [`Runtime`] struct and its pass state machine ([`Runtime::plan_step`],
//! [`Runtime::finish_step`], `start_pass`, `apply`, `end_pass`); the rest of its methods live
//! beside the state they keep:
//! - `tracking`: consumer tracking (touches the command filter saw, `remark` at `EXEC`,
//!   `confirm`, `touch`; [`Seen`] for `LIVENESS`);
//! - `reader`: what `RECLAIM.READGROUP` learnt ([`ReadScan`], [`ReadFacts`], [`ReadView`]) and
//!   the parked entries' due time;
//! - `health`: what passes saw ([`Health`]), the state word, the status text of a waiting policy
//!   (`write_status`, `wait_for`) and its one log notice per wait (`waiting_notice`);
//! - `storm`: the glue to the `STORM` window ([`crate::breaker::Breaker`]).
//!
//! Pure: no Redis calls. `state::registry` owns every `Runtime` (one per policy it knows) and
//! frees it with its policy; every collection here is bounded (see [`MAX_TRACKED`],
//! [`MAX_TRACKED_BYTES`](tracking::MAX_TRACKED_BYTES)), whatever the number of consumers that ever touched the stream. The
//! fields are private to this module: the files beside it reach them, nothing else does.

mod health;
mod reader;
mod storm;
mod tracking;

pub use health::Health;
pub use reader::{ReadFacts, ReadView};
pub use tracking::{EXEC_REMARK_MS, MAX_TRACKED};

use reader::ReadScan;
use tracking::{Names, Recent, Seen, Unchecked};

use std::time::Duration;

use crate::breaker::Breaker;
use crate::error::ReclaimError;
use crate::metrics::{self, Counters, Stat};
use crate::outcome::{Outcome, Stop, Summary};
use crate::planner::{self, Horizon, PassKind, Tally};
use crate::policy::{Policy, State};

/// The pass in progress of a policy.
#[derive(Debug, Clone)]
struct Pass {
    /// What the pass does, decided when it started.
    kind: PassKind,
    /// Consumers whose own PELs are paged first (delivery counts check), in order; the one being
    /// paged is the first.
    check: Vec<Vec<u8>>,
    /// [`Runtime::idle_mark`] when the pass started.
    idle_mark: u64,
    /// How far ahead of `MIN-IDLE` (ms) its scans look: their `IDLE` threshold is `MIN-IDLE`
    /// minus this.
    lookahead_ms: i64,
    /// What the pass has seen so far, for the next pass's schedule.
    horizon: Horizon,
    /// A stale or over-delivered entry was left pending (DLQ of the wrong type, out of memory).
    left_some: bool,
    /// A dead-letter move (or tombstone) was skipped for memory in this pass: it waits for the
    /// next one ([`Runtime::problem_after`]).
    oom_skipped: bool,
    /// The entries the pass read so far (consumer checks left out), for [`Health`].
    tally: Tally,
}

/// Run-time state of one policy.
#[derive(Debug, Clone, Default)]
pub struct Runtime {
    /// Last PEL entry handled in the current pass; `None` = the pass starts at the head of the PEL.
    cursor: Option<Vec<u8>>,
    /// ID-window width learned by windowed steps (0 = none yet).
    width: u128,
    /// Monotonic time (ms, [`crate::clock::now_ms`]) at which the next step is due.
    due_ms: u64,
    /// µs spent in the steps of the pass in progress.
    pass_us: i64,
    /// Recent cost of handling one entry in a step, ns (0 = not measured yet); sizes steps to the
    /// time left ([`crate::planner::step_entries`]).
    entry_ns: u64,
    /// Counters since load.
    counters: Counters,
    /// What the last step found wrong, for `RECLAIM.STATS` (`None` = nothing); `oom` stays while
    /// moves skipped for memory wait ([`Runtime::problem_after`]).
    problem: Option<Stop>,
    /// Bumped by every client command that may set an older idle time (`XCLAIM ... IDLE/TIME`)
    /// and whenever the PEL may be a new one ([`Runtime::touch`], [`Runtime::forget_learnt`]).
    idle_mark: u64,
    /// Whose delivery counts may have risen since a pass checked them ([`Runtime::touch`]).
    unchecked: Unchecked,
    /// Touches the command filter saw in the last [`EXEC_REMARK_MS`], made once confirmed.
    recent: Recent,
    /// The pass in progress (`None` between passes).
    pass: Option<Pass>,
    /// How far ahead (ms) the next scan looks; `None` = [`crate::planner::first_lookahead`].
    lookahead_ms: Option<i64>,
    /// Wall-clock ms before which no pending entry can be stale (0 = unknown), from the last
    /// complete pass ([`Horizon::stale_not_before_ms`]).
    stale_not_before_ms: i64,
    /// The PEL at the end of the last complete pass (all zero before one). Kept here, not in
    /// [`Runtime::health`]: `INFO reclaim` reads it for every policy, and a walk over thousands
    /// of runtimes should not have to follow a pointer each.
    summary: Summary,
    /// What else the passes saw (`None` until a pass ended).
    health: Option<Box<Health>>,
    /// The last state announced with a keyspace event (`ffi::events::notify_state`); `""`:
    /// none yet (a new policy is `active` without one).
    announced: &'static str,
    /// What the policy waited for when the server log was last told ([`Runtime::waiting_notice`]):
    /// `None` once it runs. Kept across `SET`, so a policy set again while it waits is not logged
    /// again.
    noticed: Option<Stop>,
    /// The server evicted the policy's stream (keyspace event `evicted`): while the policy then
    /// waits for its stream or group, its status says so ([`Runtime::write_status`]). Cleared
    /// when a step finds both again.
    evicted: bool,
    /// The policy's stored [`State`] as last seen (a step, `RECLAIM.POLICY PAUSE`/`RESUME`, the
    /// `STORM` breaker opening): `paused` and `storm` come first in [`Runtime::state`].
    held: State,
    /// Where `RECLAIM.READGROUP` looks next for stale entries of other consumers, and what this
    /// round of looks over the PEL found so far.
    read_scan: ReadScan,
    /// When consumers last talked to the module (`LIVENESS` policies only).
    seen: Seen,
    /// Wall-clock ms before which `RECLAIM.READGROUP` need not look for stale entries of other
    /// consumers again: its last round over the PEL found none, and the most idle entry it saw
    /// turns stale then at the earliest (0 = look).
    read_not_before_ms: i64,
    /// Dead-letters of the recent `STORM` window (policies with `STORM` only).
    breaker: Breaker,
    /// Why the stored policy cannot run where it is, as last seen (at load, on arrival by
    /// `RENAME`/`COPY`/`MOVE`/`RESTORE`, at every visit): `invalid` comes first in
    /// [`Runtime::state`]. `None`: it can.
    fault: Option<ReclaimError>,
    /// A read found the claimant's inbox empty, and nothing the module knows of filled it since
    /// (its moves, `RECLAIM.NACK`, a client's touch, a pass that saw entries there): reads skip
    /// their look at the inbox.
    inbox_empty: bool,
    /// What the last read kept of the policy's value (`None`: read it).
    read_facts: Option<Box<ReadFacts>>,
    /// Wall-clock ms at which an entry of this group parked in the stream's delay key may be due
    /// at the earliest (0: unknown, look; `i64::MAX`: none parked). Learnt by each look
    /// ([`Runtime::parked_released`]), lowered by `RECLAIM.NACK` ([`Runtime::note_parked`]).
    parked_due_ms: i64,
    /// The stream's delay key held another type at the last look (logged once).
    parked_wrong_type: bool,
}

/// What the next step of a policy's pass reads and how much ([`Runtime::plan_step`]): the
/// scheduler runs it with no lock held.
#[derive(Debug, Clone)]
pub struct StepPlan {
    /// The kind of pass the step belongs to.
    pub kind: PassKind,
    /// The consumer whose own PEL the step pages (a delivery-count check), if it is one.
    pub consumer: Option<Vec<u8>>,
    /// Where the step starts (`None`: the head of the PEL).
    pub cursor: Option<Vec<u8>>,
    /// The ID-window width learnt so far (scans).
    pub width: u128,
    /// The scan's `IDLE` threshold, ms.
    pub threshold_ms: i64,
    /// At most this many entries.
    pub max: i64,
    /// How long ago (ms) consumers last talked to the module (`LIVENESS`).
    pub seen: Vec<(Vec<u8>, u64)>,
    /// The dead-letters the `STORM` breaker allows now.
    pub dead_letters: u64,
}

/// How often (ms, at most) a paused or disabled policy is looked at again.
const HALTED_RECHECK_MS: u64 = 1000;

impl Runtime {
    /// A new policy's state, due at `due_ms`.
    pub fn new(due_ms: u64) -> Runtime {
        Runtime {
            due_ms,
            ..Runtime::default()
        }
    }

    /// Monotonic ms at which the next step is due (the registry's visiting order).
    pub fn due_ms(&self) -> u64 {
        self.due_ms
    }

    /// Makes the policy due at monotonic ms `due` (the registry keeps its queue in step).
    pub fn set_due(&mut self, due: u64) {
        self.due_ms = due;
    }

    /// Counters since load.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Where the timer's pass goes on (`None`: the head of the PEL).
    pub fn cursor(&self) -> Option<&[u8]> {
        self.cursor.as_deref()
    }

    /// Wall-clock ms before which no pending entry can be stale, by the last complete pass (0:
    /// unknown).
    pub fn stale_not_before_ms(&self) -> i64 {
        self.stale_not_before_ms
    }

    /// Counts a sweep step ([`count_step`]).
    pub fn count_step(&mut self, out: &Outcome) {
        count_step(&mut self.counters, out);
    }

    /// Counts what a read or a verb did ([`count_outcome`]).
    pub fn count_outcome(&mut self, out: &Outcome) {
        count_outcome(&mut self.counters, out);
    }

    /// Counts `n` consumers deleted by `FORGET-IDLE` (`consumers-forgotten`).
    pub fn count_forgotten(&mut self, n: u64) {
        self.counters.add(Stat::ConsumersForgotten, n);
    }

    /// Counts `n` entries handed to readers again (`redelivered`).
    pub fn count_redelivered(&mut self, n: u64) {
        self.counters.add(Stat::Redelivered, n);
    }

    /// `RECLAIM.SWEEP` completed a full pass at wall-clock ms `wall` in `us` µs, reading `tally`.
    pub fn note_full_pass(&mut self, tally: Tally, us: i64, wall: i64) {
        self.counters.add(Stat::Passes, 1);
        self.counters.last_pass_ms = wall;
        self.counters.last_pass_us = us;
        self.note_tally(tally, wall, PassKind::Full);
    }

    /// What the next step of the timer's pass of `policy` reads, at monotonic `now` and
    /// wall-clock `wall` with `left_ns` of the slice's budget left: the pass starts if none is in
    /// progress ([`Runtime::start_pass`]). `None` when the policy cannot run where it is
    /// (`fault`, see [`Policy::fault_at`]) or is halted (paused, `storm`,
    /// `reclaim.enabled` no: `enabled` false): it is looked at again within a second.
    pub fn plan_step(
        &mut self,
        policy: &Policy,
        fault: Option<ReclaimError>,
        enabled: bool,
        now: u64,
        wall: i64,
        left_ns: u64,
    ) -> Option<StepPlan> {
        self.held = policy.state;
        self.fault = fault;
        if self.fault.is_some() || policy.halted(enabled).is_some() {
            self.due_ms = now.saturating_add((policy.interval_ms as u64).min(HALTED_RECHECK_MS));
            return None;
        }
        self.start_pass(policy, wall);
        let pass = self.pass.as_ref()?;
        // At most COUNT entries, and no more than are likely to be handled in the time left (at
        // the policy's recent cost per entry): a step stopped by the deadline half-way through
        // its page reads the rest of it again next time.
        Some(StepPlan {
            kind: pass.kind,
            consumer: pass.check.first().cloned(),
            cursor: self.cursor.clone(),
            width: self.width,
            threshold_ms: pass.horizon.threshold_ms,
            max: planner::step_entries(policy.count, left_ns, self.entry_ns),
            seen: self.seen_ages(now),
            dead_letters: self.dead_letter_allowance(policy, now),
        })
    }

    /// What the step of `plan` reported, as the pass sees it: a consumer check teaches the pass
    /// nothing about when entries go stale (it sees one consumer), nor what the PEL looks like,
    /// so `out` loses those, and the end of the consumer's PEL is not the end of the pass.
    /// Returns whether the check is done (for [`Runtime::finish_step`]).
    pub fn narrow_outcome(plan: &StepPlan, out: &mut Outcome) -> bool {
        if plan.consumer.is_none() {
            return false;
        }
        out.fresh = Default::default();
        out.tally = Default::default();
        std::mem::take(&mut out.pass_done)
    }

    /// Folds the step of `plan` that reported `out` ([`Runtime::narrow_outcome`]: `checked`, a
    /// consumer check is done and the next one comes) and took `took` into the state
    /// ([`Runtime::apply`]).
    pub fn finish_step(
        &mut self,
        checked: bool,
        out: &Outcome,
        took: Duration,
        policy: &Policy,
        now: u64,
        wall: i64,
    ) {
        if checked {
            self.consumer_checked();
        }
        if out.examined > 0 {
            self.entry_ns =
                planner::next_entry_ns(self.entry_ns, took.as_nanos() as u64, out.examined);
        }
        self.apply(out, took.as_micros() as i64, policy, now, wall);
        if !self.problem.as_ref().is_some_and(Stop::is_missing) {
            self.evicted = false;
        }
    }

    /// The policy was (re)set: the pass restarts from the head of the PEL, and nothing learnt
    /// under the old policy holds; counters stay.
    pub fn reset(&mut self, due_ms: u64) {
        // `SET` stores only what it accepts: a policy it replaced is valid again.
        self.fault = None;
        self.cursor = None;
        self.pass_us = 0;
        self.problem = None;
        self.pass = None;
        self.unchecked = Unchecked::All;
        self.lookahead_ms = None;
        self.forget_horizon();
        self.due_ms = due_ms;
    }

    /// The module set older idle times itself (`RECLAIM.NACK`): what passes and reads learnt
    /// about when entries turn stale no longer holds, as after a client's `XCLAIM ... IDLE`.
    pub fn idle_set_older(&mut self) {
        self.idle_mark = self.idle_mark.wrapping_add(1);
        self.forget_horizon();
    }

    /// Forgets when entries can be stale at the earliest (what passes and reads learnt).
    fn forget_horizon(&mut self) {
        self.stale_not_before_ms = 0;
        self.read_not_before_ms = 0;
        self.read_scan = ReadScan::default();
        self.inbox_empty = false;
        self.read_facts = None;
    }

    /// Forgets what passes learnt (checked delivery counts, when entries can be stale): the PEL
    /// may be a new one (the stream or group appeared, the server became a primary again).
    pub fn forget_learnt(&mut self) {
        self.parked_due_ms = 0;
        self.unchecked = Unchecked::All;
        self.idle_mark = self.idle_mark.wrapping_add(1);
        self.forget_horizon();
    }

    /// Starts a pass of `policy` at wall-clock ms `wall`, unless one is in progress: a full pass
    /// while delivery counts are unchecked (`MAX-DELIVERIES` above 0), a trim-only pass while no
    /// entry can be stale yet, a scan otherwise (see [`planner::pass_kind`]).
    fn start_pass(&mut self, policy: &Policy, wall: i64) {
        if self.pass.is_some() {
            return;
        }
        let checked = self.unchecked != Unchecked::All;
        let kind = planner::pass_kind(policy, checked, wall, self.stale_not_before_ms);
        let lookahead = self
            .lookahead_ms
            .unwrap_or_else(|| planner::first_lookahead(policy));
        let threshold = match kind {
            PassKind::Full => 0,
            _ => policy.min_idle_ms.saturating_sub(lookahead).max(1),
        };
        // The counts this pass checks are checked from now on; touches during the pass add to a
        // new set, for the next pass.
        let taken = std::mem::replace(&mut self.unchecked, Unchecked::Consumers(Names::default()));
        // A full pass checks everyone anyway; without MAX-DELIVERIES counts do not matter.
        let check = match taken {
            Unchecked::Consumers(set) if kind != PassKind::Full && policy.max_deliveries > 0 => {
                set.set.into_iter().collect()
            }
            _ => Vec::new(),
        };
        self.pass = Some(Pass {
            kind,
            check,
            idle_mark: self.idle_mark,
            lookahead_ms: lookahead,
            horizon: Horizon::new(wall, threshold),
            left_some: false,
            oom_skipped: false,
            tally: Tally::default(),
        });
    }

    /// Ends the pass in progress at wall-clock ms `wall`: what it learnt sets the next passes'
    /// kind and lookahead, and what it read is kept for [`Health`].
    fn end_pass(&mut self, policy: &Policy, wall: i64) {
        let Some(p) = self.pass.take() else {
            return;
        };
        if p.kind != PassKind::TrimOnly {
            self.note_tally(p.tally, wall, p.kind);
        }
        // A stale or over-delivered entry left pending must be found again on the next pass; a
        // client's `XCLAIM ... IDLE` during the pass may have made an entry stale behind it.
        if p.left_some {
            self.unchecked = Unchecked::All;
        }
        let trusted = !p.left_some && self.idle_mark == p.idle_mark;
        match p.kind {
            PassKind::TrimOnly => self.counters.add(Stat::ScansSkipped, 1),
            PassKind::Full | PassKind::Scan => {
                if p.kind == PassKind::Full {
                    self.counters.add(Stat::FullPasses, 1);
                } else {
                    self.lookahead_ms = Some(planner::next_lookahead(
                        p.lookahead_ms,
                        p.horizon.fresh.watched,
                        policy,
                    ));
                }
                self.stale_not_before_ms = if trusted {
                    p.horizon.stale_not_before_ms(policy.min_idle_ms)
                } else {
                    0
                };
            }
        }
    }

    /// The policy's trouble after a step that reported `out` and went on (or stopped at its
    /// deadline): the step's own; else `oom` stays while dead-letter moves skipped for memory
    /// wait, until a step dead-letters again (skipping none: it had no problem) or a pass ends
    /// that skipped none (`pass_skipped`: the pass in progress, this step included, skipped one).
    /// A step with nothing to move (a consumer check, a window of fresh entries, the last step
    /// of a pass finding nothing more) does not clear it.
    fn problem_after(&self, out: &Outcome, pass_skipped: bool) -> Option<Stop> {
        if out.problem.is_some() {
            return out.problem.clone();
        }
        let waiting = self.problem == Some(Stop::Oom)
            && out.dead_lettered == 0
            && (pass_skipped || !out.pass_done);
        waiting.then_some(Stop::Oom)
    }

    /// A manual step (`RECLAIM.SWEEP`) skipped dead-letter moves for memory: they wait, and
    /// the policy says `oom` until the timer's steps move again ([`Runtime::problem_after`]).
    pub fn note_oom_skips(&mut self, out: &Outcome) {
        let skipped = out.oom_skips > 0 || out.problem == Some(Stop::Oom);
        if skipped && matches!(self.problem, None | Some(Stop::Oom)) {
            self.problem = Some(Stop::Oom);
        }
    }

    /// A pass that ends early (no stream, no group, an error): what it took to check is unchecked
    /// again, and nothing it saw is trusted.
    fn abort_pass(&mut self) {
        if self.pass.take().is_some() {
            self.unchecked = Unchecked::All;
        }
        self.forget_horizon();
    }

    /// A consumer check of the pass in progress ended (that consumer's PEL is done): the next
    /// step checks the next one, or starts the pass proper.
    fn consumer_checked(&mut self) {
        if let Some(p) = self.pass.as_mut() {
            if !p.check.is_empty() {
                p.check.remove(0);
            }
        }
        self.counters.add(Stat::ConsumerChecks, 1);
    }

    /// Folds one step's outcome into the state (counters, cursor, the pass in progress) and sets
    /// when the policy is due next (`now` is monotonic ms, `wall` wall-clock ms). `us` is the
    /// step's duration.
    fn apply(&mut self, out: &Outcome, us: i64, policy: &Policy, now: u64, wall: i64) {
        count_step(&mut self.counters, out);
        self.pass_us += us;
        self.cursor = out.cursor.clone();
        self.width = out.width;
        if let Some(p) = self.pass.as_mut() {
            p.horizon.fresh.merge(&out.fresh);
            p.tally.merge(&out.tally);
            p.left_some |= out.problem.is_some() || out.oom_skips > 0;
            p.oom_skipped |= out.oom_skips > 0 || out.problem == Some(Stop::Oom);
            // A scan copying out too many fresh entries stops looking ahead for the rest of the
            // pass.
            let cap = planner::WATCH_PAGES.saturating_mul(policy.count.max(1) as u64);
            if p.kind == PassKind::Scan && p.horizon.fresh.watched > cap {
                p.horizon.threshold_ms = policy.min_idle_ms;
            }
        }
        let later = now.saturating_add(policy.interval_ms as u64);
        let pass_skipped = self.pass.as_ref().is_some_and(|p| p.oom_skipped);
        match &out.stop {
            Some(Stop::Deadline) => {
                self.problem = self.problem_after(out, pass_skipped);
                self.due_ms = now;
            }
            Some(s) => {
                self.problem = Some(s.clone());
                self.cursor = None;
                self.pass_us = 0;
                self.abort_pass();
                self.due_ms = later;
            }
            None => {
                self.problem = self.problem_after(out, pass_skipped);
                if out.pass_done {
                    self.counters.add(Stat::Passes, 1);
                    self.counters.last_pass_ms = wall;
                    self.counters.last_pass_us = self.pass_us;
                    self.end_pass(policy, wall);
                    self.pass_us = 0;
                    self.due_ms = later;
                } else {
                    self.due_ms = now;
                }
            }
        }
    }
}

/// Counts a sweep step (the timer's or `RECLAIM.SWEEP`'s): `INFO reclaim_steps` and what it did
/// ([`count_outcome`]).
fn count_step(c: &mut Counters, out: &Outcome) {
    metrics::STEPS.add(1);
    count_outcome(c, out);
}

/// Counts what a step or a read did (moves, dead-letters, purges, skipped moves, errors) in `c`
/// and the server-wide totals: the one place where an outcome becomes counters.
fn count_outcome(c: &mut Counters, out: &Outcome) {
    c.add(Stat::Claimed, out.claimed);
    c.dead_lettered_at(out.dead_lettered, crate::clock::epoch_ms());
    c.add(Stat::Deleted, out.deleted);
    c.add(Stat::OomSkips, out.oom_skips);
    c.add(Stat::DlqTrimmed, out.dlq_trimmed);
    c.add(Stat::Tombstones, out.tombstones);
    let failed = matches!(out.problem, Some(Stop::WrongTypeDlq))
        || matches!(out.stop, Some(Stop::Error(_) | Stop::WrongTypeStream));
    if failed {
        c.add(Stat::Errors, 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oom_stays_while_moves_skipped_for_memory_wait() {
        let p = Policy {
            max_deliveries: 3,
            dlq: Some(b"d".to_vec()),
            ..Policy::default()
        };
        let skipped = Outcome {
            problem: Some(Stop::Oom),
            oom_skips: 16,
            examined: 16,
            stop: Some(Stop::Deadline),
            ..Outcome::default()
        };
        let nothing_more = Outcome {
            pass_done: true,
            ..Outcome::default()
        };
        let fresh = Outcome {
            examined: 5,
            ..Outcome::default()
        };
        let moved = Outcome {
            examined: 2,
            dead_lettered: 2,
            ..Outcome::default()
        };
        let mut rt = Runtime::new(0);
        rt.start_pass(&p, 0);
        rt.apply(&skipped, 1, &p, 0, 0);
        assert_eq!(rt.state(), "oom");
        // The last step of the pass finds nothing more: the skipped moves still wait.
        rt.apply(&nothing_more, 1, &p, 0, 0);
        assert!(rt.pass.is_none());
        assert_eq!(rt.state(), "oom");
        // The next pass: steps with nothing to move keep it; one that dead-letters clears it.
        rt.start_pass(&p, 0);
        rt.apply(&fresh, 1, &p, 0, 0);
        assert_eq!(rt.state(), "oom");
        rt.apply(&moved, 1, &p, 0, 0);
        assert_eq!(rt.state(), "active");
        // Skipped again; a whole pass that skipped none (and moved none) clears it at its end.
        rt.apply(&skipped, 1, &p, 0, 0);
        rt.apply(&nothing_more, 1, &p, 0, 0);
        assert_eq!(rt.state(), "oom");
        rt.start_pass(&p, 0);
        rt.apply(&nothing_more, 1, &p, 0, 0);
        assert_eq!(rt.state(), "active");
        // RECLAIM.SWEEP's skipped moves say so too, and do not hide another problem.
        rt.note_oom_skips(&Outcome {
            oom_skips: 3,
            ..Outcome::default()
        });
        assert_eq!(rt.state(), "oom");
        rt.wait_for(Stop::NoGroup);
        rt.note_oom_skips(&Outcome {
            oom_skips: 3,
            ..Outcome::default()
        });
        assert_eq!(rt.problem(), Some(&Stop::NoGroup));
    }

    /// A policy with `MAX-DELIVERIES 3` and a DLQ, `MIN-IDLE` 60 s, `INTERVAL` 1 s, `COUNT` 100.
    fn counted() -> Policy {
        Policy {
            min_idle_ms: 60_000,
            max_deliveries: 3,
            dlq: Some(b"d".to_vec()),
            interval_ms: 1_000,
            count: 100,
            ..Policy::default()
        }
    }

    /// One timer step of `p` at monotonic `now` and wall-clock `wall` that reports `out`, as
    /// the scheduler runs it (`plan_step`, `narrow_outcome`, `finish_step`); its plan.
    fn step(rt: &mut Runtime, p: &Policy, mut out: Outcome, now: u64, wall: i64) -> StepPlan {
        let plan = rt
            .plan_step(p, None, true, now, wall, u64::MAX)
            .expect("runs");
        let checked = Runtime::narrow_outcome(&plan, &mut out);
        rt.finish_step(checked, &out, Duration::from_micros(10), p, now, wall);
        plan
    }

    #[test]
    fn a_pass_goes_on_from_its_cursor_and_teaches_the_next_one() {
        let p = counted();
        let mut rt = Runtime::new(0);
        // Counts unchecked: a full pass from the head, COUNT entries at most.
        let half = Outcome {
            examined: 100,
            cursor: Some(b"5-0".to_vec()),
            ..Outcome::default()
        };
        let plan = step(&mut rt, &p, half, 10, 1_000_000);
        assert_eq!(plan.kind, PassKind::Full);
        assert_eq!(
            (plan.cursor, plan.consumer, plan.threshold_ms),
            (None, None, 0)
        );
        assert_eq!(plan.max, 100);
        // Stopped half-way: the same pass goes on from its cursor at once.
        assert_eq!(rt.due_ms(), 10);
        let done = Outcome {
            examined: 3,
            pass_done: true,
            ..Outcome::default()
        };
        let plan = step(&mut rt, &p, done.clone(), 20, 1_000_010);
        assert_eq!(plan.kind, PassKind::Full);
        assert_eq!(plan.cursor.as_deref(), Some(&b"5-0"[..]));
        // The pass ended: counted, due again after INTERVAL, the next one from the head.
        assert_eq!(rt.due_ms(), 1_020);
        assert_eq!(rt.cursor(), None);
        assert_eq!(rt.counters().get(Stat::Passes), 1);
        assert_eq!(rt.counters().get(Stat::FullPasses), 1);
        assert_eq!(rt.health().unwrap().tally_kind, Some(PassKind::Full));
        // It saw no fresh entry: nothing is stale before its start + MIN-IDLE.
        assert_eq!(rt.stale_not_before_ms(), 1_060_000);
        // Counts are checked now: before that the next pass only trims...
        let plan = step(&mut rt, &p, done.clone(), 1_020, 1_001_000);
        assert_eq!(plan.kind, PassKind::TrimOnly);
        assert_eq!(rt.counters().get(Stat::ScansSkipped), 1);
        assert_eq!(rt.counters().get(Stat::Passes), 2);
        // ... and from then on it scans, looking ahead of MIN-IDLE.
        let plan = step(&mut rt, &p, done, 2_020, 1_060_000);
        assert_eq!(plan.kind, PassKind::Scan);
        assert_eq!(plan.threshold_ms, 60_000 - planner::first_lookahead(&p));
        assert_eq!(rt.counters().get(Stat::FullPasses), 1);
    }

    #[test]
    fn a_touched_consumer_is_checked_first_then_the_pass_proper_runs() {
        let p = counted();
        let mut rt = Runtime::new(0);
        let done = Outcome {
            pass_done: true,
            ..Outcome::default()
        };
        step(&mut rt, &p, done.clone(), 0, 1_000_000);
        // A client's XCLAIM raised w1's counts (it ran: w1 was seen after it).
        rt.note_touch(b"w1", false, 5);
        rt.confirm(&[(b"w1".to_vec(), 5)].into());
        let wall = 1_060_000;
        let plan = step(&mut rt, &p, done.clone(), 1_000, wall);
        assert_eq!(plan.kind, PassKind::Scan);
        assert_eq!(plan.consumer.as_deref(), Some(&b"w1"[..]));
        // The end of w1's PEL is not the end of the pass.
        assert_eq!(rt.counters().get(Stat::ConsumerChecks), 1);
        assert_eq!(rt.counters().get(Stat::Passes), 1);
        assert_eq!(rt.due_ms(), 1_000);
        let plan = step(&mut rt, &p, done, 1_000, wall);
        assert_eq!((plan.kind, plan.consumer.clone()), (PassKind::Scan, None));
        assert_eq!(rt.counters().get(Stat::Passes), 2);
        // What the check narrowed: it teaches nothing about the PEL.
        let mut out = Outcome {
            pass_done: true,
            ..Outcome::default()
        };
        let check = StepPlan {
            consumer: Some(b"w1".to_vec()),
            ..plan.clone()
        };
        assert!(Runtime::narrow_outcome(&check, &mut out));
        assert!(!out.pass_done);
        let mut out = Outcome {
            pass_done: true,
            ..Outcome::default()
        };
        assert!(!Runtime::narrow_outcome(&plan, &mut out));
        assert!(out.pass_done);
    }

    #[test]
    fn a_halted_policy_plans_nothing_and_is_looked_at_again_within_a_second() {
        let mut p = counted();
        p.interval_ms = 60_000;
        let mut rt = Runtime::new(0);
        assert!(rt.plan_step(&p, None, false, 100, 0, u64::MAX).is_none());
        assert_eq!(rt.due_ms(), 100 + HALTED_RECHECK_MS);
        assert_eq!(rt.status(false, false), "disabled");
        p.state = State::Paused;
        assert!(rt.plan_step(&p, None, true, 200, 0, u64::MAX).is_none());
        assert_eq!(rt.state(), "paused");
        p.state = State::Active;
        let fault = Some(ReclaimError::Static("ERR invalid"));
        assert!(rt.plan_step(&p, fault, true, 300, 0, u64::MAX).is_none());
        assert_eq!((rt.state(), rt.due_ms()), ("invalid", 1_300));
        // No pass started meanwhile: the first one is still a full pass.
        let plan = rt.plan_step(&p, None, true, 400, 0, u64::MAX).unwrap();
        assert_eq!(plan.kind, PassKind::Full);
    }

    #[test]
    fn a_wait_is_announced_and_logged_once_across_steps() {
        let p = counted();
        let mut rt = Runtime::new(0);
        let no_group = Outcome {
            stop: Some(Stop::NoGroup),
            ..Outcome::default()
        };
        let done = Outcome {
            pass_done: true,
            ..Outcome::default()
        };
        step(&mut rt, &p, no_group.clone(), 0, 0);
        assert_eq!(
            rt.after_step_notes(),
            (Some("waiting"), Some(Stop::NoGroup))
        );
        assert_eq!(rt.due_ms(), 1_000, "looked at again after INTERVAL");
        step(&mut rt, &p, no_group.clone(), 1_000, 1_000);
        assert_eq!(rt.after_step_notes(), (None, None), "once per wait");
        // It runs: announced active; the next wait is news again.
        step(&mut rt, &p, done, 2_000, 2_000);
        assert_eq!(rt.after_step_notes(), (Some("active"), None));
        step(&mut rt, &p, no_group, 3_000, 3_000);
        assert_eq!(
            rt.after_step_notes(),
            (Some("waiting"), Some(Stop::NoGroup))
        );
        // The aborted pass trusted nothing: the next one is a full pass from the head.
        let plan = rt
            .plan_step(&p, None, true, 4_000, 4_000, u64::MAX)
            .unwrap();
        assert_eq!((plan.kind, plan.cursor), (PassKind::Full, None));
    }
}
