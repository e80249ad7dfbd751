//! The sweep planner (pure): pending entries + policy -> what to do with each entry.
//!
//! Rules (see docs/design.md). A delivery is a hand-over to worker code; moving an entry is not:
//! - stale: idle >= `MIN-IDLE` ms (the comparison XCLAIM/XAUTOCLAIM use, Redis 6.2+ t_stream.c);
//! - over-delivered: delivery count > `MAX-DELIVERIES`, or stale with count == `MAX-DELIVERIES`
//!   (its last attempt ended without an acknowledgement); a count that reads negative (above
//!   2^63-1) is over any limit; never with `MAX-DELIVERIES 0`;
//! - over-delivered -> dead-letter; otherwise an entry of the CLAIMANT (the inbox) waits for a
//!   reader, however long; a stale entry of another consumer moves to the CLAIMANT, its count
//!   unchanged; anything else is untouched.
//!
//! Whether the entry still exists in the stream is checked by the executor: a deleted entry is
//! removed from the PEL and counted as `deleted`, never dead-lettered.
//!
//! [`decide`] names the row of that table (docs/design.md, "Sweep rules") that decides an entry,
//! a [`Rule`]; its [`Action`] follows from the rule. The sweep acts on the action
//! ([`plan`]); `RECLAIM.SIMULATE` reports both.

use crate::policy::Policy;

/// One pending entry as `XPENDING key group start end count` reports it (Redis 6.2+ extended
/// form): ID, owner (consumer), idle time in ms, delivery count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// Entry ID as Redis prints it (`ms-seq`).
    pub id: Vec<u8>,
    /// The consumer that owns the entry.
    pub consumer: Vec<u8>,
    /// ms since the last delivery.
    pub idle_ms: i64,
    /// Delivery count; negative when the server's u64 counter is above 2^63-1.
    pub deliveries: i64,
}

/// What the sweep does with one pending entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Neither stale nor over-delivered, or waiting in the CLAIMANT's inbox: owner, count and
    /// idle time stay as they are.
    Untouched,
    /// Move to the policy's CLAIMANT (its inbox): owner = claimant, idle reset to 0, delivery
    /// count unchanged (`XCLAIM ... JUSTID`).
    Move,
    /// Append to the DLQ and acknowledge, atomically.
    DeadLetter,
    /// Remove from the PEL (`XACK`), counted as `deleted`: the stream entry is gone.
    Purge,
}

impl Action {
    /// The name `RECLAIM.SIMULATE` shows: `none`, `move`, `dead-letter`, `purge`.
    pub fn name(self) -> &'static str {
        match self {
            Action::Untouched => "none",
            Action::Move => "move",
            Action::DeadLetter => "dead-letter",
            Action::Purge => "purge",
        }
    }
}

/// The row of the sweep's table (docs/design.md, "Sweep rules") that decides a pending entry;
/// the first row that applies decides, in this order. Each rule has one [`Action`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    /// Its ID is below the stream's first entry (or the stream is empty): purge.
    Trimmed,
    /// Its deliveries are used up ([`over_delivered`]): dead-letter.
    OverDelivered,
    /// Owned by the CLAIMANT and not over-delivered: waits for a reader, untouched.
    InInbox,
    /// Owned by `<CLAIMANT>:delayed` (given back with `RECLAIM.NACK ... DELAY`), its delay not
    /// over yet: untouched.
    Delayed,
    /// Owned by `<CLAIMANT>:parked` (given back with a `RECLAIM.NACK ... DELAY` longer than its
    /// due idle): never stale by idle; the timer releases it when its due time comes. Untouched.
    Parked,
    /// Idle below `MIN-IDLE`: untouched.
    Fresh,
    /// Idle at least `MIN-IDLE` but below the `BACKOFF` step of its count: untouched.
    Backoff,
    /// Stale, but its owner was seen within `LIVENESS`: untouched, the owner keeps it.
    Held,
    /// Stale, of another consumer (`<CLAIMANT>:delayed` included): move to the CLAIMANT.
    Stale,
    /// To be moved or dead-lettered, but the stream entry is gone (`XDEL`): removed from the PEL
    /// only, counted as `deleted`. Known to the executor only (the planner does not read the
    /// stream): never returned by [`decide`].
    Deleted,
    /// Over-delivered, but the `STORM` breaker allows no more dead-letters now (its allowance is
    /// used up by the entries before it, or the breaker is open): untouched, the entry stays
    /// pending (the sweep stops its dead-letters there, [`crate::outcome::Stop::Storm`]). Known to
    /// the executor only: never returned by [`decide`].
    Storm,
}

impl Rule {
    /// What the sweep does with an entry this rule decides.
    pub fn action(self) -> Action {
        match self {
            Rule::Trimmed | Rule::Deleted => Action::Purge,
            Rule::OverDelivered => Action::DeadLetter,
            Rule::Stale => Action::Move,
            Rule::InInbox
            | Rule::Delayed
            | Rule::Parked
            | Rule::Fresh
            | Rule::Backoff
            | Rule::Held
            | Rule::Storm => Action::Untouched,
        }
    }

    /// The name `RECLAIM.SIMULATE` shows.
    pub fn name(self) -> &'static str {
        match self {
            Rule::Trimmed => "trimmed",
            Rule::OverDelivered => "over-delivered",
            Rule::InInbox => "in-inbox",
            Rule::Delayed => "delayed",
            Rule::Parked => "parked",
            Rule::Fresh => "fresh",
            Rule::Backoff => "backoff",
            Rule::Held => "held",
            Rule::Stale => "stale",
            Rule::Deleted => "deleted",
            Rule::Storm => "storm",
        }
    }
}

