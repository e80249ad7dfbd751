//! Policies and their argument parser (pure: no Redis calls, unit-tested without a server).
//!
//! A policy tells the sweeper, for one (stream, consumer group), when a pending entry is stale
//! (`MIN-IDLE`, growing with its deliveries by `BACKOFF`, and only once its consumer went quiet
//! with `LIVENESS`), when it is dead-lettered (`MAX-DELIVERIES`, `DLQ`), who receives moved
//! entries (`CLAIMANT`), how much one step may handle (`COUNT`) and how often a pass starts
//! (`INTERVAL`), how the DLQ is kept short (`DLQ-MAXLEN`, `DLQ-MAXAGE`) and whether entries
//! deleted while pending leave a record in it (`TOMBSTONES`).
//!
//! This module holds the value ([`Policy`], its defaults, [`Backoff`] and [`Policy::due_idle`],
//! [`Storm`], [`State`]); each command's option grammar has a file of its own: `set.rs`
//! (`RECLAIM.POLICY SET`'s options, [`Changes`], the DLQ's position for getkeys), `simulate.rs`
//! (`RECLAIM.SIMULATE`: SET's options and `LIMIT`), `sweep.rs` (`RECLAIM.SWEEP`'s `LIMIT`),
//! `list.rs` (`RECLAIM.POLICY LIST`'s page), and `args.rs` what they share (a number in range).

mod args;
mod list;
mod set;
mod simulate;
mod sweep;

pub use list::{parse_list_options, ListPage};
pub(crate) use set::option_of;
pub use set::{dlq_position, parse_set_options, Changes};
pub use simulate::parse_simulate_options;
pub use sweep::parse_sweep_options;

use crate::error::{self, ReclaimError};
use crate::text::yes_no;

/// Default `MIN-IDLE`, in ms: an entry idle this long (or longer) is stale.
const DEFAULT_MIN_IDLE_MS: i64 = 60_000;
/// Default `MAX-DELIVERIES`: 0 means never dead-letter.
const DEFAULT_MAX_DELIVERIES: i64 = 0;
/// Default `CLAIMANT`: the consumer that receives claimed entries.
const DEFAULT_CLAIMANT: &[u8] = b"reclaim";
/// Default `COUNT`, in pending entries examined per step.
const DEFAULT_COUNT: i64 = 100;
/// Largest `COUNT` accepted: bounds the memory and time of one step whatever the user asks.
const MAX_COUNT: i64 = 10_000;
/// Default `INTERVAL`, in ms between the end of one pass and the start of the next.
const DEFAULT_INTERVAL_MS: i64 = 10_000;

/// What follows the claimant's name in the name of the consumer that holds delayed entries.
const DELAYED_SUFFIX: &[u8] = b":delayed";

/// What follows the claimant's name in the name of the consumer that holds parked entries
/// (`RECLAIM.NACK ... DELAY` longer than the entry's due idle), until the timer releases them.
const PARKED_SUFFIX: &[u8] = b":parked";

/// The longest `RECLAIM.NACK ... DELAY`, ms: 30 days.
pub const MAX_DELAY_MS: i64 = 30 * 24 * 3600 * 1000;

/// The longest `RECLAIM.NACK ... REASON`, bytes.
pub const MAX_REASON_BYTES: usize = 1024;

/// Most values of `BACKOFF LIST`.
pub const MAX_BACKOFF_STEPS: usize = 64;

/// How the idle time an entry needs before its next redelivery grows with its delivery count.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Backoff {
    /// `BACKOFF FIXED`: always `MIN-IDLE`.
    #[default]
    Fixed,
    /// `BACKOFF EXPONENTIAL max-ms`: `MIN-IDLE` x 2^(count-1), at most `max-ms`.
    Exponential(i64),
    /// `BACKOFF LIST ms [ms ...]`: after the n-th delivery the n-th value, the last one repeating;
    /// never below `MIN-IDLE`.
    List(Vec<i64>),
}

