//! One policy's run-time state, in one place: its schedule, cursor, counters, the pass in
//! progress and what passes learnt, and what client commands may have undone since (touches).
//! Also the pass state machine ([`Runtime::start_pass`], [`Runtime::apply`]).
//!
//! Pure: no Redis calls. `state::registry` owns every `Runtime` (one per policy it knows) and
//! frees it with its policy; every collection here is bounded (see [`MAX_TRACKED`],
//! [`MAX_TRACKED_BYTES`]), whatever the number of consumers that ever touched the stream.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::access::ReadWrites;
use crate::breaker::Breaker;
use crate::error::ReclaimError;
use crate::metrics::{self, Counters, Stat};
use crate::outcome::{Outcome, Stop, Summary};
use std::time::Duration;

use crate::planner::{self, Horizon, PassKind, Tally};
use crate::policy::{Policy, State, Storm};

/// Most consumers one policy tracks in each of its sets ([`Unchecked::Consumers`], the recent
/// touches): past it the policy falls back to checking everyone (a full pass, counted in
/// `INFO reclaim_tracking_overflows`).
pub const MAX_TRACKED: usize = 64;

/// Most bytes of consumer names one policy tracks in each of its sets; past it, as for
/// [`MAX_TRACKED`].
pub const MAX_TRACKED_BYTES: usize = 16 * 1024;

/// How long (ms) a touch is made again at every `EXEC` (a command queued in `MULTI` is seen when
/// it is queued, and runs at `EXEC`).
pub const EXEC_REMARK_MS: u64 = 10_000;

/// Whose delivery counts may have risen since a pass last checked them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Unchecked {
    /// Anyone's: the next pass pages the whole PEL ([`PassKind::Full`]).
    #[default]
    All,
    /// These consumers' (none: every count is known to be within the limit).
    Consumers(Names),
}

/// A bounded set of consumer names: at most [`MAX_TRACKED`] names and [`MAX_TRACKED_BYTES`]
/// bytes of them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Names {
    set: BTreeSet<Vec<u8>>,
    bytes: usize,
}

impl Names {
    /// Adds `name`; `false` when that would pass a bound (the set is then unchanged).
    fn insert(&mut self, name: &[u8]) -> bool {
        if self.set.contains(name) {
            return true;
        }
        if self.set.len() >= MAX_TRACKED || self.bytes + name.len() > MAX_TRACKED_BYTES {
            return false;
        }
        self.bytes += name.len();
        self.set.insert(name.to_vec());
        true
    }

    /// Keeps the names `keep` accepts.
    fn retain(&mut self, mut keep: impl FnMut(&[u8]) -> bool) {
        let mut bytes = 0;
        self.set.retain(|n| {
            let k = keep(n);
            if k {
                bytes += n.len();
            }
            k
        });
        self.bytes = bytes;
    }

    /// How many names.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// The names, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Vec<u8>> {
        self.set.iter()
    }
}

/// A touch the command filter saw ([`Recent`]): when (server clock, ms), whether the command
/// sets idle times, and the consumer's last sighting already applied for it (0: none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Touch {
    /// Server clock (ms) when the filter saw the command: the command ran only if its consumer
    /// was seen at or after it (`XINFO CONSUMERS`' `idle`).
    pub at: u64,
    /// `XCLAIM ... IDLE/TIME`.
    pub sets_idle: bool,
    /// The sighting (server clock, ms) that last confirmed it (0: none yet).
    pub applied: u64,
}

/// The touches the command filter saw in the last [`EXEC_REMARK_MS`], by consumer, waiting to be
/// confirmed ([`Runtime::confirm`]). The filter runs before the server checks a command
/// (authentication, ACL, arity, out of memory, a `MULTI` that is later discarded): a touch
/// changes nothing until its consumer is seen at or after it, which only a command that ran
/// does (or the consumer's own later work). A touch stays that long so that a command queued in
/// `MULTI` (seen when queued) counts when `EXEC` runs it. When a bound is passed, one marker
/// stands for every consumer instead, until it expires.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recent {
    by_consumer: BTreeMap<Vec<u8>, Touch>,
    bytes: usize,
    /// Every consumer was touched (a bound was passed).
    everyone: Option<Touch>,
    /// A touch was noted, or `EXEC` ran, since the last confirmation.
    recheck: bool,
}

