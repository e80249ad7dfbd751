//! What a pass does and learns: its kind ([`PassKind`], [`pass_kind`]), the fresh entries it
//! watches ([`Fresh`]), what it read ([`Tally`]), when an entry can be stale at the earliest
//! ([`Horizon`]), how far ahead scans look, and how many entries a step reads.

use crate::policy::Policy;

use super::{held, in_inbox, is_stale, Owners, Pending};

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
pub(crate) fn pass_kind(
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
    pub(crate) watched: u64,
    /// The least time any of them needs to be due, ms (`i64::MAX`: none; 0 for an entry held
    /// by a live owner, which may be taken as soon as its owner goes quiet).
    pub(crate) min_remaining_ms: i64,
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
    pub(crate) fn merge(&mut self, other: &Fresh) {
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
pub(crate) struct Horizon {
    /// Wall-clock ms when the pass started.
    pub(crate) start_ms: i64,
    /// The `IDLE` threshold of the pass's scans, ms: entries below it were not returned.
    /// `MIN-IDLE` means the pass learnt nothing about fresh entries; 0 for a full pass.
    pub(crate) threshold_ms: i64,
    /// The returned entries that were not stale.
    pub(crate) fresh: Fresh,
}

impl Horizon {
    /// A pass starting at `start_ms` with scans at `threshold_ms`.
    pub(crate) fn new(start_ms: i64, threshold_ms: i64) -> Horizon {
        Horizon {
            start_ms,
            threshold_ms,
            fresh: Fresh::default(),
        }
    }

    /// Wall-clock ms before which no entry of the PEL can be stale, for a pass that ended with
    /// every stale entry it found handled: `start + min(MIN-IDLE - threshold, least time a
    /// returned entry needs)` (entries below the threshold need at least `MIN-IDLE - threshold`).
    pub(crate) fn stale_not_before_ms(&self, min_idle_ms: i64) -> i64 {
        let unseen = min_idle_ms.saturating_sub(self.threshold_ms.max(0));
        self.start_ms
            .saturating_add(unseen.min(self.fresh.min_remaining_ms).max(0))
    }
}

/// Most entries below `MIN-IDLE` that a scan pass may copy out, in pages of `COUNT`: past it the
/// pass scans at `MIN-IDLE` (learning nothing more) and the next pass looks half as far ahead.
pub(crate) const WATCH_PAGES: u64 = 4;

/// How far ahead (ms) a policy's first scan looks: [`Horizon::threshold_ms`] is
/// `MIN-IDLE - lookahead`. Half of `MIN-IDLE`, or 0 when that is shorter than `INTERVAL`
/// (a pass could never be skipped).
pub(crate) fn first_lookahead(policy: &Policy) -> i64 {
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
pub(crate) fn next_lookahead(ms: i64, watched: u64, policy: &Policy) -> i64 {
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
pub(crate) const FIRST_ENTRY_NS: u64 = 10_000;

/// How many entries a step may read: `COUNT`, but no more than are likely to be handled in the
/// `left_ns` ns left of the tick at `entry_ns` ns each (0 = not measured yet:
/// [`FIRST_ENTRY_NS`]); at least 1.
pub(crate) fn step_entries(count: i64, left_ns: u64, entry_ns: u64) -> i64 {
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
pub(crate) fn next_entry_ns(old: u64, took_ns: u64, entries: u64) -> u64 {
    let now = took_ns / entries.max(1);
    if old == 0 {
        now.max(1)
    } else {
        ((old.saturating_mul(3) + now) / 4).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::tests::{pe, pol};

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
}