/// Whether `p` is stale under `policy`: idle for at least the time its delivery count needs
/// (`MIN-IDLE`, grown by `BACKOFF`: [`Policy::due_idle`]). A parked entry ([`Policy::parked`])
/// never is: its due time is not an idle time.
pub fn is_stale(p: &Pending, policy: &Policy) -> bool {
    p.idle_ms >= policy.due_idle(p.deliveries) && !policy.is_parked(&p.consumer)
}

/// Whether `p` may be taken from its owner now: the module holds it (the inbox, or given back
/// with `RECLAIM.NACK ... DELAY`), or its owner is `quiet` (not seen for `LIVENESS` ms; always,
/// without `LIVENESS`).
fn takeable(p: &Pending, policy: &Policy, quiet: bool) -> bool {
    in_inbox(p, policy) || policy.is_delayed(&p.consumer) || policy.liveness_ms == 0 || quiet
}

/// Whether `p` has used up its deliveries under `policy`: over `MAX-DELIVERIES`, or at it and
/// stale with its owner quiet (its last attempt ended without an acknowledgement). Never with
/// `MAX-DELIVERIES 0`. `quiet`: the owner has not been seen for `LIVENESS` ms.
pub fn over_delivered(p: &Pending, policy: &Policy, quiet: bool) -> bool {
    let max = policy.max_deliveries;
    max > 0
        && (p.deliveries < 0
            || p.deliveries > max
            || (p.deliveries == max && is_stale(p, policy) && takeable(p, policy, quiet)))
}

/// Whether `p` waits in the policy's inbox: owned by the CLAIMANT. Nothing moves it again; a
/// reader takes it (`RECLAIM.READGROUP`, or a read of the claimant's history).
pub fn in_inbox(p: &Pending, policy: &Policy) -> bool {
    p.consumer == policy.claimant
}

/// The rule that decides pending entry `p` under `policy` (the first row of the sweep's table
/// that applies); `first`: the stream's first entry ID (`None`: the stream is empty); `quiet`:
/// its owner has not been seen for `LIVENESS` ms (see [`Owners`]).
pub fn decide(p: &Pending, policy: &Policy, first: Option<(u64, u64)>, quiet: bool) -> Rule {
    if is_trimmed(&p.id, first) {
        Rule::Trimmed
    } else if over_delivered(p, policy, quiet) {
        Rule::OverDelivered
    } else if in_inbox(p, policy) {
        Rule::InInbox
    } else if !is_stale(p, policy) {
        if policy.is_delayed(&p.consumer) {
            Rule::Delayed
        } else if policy.is_parked(&p.consumer) {
            Rule::Parked
        } else if p.idle_ms >= policy.min_idle_ms {
            Rule::Backoff
        } else {
            Rule::Fresh
        }
    } else if !takeable(p, policy, quiet) {
        Rule::Held
    } else {
        Rule::Stale
    }
}

/// What the sweep does with pending entry `p` under `policy`, whatever the stream holds (an
/// entry still in the stream: [`decide`] without the trimming test).
pub fn classify(p: &Pending, policy: &Policy, quiet: bool) -> Action {
    decide(p, policy, Some((0, 0)), quiet).action()
}

/// Whether `p` is stale but kept by its owner, which was seen less than `LIVENESS` ms ago.
pub fn held(p: &Pending, policy: &Policy, quiet: bool) -> bool {
    is_stale(p, policy) && !takeable(p, policy, quiet)
}

/// Whether a consumer has been quiet for `LIVENESS` ms (`XINFO CONSUMERS` `idle`). `None` for a
/// consumer the view does not know: quiet (a consumer that is gone cannot work on anything).
pub type Owners<'a> = &'a dyn Fn(&[u8]) -> bool;

/// Whether `p`'s next delivery would pass `MAX-DELIVERIES`: `RECLAIM.READGROUP` dead-letters
/// it instead of handing it over (never with `MAX-DELIVERIES 0`).
pub fn delivery_would_pass_limit(p: &Pending, policy: &Policy) -> bool {
    policy.max_deliveries > 0 && (p.deliveries < 0 || p.deliveries >= policy.max_deliveries)
}

/// Parses a stream entry ID (`ms-seq`, or `ms` meaning `ms-0`) into a comparable pair.
pub fn parse_id(id: &[u8]) -> Option<(u64, u64)> {
    match id.iter().position(|&b| b == b'-') {
        Some(dash) => Some((parse_u64(&id[..dash])?, parse_u64(&id[dash + 1..])?)),
        None => Some((parse_u64(id)?, 0)),
    }
}