impl Recent {
    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.by_consumer.is_empty() && self.everyone.is_none()
    }

    /// How many consumers' touches were confirmed (and are remembered).
    pub fn confirmed(&self) -> usize {
        self.by_consumer.values().filter(|t| t.applied > 0).count()
    }

    /// Notes a touch of `consumer` seen at `at` (server clock, ms).
    fn note(&mut self, consumer: &[u8], sets_idle: bool, at: u64) {
        self.recheck = true;
        let merge = |t: &mut Touch| {
            t.at = t.at.max(at);
            t.sets_idle |= sets_idle;
        };
        if let Some(t) = self.everyone.as_mut() {
            merge(t);
            return;
        }
        if let Some(t) = self.by_consumer.get_mut(consumer) {
            merge(t);
            return;
        }
        let fresh = Touch {
            at,
            sets_idle,
            applied: 0,
        };
        if self.by_consumer.len() >= MAX_TRACKED || self.bytes + consumer.len() > MAX_TRACKED_BYTES
        {
            let mut all = fresh;
            for t in self.by_consumer.values() {
                all.sets_idle |= t.sets_idle;
                all.at = all.at.min(t.at);
            }
            self.by_consumer.clear();
            self.bytes = 0;
            self.everyone = Some(all);
            return;
        }
        self.bytes += consumer.len();
        self.by_consumer.insert(consumer.to_vec(), fresh);
    }

    /// Forgets the touches older than [`EXEC_REMARK_MS`] at `now` (server clock, ms).
    fn prune(&mut self, now: u64) {
        let fresh = |t: &Touch| now.saturating_sub(t.at) < EXEC_REMARK_MS;
        if self.everyone.as_ref().is_some_and(|t| !fresh(t)) {
            self.everyone = None;
        }
        let mut bytes = 0;
        self.by_consumer.retain(|c, t| {
            let k = fresh(t);
            if k {
                bytes += c.len();
            }
            k
        });
        self.bytes = bytes;
    }
}

/// The pass in progress of a policy.
#[derive(Debug, Clone)]
pub struct Pass {
    /// What the pass does, decided when it started.
    pub kind: PassKind,
    /// Consumers whose own PELs are paged first (delivery counts check), in order; the one being
    /// paged is the first.
    pub check: Vec<Vec<u8>>,
    /// [`Runtime::idle_mark`] when the pass started.
    pub idle_mark: u64,
    /// How far ahead of `MIN-IDLE` (ms) its scans look: their `IDLE` threshold is `MIN-IDLE`
    /// minus this.
    pub lookahead_ms: i64,
    /// What the pass has seen so far, for the next pass's schedule.
    pub horizon: Horizon,
    /// A stale or over-delivered entry was left pending (DLQ of the wrong type, out of memory).
    pub left_some: bool,
    /// A dead-letter move (or tombstone) was skipped for memory in this pass: it waits for the
    /// next one ([`Runtime::problem_after`]).
    pub oom_skipped: bool,
    /// The entries the pass read so far (consumer checks left out), for [`Health`].
    pub tally: Tally,
}

/// Most PEL sizes a policy remembers, one per complete pass ([`Health::sizes`]).
pub const PEL_HISTORY: usize = 16;

/// What the passes saw, for `RECLAIM.HEALTH` and the per-policy lines of `INFO reclaim`: only
/// figures a pass already had in hand, each with the time it was taken. Bounded: a fixed number
/// of figures ([`PEL_HISTORY`] sizes, at most [`planner::MAX_BUCKETS`] + 1 buckets), whatever the
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

/// When consumers last talked to the module (`RECLAIM.READGROUP`, `EXTEND`, `NACK`, `TERM`),
/// for `LIVENESS`: Redis 7.0's `XINFO CONSUMERS` `idle` moves only when a read returns entries,
/// so a worker polling an empty stream would look gone. Bounded like the other sets
/// ([`MAX_TRACKED`] names, [`MAX_TRACKED_BYTES`] bytes; past it the least recent one is
/// forgotten), and entries older than `LIVENESS` are pruned on the timer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Seen {
    by_consumer: BTreeMap<Vec<u8>, u64>,
    bytes: usize,
    /// How long (ms) a sighting counts (the policy's `LIVENESS` when it was noted).
    keep_ms: u64,
}

