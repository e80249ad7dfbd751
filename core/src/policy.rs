//! Policies and their argument parser (pure: no Redis calls, unit-tested without a server).
//!
//! A policy tells the sweeper, for one (stream, consumer group), when a pending entry is stale
//! (`MIN-IDLE`, growing with its deliveries by `BACKOFF`, and only once its consumer went quiet
//! with `LIVENESS`), when it is dead-lettered (`MAX-DELIVERIES`, `DLQ`), who receives moved
//! entries (`CLAIMANT`), how much one step may handle (`COUNT`) and how often a pass starts
//! (`INTERVAL`), how the DLQ is kept short (`DLQ-MAXLEN`, `DLQ-MAXAGE`) and whether entries
//! deleted while pending leave a record in it (`TOMBSTONES`).

use crate::error::{self, ReclaimError};
use crate::text::{parse_i64, printable, yes_no};

/// Default `MIN-IDLE`, in ms: an entry idle this long (or longer) is stale.
pub const DEFAULT_MIN_IDLE_MS: i64 = 60_000;
/// Default `MAX-DELIVERIES`: 0 means never dead-letter.
pub const DEFAULT_MAX_DELIVERIES: i64 = 0;
/// Default `CLAIMANT`: the consumer that receives claimed entries.
pub const DEFAULT_CLAIMANT: &[u8] = b"reclaim";
/// Default `COUNT`, in pending entries examined per step.
pub const DEFAULT_COUNT: i64 = 100;
/// Largest `COUNT` accepted: bounds the memory and time of one step whatever the user asks.
pub const MAX_COUNT: i64 = 10_000;
/// Default `INTERVAL`, in ms between the end of one pass and the start of the next.
pub const DEFAULT_INTERVAL_MS: i64 = 10_000;

/// What follows the claimant's name in the name of the consumer that holds delayed entries.
pub const DELAYED_SUFFIX: &[u8] = b":delayed";

/// What follows the claimant's name in the name of the consumer that holds parked entries
/// (`RECLAIM.NACK ... DELAY` longer than the entry's due idle), until the timer releases them.
pub const PARKED_SUFFIX: &[u8] = b":parked";

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

fn number(
    name: &'static str,
    range: &'static str,
    v: &[u8],
    min: i64,
    max: i64,
) -> Result<i64, ReclaimError> {
    match parse_i64(v) {
        Some(n) if n >= min && n <= max => Ok(n),
        _ => Err(ReclaimError::BadNumber(name, range)),
    }
}

/// The options of `RECLAIM.POLICY SET`, each with how many values it takes (`None`: one or more,
/// the numbers that follow: `BACKOFF LIST ms ...`).
const SET_OPTIONS: &[&str] = &[
    "MIN-IDLE",
    "MAX-DELIVERIES",
    "DLQ",
    "CLAIMANT",
    "COUNT",
    "INTERVAL",
    "BACKOFF",
    "LIVENESS",
    "STORM",
    "DLQ-MAXLEN",
    "DLQ-MAXAGE",
    "TOMBSTONES",
    "FORGET-IDLE",
];

/// One option of `RECLAIM.POLICY SET`: (canonical name, index of the name, its values).
type Span<'a> = (&'static str, usize, &'a [&'a [u8]]);

/// Splits `RECLAIM.POLICY SET` options into (canonical name, index of the name, its values):
/// every option takes one value, but `BACKOFF`, which takes `FIXED`, `EXPONENTIAL max-ms` or
/// `LIST ms [ms ...]` (the numbers that follow). Errors: unknown option, missing value.
fn set_spans<'a>(opts: &'a [&'a [u8]]) -> Result<Vec<Span<'a>>, ReclaimError> {
    spans(opts, &[])
}

/// [`set_spans`] with the options of `extra` besides `SET`'s (each takes one value, but `BACKOFF`
/// and `STORM`).
fn spans<'a>(opts: &'a [&'a [u8]], extra: &[&'static str]) -> Result<Vec<Span<'a>>, ReclaimError> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < opts.len() {
        let raw = opts[i];
        let up = raw.to_ascii_uppercase();
        let known = |o: &&&'static str| o.as_bytes() == up.as_slice();
        let Some(name) = SET_OPTIONS.iter().chain(extra).find(known) else {
            return Err(ReclaimError::UnknownOption(printable(raw)));
        };
        let first = *opts.get(i + 1).ok_or(ReclaimError::MissingValue(name))?;
        let len = if *name == "STORM" {
            2
        } else if *name != "BACKOFF" {
            1
        } else if first.eq_ignore_ascii_case(b"EXPONENTIAL") {
            2
        } else if first.eq_ignore_ascii_case(b"LIST") {
            1 + opts[i + 2..]
                .iter()
                .take_while(|v| parse_i64(v).is_some())
                .count()
        } else {
            1
        };
        let end = (i + 1 + len).min(opts.len());
        out.push((*name, i, &opts[i + 1..end]));
        i = end;
    }
    Ok(out)
}

