//! What `RECLAIM.READGROUP` learnt of one policy: its rounds over the PEL ([`ReadScan`]), what a
//! read keeps of the policy's value ([`ReadFacts`]), what a read needs first ([`ReadView`]), the
//! claimant's inbox known empty, and when a parked entry may be due.

use crate::access::ReadWrites;
use crate::policy::State;

use super::Runtime;

/// `RECLAIM.READGROUP`'s rounds over the PEL looking for stale entries of other consumers, pages
/// read from a cursor (as `XAUTOCLAIM`'s cursor goes): where the next page starts, and what the
/// round learnt so far about when entries it passed turn due.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ReadScan {
    /// Last ID examined (`None`: the next page starts at the head of the PEL). Every entry up to
    /// it was either handed over or seen not due yet.
    pub(crate) cursor: Option<Vec<u8>>,
    /// Wall-clock ms when this round started (0: no round under way).
    pub(crate) round_start_ms: i64,
    /// The earliest wall-clock ms at which an entry this round saw not due yet turns due
    /// (`None`: none seen).
    pub(crate) min_due_ms: Option<i64>,
}

impl ReadScan {
    /// Notes pages read from the cursor at wall-clock `now`: `last` the last ID examined (`None`:
    /// the pages reached the end of the PEL, ending the round), `due` the earliest wall-clock ms
    /// at which an entry they saw not due yet turns due. At the end of a round, returns when the
    /// next due entry can appear at the earliest: what the round saw, and at most `min_idle` after
    /// the round started (entries it handed over, or delivered since, need that much idle time).
    pub(crate) fn page(
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

impl Runtime {
    /// When, by what the last pass and `RECLAIM.READGROUP`'s last look learnt, a pending entry of
    /// another consumer can be stale at the earliest (wall-clock ms; 0: unknown).
    pub(crate) fn read_horizon(&self) -> i64 {
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