impl Seen {
    /// Notes that `consumer` talked to the module at monotonic ms `now`.
    pub fn note(&mut self, consumer: &[u8], now: u64, keep_ms: u64) {
        self.keep_ms = keep_ms;
        if let Some(at) = self.by_consumer.get_mut(consumer) {
            *at = now;
            return;
        }
        while !self.by_consumer.is_empty()
            && (self.by_consumer.len() >= MAX_TRACKED
                || self.bytes + consumer.len() > MAX_TRACKED_BYTES)
        {
            let oldest = self
                .by_consumer
                .iter()
                .min_by_key(|(_, at)| **at)
                .map(|(c, _)| c.clone());
            if let Some(c) = oldest {
                self.bytes -= c.len();
                self.by_consumer.remove(&c);
            }
        }
        if consumer.len() <= MAX_TRACKED_BYTES {
            self.bytes += consumer.len();
            self.by_consumer.insert(consumer.to_vec(), now);
        }
    }

    /// Ms since `consumer` last talked to the module, if it did lately.
    pub fn age(&self, consumer: &[u8], now: u64) -> Option<u64> {
        self.by_consumer
            .get(consumer)
            .map(|at| now.saturating_sub(*at))
    }

    /// Forgets sightings older than they count for; whether any is left.
    pub fn prune(&mut self, now: u64) -> bool {
        let keep = self.keep_ms;
        let mut bytes = 0;
        self.by_consumer.retain(|c, at| {
            let k = now.saturating_sub(*at) < keep;
            if k {
                bytes += c.len();
            }
            k
        });
        self.bytes = bytes;
        !self.by_consumer.is_empty()
    }

    /// How many consumers.
    pub fn len(&self) -> usize {
        self.by_consumer.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_consumer.is_empty()
    }

    /// The consumers and when (monotonic ms) each was last seen.
    pub fn by_consumer(&self) -> impl Iterator<Item = (&Vec<u8>, &u64)> {
        self.by_consumer.iter()
    }
}

/// `RECLAIM.READGROUP`'s rounds over the PEL looking for stale entries of other consumers, pages
/// read from a cursor (as `XAUTOCLAIM`'s cursor goes): where the next page starts, and what the
/// round learnt so far about when entries it passed turn due.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadScan {
    /// Last ID examined (`None`: the next page starts at the head of the PEL). Every entry up to
    /// it was either handed over or seen not due yet.
    pub cursor: Option<Vec<u8>>,
    /// Wall-clock ms when this round started (0: no round under way).
    pub round_start_ms: i64,
    /// The earliest wall-clock ms at which an entry this round saw not due yet turns due
    /// (`None`: none seen).
    pub min_due_ms: Option<i64>,
}

impl ReadScan {
    /// Notes pages read from the cursor at wall-clock `now`: `last` the last ID examined (`None`:
    /// the pages reached the end of the PEL, ending the round), `due` the earliest wall-clock ms
    /// at which an entry they saw not due yet turns due. At the end of a round, returns when the
    /// next due entry can appear at the earliest: what the round saw, and at most `min_idle` after
    /// the round started (entries it handed over, or delivered since, need that much idle time).
    pub fn page(
        &mut self,
        last: Option<Vec<u8>>,
        due: Option<i64>,
        now: i64,
        min_idle: i64,
    ) -> Option<i64> {
        if self.round_start_ms == 0 {
            self.round_start_ms = now;
        }
        self.min_due_ms = match (self.min_due_ms, due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.cursor = last;
        if self.cursor.is_some() {
            return None;
        }
        let quiet = self
            .round_start_ms
            .saturating_add(min_idle.max(0))
            .min(self.min_due_ms.unwrap_or(i64::MAX));
        *self = ReadScan::default();
        Some(quiet)
    }
}

/// What a read needs of a policy's value when nothing can be due ([`Runtime::quick_read`]): kept
/// from the last read that read the value, forgotten whenever the value may have changed
/// (`RECLAIM.POLICY SET`, a policy key arriving, a new PEL, a promotion).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadFacts {
    /// The policy's `LIVENESS` (a sighting is noted above 0).
    pub liveness_ms: i64,
    /// What a read may write besides `XREADGROUP` and `XCLAIM` (its ACL checks).
    pub writes: ReadWrites,
}