/// Parses the words after `STORM`: `n window-ms`, both positive.
fn parse_storm(v: &[&[u8]]) -> Result<Storm, ReclaimError> {
    let range = "two positive integers: the most dead-letters, then the window (ms)";
    let (Some(n), Some(w)) = (v.first(), v.get(1)) else {
        return Err(ReclaimError::BadNumber("STORM", range));
    };
    Ok(Storm {
        max: number("STORM", range, n, 1, i64::MAX)?,
        window_ms: number("STORM", range, w, 1, i64::MAX)?,
    })
}

/// Parses the words after `BACKOFF`.
fn parse_backoff(v: &[&[u8]]) -> Result<Backoff, ReclaimError> {
    let bad = ReclaimError::Static(error::BACKOFF_SYNTAX);
    let kind = v.first().ok_or(bad.clone())?;
    if kind.eq_ignore_ascii_case(b"FIXED") {
        return Ok(Backoff::Fixed);
    }
    if kind.eq_ignore_ascii_case(b"EXPONENTIAL") {
        let max = v.get(1).ok_or(bad)?;
        let range = "a positive integer (ms) after EXPONENTIAL";
        return Ok(Backoff::Exponential(number(
            "BACKOFF",
            range,
            max,
            1,
            i64::MAX,
        )?));
    }
    if kind.eq_ignore_ascii_case(b"LIST") {
        let steps = &v[1..];
        if steps.is_empty() || steps.len() > MAX_BACKOFF_STEPS {
            return Err(ReclaimError::Static(error::BACKOFF_LIST_LENGTH));
        }
        let range = "a list of positive integers (ms) after LIST";
        let list = steps
            .iter()
            .map(|x| number("BACKOFF", range, x, 1, i64::MAX))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(Backoff::List(list));
    }
    Err(bad)
}

/// The options of one `RECLAIM.POLICY SET`, each as given (`None`: not given), checked one by
/// one but not yet against each other (see [`Changes::apply`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    min_idle_ms: Option<i64>,
    max_deliveries: Option<i64>,
    dlq: Option<Vec<u8>>,
    claimant: Option<Vec<u8>>,
    count: Option<i64>,
    interval_ms: Option<i64>,
    backoff: Option<Backoff>,
    liveness_ms: Option<i64>,
    storm: Option<Storm>,
    dlq_maxlen: Option<i64>,
    dlq_maxage_ms: Option<i64>,
    tombstones: Option<bool>,
    forget_idle_ms: Option<i64>,
}

impl Changes {
    /// Whether no option was given.
    pub fn is_empty(&self) -> bool {
        *self == Changes::default()
    }

    /// The `STORM` option given, if any.
    pub fn storm(&self) -> Option<Storm> {
        self.storm
    }

    /// Reads one option (its canonical name and values, from [`spans`]). Errors: a number out
    /// of range, a malformed `BACKOFF`.
    fn read(&mut self, name: &'static str, v: &[&[u8]]) -> Result<(), ReclaimError> {
        let first = v[0];
        let pos = "a positive integer (ms)";
        match name {
            "MIN-IDLE" => self.min_idle_ms = Some(number(name, pos, first, 1, i64::MAX)?),
            "MAX-DELIVERIES" => {
                self.max_deliveries =
                    Some(number(name, "a non-negative integer", first, 0, i64::MAX)?)
            }
            "DLQ" => self.dlq = Some(first.to_vec()),
            "CLAIMANT" => self.claimant = Some(first.to_vec()),
            "COUNT" => {
                self.count = Some(number(
                    name,
                    "an integer from 1 to 10000",
                    first,
                    1,
                    MAX_COUNT,
                )?)
            }
            "INTERVAL" => self.interval_ms = Some(number(name, pos, first, 1, i64::MAX)?),
            "BACKOFF" => self.backoff = Some(parse_backoff(v)?),
            "STORM" => self.storm = Some(parse_storm(v)?),
            "DLQ-MAXLEN" => {
                self.dlq_maxlen = Some(number(name, "a non-negative integer", first, 0, i64::MAX)?)
            }
            "DLQ-MAXAGE" => {
                self.dlq_maxage_ms = Some(number(
                    name,
                    "a non-negative integer (ms)",
                    first,
                    0,
                    i64::MAX,
                )?)
            }
            "TOMBSTONES" => {
                self.tombstones = Some(if first.eq_ignore_ascii_case(b"yes") {
                    true
                } else if first.eq_ignore_ascii_case(b"no") {
                    false
                } else {
                    return Err(ReclaimError::Static(error::TOMBSTONES_SYNTAX));
                })
            }
            "FORGET-IDLE" => {
                self.forget_idle_ms = Some(number(
                    name,
                    "a non-negative integer (ms)",
                    first,
                    0,
                    i64::MAX,
                )?)
            }
            _ => {
                self.liveness_ms = Some(number(
                    name,
                    "a non-negative integer (ms)",
                    first,
                    0,
                    i64::MAX,
                )?)
            }
        }
        Ok(())
    }

