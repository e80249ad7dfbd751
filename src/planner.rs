//! The sweep planner (pure): pending entries + policy -> what to do with each entry.
//!
//! Rules (see docs/design.md):
//! - stale: idle >= `MIN-IDLE` ms (the comparison XCLAIM/XAUTOCLAIM use, Redis 6.2+ t_stream.c);
//! - over-delivered: delivery count > `MAX-DELIVERIES`, or stale with count == `MAX-DELIVERIES`;
//!   a count that reads negative (above 2^63-1) is over any limit; never with `MAX-DELIVERIES 0`;
//! - over-delivered -> dead-letter; stale and not over-delivered -> claim; otherwise untouched.
//!
//! Whether the entry still exists in the stream is checked by the executor: a deleted entry is
//! removed from the PEL and counted as `deleted`, never dead-lettered.

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
    /// Neither stale nor over-delivered: owner, count and idle time stay as they are.
    Untouched,
    /// Claim for the policy's CLAIMANT: delivery count + 1, idle reset to 0.
    Claim,
    /// Append to the DLQ and acknowledge, atomically.
    DeadLetter,
}

/// Classifies one pending entry under `policy`.
pub fn classify(p: &Pending, policy: &Policy) -> Action {
    let stale = p.idle_ms >= policy.min_idle_ms;
    if policy.max_deliveries > 0 {
        let over = p.deliveries < 0
            || p.deliveries > policy.max_deliveries
            || (stale && p.deliveries == policy.max_deliveries);
        if over {
            return Action::DeadLetter;
        }
    }
    if stale {
        Action::Claim
    } else {
        Action::Untouched
    }
}

/// The `RETRYCOUNT` to give XCLAIM so that a claim adds exactly one delivery, as a plain XCLAIM
/// would (Redis 7.0 `xclaimCommand`: `delivery_count++` unless JUSTID). `None` when the count
/// already reads negative (above 2^63-1): the claim then keeps the count as it is.
pub fn claim_retrycount(deliveries: i64) -> Option<i64> {
    if deliveries < 0 {
        None
    } else {
        Some(deliveries.saturating_add(1))
    }
}

/// Parses a stream entry ID (`ms-seq`, or `ms` meaning `ms-0`) into a comparable pair.
pub fn parse_id(id: &[u8]) -> Option<(u64, u64)> {
    let s = std::str::from_utf8(id).ok()?;
    match s.split_once('-') {
        Some((ms, seq)) => Some((ms.parse().ok()?, seq.parse().ok()?)),
        None => Some((s.parse().ok()?, 0)),
    }
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

/// One unit of work for the executor, in PEL (ID) order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Batch {
    /// Claim these entries with one XCLAIM; all share `retrycount` (the new delivery count).
    Claim {
        ids: Vec<Vec<u8>>,
        retrycount: Option<i64>,
    },
    /// Dead-letter these entries (appends first, then one XACK of those appended).
    DeadLetter(Vec<Pending>),
    /// Consecutive entries to leave alone: the last one's ID (for the cursor) and how many.
    Skip(Vec<u8>, u64),
    /// Entries trimmed from the stream (below its first ID): removed from the PEL with one XACK,
    /// whatever their idle time or count, and counted as `deleted`.
    Purge(Vec<Vec<u8>>),
}

impl Batch {
    /// How many pending entries the batch covers.
    pub fn len(&self) -> u64 {
        match self {
            Batch::Claim { ids, .. } | Batch::Purge(ids) => ids.len() as u64,
            Batch::DeadLetter(v) => v.len() as u64,
            Batch::Skip(_, n) => *n,
        }
    }