/// What `RECLAIM.READGROUP` needs to know of a policy before it reads anything
/// ([`Runtime::begin_read`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadView {
    /// Wall-clock ms before which no pending entry of another consumer can be due (0: unknown).
    pub horizon_ms: i64,
    /// Wall-clock ms before which no parked entry can be due (0: unknown).
    pub parked_due_ms: i64,
    /// Where the next page of the PEL starts (`None`: the head).
    pub cursor: Option<Vec<u8>>,
    /// Whether the claimant's inbox may hold entries (`false`: a read found it empty, and
    /// nothing the module knows of has filled it since).
    pub inbox: bool,
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

    /// The PEL at the end of the last complete pass (all zero before one).
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// What the passes saw (`None` until a pass ended).
    pub fn health(&self) -> Option<&Health> {
        self.health.as_deref()
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

    /// What the last step found wrong (`None`: nothing).
    pub fn problem(&self) -> Option<&Stop> {
        self.problem.as_ref()
    }

    /// Whether it remembers touches made again at `EXEC` ([`Runtime::remark`]).
    pub fn has_recent_touches(&self) -> bool {
        !self.recent.is_empty()
    }

    /// Whether it remembers touches or sightings, which expire ([`Runtime::prune`]).
    pub fn remembers(&self) -> bool {
        !self.recent.is_empty() || !self.seen.is_empty()
    }

    /// The consumers whose delivery counts the next pass checks first (none while anyone's are
    /// unchecked).
    pub fn unchecked_consumers(&self) -> impl Iterator<Item = &Vec<u8>> {
        let set = match &self.unchecked {
            Unchecked::Consumers(set) => Some(set.iter()),
            Unchecked::All => None,
        };
        set.into_iter().flatten()
    }

    /// Consumer `consumer` talked to the module at monotonic ms `now` (`LIVENESS`, whose `keep_ms`
    /// is how long it counts).
    pub fn saw(&mut self, consumer: &[u8], now: u64, keep_ms: u64) {
        self.seen.note(consumer, now, keep_ms);
    }

    /// How long ago (ms, at monotonic `now`) each consumer last talked to the module.
    pub fn seen_ages(&self, now: u64) -> Vec<(Vec<u8>, u64)> {
        self.seen
            .by_consumer()
            .map(|(c, at)| (c.clone(), now.saturating_sub(*at)))
            .collect()
    }

    /// When, by what the last pass and `RECLAIM.READGROUP`'s last look learnt, a pending entry of
    /// another consumer can be stale at the earliest (wall-clock ms; 0: unknown).
    pub fn read_horizon(&self) -> i64 {
        self.stale_not_before_ms.max(self.read_not_before_ms)
    }

    /// Where `RECLAIM.READGROUP`'s next page of the PEL starts (`None`: the head).
    pub fn read_cursor(&self) -> Option<Vec<u8>> {
        self.read_scan.cursor.clone()
    }

    /// Whether a reader may find an entry due under this policy at wall-clock `now`: it is not
    /// paused or held by its `STORM` breaker, and its inbox may hold entries or what passes and
    /// reads learnt says an entry of another consumer may be due.
    pub fn readers_may_find(&self, now: i64) -> bool {
        self.held == State::Active
            && (!self.inbox_empty || self.read_horizon() <= now || self.parked_due_ms <= now)
    }

    /// Whether the timer's visit at wall-clock `wall` looks at the stream's parked entries
    /// first: one may be due, or a pass is about to start (each pass looks, so what this server
    /// did not write itself, before a promotion, a load or a `SWAPDB`, is found within one
    /// `INTERVAL`).
    pub fn parked_check_due(&self, wall: i64) -> bool {
        self.pass.is_none() || wall >= self.parked_due_ms
    }

    /// `RECLAIM.NACK` parked an entry due at wall-clock `due_ms`.
    pub fn note_parked(&mut self, due_ms: i64) {
        self.parked_due_ms = self.parked_due_ms.min(due_ms);
    }

    /// A look at the parked entries released `released` of them (now stale entries of
    /// `<claimant>:delayed`: an older idle time than passes saw) and found the next one due at
    /// wall-clock `next` (`i64::MAX`: none).
    /// `wrong_type`: the delay key holds another type; returns whether that is new (logged
    /// once).
    pub fn parked_released(&mut self, released: usize, next: i64, wrong_type: bool) -> bool {
        self.parked_due_ms = next;
        if released > 0 {
            self.idle_set_older();
        }
        let new = wrong_type && !self.parked_wrong_type;
        self.parked_wrong_type = wrong_type;
        new
    }

    /// A read by `consumer` begins at monotonic ms `now`: notes the sighting (`LIVENESS`
    /// policies: `liveness_ms` above 0) and says what the reader needs to know first.
    pub fn begin_read(&mut self, consumer: &[u8], facts: ReadFacts, now: u64) -> ReadView {
        if facts.liveness_ms > 0 {
            self.saw(consumer, now, facts.liveness_ms as u64);
        }
        if self.read_facts.as_deref() != Some(&facts) {
            self.read_facts = Some(Box::new(facts));
        }
        ReadView {
            horizon_ms: self.read_horizon(),
            parked_due_ms: self.parked_due_ms,
            cursor: self.read_scan.cursor.clone(),
            inbox: !self.inbox_empty,
        }
    }

    /// A read at wall-clock `wall` that can be answered without the policy's value: a read
    /// before learnt what it needs of it, the inbox is known empty and no entry of another
    /// consumer can be due before the horizon. Returns what that read kept of the value (what a
    /// reader must be allowed to write, `LIVENESS`); `None`: read the policy and look (also while
    /// a client's touch waits for [`Runtime::confirm`]: it may have made entries due).
    pub fn quick_read(&self, wall: i64) -> Option<&ReadFacts> {
        if self.inbox_empty
            && wall < self.read_horizon()
            && wall < self.parked_due_ms
            && !self.wants_confirmation()
        {
            return self.read_facts.as_deref();
        }
        None
    }

    /// The policy's value may have changed under the same name (a policy key arriving by
    /// `RENAME`, `RESTORE`, `COPY`, `MOVE`): reads read it again.
    pub fn forget_read_facts(&mut self) {
        self.read_facts = None;
    }

    /// `RECLAIM.READGROUP` read pages of the PEL from its cursor ([`ReadScan::page`]): a round
    /// over the whole PEL says when to look again at the earliest.
    pub fn note_read_page(
        &mut self,
        last: Option<Vec<u8>>,
        due: Option<i64>,
        now: i64,
        min_idle: i64,
    ) {
        if let Some(quiet) = self.read_scan.page(last, due, now, min_idle) {
            self.read_not_before_ms = quiet;
        }
    }

    /// A read left entries it found due where they were (a dead-letter that could not be made):
    /// what reads learnt no longer holds.
    pub fn read_left_some(&mut self) {
        self.read_not_before_ms = 0;
        self.read_scan = ReadScan::default();
        self.inbox_empty = false;
    }

    /// A read found the claimant's inbox empty (it handled every entry there).
    pub fn note_inbox_empty(&mut self) {
        self.inbox_empty = true;
    }

    /// Entries may have been moved into the claimant's inbox.
    pub fn inbox_filled(&mut self) {
        self.inbox_empty = false;
    }

    /// Notes the state the policy is stored in ([`Runtime::state`] shows `paused` and `storm`).
    pub fn hold(&mut self, state: State) {
        self.held = state;
    }

    /// Notes why the stored policy cannot run where it is (`None`: it can).
    pub fn set_fault(&mut self, fault: Option<ReclaimError>) {
        self.fault = fault;
    }

    /// Why the stored policy cannot run where it is, as last seen (`None`: it can).
    pub fn fault(&self) -> Option<&ReclaimError> {
        self.fault.as_ref()
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

    /// Whether the last step stopped at a problem (no stream, no group, an error...).
    pub fn has_problem(&self) -> bool {
        self.problem.is_some()
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

    /// After a step: the state to announce (`reclaim-<state>`, [`Runtime::announce`]) and what
    /// the policy now waits for, if it is news ([`Runtime::waiting_notice`]).
    pub fn after_step_notes(&mut self) -> (Option<&'static str>, Option<Stop>) {
        (self.announce(), self.waiting_notice())
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

    /// The command filter saw a command that may raise the delivery counts of `consumer`'s
    /// entries (and with `sets_idle` set older idle times), at `at` (server clock, ms). Nothing
    /// changes until [`Runtime::confirm`] finds that it ran.
    pub fn note_touch(&mut self, consumer: &[u8], sets_idle: bool, at: u64) {
        self.recent.note(consumer, sets_idle, at);
    }

    /// Called at every `EXEC` (at `now`, server clock, ms): a command queued in `MULTI` was seen
    /// when it was queued and runs now, so the touches of the last [`EXEC_REMARK_MS`] are
    /// confirmed again.
    pub fn remark(&mut self, now: u64) {
        self.recent.prune(now);
        if !self.recent.is_empty() {
            self.recent.recheck = true;
        }
    }

    /// Whether touches wait for [`Runtime::confirm`].
    pub fn wants_confirmation(&self) -> bool {
        self.recent.recheck && !self.recent.is_empty()
    }

    /// Confirms the touches waiting: `seen` gives when (server clock, ms) each consumer was last
    /// seen (`XINFO CONSUMERS`). A touch whose consumer was seen at or after it, later than what
    /// confirmed it before, is made ([`Runtime::touch`]); the others change nothing.
    pub fn confirm(&mut self, seen: &std::collections::HashMap<Vec<u8>, u64>) {
        self.recent.recheck = false;
        let latest = seen.values().copied().max().unwrap_or(0);
        let mut make: Vec<(Vec<u8>, bool)> = Vec::new();
        if let Some(t) = self.recent.everyone.as_mut() {
            if latest >= t.at && latest > t.applied {
                // Too many consumers were touched to name each: everyone's counts are checked.
                t.applied = latest;
                metrics::TRACKING_OVERFLOWS.add(1);
                self.unchecked = Unchecked::All;
                if t.sets_idle {
                    self.idle_mark = self.idle_mark.wrapping_add(1);
                    self.forget_horizon();
                }
            }
        }
        for (c, t) in self.recent.by_consumer.iter_mut() {
            match seen.get(c) {
                Some(&s) if s >= t.at && s > t.applied => {
                    t.applied = s;
                    make.push((c.clone(), t.sets_idle));
                }
                _ => {}
            }
        }
        for (c, idle) in make {
            self.touch(&c, idle);
        }
    }

    /// A client command raised the delivery counts of `consumer`'s entries, and with `sets_idle`
    /// set older idle times: the next pass checks that consumer's entries first (with
    /// `MAX-DELIVERIES`), and with `sets_idle` scans without skipping.
    fn touch(&mut self, consumer: &[u8], sets_idle: bool) {
        // The touched consumer may be the claimant (a client's XCLAIM into the inbox).
        self.inbox_empty = false;
        if let Unchecked::Consumers(set) = &mut self.unchecked {
            if !set.insert(consumer) {
                self.unchecked = Unchecked::All;
                metrics::TRACKING_OVERFLOWS.add(1);
            }
        }
        if sets_idle {
            self.idle_mark = self.idle_mark.wrapping_add(1);
            self.forget_horizon();
        }
    }

    /// Forgets touches older than [`EXEC_REMARK_MS`] at `server_now` (server clock, ms) and
    /// sightings older than `LIVENESS` at `now` (monotonic ms) (called on a timer); whether any is
    /// left.
    pub fn prune(&mut self, now: u64, server_now: u64) -> bool {
        self.recent.prune(server_now);
        let seen = self.seen.prune(now);
        !self.recent.is_empty() || seen
    }

    /// Forgets tracked consumers for which `has_pending` is false: with no pending entry, there
    /// is no count to check (called when consumers are deleted).
    pub fn forget_idle_consumers(&mut self, mut has_pending: impl FnMut(&[u8]) -> bool) {
        if let Unchecked::Consumers(set) = &mut self.unchecked {
            set.retain(&mut has_pending);
        }
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
    fn note_tally(&mut self, tally: Tally, wall: i64, kind: PassKind) {
        let h = self.health.get_or_insert_with(Box::default);
        h.tally = tally;
        h.tally_ms = wall;
        h.tally_kind = Some(kind);
    }

    /// The policy's state in one word, as `INFO reclaim` shows it and keyspace events announce
    /// it: `invalid` while the stored policy cannot run where it is ([`Runtime::fault`]),
    /// `paused` or `storm` while the policy is held so ([`Runtime::held`]), else the last
    /// step's ([`Stop::state`]): `active`, `waiting`, `oom`, `storm` or `error`.
    pub fn state(&self) -> &'static str {
        if self.fault.is_some() {
            return "invalid";
        }
        match self.held {
            State::Active => self.problem.as_ref().map_or("active", Stop::state),
            held => held.name(),
        }
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

    /// Consumers this policy tracks now (unchecked ones and recent touches).
    pub fn tracked_consumers(&self) -> usize {
        let unchecked = match &self.unchecked {
            Unchecked::All => 0,
            Unchecked::Consumers(s) => s.len(),
        };
        unchecked + self.recent.confirmed() + self.seen.len()
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

    /// The stream, its group or its consumers are gone (DEL, RENAME, XGROUP DESTROY): nothing
    /// tracked about them is worth keeping.
    pub fn forget_tracking(&mut self) {
        self.unchecked = Unchecked::All;
        self.recent = Recent::default();
        self.seen = Seen::default();
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

    /// Confirms every touch: each consumer seen at `at`.
    fn seen_all(rt: &Runtime, at: u64) -> std::collections::HashMap<Vec<u8>, u64> {
        let mut m: std::collections::HashMap<Vec<u8>, u64> = rt
            .recent
            .by_consumer
            .keys()
            .map(|c| (c.clone(), at))
            .collect();
        m.insert(b"someone".to_vec(), at);
        m
    }

    #[test]
    fn tracking_is_bounded_and_falls_back_to_everyone() {
        let mut rt = Runtime::new(0);
        rt.unchecked = Unchecked::Consumers(Names::default());
        for i in 0..MAX_TRACKED {
            rt.note_touch(format!("c{i}").as_bytes(), false, 1);
        }
        // Nothing counts before it is confirmed.
        assert_eq!(rt.tracked_consumers(), 0);
        rt.confirm(&seen_all(&rt, 1));
        assert_eq!(rt.tracked_consumers(), 2 * MAX_TRACKED);
        rt.note_touch(b"one-more", false, 1);
        assert!(rt.recent.everyone.is_some());
        rt.confirm(&seen_all(&rt, 2));
        assert_eq!(rt.unchecked, Unchecked::All);
        assert_eq!(rt.tracked_consumers(), 0);
        // Long names pass the byte bound first.
        let mut rt = Runtime::new(0);
        rt.unchecked = Unchecked::Consumers(Names::default());
        rt.note_touch(&vec![b'x'; MAX_TRACKED_BYTES], false, 1);
        rt.confirm(&seen_all(&rt, 1));
        assert_eq!(rt.tracked_consumers(), 2);
        rt.note_touch(b"y", false, 1);
        rt.confirm(&seen_all(&rt, 1));
        assert_eq!(rt.unchecked, Unchecked::All);
    }

    #[test]
    fn a_touch_counts_only_once_its_command_ran() {
        let mut rt = Runtime::new(0);
        rt.unchecked = Unchecked::Consumers(Names::default());
        rt.stale_not_before_ms = 77;
        // Refused: the consumer was last seen before the command (or never).
        rt.note_touch(b"x", true, 1_000);
        rt.note_touch(b"nobody", true, 1_000);
        assert!(rt.wants_confirmation());
        let seen: std::collections::HashMap<Vec<u8>, u64> = [(b"x".to_vec(), 999)].into();
        rt.confirm(&seen);
        assert!(!rt.wants_confirmation());
        assert_eq!(rt.unchecked, Unchecked::Consumers(Names::default()));
        assert_eq!(rt.stale_not_before_ms, 77);
        // Queued in MULTI, run at EXEC: confirmed at the next look after it.
        rt.remark(1_500);
        assert!(rt.wants_confirmation());
        let seen: std::collections::HashMap<Vec<u8>, u64> = [(b"x".to_vec(), 1_500)].into();
        rt.confirm(&seen);
        let Unchecked::Consumers(set) = &rt.unchecked else {
            panic!("{:?}", rt.unchecked)
        };
        assert_eq!(set.iter().cloned().collect::<Vec<_>>(), vec![b"x".to_vec()]);
        assert_eq!(rt.stale_not_before_ms, 0);
        // The same sighting confirms nothing twice; a later one (the command ran again) does.
        rt.unchecked = Unchecked::Consumers(Names::default());
        rt.remark(1_600);
        rt.confirm(&seen);
        assert_eq!(rt.unchecked, Unchecked::Consumers(Names::default()));
        // Touches expire.
        assert!(!rt.prune(0, 20_000));
        assert!(rt.recent.is_empty());
    }

    #[test]
    fn readers_rounds_learn_when_to_look_again() {
        let mut r = ReadScan::default();
        // A round of two pages: an entry due at 10,350 at the earliest; MIN-IDLE 1000 after the
        // round's start would be later.
        assert_eq!(
            r.page(Some(b"5-0".to_vec()), Some(10_700), 10_000, 1000),
            None
        );
        assert_eq!(r.cursor.as_deref(), Some(&b"5-0"[..]));
        assert_eq!(r.page(None, Some(10_350), 10_050, 1000), Some(10_350));
        assert_eq!(r, ReadScan::default());
        // Nothing seen but entries handed over: MIN-IDLE after the round started.
        assert_eq!(r.page(Some(b"1-0".to_vec()), None, 500, 1000), None);
        assert_eq!(r.page(None, None, 900, 1000), Some(1500));
        // A held entry (due 0 from now) makes the next read look again at once.
        assert_eq!(r.page(None, Some(2000), 2000, 1000), Some(2000));
    }

    #[test]
    fn the_inbox_is_known_empty_until_something_may_fill_it() {
        let mut rt = Runtime::new(0);
        let facts = ReadFacts::default();
        assert!(rt.begin_read(b"c", facts.clone(), 0).inbox);
        rt.note_inbox_empty();
        assert!(!rt.begin_read(b"c", facts.clone(), 0).inbox);
        // A client's XCLAIM into the inbox, noted by the filter: the inbox is looked at again
        // once it is confirmed (it ran: the claimant was stamped after it).
        rt.note_touch(b"reclaim", false, 1);
        assert!(!rt.begin_read(b"c", facts.clone(), 0).inbox);
        rt.confirm(&[(b"reclaim".to_vec(), 1)].into());
        assert!(rt.begin_read(b"c", facts.clone(), 0).inbox);
        rt.note_inbox_empty();
        rt.idle_set_older();
        assert!(rt.begin_read(b"c", facts, 0).inbox);
    }

    #[test]
    fn a_read_is_answered_from_what_reads_learnt_until_something_changes() {
        let mut rt = Runtime::new(0);
        let facts = ReadFacts {
            liveness_ms: 0,
            writes: ReadWrites {
                dlq: Some(b"d".to_vec()),
                trims: true,
            },
        };
        // Nothing learnt yet.
        assert_eq!(rt.quick_read(0), None);
        rt.begin_read(b"c", facts.clone(), 0);
        rt.note_inbox_empty();
        rt.note_read_page(None, None, 1_000, 500);
        // Parked entries not looked at yet: the read looks.
        assert_eq!(rt.quick_read(1_400), None);
        assert!(!rt.parked_released(0, i64::MAX, false));
        // Before the horizon (1,500): no look, the DLQ writes to check.
        assert_eq!(rt.quick_read(1_400), Some(&facts));
        assert_eq!(rt.quick_read(1_500), None);
        // A NACK parks an entry due at 1,300: reads from then on look (and release it).
        rt.note_parked(1_300);
        assert_eq!(rt.quick_read(1_200), Some(&facts));
        assert_eq!(rt.quick_read(1_300), None);
        assert!(rt.readers_may_find(1_300));
        rt.parked_released(1, i64::MAX, false);
        assert_eq!(rt.quick_read(1_400), None, "released: an older idle time");
        rt.begin_read(b"c", facts.clone(), 0);
        rt.note_inbox_empty();
        rt.note_read_page(None, None, 1_000, 500);
        // A client's touch (XCLAIM ... IDLE) waits for its confirmation: the read looks.
        rt.note_touch(b"c", true, 5);
        assert_eq!(rt.quick_read(1_400), None);
        rt.confirm(&[(b"other".to_vec(), 9)].into());
        assert_eq!(
            rt.quick_read(1_400),
            Some(&facts),
            "it did not run: nothing changed"
        );
        // A SET forgets it all.
        rt.reset(0);
        assert_eq!(rt.quick_read(1_400), None);
    }

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

    #[test]
    fn deleted_consumers_are_forgotten() {
        let mut rt = Runtime::new(0);
        rt.unchecked = Unchecked::Consumers(Names::default());
        rt.touch(b"gone", false);
        rt.touch(b"busy", false);
        rt.forget_idle_consumers(|c| c == b"busy");
        assert_eq!(rt.tracked_consumers(), 1);
    }
}