    /// `base` with these options changed: the policy `RECLAIM.POLICY SET` would make of them
    /// over `base` (its defaults for SET itself), checked as a whole for `stream`. Errors:
    /// `BACKOFF EXPONENTIAL` below `MIN-IDLE`, `MAX-DELIVERIES`, `DLQ-MAXLEN` or `DLQ-MAXAGE` > 0
    /// or `TOMBSTONES yes` without `DLQ` (checked in that order), `DLQ` equal
    /// to `stream` or a policy key.
    pub fn apply(self, base: Policy, stream: &[u8]) -> Result<Policy, ReclaimError> {
        let mut p = base;
        p.min_idle_ms = self.min_idle_ms.unwrap_or(p.min_idle_ms);
        p.max_deliveries = self.max_deliveries.unwrap_or(p.max_deliveries);
        p.dlq = self.dlq.or(p.dlq);
        p.claimant = self.claimant.unwrap_or(p.claimant);
        p.count = self.count.unwrap_or(p.count);
        p.interval_ms = self.interval_ms.unwrap_or(p.interval_ms);
        p.backoff = self.backoff.unwrap_or(p.backoff);
        p.liveness_ms = self.liveness_ms.unwrap_or(p.liveness_ms);
        p.storm = self.storm.or(p.storm);
        p.dlq_maxlen = self.dlq_maxlen.unwrap_or(p.dlq_maxlen);
        p.dlq_maxage_ms = self.dlq_maxage_ms.unwrap_or(p.dlq_maxage_ms);
        p.tombstones = self.tombstones.unwrap_or(p.tombstones);
        p.forget_idle_ms = self.forget_idle_ms.unwrap_or(p.forget_idle_ms);
        if matches!(p.backoff, Backoff::Exponential(max) if max < p.min_idle_ms) {
            return Err(ReclaimError::Static(error::BACKOFF_BELOW_MIN_IDLE));
        }
        if p.max_deliveries > 0 && p.dlq.is_none() {
            return Err(ReclaimError::Static(error::MAX_DELIVERIES_NEEDS_DLQ));
        }
        if p.dlq.is_none() {
            if p.dlq_maxlen > 0 {
                return Err(ReclaimError::Static(error::DLQ_MAXLEN_NEEDS_DLQ));
            }
            if p.dlq_maxage_ms > 0 {
                return Err(ReclaimError::Static(error::DLQ_MAXAGE_NEEDS_DLQ));
            }
            if p.tombstones {
                return Err(ReclaimError::Static(error::TOMBSTONES_NEEDS_DLQ));
            }
        }
        if p.dlq.as_deref() == Some(stream) {
            return Err(ReclaimError::Static(error::DLQ_IS_STREAM));
        }
        if p.dlq.as_deref().is_some_and(crate::keys::is_module_key) {
            return Err(ReclaimError::Static(error::DLQ_IS_MODULE_KEY));
        }
        Ok(p)
    }
}

