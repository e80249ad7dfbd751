//! Consumer tracking of one policy: whose delivery counts may have risen since a pass checked
//! them ([`Unchecked`], bounded [`Names`]), the touches the command filter saw waiting to be
//! confirmed ([`Recent`], made again at every `EXEC`: [`Runtime::remark`]), and when consumers
//! last talked to the module ([`Seen`], for `LIVENESS`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::metrics;

use super::Runtime;

/// Most consumers one policy tracks in each of its sets ([`Unchecked::Consumers`], the recent
/// touches): past it the policy falls back to checking everyone (a full pass, counted in
/// `INFO reclaim_tracking_overflows`).
pub const MAX_TRACKED: usize = 64;

/// Most bytes of consumer names one policy tracks in each of its sets; past it, as for
/// [`MAX_TRACKED`].
pub(crate) const MAX_TRACKED_BYTES: usize = 16 * 1024;

/// How long (ms) a touch is made again at every `EXEC` (a command queued in `MULTI` is seen when
/// it is queued, and runs at `EXEC`).
pub const EXEC_REMARK_MS: u64 = 10_000;

/// Whose delivery counts may have risen since a pass last checked them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum Unchecked {
    /// Anyone's: the next pass pages the whole PEL ([`crate::planner::PassKind::Full`]).
    #[default]
    All,
    /// These consumers' (none: every count is known to be within the limit).
    Consumers(Names),
}

/// A bounded set of consumer names: at most [`MAX_TRACKED`] names and [`MAX_TRACKED_BYTES`]
/// bytes of them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Names {
    pub(super) set: BTreeSet<Vec<u8>>,
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
    pub(crate) fn len(&self) -> usize {
        self.set.len()
    }

    /// The names, in order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Vec<u8>> {
        self.set.iter()
    }
}

/// A touch the command filter saw ([`Recent`]): when (server clock, ms), whether the command
/// sets idle times, and the consumer's last sighting already applied for it (0: none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Touch {
    /// Server clock (ms) when the filter saw the command: the command ran only if its consumer
    /// was seen at or after it (`XINFO CONSUMERS`' `idle`).
    pub(crate) at: u64,
    /// `XCLAIM ... IDLE/TIME`.
    pub(crate) sets_idle: bool,
    /// The sighting (server clock, ms) that last confirmed it (0: none yet).
    pub(crate) applied: u64,
}

/// The touches the command filter saw in the last [`EXEC_REMARK_MS`], by consumer, waiting to be
/// confirmed ([`Runtime::confirm`]). The filter runs before the server checks a command
/// (authentication, ACL, arity, out of memory, a `MULTI` that is later discarded): a touch
/// changes nothing until its consumer is seen at or after it, which only a command that ran
/// does (or the consumer's own later work). A touch stays that long so that a command queued in
/// `MULTI` (seen when queued) counts when `EXEC` runs it. When a bound is passed, one marker
/// stands for every consumer instead, until it expires.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Recent {
    by_consumer: BTreeMap<Vec<u8>, Touch>,
    bytes: usize,
    /// Every consumer was touched (a bound was passed).
    everyone: Option<Touch>,
    /// A touch was noted, or `EXEC` ran, since the last confirmation.
    recheck: bool,
}

impl Recent {
    /// Whether nothing is remembered.
    pub(crate) fn is_empty(&self) -> bool {
        self.by_consumer.is_empty() && self.everyone.is_none()
    }

