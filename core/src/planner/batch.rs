//! A page of pending entries turned into units of work for the executor ([`Batch`], [`plan`]), in
//! PEL order, each entry decided by the table ([`super::decide`]).

use crate::policy::Policy;

use super::{decide, Action, Owners, Pending};

/// Most entries in one dead-letter batch: a move costs several µs (one `XADD` each), and the
/// deadline is only checked between batches.
pub(crate) const DEAD_LETTER_BATCH: usize = 16;

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
/// (see [`super::is_trimmed`]; `first` is the stream's first entry ID) are purged whatever their idle
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
    use crate::planner::tests::{pe, pol};
    use crate::planner::*;

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