/// Where a policy stands: whether its moves and dead-letters run. Not an option of
/// `RECLAIM.POLICY SET` (a `SET` keeps it): `RECLAIM.POLICY PAUSE` and `RESUME` change it, and the
/// `STORM` breaker opens it. Stored with the policy (RDB, AOF, replicas).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum State {
    /// Sweeps, redeliveries and dead-letters run.
    #[default]
    Active,
    /// `RECLAIM.POLICY PAUSE`: nothing is moved, redelivered or dead-lettered (new entries are
    /// still read through `RECLAIM.READGROUP`).
    Paused,
    /// The `STORM` breaker opened: no dead-letters (entries stay pending); moves go on.
    Storm,
}

impl State {
    /// The name `RECLAIM.POLICY GET` and `RECLAIM.STATS` show: `active`, `paused`, `storm`.
    pub fn name(self) -> &'static str {
        match self {
            State::Active => "active",
            State::Paused => "paused",
            State::Storm => "storm",
        }
    }

    /// Its code in the RDB (encoding version 3): 0, 1, 2.
    pub fn code(self) -> u64 {
        match self {
            State::Active => 0,
            State::Paused => 1,
            State::Storm => 2,
        }
    }

    /// The state of an RDB code, `None` for an unknown one.
    pub fn from_code(c: u64) -> Option<State> {
        match c {
            0 => Some(State::Active),
            1 => Some(State::Paused),
            2 => Some(State::Storm),
            _ => None,
        }
    }
}

/// `STORM n window-ms`: the poison-storm breaker. When more than `max` entries would be
/// dead-lettered within `window_ms`, the policy stops dead-lettering (state [`State::Storm`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Storm {
    /// Most dead-letters within one window, >= 1.
    pub max: i64,
    /// The window, ms, >= 1.
    pub window_ms: i64,
}

/// One (stream, group) policy. Field names follow the `RECLAIM.POLICY GET` reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// `min-idle`: ms; a pending entry with idle >= this is stale. Always >= 1.
    pub min_idle_ms: i64,
    /// `max-deliveries`: 0 = never dead-letter; otherwise an entry whose delivery count is above
    /// it, or equal to it and stale, moves to the DLQ.
    pub max_deliveries: i64,
    /// `dlq`: the dead-letter stream; required when `max_deliveries > 0`.
    pub dlq: Option<Vec<u8>>,
    /// `claimant`: the consumer that stale entries are claimed for.
    pub claimant: Vec<u8>,
    /// `count`: pending entries examined per step, 1..=[`MAX_COUNT`].
    pub count: i64,
    /// `interval`: ms from the end of a pass to the start of the next, >= 1.
    pub interval_ms: i64,
    /// `backoff`: how the idle an entry needs grows with its delivery count.
    pub backoff: Backoff,
    /// `liveness`: ms; an entry is taken from its consumer only when that consumer has not been
    /// seen (XINFO CONSUMERS `idle`) for at least this long. 0 = off.
    pub liveness_ms: i64,
    /// `storm`: the dead-letter breaker; `None` = off.
    pub storm: Option<Storm>,
    /// `dlq-maxlen`: after each dead-letter batch the DLQ is trimmed with `XTRIM dlq MAXLEN ~ n`
    /// (approximate: whole stream nodes, so it stays at n or a little above). 0 = off; above 0
    /// needs a DLQ.
    pub dlq_maxlen: i64,
    /// `dlq-maxage`: ms; after each dead-letter batch the DLQ is trimmed with `XTRIM dlq MINID ~
    /// <now - ms>` (dead letters older than this, by their ID's time). 0 = off; above 0 needs a
    /// DLQ.
    pub dlq_maxage_ms: i64,
    /// `tombstones`: an entry found deleted from the stream while pending gets a DLQ record
    /// (`reclaim-reason deleted`, the `reclaim-*` fields only) with its `XACK`. Needs a DLQ.
    pub tombstones: bool,
    /// `forget-idle`: ms; a consumer of the group idle (`XINFO CONSUMERS` `idle`) at least this
    /// long with no pending entries is deleted by the sweep (`XGROUP DELCONSUMER`), never the
    /// claimant or `<claimant>:delayed`. 0 = off.
    pub forget_idle_ms: i64,
    /// Whether moves and dead-letters run now (not an option: see [`State`]).
    pub state: State,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            min_idle_ms: DEFAULT_MIN_IDLE_MS,
            max_deliveries: DEFAULT_MAX_DELIVERIES,
            dlq: None,
            claimant: DEFAULT_CLAIMANT.to_vec(),
            count: DEFAULT_COUNT,
            interval_ms: DEFAULT_INTERVAL_MS,
            backoff: Backoff::Fixed,
            liveness_ms: 0,
            storm: None,
            dlq_maxlen: 0,
            dlq_maxage_ms: 0,
            tombstones: false,
            forget_idle_ms: 0,
            state: State::Active,
        }
    }
}

