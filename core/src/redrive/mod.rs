//! A redrive task (`RECLAIM.REDRIVE`) as its hash stores it, and what decides its steps (pure):
//! the command's request and options' parser, the task ([`Task`]: its [`Phase`], `quota`,
//! `settle`, `check_canary`), a DLQ entry's [`Origin`], and the task's pacing ([`Bucket`]:
//! `RATE` tokens, what an entry costs, `may_start`). The steps themselves are
//! `engine::redrive`'s.

use std::time::Duration;

use crate::error::{self, ReclaimError};
use crate::planner::parse_id;
use crate::text::{parse_i64, printable};

/// Largest `COUNT`, `RATE` and `CANARY` value.
const MAX_NUMBER: i64 = 1_000_000_000;
/// Largest `WINDOW`, ms (one day).
const MAX_WINDOW_MS: i64 = 86_400_000;
/// Entries moved back in one step of one task, at most.
const STEP_MOVES: u64 = 32;
/// DLQ entries read (moved, skipped or of another source) in one step of one task, at most.
pub const STEP_READS: u64 = 64;
/// DLQ entries checked for `failed-again` in one step of one task, at most.
pub const STEP_CHECKS: u64 = 64;
/// Most DLQ entry IDs `IDS n id [id ...]` takes.
pub const MAX_IDS: i64 = 1000;

/// Options of `RECLAIM.REDRIVE dlq [SOURCE key group] [IDS n id [id ...]] [COUNT n] [RATE n]
/// [CANARY k WINDOW ms]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// Only these DLQ entries (sorted, each once; empty: every entry up to the task's end).
    pub ids: Vec<(u64, u64)>,
    /// Only the entries dead-lettered from this (stream, group).
    pub source: Option<(Vec<u8>, Vec<u8>)>,
    /// At most this many entries moved back (0: all).
    pub count: u64,
    /// At most this many entries moved back per second (0: no limit).
    pub rate: u64,
    /// The first `canary` entries go back, then the task waits `window_ms` (0: no canary).
    pub canary: u64,
    /// The canary's window, ms.
    pub window_ms: u64,
}

/// Parses the options after the DLQ key. Errors, in the order checked while reading left to
/// right: an unknown option (`ERR unknown option 'X'`), an option given twice, an option without
/// its value(s), a number out of range (`COUNT`, `RATE`, `CANARY`: 1 to 1000000000; `WINDOW`: 1
/// to 86400000 ms; `IDS`: 1 to 1000, then fewer than `n` words left, or one of them not a stream
/// ID); then `CANARY` without `WINDOW` or the reverse.
pub fn parse_options(opts: &[&[u8]]) -> Result<Options, ReclaimError> {
    let mut o = Options::default();
    let mut seen: Vec<&'static str> = Vec::new();
    let mut i = 0;
    let number = |name: &'static str, v: Option<&&[u8]>, max: i64| -> Result<u64, ReclaimError> {
        let v = v.ok_or(ReclaimError::MissingValue(name))?;
        match parse_i64(v) {
            Some(n) if (1..=max).contains(&n) => Ok(n as u64),
            _ => Err(ReclaimError::BadNumber(
                name,
                if max == MAX_WINDOW_MS {
                    "an integer from 1 to 86400000 (ms)"
                } else {
                    "an integer from 1 to 1000000000"
                },
            )),
        }
    };
    while i < opts.len() {
        let word = opts[i].to_ascii_uppercase();
        let name: &'static str = match word.as_slice() {
            b"SOURCE" => "SOURCE",
            b"COUNT" => "COUNT",
            b"RATE" => "RATE",
            b"CANARY" => "CANARY",
            b"WINDOW" => "WINDOW",
            b"IDS" => "IDS",
            _ => return Err(ReclaimError::UnknownOption(printable(opts[i]))),
        };
        if seen.contains(&name) {
            return Err(ReclaimError::RepeatedOption(name));
        }
        seen.push(name);
        match name {
            "SOURCE" => {
                let (Some(k), Some(g)) = (opts.get(i + 1), opts.get(i + 2)) else {
                    return Err(ReclaimError::MissingValue("SOURCE"));
                };
                o.source = Some((k.to_vec(), g.to_vec()));
                i += 3;
                continue;
            }
            "IDS" => {
                let n = opts.get(i + 1).ok_or(ReclaimError::MissingValue("IDS"))?;
                let n = match parse_i64(n) {
                    Some(n) if (1..=MAX_IDS).contains(&n) => n as usize,
                    _ => return Err(ReclaimError::BadNumber("IDS", "an integer from 1 to 1000")),
                };
                o.ids = parse_ids(opts.get(i + 2..i + 2 + n).unwrap_or(&[]), n)?;
                i += 2 + n;
                continue;
            }
            "COUNT" => o.count = number("COUNT", opts.get(i + 1), MAX_NUMBER)?,
            "RATE" => o.rate = number("RATE", opts.get(i + 1), MAX_NUMBER)?,
            "CANARY" => o.canary = number("CANARY", opts.get(i + 1), MAX_NUMBER)?,
            _ => o.window_ms = number("WINDOW", opts.get(i + 1), MAX_WINDOW_MS)?,
        }
        i += 2;
    }
    if (o.canary > 0) != (o.window_ms > 0) {
        return Err(error::REDRIVE_CANARY_WINDOW.into());
    }
    Ok(o)
}