/// A u64 as `str::parse` reads one (decimal digits after an optional `+`), without its UTF-8
/// check: read per pending entry, several times a step. `None` when there are no digits, a
/// byte is not one, or it is above `u64::MAX`.
fn parse_u64(s: &[u8]) -> Option<u64> {
    let s = s.strip_prefix(b"+").unwrap_or(s);
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(0u64, |n, &b| {
        if b.is_ascii_digit() {
            n.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

/// Whether a pending entry was trimmed away: its ID is below the stream's first entry (`first`,
/// `None` when the stream is empty). Stream IDs only grow, so such an entry cannot exist.
pub fn is_trimmed(id: &[u8], first: Option<(u64, u64)>) -> bool {
    match (parse_id(id), first) {
        (Some(i), Some(f)) => i < f,
        (Some(_), None) => true,
        (None, _) => false,
    }
}

/// Most entries in one dead-letter batch: a move costs several µs (one `XADD` each), and the
/// deadline is only checked between batches.
pub const DEAD_LETTER_BATCH: usize = 16;

/// An entry ID as one number (`ms << 64 | seq`), so that ID windows can be sized by arithmetic.
pub fn id_value(id: (u64, u64)) -> u128 {
    ((id.0 as u128) << 64) | id.1 as u128
}

/// The ID text (`ms-seq`) of an [`id_value`].
pub fn id_text(v: u128) -> String {
    format!("{}-{}", (v >> 64) as u64, v as u64)
}

/// Width (in [`id_value`] units) of the first ID window of a pass: small, because a bulk-loaded
/// stream can hold a million entries within one millisecond.
pub const FIRST_WINDOW: u128 = 1024;

/// The scan time one windowed `XPENDING ... IDLE` call aims at, in µs.
pub const WINDOW_TARGET_US: u64 = 100;

/// The end of the next ID window after `start` (exclusive), `width` wide; `None` when the window
/// reaches the stream's last entry `last`, i.e. the scan can go to `+`.
pub fn window_end(start: u128, width: u128, last: u128) -> Option<u128> {
    let end = start.saturating_add(width.max(1));
    if end >= last {
        None
    } else {
        Some(end)
    }
}

/// The next window width after a window of `width` took `took_us` µs to scan: scaled toward
/// [`WINDOW_TARGET_US`], by at most 4x up (so a sparse stretch followed by a dense one overshoots
/// the target at most 4x) and 16x down per window, never below [`FIRST_WINDOW`]. The cost of
/// `XPENDING ... IDLE` grows with the entries in the window, so the width follows the PEL's
/// density without knowing it.
pub fn next_width(width: u128, took_us: u64) -> u128 {
    let w = width.max(FIRST_WINDOW);
    let took = took_us.max(1) as u128;
    let target = WINDOW_TARGET_US as u128;
    let scaled = if took * 4 <= target {
        w.saturating_mul(4)
    } else if took >= target * 16 {
        w / 16
    } else {
        w.saturating_mul(target) / took
    };
    scaled.clamp(FIRST_WINDOW, u128::MAX / 4)
}

/// What a pass of a policy does, decided when it starts (see docs/design.md, "Passes").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassKind {
    /// Page every pending entry (`XPENDING key group start + COUNT`): needed with
    /// `MAX-DELIVERIES` above 0 when any consumer's delivery counts may have risen unseen (after
    /// SET, a load, a promotion, a new PEL), because an entry over the limit is dead-lettered
    /// while fresh.
    Full,
    /// Scan ID windows with `XPENDING ... IDLE threshold`: only entries idle for at least the
    /// threshold (at most `MIN-IDLE`) are copied out of the server.
    Scan,
    /// Only purge entries trimmed from the stream: no pending entry can be stale before
    /// [`Horizon::stale_not_before_ms`], so a scan would find nothing to claim.
    TrimOnly,
}

/// Decides a new pass's kind. `counts_checked`: every delivery count is known to be within the
/// limit, but maybe those of some consumers, which the pass checks first (`registry::Unchecked`); `now_ms` and `stale_not_before_ms` are wall-clock
/// ms (the clock Redis computes idle times with, `mstime()`); `stale_not_before_ms` 0 = unknown.
pub fn pass_kind(
    policy: &Policy,
    counts_checked: bool,
    now_ms: i64,
    stale_not_before_ms: i64,
) -> PassKind {
    if policy.max_deliveries > 0 && !counts_checked {
        PassKind::Full
    } else if now_ms < stale_not_before_ms {
        PassKind::TrimOnly
    } else {
        PassKind::Scan
    }
}

/// The entries a step read that were not stale: how many, and the least time (ms) any of them
/// needs to turn stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fresh {
    /// Entries read that were not stale yet (or stale but held by a live owner).
    pub watched: u64,
    /// The least time any of them needs to be due, ms (`i64::MAX`: none; 0 for an entry held
    /// by a live owner, which may be taken as soon as its owner goes quiet).
    pub min_remaining_ms: i64,
}

impl Default for Fresh {
    fn default() -> Self {
        Fresh {
            watched: 0,
            min_remaining_ms: i64::MAX,
        }
    }
}

impl Fresh {
    /// Adds the entries of `page` that the sweep may have to handle later: not stale yet, or
    /// held by a live owner; but not parked ones, nor those waiting in the inbox that never need the sweep (only
    /// those at their last delivery go to the DLQ when they go stale).
    pub fn observe(&mut self, page: &[Pending], policy: &Policy, owners: Owners) {
        for p in page {
            let later = policy.max_deliveries > 0 && p.deliveries >= policy.max_deliveries;
            // Parked entries turn due when the timer releases them (which forgets the horizon).
            if (in_inbox(p, policy) && !later) || policy.is_parked(&p.consumer) {
                continue;
            }
            let remaining = if !is_stale(p, policy) {
                policy.due_idle(p.deliveries) - p.idle_ms
            } else if held(p, policy, owners(&p.consumer)) {
                0
            } else {
                continue;
            };
            self.watched += 1;
            self.min_remaining_ms = self.min_remaining_ms.min(remaining);
        }
    }

    /// Adds what another step saw.
    pub fn merge(&mut self, other: &Fresh) {
        self.watched += other.watched;
        self.min_remaining_ms = self.min_remaining_ms.min(other.min_remaining_ms);
    }
}

/// Most delivery-count buckets of a [`Tally`]: counts 1 to this, then one bucket for the ones
/// above.
pub const MAX_BUCKETS: usize = 32;

/// Buckets of a [`Tally`] under `policy`: `MAX-DELIVERIES` (at most [`MAX_BUCKETS`]), or 10 when
/// deliveries are not limited.
pub fn bucket_count(policy: &Policy) -> usize {
    match policy.max_deliveries {
        n if n <= 0 => 10,
        n => (n as usize).min(MAX_BUCKETS),
    }
}

/// What the pending entries a pass read looked like, for `RECLAIM.HEALTH`: how many, their
/// delivery counts (buckets `1..=n`, then `above`; a count of 0 counts as 1, and one that reads
/// negative, above 2^63-1, as above), and the most idle one. Bounded: at most
/// [`MAX_BUCKETS`] + 1 numbers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    /// Entries counted.
    pub entries: u64,
    /// `buckets[i]`: entries delivered `i + 1` times; the last one: more than `buckets.len() - 1`.
    pub buckets: Vec<u64>,
    /// The most idle entry seen: (its idle ms, wall-clock ms when it was read); `None`: none.
    pub most_idle: Option<(i64, i64)>,
}

impl Tally {
    /// Counts the entries of `page`, read at wall-clock ms `now`, in `n` buckets (and one above).
    pub fn observe(&mut self, page: &[Pending], n: usize, now: i64) {
        if self.buckets.len() != n + 1 {
            self.buckets = vec![0; n + 1];
        }
        for p in page {
            let i = match p.deliveries {
                d if d < 0 => n,
                d => (d.max(1) as usize - 1).min(n),
            };
            self.buckets[i] += 1;
            self.entries += 1;
            self.note_idle(p.idle_ms, now);
        }
    }

    fn note_idle(&mut self, idle: i64, at: i64) {
        // The most idle is the one delivered longest ago (at - idle), whenever it was read.
        let older = match self.most_idle {
            None => true,
            Some((i, a)) => at.saturating_sub(idle) < a.saturating_sub(i),
        };
        if older {
            self.most_idle = Some((idle, at));
        }
    }

    /// Adds what another step counted (with the same buckets; otherwise the other one's replace
    /// these: the policy changed).
    pub fn merge(&mut self, other: &Tally) {
        if other.entries == 0 && other.most_idle.is_none() {
            return;
        }
        if self.buckets.len() != other.buckets.len() {
            self.buckets = vec![0; other.buckets.len()];
            self.entries = 0;
        }
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.entries += other.entries;
        if let Some((i, a)) = other.most_idle {
            self.note_idle(i, a);
        }
    }
}

/// What a pass learns about when its PEL can next hold a stale entry.
///
/// Idle times only grow, one ms per ms, and only a delivery resets them: `XREADGROUP` and the
/// module's own claims set them to 0; only a client's `XCLAIM ... IDLE/TIME` (or a key arriving
/// with RESTORE, RENAME, MOVE, COPY) can set an older one, and the module watches for those (see
/// `registry::touch`). So if every entry a pass scanned from `start_ms` on had an idle
/// time below `I`, none can be stale before `start_ms + MIN-IDLE - I`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Horizon {
    /// Wall-clock ms when the pass started.
    pub start_ms: i64,
    /// The `IDLE` threshold of the pass's scans, ms: entries below it were not returned.
    /// `MIN-IDLE` means the pass learnt nothing about fresh entries; 0 for a full pass.
    pub threshold_ms: i64,
    /// The returned entries that were not stale.
    pub fresh: Fresh,
}