    /// How many consumers' touches were confirmed (and are remembered).
    pub(crate) fn confirmed(&self) -> usize {
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

/// When consumers last talked to the module (`RECLAIM.READGROUP`, `EXTEND`, `NACK`, `TERM`),
/// for `LIVENESS`: Redis 7.0's `XINFO CONSUMERS` `idle` moves only when a read returns entries,
/// so a worker polling an empty stream would look gone. Bounded like the other sets
/// ([`MAX_TRACKED`] names, [`MAX_TRACKED_BYTES`] bytes; past it the least recent one is
/// forgotten), and entries older than `LIVENESS` are pruned on the timer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Seen {
    by_consumer: BTreeMap<Vec<u8>, u64>,
    bytes: usize,
    /// How long (ms) a sighting counts (the policy's `LIVENESS` when it was noted).
    keep_ms: u64,
}

impl Seen {
    /// Notes that `consumer` talked to the module at monotonic ms `now`.
    pub(crate) fn note(&mut self, consumer: &[u8], now: u64, keep_ms: u64) {
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

    /// Forgets sightings older than they count for; whether any is left.
    pub(crate) fn prune(&mut self, now: u64) -> bool {
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
    pub(crate) fn len(&self) -> usize {
        self.by_consumer.len()
    }

    /// Whether there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.by_consumer.is_empty()
    }

    /// The consumers and when (monotonic ms) each was last seen.
    pub(crate) fn by_consumer(&self) -> impl Iterator<Item = (&Vec<u8>, &u64)> {
        self.by_consumer.iter()
    }
}

impl Runtime {
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
    pub fn confirm(&mut self, seen: &HashMap<Vec<u8>, u64>) {
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

    /// Consumers this policy tracks now (unchecked ones and recent touches).
    pub fn tracked_consumers(&self) -> usize {
        let unchecked = match &self.unchecked {
            Unchecked::All => 0,
            Unchecked::Consumers(s) => s.len(),
        };
        unchecked + self.recent.confirmed() + self.seen.len()
    }

    /// The stream, its group or its consumers are gone (DEL, RENAME, XGROUP DESTROY): nothing
    /// tracked about them is worth keeping.
    pub fn forget_tracking(&mut self) {
        self.unchecked = Unchecked::All;
        self.recent = Recent::default();
        self.seen = Seen::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Confirms every touch: each consumer seen at `at`.
    fn seen_all(rt: &Runtime, at: u64) -> HashMap<Vec<u8>, u64> {
        let mut m: HashMap<Vec<u8>, u64> = rt
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
        let seen: HashMap<Vec<u8>, u64> = [(b"x".to_vec(), 999)].into();
        rt.confirm(&seen);
        assert!(!rt.wants_confirmation());
        assert_eq!(rt.unchecked, Unchecked::Consumers(Names::default()));
        assert_eq!(rt.stale_not_before_ms, 77);
        // Queued in MULTI, run at EXEC: confirmed at the next look after it.
        rt.remark(1_500);
        assert!(rt.wants_confirmation());
        let seen: HashMap<Vec<u8>, u64> = [(b"x".to_vec(), 1_500)].into();
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
    fn deleted_consumers_are_forgotten() {
        let mut rt = Runtime::new(0);
        rt.unchecked = Unchecked::Consumers(Names::default());
        rt.touch(b"gone", false);
        rt.touch(b"busy", false);
        rt.forget_idle_consumers(|c| c == b"busy");
        assert_eq!(rt.tracked_consumers(), 1);
    }

    #[test]
    fn sightings_are_bounded_forgetting_the_least_recent_and_expire() {
        let mut s = Seen::default();
        for i in 0..MAX_TRACKED {
            s.note(format!("c{i}").as_bytes(), 10 + i as u64, 1_000);
        }
        s.note(b"new", 100, 1_000);
        assert_eq!(s.len(), MAX_TRACKED);
        assert!(!s.by_consumer().any(|(c, _)| c == b"c0"), "least recent");
        assert!(s.by_consumer().any(|(c, _)| c == b"new"));
        // Seen again: its time moves, nothing is forgotten.
        s.note(b"c1", 500, 1_000);
        assert_eq!(s.len(), MAX_TRACKED);
        // Older than LIVENESS: forgotten on the timer.
        assert!(s.prune(1_099));
        assert_eq!(s.len(), 2, "c1 at 500 and new at 100 stay");
        assert!(!s.prune(1_500));
        assert!(s.is_empty());
        // A name longer than the byte bound is never kept.
        s.note(&vec![b'x'; MAX_TRACKED_BYTES + 1], 0, 1_000);
        assert!(s.is_empty());
    }
}
