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
//!
//! Where things are: this file holds the table ([`Pending`], [`Rule`], [`Action`], [`decide`] and
//! the predicates it uses); `batch` turns a page into [`Batch`]es ([`plan`]); `ids` parses entry
//! IDs and sizes ID windows; `pass` decides pass kinds and what passes learn ([`PassKind`],
//! [`Fresh`], [`Tally`], [`Horizon`], lookahead and step sizes).

mod batch;
mod ids;
mod pass;

pub use batch::{last_id, plan, Batch};
pub use ids::{
    id_text, id_value, next_width, parse_id, window_end, FIRST_WINDOW, WINDOW_TARGET_US,
};
pub use pass::{bucket_count, Fresh, PassKind, Tally, MAX_BUCKETS};
pub(crate) use pass::{
    first_lookahead, next_entry_ns, next_lookahead, pass_kind, step_entries, Horizon, WATCH_PAGES,
};

use ids::is_trimmed;

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
pub(crate) fn over_delivered(p: &Pending, policy: &Policy, quiet: bool) -> bool {
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

/// Whether `p` is stale but kept by its owner, which was seen less than `LIVENESS` ms ago.
pub fn held(p: &Pending, policy: &Policy, quiet: bool) -> bool {
    is_stale(p, policy) && !takeable(p, policy, quiet)
}

/// Whether a consumer has been quiet for `LIVENESS` ms (`XINFO CONSUMERS` `idle`). `None` for a
/// consumer the view does not know: quiet (a consumer that is gone cannot work on anything).
pub(crate) type Owners<'a> = &'a dyn Fn(&[u8]) -> bool;

/// Whether `p`'s next delivery would pass `MAX-DELIVERIES`: `RECLAIM.READGROUP` dead-letters
/// it instead of handing it over (never with `MAX-DELIVERIES 0`).
pub fn delivery_would_pass_limit(p: &Pending, policy: &Policy) -> bool {
    policy.max_deliveries > 0 && (p.deliveries < 0 || p.deliveries >= policy.max_deliveries)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the sweep does with pending entry `p` under `policy`, whatever the stream holds (an
    /// entry still in the stream: [`decide`] without the trimming test).
    fn classify(p: &Pending, policy: &Policy, quiet: bool) -> Action {
        decide(p, policy, Some((0, 0)), quiet).action()
    }

    pub(super) fn pol(min_idle: i64, max: i64) -> Policy {
        Policy {
            min_idle_ms: min_idle,
            max_deliveries: max,
            dlq: if max > 0 { Some(b"dlq".to_vec()) } else { None },
            ..Policy::default()
        }
    }

    pub(super) fn pe(id: &str, idle: i64, n: i64) -> Pending {
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

    /// The policy of [`table`]: `MIN-IDLE` 1000, `MAX-DELIVERIES` 3, an exponential backoff,
    /// `LIVENESS` 5000.
    fn table_policy() -> Policy {
        let mut p = pol(1000, 3);
        p.backoff = crate::policy::Backoff::Exponential(100_000);
        p.liveness_ms = 5000;
        p
    }

    /// One entry for each row of the sweep's table under [`table_policy`], the stream's first
    /// ID 5-0: (entry, owner quiet, rule, action).
    fn table(p: &Policy) -> Vec<(Pending, bool, Rule, Action)> {
        let of = |id: &str, owner: &[u8], idle: i64, n: i64| Pending {
            consumer: owner.to_vec(),
            ..pe(id, idle, n)
        };
        let inbox = p.claimant.clone();
        let delayed = p.delayed();
        vec![
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
        ]
    }

    #[test]
    fn each_rule_of_the_table_and_its_action() {
        let p = table_policy();
        let first = Some((5, 0));
        let table = table(&p);
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
}