impl Horizon {
    /// A pass starting at `start_ms` with scans at `threshold_ms`.
    pub fn new(start_ms: i64, threshold_ms: i64) -> Horizon {
        Horizon {
            start_ms,
            threshold_ms,
            fresh: Fresh::default(),
        }
    }

    /// Wall-clock ms before which no entry of the PEL can be stale, for a pass that ended with
    /// every stale entry it found handled: `start + min(MIN-IDLE - threshold, least time a
    /// returned entry needs)` (entries below the threshold need at least `MIN-IDLE - threshold`).
    pub fn stale_not_before_ms(&self, min_idle_ms: i64) -> i64 {
        let unseen = min_idle_ms.saturating_sub(self.threshold_ms.max(0));
        self.start_ms
            .saturating_add(unseen.min(self.fresh.min_remaining_ms).max(0))
    }
}

/// Most entries below `MIN-IDLE` that a scan pass may copy out, in pages of `COUNT`: past it the
/// pass scans at `MIN-IDLE` (learning nothing more) and the next pass looks half as far ahead.
pub const WATCH_PAGES: u64 = 4;

/// How far ahead (ms) a policy's first scan looks: [`Horizon::threshold_ms`] is
/// `MIN-IDLE - lookahead`. Half of `MIN-IDLE`, or 0 when that is shorter than `INTERVAL`
/// (a pass could never be skipped).
pub fn first_lookahead(policy: &Policy) -> i64 {
    let half = policy.min_idle_ms / 2;
    if half < policy.interval_ms {
        0
    } else {
        half
    }
}

/// The next scan's lookahead after a scan pass that copied out `watched` fresh entries with
/// lookahead `ms`: halved (to 0 below `INTERVAL`) when it copied more than [`WATCH_PAGES`] pages
/// of `COUNT`, doubled (up to [`first_lookahead`]) when it copied less than one page.
pub fn next_lookahead(ms: i64, watched: u64, policy: &Policy) -> i64 {
    let cap = first_lookahead(policy);
    let count = policy.count.max(1) as u64;
    let next = if watched > WATCH_PAGES.saturating_mul(count) {
        ms / 2
    } else if watched < count {
        ms.max(policy.interval_ms).saturating_mul(2)
    } else {
        ms
    };
    if next < policy.interval_ms {
        0
    } else {
        next.min(cap)
    }
}

/// The cost per entry a policy's first step assumes, ns: about a dead-letter move, the dearest
/// kind of entry, so that a first step with a large `COUNT` stays within the budget.
pub const FIRST_ENTRY_NS: u64 = 10_000;