impl Policy {
    /// The options that recreate this policy with `RECLAIM.POLICY SET key group <options>`, every
    /// option explicit (used for replication and AOF rewrite, so a change of defaults in a later
    /// version never changes a stored policy).
    pub fn to_args(&self) -> Vec<Vec<u8>> {
        let mut a: Vec<Vec<u8>> = vec![
            b"MIN-IDLE".to_vec(),
            self.min_idle_ms.to_string().into_bytes(),
            b"MAX-DELIVERIES".to_vec(),
            self.max_deliveries.to_string().into_bytes(),
        ];
        if let Some(d) = &self.dlq {
            a.push(b"DLQ".to_vec());
            a.push(d.clone());
        }
        a.push(b"CLAIMANT".to_vec());
        a.push(self.claimant.clone());
        a.push(b"COUNT".to_vec());
        a.push(self.count.to_string().into_bytes());
        a.push(b"INTERVAL".to_vec());
        a.push(self.interval_ms.to_string().into_bytes());
        a.push(b"BACKOFF".to_vec());
        a.extend(self.backoff_words());
        a.push(b"LIVENESS".to_vec());
        a.push(self.liveness_ms.to_string().into_bytes());
        if let Some(s) = self.storm {
            a.push(b"STORM".to_vec());
            a.push(s.max.to_string().into_bytes());
            a.push(s.window_ms.to_string().into_bytes());
        }
        a.push(b"DLQ-MAXLEN".to_vec());
        a.push(self.dlq_maxlen.to_string().into_bytes());
        a.push(b"DLQ-MAXAGE".to_vec());
        a.push(self.dlq_maxage_ms.to_string().into_bytes());
        a.push(b"TOMBSTONES".to_vec());
        a.push(yes_no(self.tombstones).to_vec());
        a.push(b"FORGET-IDLE".to_vec());
        a.push(self.forget_idle_ms.to_string().into_bytes());
        a
    }

    /// Whether dead-letter moves trim the DLQ (`DLQ-MAXLEN` or `DLQ-MAXAGE` above 0).
    pub fn trims_dlq(&self) -> bool {
        self.dlq_maxlen > 0 || self.dlq_maxage_ms > 0
    }