/// The `n` IDs of `IDS n id ...` (`words`: the words after `n`, as many as there are up to `n`),
/// sorted and each once.
fn parse_ids(words: &[&[u8]], n: usize) -> Result<Vec<(u64, u64)>, ReclaimError> {
    if words.len() < n {
        return Err(error::REDRIVE_IDS_SHORT.into());
    }
    let mut ids = words
        .iter()
        .map(|w| parse_id(w).ok_or(error::INVALID_ID))
        .collect::<Result<Vec<_>, _>>()?;
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

/// The position in `opts` (the options after the DLQ key) of `SOURCE`'s key, when given, read as
/// [`parse_options`] reads them (so an ID of `IDS` is never taken for an option); for the
/// command's getkeys callback.
pub fn source_at(opts: &[&[u8]]) -> Option<usize> {
    let mut i = 0;
    while i < opts.len() {
        let w = opts[i];
        if w.eq_ignore_ascii_case(b"SOURCE") {
            return (i + 2 < opts.len()).then_some(i + 1);
        }
        i += if w.eq_ignore_ascii_case(b"IDS") {
            let n = opts.get(i + 1).and_then(|n| parse_i64(n)).unwrap_or(0);
            2 + usize::try_from(n.clamp(0, MAX_IDS)).unwrap_or(0)
        } else {
            2
        };
    }
    None
}

/// A stream ID as `ms-seq`.
pub fn id_text((ms, seq): (u64, u64)) -> Vec<u8> {
    format!("{ms}-{seq}").into_bytes()
}

impl Options {
    /// The entries a task with these options examines, of `dlq_len` in the DLQ: the number of IDs
    /// with `IDS`, else `dlq_len`.
    pub fn task_total(&self, dlq_len: u64) -> u64 {
        if self.ids.is_empty() {
            dlq_len
        } else {
            self.ids.len() as u64
        }
    }
}

/// What `RECLAIM.REDRIVE` was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    /// Start a task on the DLQ with these options (not parsed yet).
    Start(&'a [u8], &'a [&'a [u8]]),
    /// `STATUS dlq`.
    Status(&'a [u8]),
    /// `CANCEL dlq`.
    Cancel(&'a [u8]),
}

/// Reads `argv` (the command name first): `STATUS dlq` and `CANCEL dlq` (any case) are the
/// subcommands when they are the whole command; anything else starts a task on `argv[1]`. So a
/// DLQ named `STATUS` is redriven with `RECLAIM.REDRIVE STATUS` or with options.
pub fn request<'a>(argv: &'a [&'a [u8]]) -> Request<'a> {
    if argv.len() == 3 {
        if argv[1].eq_ignore_ascii_case(b"STATUS") {
            return Request::Status(argv[2]);
        }
        if argv[1].eq_ignore_ascii_case(b"CANCEL") {
            return Request::Cancel(argv[2]);
        }
    }
    Request::Start(
        argv.get(1).copied().unwrap_or(b""),
        argv.get(2..).unwrap_or(&[]),
    )
}

/// Where a task is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Phase {
    /// Moving entries back.
    #[default]
    Running,
    /// The first `CANARY` entries are back; waiting for the window to end.
    Canary,
    /// Finished: every entry up to the task's end was examined, or `COUNT` were moved.
    Done,
    /// `RECLAIM.REDRIVE CANCEL`.
    Canceled,
    /// A canary entry was dead-lettered again within the window: the rest stays in the DLQ.
    CanaryFailed,
    /// The user who started the task may no longer write a stream an entry goes back to, or the
    /// DLQ, or is gone from this server: the rest stays in the DLQ.
    Denied,
}

impl Phase {
    /// The name `STATUS` shows (and the hash stores).
    pub fn name(self) -> &'static str {
        match self {
            Phase::Running => "running",
            Phase::Canary => "canary",
            Phase::Done => "done",
            Phase::Canceled => "canceled",
            Phase::CanaryFailed => "canary-failed",
            Phase::Denied => "denied",
        }
    }

    fn from_name(s: &[u8]) -> Option<Phase> {
        [
            Phase::Running,
            Phase::Canary,
            Phase::Done,
            Phase::Canceled,
            Phase::CanaryFailed,
            Phase::Denied,
        ]
        .into_iter()
        .find(|p| p.name().as_bytes() == s)
    }

    /// Whether the task still runs (`running` or `canary`).
    pub fn is_live(self) -> bool {
        matches!(self, Phase::Running | Phase::Canary)
    }
}

/// A redrive task as its hash stores it (every field a decimal number, an ID or a name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Task {
    /// The task's number: one more than the DLQ's previous task (1 for the first).
    pub id: u64,
    /// Where it is.
    pub phase: Phase,
    /// Its options.
    pub opts: Options,
    /// The DLQ's last entry when the task started: later entries (dead-lettered since) are not
    /// part of it.
    pub end_id: Vec<u8>,
    /// The last DLQ entry examined (`0-0`: none yet).
    pub cursor: Vec<u8>,
    /// The last DLQ entry checked for `failed-again` (starts at `end_id`).
    pub checked: Vec<u8>,
    /// DLQ entries up to `end_id` when the task started.
    pub total: u64,
    /// DLQ entries examined (moved, skipped or of another source).
    pub examined: u64,
    /// Entries moved back to their group.
    pub moved: u64,
    /// Entries left in the DLQ (see the module docs).
    pub skipped: u64,
    /// Entries moved back that were dead-lettered again while the task ran.
    pub failed_again: u64,
    /// When it started, ms since the epoch.
    pub started_ms: u64,
    /// When the canary's window ends, ms since the epoch (0: no canary checked yet).
    pub canary_until_ms: u64,
    /// When it ended, ms since the epoch (0: running).
    pub ended_ms: u64,
    /// The ACL user who started it: every step moves entries back only to streams this user
    /// may write now (`None`: a task written before the module stored it, or a server without
    /// ACL users).
    pub user: Option<Vec<u8>>,
}

fn num(v: u64) -> Vec<u8> {
    v.to_string().into_bytes()
}

/// The `ids` field of a task's hash: its IDs, comma-separated (empty without `IDS`).
fn ids_field(ids: &[(u64, u64)]) -> Vec<u8> {
    let texts: Vec<Vec<u8>> = ids.iter().map(|&id| id_text(id)).collect();
    texts.join(&b","[..])
}

/// The IDs of an `ids` field, sorted and each once; `None` when one is not a stream ID, or more
/// than [`MAX_IDS`].
fn parse_ids_field(v: &[u8]) -> Option<Vec<(u64, u64)>> {
    if v.is_empty() {
        return Some(Vec::new());
    }
    let mut ids = v
        .split(|&b| b == b',')
        .map(parse_id)
        .collect::<Option<Vec<_>>>()?;
    if ids.len() > MAX_IDS as usize {
        return None;
    }
    ids.sort_unstable();
    ids.dedup();
    Some(ids)
}

impl Task {
    /// The hash fields of the task, in a fixed order. `source-key` and `source-group` are empty
    /// without `SOURCE`, `user` without a user, `ids` without `IDS`.
    pub fn to_fields(&self) -> Vec<(&'static [u8], Vec<u8>)> {
        let (sk, sg) = self.opts.source.clone().unwrap_or_default();
        vec![
            (b"id", num(self.id)),
            (b"state", self.phase.name().as_bytes().to_vec()),
            (b"source", num(self.opts.source.is_some() as u64)),
            (b"source-key", sk),
            (b"source-group", sg),
            (b"count", num(self.opts.count)),
            (b"rate", num(self.opts.rate)),
            (b"canary", num(self.opts.canary)),
            (b"window", num(self.opts.window_ms)),
            (b"end-id", self.end_id.clone()),
            (b"cursor", self.cursor.clone()),
            (b"checked", self.checked.clone()),
            (b"total", num(self.total)),
            (b"examined", num(self.examined)),
            (b"moved", num(self.moved)),
            (b"skipped", num(self.skipped)),
            (b"failed-again", num(self.failed_again)),
            (b"started-ms", num(self.started_ms)),
            (b"canary-until-ms", num(self.canary_until_ms)),
            (b"ended-ms", num(self.ended_ms)),
            (b"user", self.user.clone().unwrap_or_default()),
            (b"ids", ids_field(&self.opts.ids)),
        ]
    }

    /// With `IDS`: the task's IDs not examined yet (its IDs are sorted and examined in order, one
    /// each, so the first `examined` are done), at most `n`. Counted, not read from the cursor:
    /// the cursor `0-0` means "none yet", and `0-0` is an ID `IDS` may be given.
    pub fn ids_left(&self, n: usize) -> &[(u64, u64)] {
        let from = usize::try_from(self.examined)
            .unwrap_or(usize::MAX)
            .min(self.opts.ids.len());
        let rest = &self.opts.ids[from..];
        &rest[..rest.len().min(n)]
    }

    /// The task of a hash's field/value pairs; `None` when a field is missing or malformed.
    pub fn from_fields(pairs: &[(Vec<u8>, Vec<u8>)]) -> Option<Task> {
        let get = |name: &[u8]| {
            pairs
                .iter()
                .find(|(f, _)| f.as_slice() == name)
                .map(|(_, v)| v.as_slice())
        };
        let n = |name: &[u8]| -> Option<u64> {
            parse_i64(get(name)?).and_then(|v| u64::try_from(v).ok())
        };
        let source = match n(b"source")? {
            0 => None,
            _ => Some((get(b"source-key")?.to_vec(), get(b"source-group")?.to_vec())),
        };
        Some(Task {
            id: n(b"id")?,
            phase: Phase::from_name(get(b"state")?)?,
            opts: Options {
                source,
                count: n(b"count")?,
                rate: n(b"rate")?,
                canary: n(b"canary")?,
                window_ms: n(b"window")?,
                ids: match get(b"ids") {
                    Some(v) => parse_ids_field(v)?,
                    None => Vec::new(),
                },
            },
            end_id: get(b"end-id")?.to_vec(),
            cursor: get(b"cursor")?.to_vec(),
            checked: get(b"checked")?.to_vec(),
            total: n(b"total")?,
            examined: n(b"examined")?,
            moved: n(b"moved")?,
            skipped: n(b"skipped")?,
            failed_again: n(b"failed-again")?,
            started_ms: n(b"started-ms")?,
            canary_until_ms: n(b"canary-until-ms")?,
            ended_ms: n(b"ended-ms")?,
            user: get(b"user").filter(|u| !u.is_empty()).map(<[u8]>::to_vec),
        })
    }

    /// DLQ entries up to the task's end not examined yet (an estimate when the DLQ was trimmed
    /// or its entries deleted meanwhile).
    pub fn left(&self) -> u64 {
        self.total.saturating_sub(self.examined)
    }

    /// Whether the canary still has to be checked: `CANARY` given and its window not started.
    fn canary_pending(&self) -> bool {
        self.opts.canary > 0 && self.canary_until_ms == 0
    }

    /// How many entries the next step may move back, with `tokens` from the `RATE` bucket
    /// (ignored without `RATE`): at most [`STEP_MOVES`], what is left of `COUNT`, and, before
    /// the canary's window, what is left of `CANARY`.
    pub fn quota(&self, tokens: u64) -> u64 {
        let mut q = STEP_MOVES;
        if self.opts.rate > 0 {
            q = q.min(tokens);
        }
        if self.opts.count > 0 {
            q = q.min(self.opts.count.saturating_sub(self.moved));
        }
        if self.canary_pending() {
            q = q.min(self.opts.canary.saturating_sub(self.moved));
        }
        q
    }

    /// After a step of moves at `now` (`exhausted`: no entry is left up to the end): the canary's
    /// window starts once `CANARY` entries are back (or fewer, when the task would otherwise end:
    /// what went back is checked all the same); the task is done when nothing is left or `COUNT`
    /// were moved.
    pub fn settle(&mut self, now: u64, exhausted: bool) {
        if self.phase != Phase::Running {
            return;
        }
        let count_reached = self.opts.count > 0 && self.moved >= self.opts.count;
        let ending = exhausted || count_reached;
        if self.canary_pending() && self.moved > 0 && (self.moved >= self.opts.canary || ending) {
            self.phase = Phase::Canary;
            self.canary_until_ms = now.saturating_add(self.opts.window_ms).max(1);
        } else if ending {
            self.finish(Phase::Done, now);
        }
    }

    /// During the canary's window at `now`: `canary-failed` as soon as one of them came back to
    /// the DLQ, `running` again when the window is over.
    pub fn check_canary(&mut self, now: u64) {
        if self.phase != Phase::Canary {
            return;
        }
        if self.failed_again > 0 {
            self.finish(Phase::CanaryFailed, now);
        } else if now >= self.canary_until_ms {
            self.phase = Phase::Running;
        }
    }

    /// Ends the task in `phase` at `now`.
    pub fn finish(&mut self, phase: Phase, now: u64) {
        self.phase = phase;
        self.ended_ms = now.max(1);
    }
}

/// Where a dead-lettered entry came from: its `reclaim-stream`, `reclaim-group` and `reclaim-id`
/// fields (the last of each, as the module appends them after the entry's own fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The stream.
    pub stream: Vec<u8>,
    /// The consumer group it failed in.
    pub group: Vec<u8>,
    /// Its ID in the stream.
    pub id: Vec<u8>,
}

/// The origin of a DLQ entry from its flat field/value list; `None` without the three fields.
pub fn origin(fields: &[Vec<u8>]) -> Option<Origin> {
    let last = |name: &[u8]| {
        fields
            .chunks(2)
            .rfind(|p| p.len() == 2 && p[0].as_slice() == name)
            .map(|p| p[1].clone())
    };
    Some(Origin {
        stream: last(b"reclaim-stream")?,
        group: last(b"reclaim-group")?,
        id: last(b"reclaim-id")?,
    })
}

impl Origin {
    /// The entry's member in the moved set: the stream's and the group's lengths and bytes, then
    /// the ID (unambiguous for any bytes).
    pub fn member(&self) -> Vec<u8> {
        let mut m = Vec::with_capacity(self.stream.len() + self.group.len() + self.id.len() + 24);
        m.extend_from_slice(self.stream.len().to_string().as_bytes());
        m.push(b':');
        m.extend_from_slice(&self.stream);
        m.extend_from_slice(self.group.len().to_string().as_bytes());
        m.push(b':');
        m.extend_from_slice(&self.group);
        m.extend_from_slice(&self.id);
        m
    }
}

/// A task's pacing, in memory (a restart or failover starts it afresh): its `RATE` token
/// bucket, and what an entry has recently cost a step, so that a step does not start an entry
/// likely to end past the tick's budget.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Bucket {
    tokens: f64,
    last_ms: u64,
    /// Recent cost of handling one DLQ entry, µs (a moving average; 0: none measured yet).
    entry_us: u64,
    /// The last step put off its first entry for the budget: the next one handles one entry
    /// whatever the time left, so that a task always moves on.
    deferred: bool,
    /// Monotonic ms when the task's user was last checked in full ([`USER_RECHECK_MS`]; 0:
    /// never).
    user_checked_ms: u64,
}