/// How many entries a step may read: `COUNT`, but no more than are likely to be handled in the
/// `left_ns` ns left of the tick at `entry_ns` ns each (0 = not measured yet:
/// [`FIRST_ENTRY_NS`]); at least 1.
pub fn step_entries(count: i64, left_ns: u64, entry_ns: u64) -> i64 {
    let count = count.max(1);
    let per = if entry_ns == 0 {
        FIRST_ENTRY_NS
    } else {
        entry_ns
    };
    let fit = (left_ns / per).min(i64::MAX as u64) as i64;
    fit.clamp(1, count)
}

/// The cost per entry after a step that handled `entries` in `took_ns`: a moving average
/// (3/4 of the old value, 1/4 of the new one), so one slow step does not shrink the next ones.
pub fn next_entry_ns(old: u64, took_ns: u64, entries: u64) -> u64 {
    let now = took_ns / entries.max(1);
    if old == 0 {
        now.max(1)
    } else {
        ((old.saturating_mul(3) + now) / 4).max(1)
    }
}

/// One unit of work for the executor, in PEL (ID) order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Batch {
    /// Move these entries to the CLAIMANT with one `XCLAIM ... JUSTID` (counts unchanged).
    Move(Vec<Pending>),
    /// Dead-letter these entries (appends first, then one XACK of those appended).
    DeadLetter(Vec<Pending>),
    /// Consecutive entries to leave alone: the last one's ID (for the cursor) and how many.
    Skip(Vec<u8>, u64),
    /// Entries trimmed from the stream (below its first ID): removed from the PEL with one XACK,
    /// whatever their idle time or count, and counted as `deleted` (with `TOMBSTONES yes`, each
    /// gets a DLQ record first).
    Purge(Vec<Pending>),
}

impl Batch {
    /// How many pending entries the batch covers.
    pub fn len(&self) -> u64 {
        match self {
            Batch::Move(v) | Batch::Purge(v) | Batch::DeadLetter(v) => v.len() as u64,
            Batch::Skip(_, n) => *n,
        }
    }