    /// Why moves and dead-letters may not run now, as the error a command gets: `reclaim.enabled`
    /// is `no` (`enabled` false: [`error::DISABLED`]), or the policy is paused
    /// ([`error::POLICY_PAUSED`]); `None` when they may (an open `STORM` breaker stops only
    /// dead-letters: see the `dead_letters` allowance of `engine::deadletter::Dlq`).
    pub fn halted(&self, enabled: bool) -> Option<&'static str> {
        if !enabled {
            Some(error::DISABLED)
        } else if self.state == State::Paused {
            Some(error::POLICY_PAUSED)
        } else {
            None
        }
    }

    /// Why `RECLAIM.POLICY SET` would refuse these options for `stream` (the error it would
    /// answer, checked in the order SET reads them: each option's range, then the rules between
    /// them), `None` when it accepts them. A stored value can hold options SET never accepts: a
    /// `RENAME` or `COPY` of a policy key onto the policy key of its own DLQ, a `RESTORE` of a
    /// crafted payload. Such a policy is kept as it is and marked invalid with this reason; it
    /// never runs until a `SET` replaces it. Allocates nothing (the timer asks at every visit).
    pub fn fault(&self, stream: &[u8]) -> Option<ReclaimError> {
        let pos = "a positive integer (ms)";
        let non_neg = "a non-negative integer";
        let bad = |name, range| Some(ReclaimError::BadNumber(name, range));
        if self.min_idle_ms < 1 {
            return bad("MIN-IDLE", pos);
        }
        if self.max_deliveries < 0 {
            return bad("MAX-DELIVERIES", non_neg);
        }
        if !(1..=MAX_COUNT).contains(&self.count) {
            return bad("COUNT", "an integer from 1 to 10000");
        }
        if self.interval_ms < 1 {
            return bad("INTERVAL", pos);
        }
        match &self.backoff {
            Backoff::Fixed => {}
            Backoff::Exponential(max) if *max < 1 => {
                return bad("BACKOFF", "a positive integer (ms) after EXPONENTIAL")
            }
            Backoff::Exponential(_) => {}
            Backoff::List(v) if v.is_empty() || v.len() > MAX_BACKOFF_STEPS => {
                return Some(ReclaimError::Static(error::BACKOFF_LIST_LENGTH))
            }
            Backoff::List(v) if v.iter().any(|x| *x < 1) => {
                return bad("BACKOFF", "a list of positive integers (ms) after LIST")
            }
            Backoff::List(_) => {}
        }
        if self.liveness_ms < 0 {
            return bad("LIVENESS", "a non-negative integer (ms)");
        }
        if self.storm.is_some_and(|s| s.max < 1 || s.window_ms < 1) {
            return bad(
                "STORM",
                "two positive integers: the most dead-letters, then the window (ms)",
            );
        }
        if self.dlq_maxlen < 0 {
            return bad("DLQ-MAXLEN", non_neg);
        }
        if self.dlq_maxage_ms < 0 {
            return bad("DLQ-MAXAGE", "a non-negative integer (ms)");
        }
        if self.forget_idle_ms < 0 {
            return bad("FORGET-IDLE", "a non-negative integer (ms)");
        }
        let rule = |s| Some(ReclaimError::Static(s));
        if matches!(self.backoff, Backoff::Exponential(max) if max < self.min_idle_ms) {
            return rule(error::BACKOFF_BELOW_MIN_IDLE);
        }
        if self.dlq.is_none() {
            if self.max_deliveries > 0 {
                return rule(error::MAX_DELIVERIES_NEEDS_DLQ);
            }
            if self.dlq_maxlen > 0 {
                return rule(error::DLQ_MAXLEN_NEEDS_DLQ);
            }
            if self.dlq_maxage_ms > 0 {
                return rule(error::DLQ_MAXAGE_NEEDS_DLQ);
            }
            if self.tombstones {
                return rule(error::TOMBSTONES_NEEDS_DLQ);
            }
        }
        match self.dlq.as_deref() {
            Some(d) if d == stream => rule(error::DLQ_IS_STREAM),
            Some(d) if crate::keys::is_module_key(d) => rule(error::DLQ_IS_MODULE_KEY),
            _ => None,
        }
    }

    /// [`Policy::fault`], and in Redis Cluster (`cluster`) a DLQ that hashes to another slot than
    /// `stream` (what the server answers `SET` with, `CROSSSLOT`): why this policy cannot run
    /// where it is.
    pub fn fault_at(&self, stream: &[u8], cluster: bool) -> Option<ReclaimError> {
        use crate::keys::key_slot;
        self.fault(stream).or_else(|| {
            let d = self.dlq.as_deref()?;
            (cluster && key_slot(d) != key_slot(stream))
                .then_some(ReclaimError::Static(error::IMPORT_CROSSSLOT))
        })
    }

    /// The same options, another state: whether two policies differ in their options only.
    pub fn with_state(&self, state: State) -> Policy {
        Policy {
            state,
            ..self.clone()
        }
    }

    /// The consumer that holds entries given back with `RECLAIM.NACK ... DELAY ms` until they are
    /// due again: the claimant's name followed by `:delayed`.
    pub fn delayed(&self) -> Vec<u8> {
        [self.claimant.as_slice(), DELAYED_SUFFIX].concat()
    }

    /// Whether `consumer` is [`Policy::delayed`] (without building its name).
    pub fn is_delayed(&self, consumer: &[u8]) -> bool {
        consumer.len() == self.claimant.len() + DELAYED_SUFFIX.len()
            && consumer.starts_with(&self.claimant)
            && consumer.ends_with(DELAYED_SUFFIX)
    }

    /// The consumer that holds entries parked by `RECLAIM.NACK ... DELAY` for longer than their
    /// due idle: the claimant's name followed by `:parked`. Its entries are never stale: their
    /// due time is kept in the stream's delay key (`keys::delay_key`), and the timer releases them.
    pub fn parked(&self) -> Vec<u8> {
        [self.claimant.as_slice(), PARKED_SUFFIX].concat()
    }

    /// Whether `consumer` is [`Policy::parked`] (without building its name).
    pub fn is_parked(&self, consumer: &[u8]) -> bool {
        consumer.len() == self.claimant.len() + PARKED_SUFFIX.len()
            && consumer.starts_with(&self.claimant)
            && consumer.ends_with(PARKED_SUFFIX)
    }

    /// Whether `FORGET-IDLE` deletes `consumer`, which has `pending` entries and was last seen
    /// `idle_ms` ago: on, idle at least `FORGET-IDLE`, nothing pending, and not the module's own
    /// (the claimant, `<claimant>:delayed`, `<claimant>:parked`).
    pub fn forgets(&self, consumer: &[u8], pending: i64, idle_ms: i64) -> bool {
        self.forget_idle_ms > 0
            && pending == 0
            && idle_ms >= self.forget_idle_ms
            && consumer != self.claimant.as_slice()
            && !self.is_delayed(consumer)
            && !self.is_parked(consumer)
    }

    /// The words after `BACKOFF`: `FIXED`, `EXPONENTIAL max-ms` or `LIST ms ...`.
    pub fn backoff_words(&self) -> Vec<Vec<u8>> {
        let n = |v: &i64| v.to_string().into_bytes();
        match &self.backoff {
            Backoff::Fixed => vec![b"FIXED".to_vec()],
            Backoff::Exponential(max) => vec![b"EXPONENTIAL".to_vec(), n(max)],
            Backoff::List(v) => std::iter::once(b"LIST".to_vec())
                .chain(v.iter().map(n))
                .collect(),
        }
    }

    /// The idle time (ms) that makes an entry delivered `count` times due for its next delivery:
    /// `MIN-IDLE`, grown by `BACKOFF` (a count below 1 counts as 1; one that reads negative, above
    /// 2^63-1, as the largest).
    pub fn due_idle(&self, count: i64) -> i64 {
        let n = if count < 0 { i64::MAX } else { count.max(1) };
        match &self.backoff {
            Backoff::Fixed => self.min_idle_ms,
            Backoff::Exponential(max) => {
                let shift = (n - 1).min(62) as u32;
                self.min_idle_ms
                    .saturating_mul(1i64 << shift)
                    .min(*max)
                    .max(self.min_idle_ms)
            }
            Backoff::List(v) => {
                let i = ((n - 1) as usize).min(v.len().saturating_sub(1));
                v.get(i).copied().unwrap_or(0).max(self.min_idle_ms)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::set::parse_words as set;

    #[test]
    fn defaults() {
        let p = set(&[]).unwrap();
        assert_eq!(p.min_idle_ms, 60_000);
        assert_eq!(p.max_deliveries, 0);
        assert_eq!(p.dlq, None);
        assert_eq!(p.claimant, b"reclaim");
        assert_eq!(p.count, 100);
        assert_eq!(p.interval_ms, 10_000);
        assert_eq!((p.backoff.clone(), p.liveness_ms), (Backoff::Fixed, 0));
    }

    #[test]
    fn backoff_and_liveness() {
        let p = set(&[
            "MIN-IDLE",
            "100",
            "BACKOFF",
            "exponential",
            "1000",
            "LIVENESS",
            "5",
        ])
        .unwrap();
        assert_eq!(p.backoff, Backoff::Exponential(1000));
        let waits: Vec<i64> = (1..=6).map(|n| p.due_idle(n)).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(
            (p.due_idle(0), p.due_idle(-1), p.liveness_ms),
            (100, 1000, 5)
        );
        let p = set(&[
            "BACKOFF",
            "LIST",
            "50",
            "2000",
            "9000",
            "MIN-IDLE",
            "100",
            "DLQ",
            "d",
            "MAX-DELIVERIES",
            "9",
        ])
        .unwrap();
        assert_eq!(p.backoff, Backoff::List(vec![50, 2000, 9000]));
        let waits: Vec<i64> = (1..=5).map(|n| p.due_idle(n)).collect();
        assert_eq!(waits, [100, 2000, 9000, 9000, 9000]);
        // Round trip through to_args.
        let args = p.to_args();
        let a: Vec<&[u8]> = args.iter().map(|v| v.as_slice()).collect();
        assert_eq!(parse_set_options(b"orders", &a).unwrap(), p);
        assert_eq!(set(&["BACKOFF", "FIXED"]).unwrap().backoff, Backoff::Fixed);
        // The DLQ after a LIST is found where it is.
        let argv: Vec<&[u8]> = vec![
            b"RECLAIM.POLICY",
            b"SET",
            b"s",
            b"g",
            b"BACKOFF",
            b"LIST",
            b"1",
            b"2",
            b"DLQ",
            b"d",
        ];
        assert_eq!(dlq_position(&argv), Some(9));
    }

    /// Any policy, options in and out of range (as a crafted `RESTORE` can store them).
    fn any_policy() -> impl proptest::strategy::Strategy<Value = Policy> {
        use proptest::prelude::*;
        let num = || {
            prop_oneof![
                Just(0i64),
                Just(1),
                Just(-1),
                Just(10_000),
                Just(10_001),
                -3i64..200_000,
                any::<i64>()
            ]
        };
        let name = prop_oneof![
            Just(b"orders".to_vec()),
            Just(b"orders:dlq".to_vec()),
            Just(b"reclaim:policy:{x}:x".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..4),
        ];
        let backoff = prop_oneof![
            Just(Backoff::Fixed),
            num().prop_map(Backoff::Exponential),
            proptest::collection::vec(num(), 0..70).prop_map(Backoff::List),
        ];
        let storm = proptest::option::of(
            (num(), num()).prop_map(|(max, window_ms)| Storm { max, window_ms }),
        );
        (
            (
                num(),
                num(),
                proptest::option::of(name),
                num(),
                num(),
                backoff,
            ),
            (num(), storm, num(), num(), any::<bool>(), num()),
        )
            .prop_map(
                |(
                    (min_idle_ms, max_deliveries, dlq, count, interval_ms, backoff),
                    (liveness_ms, storm, dlq_maxlen, dlq_maxage_ms, tombstones, forget_idle_ms),
                )| Policy {
                    min_idle_ms,
                    max_deliveries,
                    dlq,
                    claimant: b"c".to_vec(),
                    count,
                    interval_ms,
                    backoff,
                    liveness_ms,
                    storm,
                    dlq_maxlen,
                    dlq_maxage_ms,
                    tombstones,
                    forget_idle_ms,
                    state: State::Paused,
                },
            )
    }

    #[test]
    fn forget_idle_deletes_only_idle_consumers_with_nothing_pending() {
        let p = set(&["FORGET-IDLE", "600000"]).unwrap();
        assert_eq!(p.forget_idle_ms, 600_000);
        assert!(p
            .to_args()
            .ends_with(&[b"FORGET-IDLE".to_vec(), b"600000".to_vec()]));
        assert!(p.forgets(b"pod-1", 0, 600_000));
        assert!(!p.forgets(b"pod-1", 0, 599_999));
        assert!(!p.forgets(b"pod-1", 1, i64::MAX));
        assert!(!p.forgets(b"reclaim", 0, i64::MAX));
        assert!(!p.forgets(b"reclaim:delayed", 0, i64::MAX));
        assert!(p.forgets(b"reclaim:delayed2", 0, i64::MAX));
        let off = Policy::default();
        assert_eq!(off.forget_idle_ms, 0);
        assert!(!off.forgets(b"pod-1", 0, i64::MAX));
        for (args, want) in [
            (
                &["FORGET-IDLE", "-1"][..],
                "ERR FORGET-IDLE must be a non-negative integer (ms)",
            ),
            (
                &["FORGET-IDLE", "x"],
                "ERR FORGET-IDLE must be a non-negative integer (ms)",
            ),
            (&["FORGET-IDLE"], "ERR option FORGET-IDLE needs a value"),
        ] {
            assert_eq!(set(args).unwrap_err().to_string(), want, "{args:?}");
        }
    }

    #[test]
    fn faults_of_stored_values() {
        let p = set(&["DLQ", "orders:dlq", "MAX-DELIVERIES", "3"]).unwrap();
        assert_eq!(p.fault(b"orders"), None);
        assert_eq!(
            p.fault(b"orders:dlq").unwrap().to_string(),
            error::DLQ_IS_STREAM
        );
        assert_eq!(p.fault_at(b"orders", false), None);
        assert_eq!(
            p.fault_at(b"orders", true).unwrap().to_string(),
            error::IMPORT_CROSSSLOT
        );
        let tagged = set(&["DLQ", "{orders}:dlq"]).unwrap();
        assert_eq!(tagged.fault_at(b"orders", true), None);
        let bad = Policy {
            count: 0,
            ..Policy::default()
        };
        assert_eq!(
            bad.fault(b"s").unwrap().to_string(),
            "ERR COUNT must be an integer from 1 to 10000"
        );
    }

    /// Any policy SET accepts for the stream `orders`.
    fn valid_policy() -> impl proptest::strategy::Strategy<Value = Policy> {
        use proptest::prelude::*;
        let ms = || 1i64..10_000_000;
        let backoff = prop_oneof![
            Just(Backoff::Fixed),
            ms().prop_map(Backoff::Exponential),
            proptest::collection::vec(ms(), 1..=MAX_BACKOFF_STEPS).prop_map(Backoff::List),
        ];
        let dlq = proptest::option::of(prop_oneof![
            Just(b"orders:dlq".to_vec()),
            Just(b"{orders}:dlq".to_vec()),
            Just(b"".to_vec()),
        ]);
        let storm = proptest::option::of(
            (1i64..1000, ms()).prop_map(|(max, window_ms)| Storm { max, window_ms }),
        );
        let claimant = proptest::collection::vec(any::<u8>(), 0..8);
        (
            (ms(), 0i64..20, dlq, claimant, 1..=MAX_COUNT, ms(), backoff),
            (
                0i64..100_000,
                storm,
                0i64..1000,
                0i64..100_000,
                any::<bool>(),
                0i64..100_000,
            ),
        )
            .prop_map(
                |(
                    (min_idle_ms, max_deliveries, dlq, claimant, count, interval_ms, backoff),
                    (liveness_ms, storm, dlq_maxlen, dlq_maxage_ms, tombstones, forget_idle_ms),
                )| {
                    let has_dlq = dlq.is_some();
                    let backoff = match backoff {
                        Backoff::Exponential(m) => Backoff::Exponential(m.max(min_idle_ms)),
                        b => b,
                    };
                    Policy {
                        min_idle_ms,
                        max_deliveries: if has_dlq { max_deliveries } else { 0 },
                        dlq,
                        claimant,
                        count,
                        interval_ms,
                        backoff,
                        liveness_ms,
                        storm,
                        dlq_maxlen: if has_dlq { dlq_maxlen } else { 0 },
                        dlq_maxage_ms: if has_dlq { dlq_maxage_ms } else { 0 },
                        tombstones: has_dlq && tombstones,
                        forget_idle_ms,
                        state: State::Active,
                    }
                },
            )
    }

    proptest::proptest! {
        /// `fault` says exactly what SET says of the same options, and nothing when SET reads
        /// them back as they are.
        #[test]
        fn fault_is_what_set_answers(p in any_policy(), stream in proptest::sample::select(vec![&b"orders"[..], b"orders:dlq", b""])) {
            let args = p.to_args();
            let a: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let parsed = parse_set_options(stream, &a).map(|q| q.with_state(p.state));
            match p.fault(stream) {
                None => proptest::prop_assert_eq!(parsed, Ok(p.clone())),
                Some(e) => proptest::prop_assert_eq!(parsed, Err(e)),
            }
        }

        /// `RECLAIM.SIMULATE` reads SET's options as SET does: the words that recreate a policy
        /// make the same policy over the defaults, and nothing else changes over another base.
        #[test]
        fn simulate_reads_set_options_as_set_does(p in valid_policy()) {
            proptest::prop_assert_eq!(p.fault(b"orders"), None);
            let args = p.to_args();
            let a: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let (limit, c) = parse_simulate_options(&a).unwrap();
            proptest::prop_assert_eq!(limit, None);
            proptest::prop_assert_eq!(c.clone().apply(Policy::default(), b"orders"), Ok(p.with_state(State::Active)));
            let paused = Policy::default().with_state(State::Paused);
            proptest::prop_assert_eq!(c.apply(paused, b"orders").map(|q| q.state), Ok(State::Paused));
        }

        /// The idle an entry needs is never below `MIN-IDLE`, and with `BACKOFF EXPONENTIAL max`
        /// it grows with the delivery count up to `max`, whatever the count.
        #[test]
        fn due_idle_stays_within_its_bounds(p in valid_policy(), counts in proptest::collection::vec(proptest::num::i64::ANY, 1..8)) {
            let mut sorted = counts.clone();
            sorted.retain(|c| *c >= 0);
            sorted.sort_unstable();
            for c in &counts {
                proptest::prop_assert!(p.due_idle(*c) >= p.min_idle_ms);
                if let Backoff::Exponential(max) = p.backoff {
                    proptest::prop_assert!(p.due_idle(*c) <= max);
                }
            }
            if let Backoff::Exponential(_) | Backoff::Fixed = p.backoff {
                for w in sorted.windows(2) {
                    proptest::prop_assert!(p.due_idle(w[0]) <= p.due_idle(w[1]));
                }
            }
        }

        #[test]
        fn parser_never_panics(args in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..12), 0..10)) {
            let a: Vec<&[u8]> = args.iter().map(|x| x.as_slice()).collect();
            let _ = parse_set_options(b"s", &a);
            let _ = parse_sweep_options(&a);
            let _ = parse_simulate_options(&a).map(|(_, c)| c.apply(Policy::default(), b"s"));
            let _ = dlq_position(&a);
        }
    }
}