/// Reads the spans of `RECLAIM.POLICY SET` options into [`Changes`], in the order given;
/// `other` reads those that are not SET's own. Errors: repeated option, and those of
/// [`Changes::read`] and `other`.
fn read_changes(
    spans: &[Span],
    mut other: impl FnMut(&'static str, &[&[u8]]) -> Result<(), ReclaimError>,
) -> Result<Changes, ReclaimError> {
    let mut c = Changes::default();
    let mut seen: Vec<&'static str> = Vec::new();
    for (name, _, v) in spans {
        if seen.contains(name) {
            return Err(ReclaimError::RepeatedOption(name));
        }
        seen.push(name);
        if SET_OPTIONS.contains(name) {
            c.read(name, v)?;
        } else {
            other(name, v)?;
        }
    }
    Ok(c)
}

/// Parses the options of `RECLAIM.POLICY SET key group [MIN-IDLE ms] [MAX-DELIVERIES n]
/// [DLQ dlq-key] [CLAIMANT consumer] [COUNT n] [INTERVAL ms] [BACKOFF FIXED | EXPONENTIAL max-ms |
/// LIST ms [ms ...]] [LIVENESS ms] [STORM n window-ms] [DLQ-MAXLEN n] [DLQ-MAXAGE ms]
/// [TOMBSTONES yes|no] [FORGET-IDLE ms]` (everything after `group`). Option names are
/// case-insensitive; values are binary-safe.
///
/// Errors: unknown option, repeated option, option without value, number out of range
/// (`MIN-IDLE`, `COUNT`, `INTERVAL` >= 1, `COUNT` <= [`MAX_COUNT`], `MAX-DELIVERIES` and
/// `LIVENESS`, `FORGET-IDLE` >= 0), a malformed `BACKOFF`, `BACKOFF EXPONENTIAL` below `MIN-IDLE`,
/// `TOMBSTONES` neither `yes` nor `no` (any case), `MAX-DELIVERIES`, `DLQ-MAXLEN`, `DLQ-MAXAGE`
/// > 0 or `TOMBSTONES yes` without `DLQ`, `DLQ` equal to `stream`.
pub fn parse_set_options(stream: &[u8], opts: &[&[u8]]) -> Result<Policy, ReclaimError> {
    read_changes(&set_spans(opts)?, |_, _| Ok(()))?.apply(Policy::default(), stream)
}

/// Largest `LIMIT` of `RECLAIM.SIMULATE` (its default is the evaluated policy's `COUNT`): bounds
/// the reply and the time of the command.
pub const MAX_SIMULATE_LIMIT: i64 = 10_000;

/// The options of `RECLAIM.SIMULATE` besides `SET`'s.
const SIMULATE_OPTIONS: &[&str] = &["LIMIT"];

/// Parses `RECLAIM.SIMULATE key group [LIMIT n] [option ...]` (everything after `group`): any
/// option of `RECLAIM.POLICY SET`, read as SET reads it, and `LIMIT`, in any order. Returns the
/// limit (`None`: not given) and the policy changes (not yet applied: see [`Changes::apply`]).
/// Errors: those of SET's options one by one (unknown, repeated, without value, out of range,
/// malformed `BACKOFF`), and `LIMIT` outside 1 ..= [`MAX_SIMULATE_LIMIT`].
pub fn parse_simulate_options(opts: &[&[u8]]) -> Result<(Option<i64>, Changes), ReclaimError> {
    let mut limit = None;
    let changes = read_changes(&spans(opts, SIMULATE_OPTIONS)?, |_, v| {
        let range = "an integer from 1 to 10000";
        limit = Some(number("LIMIT", range, v[0], 1, MAX_SIMULATE_LIMIT)?);
        Ok(())
    })?;
    Ok((limit, changes))
}

/// The option of `RECLAIM.POLICY SET` that an error of [`parse_set_options`] is about (upper
/// case, as typed in SET), or `None` for an unknown option name. `RECLAIM.POLICY IMPORT` names
/// the document's field from it (the option's name in lower case). A new check in the parser adds
/// its error here.
pub fn option_of(e: &ReclaimError) -> Option<&'static str> {
    match e {
        ReclaimError::RepeatedOption(o)
        | ReclaimError::MissingValue(o)
        | ReclaimError::BadNumber(o, _) => Some(o),
        ReclaimError::Static(s) => match *s {
            error::BACKOFF_SYNTAX | error::BACKOFF_LIST_LENGTH | error::BACKOFF_BELOW_MIN_IDLE => {
                Some("BACKOFF")
            }
            error::MAX_DELIVERIES_NEEDS_DLQ => Some("MAX-DELIVERIES"),
            error::DLQ_MAXLEN_NEEDS_DLQ => Some("DLQ-MAXLEN"),
            error::DLQ_MAXAGE_NEEDS_DLQ => Some("DLQ-MAXAGE"),
            error::TOMBSTONES_NEEDS_DLQ | error::TOMBSTONES_SYNTAX => Some("TOMBSTONES"),
            error::DLQ_IS_STREAM | error::DLQ_IS_MODULE_KEY => Some("DLQ"),
            _ => None,
        },
        _ => None,
    }
}

/// Where the DLQ key sits in a `RECLAIM.POLICY SET` argument vector (`argv[0]` is
/// `RECLAIM.POLICY`, `argv[1]` is `SET`), or `None` when there is no `DLQ` option. Splits the
/// options as [`parse_set_options`] does, so `CLAIMANT DLQ` is a value, never a key.
/// Used by the getkeys callback (`COMMAND GETKEYS`, ACL, cluster routing).
pub fn dlq_position(argv: &[&[u8]]) -> Option<usize> {
    let opts = argv.get(4..)?;
    let spans = set_spans(opts).ok()?;
    spans
        .into_iter()
        .find(|(name, _, _)| *name == "DLQ")
        .map(|(_, at, _)| 4 + at + 1)
}

/// Parses `RECLAIM.SWEEP key group [LIMIT n]` options (after `group`): the entry limit, `None`
/// for a complete pass. Errors: unknown or repeated option, missing value, LIMIT < 1.
pub fn parse_sweep_options(opts: &[&[u8]]) -> Result<Option<i64>, ReclaimError> {
    let mut limit = None;
    let mut i = 0;
    while i < opts.len() {
        if !opts[i].eq_ignore_ascii_case(b"LIMIT") {
            return Err(ReclaimError::UnknownOption(printable(opts[i])));
        }
        if limit.is_some() {
            return Err(ReclaimError::RepeatedOption("LIMIT"));
        }
        let v = *opts.get(i + 1).ok_or(ReclaimError::MissingValue("LIMIT"))?;
        limit = Some(number("LIMIT", "a positive integer", v, 1, i64::MAX)?);
        i += 2;
    }
    Ok(limit)
}