    /// Whether the batch is empty (never, for batches made by [`plan`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Turns a page of pending entries (in ID order) into batches, keeping ID order. Consecutive
/// entries with the same action share a batch of at most `max_batch` entries (claims also need
/// the same resulting count, as one XCLAIM sets one RETRYCOUNT). Entries trimmed from the stream
/// (see [`is_trimmed`]; `first` is the stream's first entry ID) are purged whatever their idle
/// time or count. Entries deleted from the middle of the stream (XDEL) are found when they are
/// claimed or dead-lettered.
pub fn plan(
    page: &[Pending],
    policy: &Policy,
    max_batch: usize,
    first: Option<(u64, u64)>,
) -> Vec<Batch> {
    let cap = max_batch.max(1);
    let mut out: Vec<Batch> = Vec::new();
    for p in page {
        let last = out.last_mut();
        if is_trimmed(&p.id, first) {
            match last {
                Some(Batch::Purge(ids)) if ids.len() < cap => ids.push(p.id.clone()),
                _ => out.push(Batch::Purge(vec![p.id.clone()])),
            }
            continue;
        }
        match classify(p, policy) {
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
            Action::Claim => {
                let rc = claim_retrycount(p.deliveries);
                match last {
                    Some(Batch::Claim { ids, retrycount })
                        if *retrycount == rc && ids.len() < cap =>
                    {
                        ids.push(p.id.clone())
                    }
                    _ => out.push(Batch::Claim {
                        ids: vec![p.id.clone()],
                        retrycount: rc,
                    }),
                }
            }
        }
    }
    out
}

/// The ID of the last entry a batch covers (the cursor after it is done).
pub fn last_id(b: &Batch) -> &[u8] {
    match b {
        Batch::Claim { ids, .. } | Batch::Purge(ids) => {
            ids.last().map(|v| v.as_slice()).unwrap_or(b"")
        }
        Batch::DeadLetter(v) => v.last().map(|p| p.id.as_slice()).unwrap_or(b""),
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
    fn classification_table() {
        let p = pol(60_000, 3);
        // (idle, count) -> action, with MIN-IDLE 60000, MAX-DELIVERIES 3
        let table = [
            (59_999, 1, Action::Untouched),
            (60_000, 1, Action::Claim),
            (120_000, 2, Action::Claim),
            (120_000, 3, Action::DeadLetter), // stale at the limit
            (10, 3, Action::Untouched),       // at the limit but still being worked on
            (10, 4, Action::DeadLetter),      // re-read history: over without going stale
            (10, -1, Action::DeadLetter),     // overflowed count
        ];
        for (idle, n, want) in table {
            assert_eq!(
                classify(&pe("1-0", idle, n), &p),
                want,
                "idle {idle} count {n}"
            );
        }
        // MAX-DELIVERIES 0: never dead-letter, whatever the count.
        let never = pol(1000, 0);
        assert_eq!(classify(&pe("1-0", 5000, 1_000_000), &never), Action::Claim);
        assert_eq!(classify(&pe("1-0", 5000, -5), &never), Action::Claim);
        assert_eq!(
            classify(&pe("1-0", 10, 1_000_000), &never),
            Action::Untouched
        );
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
            plan(&page, &p, 100, Some((3, 0))),
            vec![
                Batch::Purge(vec![b"1-0".to_vec(), b"2-5".to_vec()]),
                Batch::Skip(b"3-0".to_vec(), 1),
                Batch::Claim {
                    ids: vec![b"4-0".to_vec()],
                    retrycount: Some(2)
                },
            ]
        );
        // empty stream: everything is gone.
        assert_eq!(
            plan(&page[..1], &p, 100, None),
            vec![Batch::Purge(vec![b"1-0".to_vec()])]
        );
        assert_eq!(parse_id(b"12-3"), Some((12, 3)));
        assert_eq!(parse_id(b"12"), Some((12, 0)));
        assert_eq!(parse_id(b"x-1"), None);
        assert!(is_trimmed(
            b"18446744073709551614-0",
            Some((18446744073709551615, 0))
        ));
        assert!(!is_trimmed(b"5-1", Some((5, 1))));
    }

    #[test]
    fn id_windows() {
        assert_eq!(id_value((1, 2)), (1u128 << 64) | 2);
        assert_eq!(id_text(id_value((1795943711775, 7))), "1795943711775-7");
        assert_eq!(window_end(10, 5, 100), Some(15));
        assert_eq!(window_end(10, 500, 100), None);
        assert_eq!(window_end(u128::MAX - 1, 5, u128::MAX), None);
        // A fast window grows at most 16x, a slow one shrinks at most 16x, never below the floor.
        assert_eq!(next_width(4096, 1), 4096 * 4);
        assert_eq!(next_width(1 << 40, 100_000), (1 << 40) / 16);
        assert_eq!(next_width(4096, 200), 2048);
        assert_eq!(next_width(2048, 10_000), FIRST_WINDOW);
        assert_eq!(next_width(u128::MAX, 1), u128::MAX / 4);
    }

    #[test]
    fn retrycount() {
        assert_eq!(claim_retrycount(1), Some(2));
        assert_eq!(claim_retrycount(i64::MAX), Some(i64::MAX));
        assert_eq!(claim_retrycount(-3), None);
    }

    #[test]
    fn plan_groups_claims_in_order() {
        let p = pol(100, 3);
        let page = vec![
            pe("1-0", 500, 1),
            pe("2-0", 500, 1),
            pe("3-0", 500, 2),
            pe("4-0", 5, 1),
            pe("5-0", 500, 3),
            pe("6-0", 500, 1),
        ];
        let b = plan(&page, &p, 100, Some((1, 0)));
        assert_eq!(
            b,
            vec![
                Batch::Claim {
                    ids: vec![b"1-0".to_vec(), b"2-0".to_vec()],
                    retrycount: Some(2)
                },
                Batch::Claim {
                    ids: vec![b"3-0".to_vec()],
                    retrycount: Some(3)
                },
                Batch::Skip(b"4-0".to_vec(), 1),
                Batch::DeadLetter(vec![pe("5-0", 500, 3)]),
                Batch::Claim {
                    ids: vec![b"6-0".to_vec()],
                    retrycount: Some(2)
                },
            ]
        );
        assert_eq!(last_id(&b[0]), b"2-0");
        // max_claim splits long runs.
        let b = plan(&page[..2], &p, 1, Some((1, 0)));
        assert_eq!(b.len(), 2);
    }
}