/// How often (ms) a step checks the task's user in full (`on`, may run the command on the DLQ):
/// an `ACL GETUSER` and a command check cost more than a step's moves. Each entry's stream is
/// checked at every move all the same.
const USER_RECHECK_MS: u64 = 1000;

impl Bucket {
    /// Whole tokens available at monotonic `now` ms for `rate` per second, after refilling; the
    /// bucket holds at most a tenth of a second's worth (at least one).
    pub fn available(&mut self, rate: u64, now: u64) -> u64 {
        let cap = (rate as f64 / 10.0).max(1.0);
        if self.last_ms == 0 {
            self.tokens = 1.0;
        } else {
            let add = now.saturating_sub(self.last_ms) as f64 * rate as f64 / 1000.0;
            self.tokens = (self.tokens + add).min(cap);
        }
        self.last_ms = now.max(1);
        self.tokens.floor() as u64
    }

    /// Takes `n` tokens.
    pub fn spend(&mut self, n: u64) {
        self.tokens = (self.tokens - n as f64).max(0.0);
    }

    /// Whether a step that has handled `handled` entries so far may start another with `left`
    /// of its budget: when one is likely to fit ([`Bucket::note_entry`]). A step that could not
    /// start its first entry is noted as deferred, and the next step starts its first entry
    /// anyway: a task is put off at most one step in a row.
    pub fn may_start(&mut self, left: Duration, handled: u64) -> bool {
        if left.as_micros() as u64 > self.entry_us {
            return true;
        }
        if handled > 0 {
            return false;
        }
        let go = self.deferred;
        self.deferred = !go;
        go
    }

    /// Whether a step at monotonic ms `mono` checks the task's user in full (never checked, or
    /// not for [`USER_RECHECK_MS`]); notes the check when it does.
    pub fn user_check_due(&mut self, mono: u64) -> bool {
        let full = mono.saturating_sub(self.user_checked_ms) >= USER_RECHECK_MS
            || self.user_checked_ms == 0;
        if full {
            self.user_checked_ms = mono.max(1);
        }
        full
    }

    /// Notes that handling one entry took `us` µs.
    pub fn note_entry(&mut self, us: u64) {
        self.deferred = false;
        self.entry_us = if self.entry_us == 0 {
            us
        } else {
            (3 * self.entry_us + us) / 4
        };
    }
}

#[cfg(test)]
mod tests;