/// A page of `RECLAIM.POLICY LIST`: the policies after (`key`, `group`) in the listing's order,
/// at most `count` of them. Both `None`: every policy.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ListPage<'a> {
    /// List only the policies after this (key, group), in byte order of key then group.
    pub after: Option<(&'a [u8], &'a [u8])>,
    /// List at most this many.
    pub count: Option<usize>,
}

/// Parses `RECLAIM.POLICY LIST [AFTER key group] [COUNT n]` options (after `LIST`), in any order.
/// Errors: unknown or repeated option, missing value, COUNT < 1.
pub fn parse_list_options<'a>(opts: &[&'a [u8]]) -> Result<ListPage<'a>, ReclaimError> {
    let mut page = ListPage::default();
    let mut i = 0;
    while i < opts.len() {
        let o = opts[i];
        if o.eq_ignore_ascii_case(b"AFTER") {
            if page.after.is_some() {
                return Err(ReclaimError::RepeatedOption("AFTER"));
            }
            let (Some(k), Some(g)) = (opts.get(i + 1), opts.get(i + 2)) else {
                return Err(ReclaimError::MissingValue("AFTER"));
            };
            page.after = Some((k, g));
            i += 3;
        } else if o.eq_ignore_ascii_case(b"COUNT") {
            if page.count.is_some() {
                return Err(ReclaimError::RepeatedOption("COUNT"));
            }
            let v = *opts.get(i + 1).ok_or(ReclaimError::MissingValue("COUNT"))?;
            let n = number("COUNT", "a positive integer", v, 1, i64::MAX)?;
            page.count = Some(usize::try_from(n).unwrap_or(usize::MAX));
            i += 2;
        } else {
            return Err(ReclaimError::UnknownOption(printable(o)));
        }
    }
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(opts: &[&str]) -> Result<Policy, String> {
        let o: Vec<&[u8]> = opts.iter().map(|s| s.as_bytes()).collect();
        parse_set_options(b"orders", &o).map_err(|e| e.to_string())
    }

    #[test]
    fn retention_and_tombstones() {
        let p = set(&["DLQ", "d"]).unwrap();
        assert_eq!((p.dlq_maxlen, p.dlq_maxage_ms, p.tombstones), (0, 0, false));
        assert!(!p.trims_dlq());
        let p = set(&[
            "dlq-maxlen",
            "100",
            "DLQ-MAXAGE",
            "3600000",
            "tombstones",
            "YES",
            "DLQ",
            "d",
        ])
        .unwrap();
        assert_eq!(
            (p.dlq_maxlen, p.dlq_maxage_ms, p.tombstones),
            (100, 3_600_000, true)
        );
        assert!(p.trims_dlq());
        let args = p.to_args();
        let a: Vec<&[u8]> = args.iter().map(|v| v.as_slice()).collect();
        assert_eq!(parse_set_options(b"orders", &a).unwrap(), p);
        assert_eq!(
            &args[args.len() - 8..args.len() - 2],
            [
                &b"DLQ-MAXLEN"[..],
                b"100",
                b"DLQ-MAXAGE",
                b"3600000",
                b"TOMBSTONES",
                b"yes"
            ]
        );
        // 0 and no are the defaults, allowed without a DLQ.
        let p = set(&["DLQ-MAXLEN", "0", "DLQ-MAXAGE", "0", "TOMBSTONES", "no"]).unwrap();
        assert_eq!(p, Policy::default());
        let cases: &[(&[&str], &str)] = &[
            (
                &["DLQ-MAXLEN", "-1", "DLQ", "d"],
                "ERR DLQ-MAXLEN must be a non-negative integer",
            ),
            (
                &["DLQ-MAXLEN", "1.5", "DLQ", "d"],
                "ERR DLQ-MAXLEN must be a non-negative integer",
            ),
            (
                &["DLQ-MAXAGE", "-5", "DLQ", "d"],
                "ERR DLQ-MAXAGE must be a non-negative integer (ms)",
            ),
            (
                &["DLQ-MAXAGE", "x", "DLQ", "d"],
                "ERR DLQ-MAXAGE must be a non-negative integer (ms)",
            ),
            (
                &["TOMBSTONES", "1", "DLQ", "d"],
                "ERR TOMBSTONES must be yes or no",
            ),
            (
                &["DLQ-MAXLEN", "10"],
                "ERR DLQ-MAXLEN above 0 needs a DLQ key",
            ),
            (
                &["DLQ-MAXAGE", "10"],
                "ERR DLQ-MAXAGE above 0 needs a DLQ key",
            ),
            (&["TOMBSTONES", "yes"], "ERR TOMBSTONES yes needs a DLQ key"),
            (&["TOMBSTONES"], "ERR option TOMBSTONES needs a value"),
            (
                &["DLQ-MAXLEN", "1", "DLQ-MAXLEN", "2", "DLQ", "d"],
                "ERR option DLQ-MAXLEN given more than once",
            ),
        ];
        for (opts, want) in cases {
            assert_eq!(set(opts).unwrap_err(), *want, "{opts:?}");
        }
        // SIMULATE's what-ifs take them too.
        let o: Vec<&[u8]> = ["TOMBSTONES", "yes", "DLQ-MAXLEN", "5"]
            .iter()
            .map(|s| s.as_bytes())
            .collect();
        let (_, c) = parse_simulate_options(&o).unwrap();
        let base = set(&["DLQ", "d"]).unwrap();
        let q = c.apply(base, b"orders").unwrap();
        assert_eq!((q.tombstones, q.dlq_maxlen), (true, 5));
    }

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

    #[test]
    fn all_options_any_case() {
        let p = set(&[
            "min-idle",
            "5",
            "Max-Deliveries",
            "3",
            "dlq",
            "orders:dlq",
            "claimant",
            "c",
            "count",
            "7",
            "interval",
            "9",
        ])
        .unwrap();
        assert_eq!(
            p,
            Policy {
                min_idle_ms: 5,
                max_deliveries: 3,
                dlq: Some(b"orders:dlq".to_vec()),
                claimant: b"c".to_vec(),
                count: 7,
                interval_ms: 9,
                ..Policy::default()
            }
        );
        // to_args round-trips.
        let args = p.to_args();
        let a: Vec<&[u8]> = args.iter().map(|v| v.as_slice()).collect();
        assert_eq!(parse_set_options(b"orders", &a).unwrap(), p);
    }

    #[test]
    fn rejections() {
        let cases: &[(&[&str], &str)] = &[
            (
                &["MIN-IDLE", "0"],
                "ERR MIN-IDLE must be a positive integer (ms)",
            ),
            (
                &["MIN-IDLE", "-1"],
                "ERR MIN-IDLE must be a positive integer (ms)",
            ),
            (
                &["MIN-IDLE", "1.5"],
                "ERR MIN-IDLE must be a positive integer (ms)",
            ),
            (
                &["MIN-IDLE", " 1"],
                "ERR MIN-IDLE must be a positive integer (ms)",
            ),
            (
                &["MIN-IDLE", "+1"],
                "ERR MIN-IDLE must be a positive integer (ms)",
            ),
            (
                &["MIN-IDLE", "9223372036854775808"],
                "ERR MIN-IDLE must be a positive integer (ms)",
            ),
            (
                &["COUNT", "0"],
                "ERR COUNT must be an integer from 1 to 10000",
            ),
            (
                &["COUNT", "10001"],
                "ERR COUNT must be an integer from 1 to 10000",
            ),
            (
                &["INTERVAL", "0"],
                "ERR INTERVAL must be a positive integer (ms)",
            ),
            (
                &["MAX-DELIVERIES", "-1"],
                "ERR MAX-DELIVERIES must be a non-negative integer",
            ),
            (
                &["MAX-DELIVERIES", "3"],
                "ERR MAX-DELIVERIES above 0 needs a DLQ key",
            ),
            (
                &["DLQ", "orders"],
                "ERR the DLQ key must differ from the stream key",
            ),
            (
                &["DLQ", "reclaim:policy:{orders}:orders"],
                "ERR the DLQ key is a key the module keeps for itself (reclaim:policy:..., reclaim:redrive:..., reclaim:redrive-moved:...)",
            ),
            (
                &["DLQ", "reclaim:redrive:{x}:x"],
                "ERR the DLQ key is a key the module keeps for itself (reclaim:policy:..., reclaim:redrive:..., reclaim:redrive-moved:...)",
            ),
            (
                &["DLQ", "reclaim:redrive-moved:{x}:x"],
                "ERR the DLQ key is a key the module keeps for itself (reclaim:policy:..., reclaim:redrive:..., reclaim:redrive-moved:...)",
            ),
            (&["FOO", "1"], "ERR unknown option 'FOO'"),
            (
                &["COUNT", "1", "count", "2"],
                "ERR option COUNT given more than once",
            ),
            (&["COUNT"], "ERR option COUNT needs a value"),
            (&["BACKOFF"], "ERR option BACKOFF needs a value"),
            (
                &["BACKOFF", "SLOW"],
                "ERR BACKOFF takes FIXED, EXPONENTIAL max-ms or LIST ms [ms ...]",
            ),
            (
                &["BACKOFF", "EXPONENTIAL"],
                "ERR BACKOFF takes FIXED, EXPONENTIAL max-ms or LIST ms [ms ...]",
            ),
            (
                &["BACKOFF", "EXPONENTIAL", "0"],
                "ERR BACKOFF must be a positive integer (ms) after EXPONENTIAL",
            ),
            (
                &["MIN-IDLE", "1000", "BACKOFF", "EXPONENTIAL", "999"],
                "ERR BACKOFF EXPONENTIAL max-ms must be at least MIN-IDLE",
            ),
            (
                &["BACKOFF", "LIST"],
                "ERR BACKOFF LIST takes 1 to 64 values (ms)",
            ),
            (
                &["BACKOFF", "LIST", "0"],
                "ERR BACKOFF must be a list of positive integers (ms) after LIST",
            ),
            (
                &["BACKOFF", "FIXED", "BACKOFF", "FIXED"],
                "ERR option BACKOFF given more than once",
            ),
            (
                &["LIVENESS", "-1"],
                "ERR LIVENESS must be a non-negative integer (ms)",
            ),
        ];
        for (opts, want) in cases {
            assert_eq!(set(opts).unwrap_err(), *want, "options {opts:?}");
            // Each error is about one option of those given (but an unknown name).
            let o: Vec<&[u8]> = opts.iter().map(|s| s.as_bytes()).collect();
            let e = parse_set_options(b"orders", &o).unwrap_err();
            match option_of(&e) {
                Some(name) => assert!(
                    opts.iter().any(|w| w.eq_ignore_ascii_case(name)),
                    "{want} is about {name}, not in {opts:?}"
                ),
                None => assert!(matches!(e, ReclaimError::UnknownOption(_)), "{want}"),
            }
        }
    }

    #[test]
    fn limits_of_i64() {
        assert_eq!(
            set(&["MIN-IDLE", "9223372036854775807"])
                .unwrap()
                .min_idle_ms,
            i64::MAX
        );
    }

    #[test]
    fn dlq_position_skips_values() {
        let v = |s: &[&str]| -> Vec<Vec<u8>> { s.iter().map(|x| x.as_bytes().to_vec()).collect() };
        let pos = |a: &[Vec<u8>]| {
            let r: Vec<&[u8]> = a.iter().map(|x| x.as_slice()).collect();
            dlq_position(&r)
        };
        assert_eq!(
            pos(&v(&["RECLAIM.POLICY", "SET", "s", "g", "DLQ", "d"])),
            Some(5)
        );
        assert_eq!(
            pos(&v(&[
                "RECLAIM.POLICY",
                "SET",
                "s",
                "g",
                "CLAIMANT",
                "DLQ",
                "COUNT",
                "5"
            ])),
            None
        );
        assert_eq!(
            pos(&v(&[
                "RECLAIM.POLICY",
                "SET",
                "s",
                "g",
                "CLAIMANT",
                "DLQ",
                "dlq",
                "x"
            ])),
            Some(7)
        );
        assert_eq!(pos(&v(&["RECLAIM.POLICY", "SET", "s", "g", "DLQ"])), None);
    }

    #[test]
    fn sweep_options() {
        assert_eq!(parse_sweep_options(&[]).unwrap(), None);
        assert_eq!(parse_sweep_options(&[b"limit", b"5"]).unwrap(), Some(5));
        assert_eq!(
            parse_sweep_options(&[b"LIMIT", b"0"])
                .unwrap_err()
                .to_string(),
            "ERR LIMIT must be a positive integer"
        );
        assert_eq!(
            parse_sweep_options(&[b"LIMIT", b"1", b"LIMIT", b"2"])
                .unwrap_err()
                .to_string(),
            "ERR option LIMIT given more than once"
        );
    }

    #[test]
    fn simulate_options_change_a_base_policy() {
        let sim = |opts: &[&str]| {
            let o: Vec<&[u8]> = opts.iter().map(|s| s.as_bytes()).collect();
            parse_simulate_options(&o).map_err(|e| e.to_string())
        };
        let live = set(&[
            "MIN-IDLE",
            "500",
            "MAX-DELIVERIES",
            "3",
            "DLQ",
            "d",
            "COUNT",
            "7",
        ])
        .unwrap();
        // Nothing given: the live policy as it is, no limit.
        let (limit, c) = sim(&[]).unwrap();
        assert!(c.is_empty() && limit.is_none());
        assert_eq!(c.apply(live.clone(), b"orders").unwrap(), live);
        // LIMIT alone changes nothing of the policy.
        let (limit, c) = sim(&["limit", "5"]).unwrap();
        assert!(c.is_empty());
        assert_eq!(limit, Some(5));
        // Options anywhere around LIMIT; only those given change; CLAIMANT LIMIT is a value.
        let (limit, c) =
            sim(&["MAX-DELIVERIES", "2", "LIMIT", "10000", "CLAIMANT", "LIMIT"]).unwrap();
        assert_eq!(limit, Some(10_000));
        assert_eq!(
            c.apply(live.clone(), b"orders").unwrap(),
            Policy {
                max_deliveries: 2,
                claimant: b"LIMIT".to_vec(),
                ..live.clone()
            }
        );
        // The proposed policy must be one SET accepts, over the live one.
        let (_, c) = sim(&["BACKOFF", "EXPONENTIAL", "400"]).unwrap();
        assert_eq!(
            c.apply(live.clone(), b"orders").unwrap_err().to_string(),
            "ERR BACKOFF EXPONENTIAL max-ms must be at least MIN-IDLE"
        );
        let (_, c) = sim(&["MAX-DELIVERIES", "2"]).unwrap();
        assert_eq!(
            c.apply(Policy::default(), b"orders")
                .unwrap_err()
                .to_string(),
            "ERR MAX-DELIVERIES above 0 needs a DLQ key"
        );
        let (_, c) = sim(&["DLQ", "orders"]).unwrap();
        assert_eq!(
            c.apply(live.clone(), b"orders").unwrap_err().to_string(),
            "ERR the DLQ key must differ from the stream key"
        );
        // Errors one option at a time, in the order given.
        let cases: &[(&[&str], &str)] = &[
            (
                &["LIMIT", "0"],
                "ERR LIMIT must be an integer from 1 to 10000",
            ),
            (
                &["LIMIT", "10001"],
                "ERR LIMIT must be an integer from 1 to 10000",
            ),
            (
                &["LIMIT", "x", "MIN-IDLE", "0"],
                "ERR LIMIT must be an integer from 1 to 10000",
            ),
            (
                &["MIN-IDLE", "0", "LIMIT", "0"],
                "ERR MIN-IDLE must be a positive integer (ms)",
            ),
            (&["LIMIT"], "ERR option LIMIT needs a value"),
            (
                &["LIMIT", "1", "limit", "2"],
                "ERR option LIMIT given more than once",
            ),
            (
                &["STORM", "1"],
                "ERR STORM must be two positive integers: the most dead-letters, then the window (ms)",
            ),
            (
                &["COUNT", "0"],
                "ERR COUNT must be an integer from 1 to 10000",
            ),
            (
                &["BACKOFF", "SLOW"],
                "ERR BACKOFF takes FIXED, EXPONENTIAL max-ms or LIST ms [ms ...]",
            ),
        ];
        for (opts, want) in cases {
            assert_eq!(sim(opts).unwrap_err(), *want, "options {opts:?}");
        }
        // STORM is proposed as SET reads it; the live state stays (it is not an option).
        let (_, c) = sim(&["STORM", "5", "1000", "LIMIT", "2"]).unwrap();
        let storm = Storm {
            max: 5,
            window_ms: 1000,
        };
        assert_eq!(c.storm(), Some(storm));
        let paused = live.with_state(State::Paused);
        assert_eq!(
            c.apply(paused.clone(), b"orders").unwrap(),
            Policy {
                storm: Some(storm),
                ..paused
            }
        );
        assert_eq!(sim(&["COUNT", "5"]).unwrap().1.storm(), None);
        // SET does not take LIMIT.
        assert_eq!(
            set(&["LIMIT", "5"]).unwrap_err(),
            "ERR unknown option 'LIMIT'"
        );
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

        #[test]
        fn parser_never_panics(args in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..12), 0..10)) {
            let a: Vec<&[u8]> = args.iter().map(|x| x.as_slice()).collect();
            let _ = parse_set_options(b"s", &a);
            let _ = parse_sweep_options(&a);
            let _ = parse_simulate_options(&a).map(|(_, c)| c.apply(Policy::default(), b"s"));
            let _ = dlq_position(&a);
        }
    }

    #[test]
    fn list_options() {
        let parse = |opts: &[&str]| {
            let o: Vec<&[u8]> = opts.iter().map(|s| s.as_bytes()).collect();
            parse_list_options(&o)
                .map(|p| (p.after.map(|(k, g)| (k.to_vec(), g.to_vec())), p.count))
                .map_err(|e| e.to_string())
        };
        assert_eq!(parse(&[]), Ok((None, None)));
        assert_eq!(
            parse(&["count", "2", "AFTER", "k", "g"]),
            Ok((Some((b"k".to_vec(), b"g".to_vec())), Some(2)))
        );
        assert_eq!(
            parse(&["AFTER", "", ""]),
            Ok((Some((vec![], vec![])), None))
        );
        let err = |opts: &[&str], want: &str| assert_eq!(parse(opts), Err(want.to_string()));
        err(&["COUNT", "0"], "ERR COUNT must be a positive integer");
        err(&["COUNT", "-1"], "ERR COUNT must be a positive integer");
        err(&["COUNT", "x"], "ERR COUNT must be a positive integer");
        err(&["COUNT"], "ERR option COUNT needs a value");
        err(&["AFTER", "k"], "ERR option AFTER needs a value");
        err(
            &["COUNT", "1", "COUNT", "2"],
            "ERR option COUNT given more than once",
        );
        err(
            &["AFTER", "a", "b", "AFTER", "c", "d"],
            "ERR option AFTER given more than once",
        );
        err(&["LIMIT", "2"], "ERR unknown option 'LIMIT'");
    }
}