    /// Whether the batch is empty (never, for batches made by [`plan`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Turns a page of pending entries (in ID order) into batches, keeping ID order. Consecutive
/// entries with the same action share a batch of at most `max_batch` entries. Entries trimmed from the stream
/// (see [`is_trimmed`]; `first` is the stream's first entry ID) are purged whatever their idle
/// time or count. Entries deleted from the middle of the stream (XDEL) are found when they are
/// claimed or dead-lettered.
pub fn plan(
    page: &[Pending],
    policy: &Policy,
    max_batch: usize,
    first: Option<(u64, u64)>,
    owners: Owners,
) -> Vec<Batch> {
    let cap = max_batch.max(1);
    let mut out: Vec<Batch> = Vec::new();
    for p in page {
        let last = out.last_mut();
        match decide(p, policy, first, owners(&p.consumer)).action() {
            Action::Purge => match last {
                Some(Batch::Purge(v)) if v.len() < cap => v.push(p.clone()),
                _ => out.push(Batch::Purge(vec![p.clone()])),
            },
            Action::Untouched => match last {
                Some(Batch::Skip(id, n)) => {
                    *id = p.id.clone();
                    *n += 1;
                }
                _ => out.push(Batch::Skip(p.id.clone(), 1)),
            },
            Action::DeadLetter => match last {
                Some(Batch::DeadLetter(v)) if v.len() < cap.min(DEAD_LETTER_BATCH) => {
                    v.push(p.clone())
                }
                _ => out.push(Batch::DeadLetter(vec![p.clone()])),
            },
            Action::Move => match last {
                Some(Batch::Move(v)) if v.len() < cap => v.push(p.clone()),
                _ => out.push(Batch::Move(vec![p.clone()])),
            },
        }
    }
    out
}

/// The ID of the last entry a batch covers (the cursor after it is done).
pub fn last_id(b: &Batch) -> &[u8] {
    match b {
        Batch::Move(v) | Batch::Purge(v) | Batch::DeadLetter(v) => {
            v.last().map(|p| p.id.as_slice()).unwrap_or(b"")
        }
        Batch::Skip(id, _) => id,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pol(min_idle: i64, max: i64) -> Policy {
        Policy {
            min_idle_ms: min_idle,
            max_deliveries: max,
            dlq: if max > 0 { Some(b"dlq".to_vec()) } else { None },
            ..Policy::default()
        }
    }

    fn pe(id: &str, idle: i64, n: i64) -> Pending {
        Pending {
            id: id.as_bytes().to_vec(),
            consumer: b"c1".to_vec(),
            idle_ms: idle,
            deliveries: n,
        }
    }

    #[test]
    fn tally_buckets_and_most_idle() {
        assert_eq!(bucket_count(&pol(1, 3)), 3);
        assert_eq!(bucket_count(&pol(1, 0)), 10);
        assert_eq!(bucket_count(&pol(1, 500)), MAX_BUCKETS);
        let mut t = Tally::default();
        let page = [
            pe("1-0", 500, 0),
            pe("2-0", 100, 1),
            pe("3-0", 900, 3),
            pe("4-0", 10, 4),
            pe("5-0", 10, -1),
        ];
        t.observe(&page, 3, 10_000);
        assert_eq!(t.buckets, vec![2, 0, 1, 2]);
        assert_eq!((t.entries, t.most_idle), (5, Some((900, 10_000))));
        // A later step: an entry read 5 s later with 4 s of idle was delivered after the one
        // above; one with 6 s was delivered before it.
        let mut u = Tally::default();
        u.observe(&[pe("6-0", 4_000, 2)], 3, 15_000);
        t.merge(&u);
        assert_eq!((t.entries, t.most_idle), (6, Some((900, 10_000))));
        let mut v = Tally::default();
        v.observe(&[pe("7-0", 6_000, 2)], 3, 15_000);
        t.merge(&v);
        assert_eq!(t.buckets, vec![2, 2, 1, 2]);
        assert_eq!(t.most_idle, Some((6_000, 15_000)));
        // Other buckets (the policy changed): the new ones replace the old.
        let mut w = Tally::default();
        w.observe(&[pe("8-0", 1, 1)], 5, 16_000);
        t.merge(&w);
        assert_eq!((t.entries, t.buckets.len()), (1, 6));
    }

    #[test]
    fn classification_table() {
        let p = pol(60_000, 3);
        // (idle, count) -> action, with MIN-IDLE 60000, MAX-DELIVERIES 3
        let table = [
            (59_999, 1, Action::Untouched),
            (60_000, 1, Action::Move),
            (120_000, 2, Action::Move),
            (120_000, 3, Action::DeadLetter), // stale at the limit: its last attempt failed
            (10, 3, Action::Untouched),       // at the limit but still being worked on
            (10, 4, Action::DeadLetter),      // re-read history: over without going stale
            (10, -1, Action::DeadLetter),     // overflowed count
        ];
        for (idle, n, want) in table {
            assert_eq!(
                classify(&pe("1-0", idle, n), &p, true),
                want,
                "idle {idle} count {n}"
            );
            // In the inbox nothing moves again; the limit still applies.
            let mut inbox = pe("1-0", idle, n);
            inbox.consumer = p.claimant.clone();
            let want = if want == Action::Move {
                Action::Untouched
            } else {
                want
            };
            assert_eq!(
                classify(&inbox, &p, true),
                want,
                "inbox: idle {idle} count {n}"
            );
        }
        // MAX-DELIVERIES 0: never dead-letter, whatever the count.
        let never = pol(1000, 0);
        assert_eq!(
            classify(&pe("1-0", 5000, 1_000_000), &never, true),
            Action::Move
        );
        assert_eq!(classify(&pe("1-0", 5000, -5), &never, true), Action::Move);
        assert_eq!(
            classify(&pe("1-0", 10, 1_000_000), &never, true),
            Action::Untouched
        );
    }

    #[test]
    fn each_rule_of_the_table_and_its_action() {
        let mut p = pol(1000, 3);
        p.backoff = crate::policy::Backoff::Exponential(100_000);
        p.liveness_ms = 5000;
        let of = |id: &str, owner: &[u8], idle: i64, n: i64| Pending {
            consumer: owner.to_vec(),
            ..pe(id, idle, n)
        };
        let inbox = p.claimant.clone();
        let delayed = p.delayed();
        let first = Some((5, 0));
        // (entry, owner quiet, rule, action)
        let table = [
            (of("1-0", b"c1", 10, 9), true, Rule::Trimmed, Action::Purge),
            (
                of("5-0", b"c1", 10, 4),
                false,
                Rule::OverDelivered,
                Action::DeadLetter,
            ),
            (
                of("6-0", b"c1", 4000, 3),
                true,
                Rule::OverDelivered,
                Action::DeadLetter,
            ),
            (
                of("7-0", &inbox, 99_999, 2),
                true,
                Rule::InInbox,
                Action::Untouched,
            ),
            (
                of("8-0", &inbox, 4000, 3),
                true,
                Rule::OverDelivered,
                Action::DeadLetter,
            ),
            (
                of("9-0", &delayed, 500, 1),
                true,
                Rule::Delayed,
                Action::Untouched,
            ),
            (
                of("10-0", &delayed, 1000, 1),
                false,
                Rule::Stale,
                Action::Move,
            ),
            (
                of("11-0", b"c1", 999, 1),
                true,
                Rule::Fresh,
                Action::Untouched,
            ),
            (
                of("12-0", b"c1", 1500, 2),
                true,
                Rule::Backoff,
                Action::Untouched,
            ),
            (
                of("13-0", b"c1", 2000, 2),
                false,
                Rule::Held,
                Action::Untouched,
            ),
            (
                of("14-0", b"c1", 4000, 3),
                false,
                Rule::Held,
                Action::Untouched,
            ),
            (of("15-0", b"c1", 2000, 2), true, Rule::Stale, Action::Move),
        ];
        for (e, quiet, rule, action) in &table {
            let got = decide(e, &p, first, *quiet);
            assert_eq!((got, got.action()), (*rule, *action), "{e:?} quiet {quiet}");
        }
        assert_eq!(Rule::Deleted.action(), Action::Purge);
        assert_eq!(Rule::Storm.action(), Action::Untouched);
        // plan() acts on exactly these actions, in order (every owner quiet here).
        let page: Vec<Pending> = table.iter().map(|t| t.0.clone()).collect();
        let mut acted: Vec<(Vec<u8>, Action)> = Vec::new();
        for b in plan(&page, &p, 100, first, &|_| true) {
            match b {
                Batch::Move(v) => acted.extend(v.into_iter().map(|e| (e.id, Action::Move))),
                Batch::Purge(v) => acted.extend(v.into_iter().map(|e| (e.id, Action::Purge))),
                Batch::DeadLetter(v) => {
                    acted.extend(v.into_iter().map(|e| (e.id, Action::DeadLetter)))
                }
                Batch::Skip(_, n) => {
                    let from = acted.len();
                    acted.extend(
                        page[from..from + n as usize]
                            .iter()
                            .map(|e| (e.id.clone(), Action::Untouched)),
                    )
                }
            }
        }
        let want: Vec<(Vec<u8>, Action)> = page
            .iter()
            .map(|e| (e.id.clone(), decide(e, &p, first, true).action()))
            .collect();
        assert_eq!(acted, want);
    }

    #[test]
    fn trimmed_entries_are_purged_first() {
        let p = pol(100, 3);
        let page = vec![
            pe("1-0", 5, 1),
            pe("2-5", 500, 9),
            pe("3-0", 5, 1),
            pe("4-0", 500, 1),
        ];
        // first entry of the stream is 3-0: 1-0 and 2-5 are gone, whatever their idle or count.
        assert_eq!(
            plan(&page, &p, 100, Some((3, 0)), &|_| true),
            vec![
                Batch::Purge(vec![pe("1-0", 5, 1), pe("2-5", 500, 9)]),
                Batch::Skip(b"3-0".to_vec(), 1),
                Batch::Move(vec![pe("4-0", 500, 1)]),
            ]
        );
        // empty stream: everything is gone.
        assert_eq!(
            plan(&page[..1], &p, 100, None, &|_| true),
            vec![Batch::Purge(vec![pe("1-0", 5, 1)])]
        );
        assert_eq!(parse_id(b"12-3"), Some((12, 3)));
        assert_eq!(parse_id(b"12"), Some((12, 0)));
        assert_eq!(parse_id(b"x-1"), None);
        assert_eq!(
            parse_id(b"18446744073709551615-18446744073709551615"),
            Some((u64::MAX, u64::MAX))
        );
        assert_eq!(parse_id(b"18446744073709551616-0"), None);
        assert_eq!(parse_id(b"1-"), None);
        assert_eq!(parse_id(b"-1"), None);
        assert_eq!(parse_id(b"+1-+2"), Some((1, 2)));
        assert_eq!(parse_id(b"++1-2"), None);
        assert_eq!(parse_id(b"+-2"), None);
        assert_eq!(parse_id(b"1-2-3"), None);
        assert_eq!(parse_id(b""), None);
        assert!(is_trimmed(
            b"18446744073709551614-0",
            Some((18446744073709551615, 0))
        ));
        assert!(!is_trimmed(b"5-1", Some((5, 1))));
    }

    #[test]
    fn steps_fit_the_time_left() {
        // Unknown cost: as if 10 µs each (a COUNT of 10000 would take ms).
        assert_eq!(step_entries(100, 500_000, 0), 50);
        assert_eq!(step_entries(10_000, 500_000, 0), 50);
        // 5 µs per entry, 500 µs left: 100; 200 µs left: 40; never above COUNT, never 0.
        assert_eq!(step_entries(1000, 500_000, 5_000), 100);
        assert_eq!(step_entries(100, 200_000, 5_000), 40);
        assert_eq!(step_entries(10, 500_000, 5_000), 10);
        assert_eq!(step_entries(100, 0, 5_000), 1);
        assert_eq!(next_entry_ns(0, 400_000, 100), 4_000);
        assert_eq!(next_entry_ns(4_000, 800_000, 100), 5_000);
        assert_eq!(next_entry_ns(4_000, 0, 0), 3_000);
    }

    #[test]
    fn pass_kinds() {
        let p0 = pol(60_000, 0);
        let p3 = pol(60_000, 3);
        // Counts unchecked: a full pass with MAX-DELIVERIES, whatever the horizon says.
        assert_eq!(pass_kind(&p3, false, 1000, 5000), PassKind::Full);
        assert_eq!(pass_kind(&p3, true, 1000, 5000), PassKind::TrimOnly);
        assert_eq!(pass_kind(&p3, true, 5000, 5000), PassKind::Scan);
        // MAX-DELIVERIES 0 never needs counts.
        assert_eq!(pass_kind(&p0, false, 1000, 5000), PassKind::TrimOnly);
        assert_eq!(pass_kind(&p0, false, 1000, 0), PassKind::Scan);
    }

    #[test]
    fn horizon_from_what_a_pass_saw() {
        let p = pol(60_000, 0);
        // Nothing returned below MIN-IDLE: every entry was under the threshold.
        let mut h = Horizon::new(1_000_000, 30_000);
        h.fresh.observe(&[pe("1-0", 70_000, 1)], &p, &|_| true); // stale: handled by the pass, not watched
        assert_eq!(h.fresh, Fresh::default());
        assert_eq!(h.stale_not_before_ms(60_000), 1_030_000);
        // A fresh entry 45 s idle: stale 15 s after the pass started, at the earliest.
        let mut step = Fresh::default();
        step.observe(&[pe("2-0", 45_000, 1), pe("3-0", 31_000, 2)], &p, &|_| true);
        h.fresh.merge(&step);
        // Due in 15 s (60 s - 45 s) at the earliest.
        assert_eq!((h.fresh.watched, h.fresh.min_remaining_ms), (2, 15_000));
        assert_eq!(h.stale_not_before_ms(60_000), 1_015_000);
        // A full pass (threshold 0) that saw no fresh entry: nothing before start + MIN-IDLE.
        assert_eq!(Horizon::new(5, 0).stale_not_before_ms(60_000), 60_005);
        // Scans at MIN-IDLE learn nothing: the horizon is the start.
        assert_eq!(Horizon::new(5, 60_000).stale_not_before_ms(60_000), 5);
    }

    #[test]
    fn lookahead_adapts_to_what_scans_copy() {
        let mut p = pol(60_000, 0);
        p.interval_ms = 10_000;
        p.count = 100;
        assert_eq!(first_lookahead(&p), 30_000);
        // Few fresh entries copied: look further, up to MIN-IDLE / 2.
        assert_eq!(next_lookahead(20_000, 0, &p), 30_000);
        assert_eq!(next_lookahead(30_000, 99, &p), 30_000);
        // Between one and WATCH_PAGES pages: keep it.
        assert_eq!(next_lookahead(20_000, 400, &p), 20_000);
        // More: halve it, and stop looking ahead below INTERVAL.
        assert_eq!(next_lookahead(30_000, 401, &p), 15_000);
        assert_eq!(next_lookahead(15_000, 401, &p), 0);
        // From 0, try again at 2 x INTERVAL once scans copy little.
        assert_eq!(next_lookahead(0, 0, &p), 20_000);
        // MIN-IDLE / 2 shorter than INTERVAL: a pass can never be skipped, so never look ahead.
        p.interval_ms = 40_000;
        assert_eq!(first_lookahead(&p), 0);
        assert_eq!(next_lookahead(0, 0, &p), 0);
    }

    #[test]
    fn id_windows() {
        assert_eq!(id_value((1, 2)), (1u128 << 64) | 2);
        assert_eq!(id_text(id_value((1795943711775, 7))), "1795943711775-7");
        assert_eq!(window_end(10, 5, 100), Some(15));
        assert_eq!(window_end(10, 500, 100), None);
        assert_eq!(window_end(u128::MAX - 1, 5, u128::MAX), None);
        // A fast window grows at most 4x, a slow one shrinks at most 16x, never below the floor.
        assert_eq!(next_width(4096, 1), 4096 * 4);
        assert_eq!(next_width(1 << 40, 100_000), (1 << 40) / 16);
        assert_eq!(next_width(4096, 200), 2048);
        assert_eq!(next_width(2048, 10_000), FIRST_WINDOW);
        assert_eq!(next_width(u128::MAX, 1), u128::MAX / 4);
    }

    #[test]
    fn backoff_and_liveness_decide_when_an_entry_is_due() {
        let mut p = pol(100, 3);
        p.backoff = crate::policy::Backoff::Exponential(1000);
        // Count 2 needs 200 ms, count 3 400 ms.
        assert_eq!(classify(&pe("1-0", 150, 2), &p, true), Action::Untouched);
        assert_eq!(classify(&pe("1-0", 200, 2), &p, true), Action::Move);
        assert_eq!(classify(&pe("1-0", 399, 3), &p, true), Action::Untouched);
        assert_eq!(classify(&pe("1-0", 400, 3), &p, true), Action::DeadLetter);
        // LIVENESS: a live owner keeps its stale entries, at the limit too; the inbox and the
        // delayed entries are the module's.
        p.liveness_ms = 5000;
        assert_eq!(classify(&pe("1-0", 200, 2), &p, false), Action::Untouched);
        assert!(held(&pe("1-0", 200, 2), &p, false));
        assert_eq!(classify(&pe("1-0", 400, 3), &p, false), Action::Untouched);
        assert_eq!(classify(&pe("1-0", 10, 4), &p, false), Action::DeadLetter);
        let mut delayed = pe("1-0", 200, 2);
        delayed.consumer = p.delayed();
        assert_eq!(classify(&delayed, &p, false), Action::Move);
        // Parked: never stale by idle, never dead-lettered at its limit while parked, not
        // watched by the horizon (the timer releases it).
        let mut parked = pe("1-0", 10_000_000, 3);
        parked.consumer = p.parked();
        assert!(!is_stale(&parked, &p));
        assert_eq!(decide(&parked, &p, Some((0, 0)), true), Rule::Parked);
        assert_eq!(Rule::Parked.name(), "parked");
        parked.deliveries = 4;
        assert_eq!(decide(&parked, &p, Some((0, 0)), true), Rule::OverDelivered);
        let mut f = Fresh::default();
        f.observe(&[parked], &p, &|_| true);
        assert_eq!(f.watched, 0);
        // What a pass learns: the least time left, 0 for a held entry.
        let mut f = Fresh::default();
        f.observe(&[pe("2-0", 150, 2)], &p, &|_| true);
        assert_eq!(f.min_remaining_ms, 50);
        f.observe(&[pe("3-0", 300, 2)], &p, &|_| false);
        assert_eq!((f.watched, f.min_remaining_ms), (2, 0));
    }

    #[test]
    fn readgroup_dead_letters_what_it_may_not_deliver() {
        let p = pol(100, 3);
        for (n, want) in [(1, false), (2, false), (3, true), (9, true), (-1, true)] {
            assert_eq!(delivery_would_pass_limit(&pe("1-0", 5, n), &p), want, "{n}");
        }
        assert!(!delivery_would_pass_limit(&pe("1-0", 5, 9), &pol(100, 0)));
    }

    #[test]
    fn parked_inbox_entries_teach_no_horizon() {
        let p = pol(100, 3);
        let mut inbox = pe("1-0", 50, 1);
        inbox.consumer = p.claimant.clone();
        let mut last = inbox.clone();
        last.deliveries = 3;
        let mut f = Fresh::default();
        f.observe(&[inbox, last, pe("3-0", 20, 1)], &p, &|_| true);
        assert_eq!((f.watched, f.min_remaining_ms), (2, 50));
    }

    #[test]
    fn plan_groups_moves_in_order() {
        let p = pol(100, 3);
        let page = vec![
            pe("1-0", 500, 1),
            pe("2-0", 500, 1),
            pe("3-0", 500, 2),
            pe("4-0", 5, 1),
            pe("5-0", 500, 3),
            pe("6-0", 500, 1),
        ];
        let b = plan(&page, &p, 100, Some((1, 0)), &|_| true);
        assert_eq!(
            b,
            vec![
                Batch::Move(vec![
                    pe("1-0", 500, 1),
                    pe("2-0", 500, 1),
                    pe("3-0", 500, 2)
                ]),
                Batch::Skip(b"4-0".to_vec(), 1),
                Batch::DeadLetter(vec![pe("5-0", 500, 3)]),
                Batch::Move(vec![pe("6-0", 500, 1)]),
            ]
        );
        assert_eq!(last_id(&b[0]), b"3-0");
        // max_claim splits long runs.
        let b = plan(&page[..2], &p, 1, Some((1, 0)), &|_| true);
        assert_eq!(b.len(), 2);
    }
}
