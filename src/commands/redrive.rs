//! `RECLAIM.REDRIVE`: moves dead-lettered entries back to the consumer group they failed in, for
//! another full set of `MAX-DELIVERIES` attempts, as a task that runs in small steps from the
//! sweep timer.
//!
//! A task lives in the keyspace, in the DLQ's hash slot ([`crate::model::keys::redrive_key`]): a hash
//! holding its options, its cursor in the DLQ and its counters ([`Task`]). Every write of a step
//! goes through `RM_Call` with `!`, in one timer callback, so Redis (7.0+, PR #9890) propagates
//! the step as one `MULTI`/`EXEC` to the AOF and replicas. For each entry moved back, that is:
//! - `XCLAIM stream group <CLAIMANT> 0 <reclaim-id> FORCE RETRYCOUNT 0 JUSTID`: FORCE creates the
//!   PEL entry (the entry was acknowledged when it was dead-lettered), owned by the policy's
//!   CLAIMANT (the inbox) with delivery count 0, so `RECLAIM.READGROUP` hands it to a worker as
//!   its first delivery (count 1). Redis propagates it as `XCLAIM ... RETRYCOUNT 0 FORCE JUSTID`
//!   (tested on 7.0.15). Only the entry's own group gets it: the stream's other groups are not
//!   touched;
//! - `XDEL dlq <dlq-id>`;
//! - `SADD reclaim:redrive-moved:{TAG}:DLQ <stream, group, id>`, which lets the task see the entry
//!   come back to the DLQ (`failed-again`, and the `CANARY` check);
//! - once per step, `HSET` of the task's fields.
//!
//! So an entry is in the DLQ or back in its group, never both and never neither, on the primary,
//! in the AOF and on replicas, and a promoted replica or a restart continues the task from its
//! cursor. The timer never steps on a replica, while loading, while writes are paused, or out of
//! memory (the scheduler's guards), nor while `reclaim.enabled` is `no`.
//!
//! An entry is left in the DLQ (counted as `skipped`, the cursor moves past it) when it was
//! trimmed or deleted from its stream (appending a copy would hand it to the stream's other groups
//! as a new entry), when its stream, group or policy is gone, when it is pending in its group
//! already (a worker holds it), when its ID is above the group's last-delivered ID (a record
//! written by hand of an entry the group never read: moving it would hand it out as new), or when
//! it has no `reclaim-*` fields (not written by the module).
//!
//! The task never deletes or writes its task key or moved set when it holds a value of another
//! type (written by hand): `RECLAIM.REDRIVE` refuses to start, and a running task waits (its
//! `CANCEL` still works) until that key is gone.
//!
//! In memory there is only an index of running tasks ([`TASKS`]: database, DLQ, the `RATE`
//! bucket), bounded by the DLQs with a running task. It is filled by `RECLAIM.REDRIVE` itself and
//! by a discovery after loads, syncs, `SWAPDB` and promotions ([`rediscover`]), which checks the
//! DLQ of every known policy for a task key (one key lookup per policy, once per such event).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use lazy_static::lazy_static;
use redis_module::{CallReply, CallResult, Context, ContextFlags, KeyType, RedisString};

use crate::ffi::{self, read_opts, write_opts, CmdResult, Reply};
use crate::model::clock::{epoch_ms, now_ms};
use crate::model::error::{self, ReclaimError};
use crate::model::keys;
use crate::model::text::parse_i64;
use crate::state::store;

/// Largest `COUNT`, `RATE` and `CANARY` value.
pub const MAX_NUMBER: i64 = 1_000_000_000;
/// Largest `WINDOW`, ms (one day).
pub const MAX_WINDOW_MS: i64 = 86_400_000;
/// Entries moved back in one step of one task, at most.
pub const STEP_MOVES: u64 = 32;
/// DLQ entries read (moved, skipped or of another source) in one step of one task, at most.
pub const STEP_READS: u64 = 64;
/// DLQ entries checked for `failed-again` in one step of one task, at most.
pub const STEP_CHECKS: u64 = 64;

/// Options of `RECLAIM.REDRIVE dlq [SOURCE key group] [COUNT n] [RATE n] [CANARY k WINDOW ms]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
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
/// to 86400000 ms); then `CANARY` without `WINDOW` or the reverse.
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
            _ => {
                return Err(ReclaimError::UnknownOption(crate::model::text::printable(
                    opts[i],
                )))
            }
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

impl Task {
    /// The hash fields of the task, in a fixed order. `source-key` and `source-group` are empty
    /// without `SOURCE`, `user` without a user.
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
        ]
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
pub const USER_RECHECK_MS: u64 = 1000;

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

lazy_static! {
    /// Running tasks: (database, DLQ) -> the `RATE` bucket. Bounded by the DLQs with a running
    /// task; an entry leaves when its step finds the task ended or gone.
    static ref TASKS: Mutex<BTreeMap<(i32, Vec<u8>), Bucket>> = Mutex::new(BTreeMap::new());
}

/// Whether the next tick must look for tasks the index does not know (after a load, a sync,
/// SWAPDB, a promotion; and at start).
static DISCOVER: AtomicBool = AtomicBool::new(true);

fn tasks() -> std::sync::MutexGuard<'static, BTreeMap<(i32, Vec<u8>), Bucket>> {
    TASKS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Rounds of [`run`] so far (where the next round starts).
static ROUND: AtomicUsize = AtomicUsize::new(0);

/// Asks the next tick to look for tasks the index does not know.
pub fn rediscover() {
    DISCOVER.store(true, Ordering::Relaxed);
}

fn note(db: i32, dlq: &[u8]) {
    tasks().entry((db, dlq.to_vec())).or_default();
}

fn bytes(r: &CallResult) -> Option<Vec<u8>> {
    match r {
        Ok(CallReply::String(s)) => Some(s.as_bytes().to_vec()),
        _ => None,
    }
}

fn key_type(ctx: &Context, key: &[u8]) -> KeyType {
    let name = RedisString::create_from_slice(ctx.ctx, key);
    ctx.open_key(&name).key_type()
}

/// The task stored at `key` (`HGETALL`): `Ok(None)` when the key does not exist, `Err` when it
/// holds something that is not a task.
fn read_task(ctx: &Context, key: &[u8]) -> Result<Option<Task>, &'static str> {
    match key_type(ctx, key) {
        KeyType::Empty => return Ok(None),
        KeyType::Hash => {}
        _ => return Err(error::REDRIVE_KEY_TAKEN),
    }
    let r: CallResult = ctx.call_ext("HGETALL", &read_opts(), &[key][..]);
    let Ok(CallReply::Array(a)) = r else {
        return Err(error::REDRIVE_KEY_TAKEN);
    };
    let flat: Vec<Vec<u8>> = a.iter().filter_map(|v| bytes(&v)).collect();
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = flat
        .chunks(2)
        .filter(|p| p.len() == 2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    Task::from_fields(&pairs)
        .map(Some)
        .ok_or(error::REDRIVE_KEY_TAKEN)
}

/// `HSET key <every field>` through `!` (propagated with the step's other writes).
fn write_task(ctx: &Context, key: &[u8], t: &Task) {
    let fields = t.to_fields();
    let mut args: Vec<&[u8]> = Vec::with_capacity(fields.len() * 2 + 1);
    args.push(key);
    for (f, v) in &fields {
        args.push(f);
        args.push(v);
    }
    let _: CallResult = ctx.call_ext("HSET", &write_opts(), &args[..]);
}

fn del(ctx: &Context, key: &[u8]) {
    let _: CallResult = ctx.call_ext("DEL", &write_opts(), &[key][..]);
}

/// Whether `moved_key` may be used as the moved set: it does not exist or is a set.
fn moved_key_usable(ctx: &Context, moved_key: &[u8]) -> bool {
    matches!(key_type(ctx, moved_key), KeyType::Empty | KeyType::Set)
}

/// Deletes the moved set `moved_key`, only when it is a set (never a value of another type
/// written by hand under that name).
fn del_moved(ctx: &Context, moved_key: &[u8]) {
    if key_type(ctx, moved_key) == KeyType::Set {
        del(ctx, moved_key);
    }
}

/// The last-delivered ID of each (stream, group) a step looked up (`None`: could not be read).
type Delivered = BTreeMap<(Vec<u8>, Vec<u8>), Option<(u64, u64)>>;

/// The group's last-delivered ID (`XINFO GROUPS stream`, O(groups of the stream)), `None` when
/// the stream or group is gone or the reply cannot be read.
fn last_delivered(ctx: &Context, stream: &[u8], group: &[u8]) -> Option<(u64, u64)> {
    let args: [&[u8]; 2] = [b"GROUPS", stream];
    let r: CallResult = ctx.call_ext("XINFO", &read_opts(), &args[..]);
    let Ok(CallReply::Array(groups)) = r else {
        return None;
    };
    for g in groups.iter() {
        let Ok(CallReply::Array(g)) = g else {
            continue;
        };
        // name <name> consumers <n> pending <n> last-delivered-id <id> ... (RESP2: flat pairs).
        let (mut name, mut last) = (None, None);
        for i in (0..g.len()).step_by(2) {
            let key = g.get(i).as_ref().and_then(bytes);
            let value = g.get(i + 1);
            match key.as_deref() {
                Some(b"name") => name = value.as_ref().and_then(bytes),
                Some(b"last-delivered-id") => last = value.as_ref().and_then(bytes),
                _ => {}
            }
        }
        if name.as_deref() == Some(group) {
            return last.and_then(|l| crate::model::planner::parse_id(&l));
        }
    }
    None
}

/// One DLQ entry: its ID and flat field/value list.
type DlqEntry = (Vec<u8>, Vec<Vec<u8>>);

/// `XRANGE dlq start end COUNT n`, parsed; `None` on an error reply.
fn xrange(ctx: &Context, dlq: &[u8], start: &[u8], end: &[u8], n: u64) -> Option<Vec<DlqEntry>> {
    let count = n.to_string();
    let args: [&[u8]; 5] = [dlq, start, end, b"COUNT", count.as_bytes()];
    let r: CallResult = ctx.call_ext("XRANGE", &read_opts(), &args[..]);
    let Ok(CallReply::Array(a)) = r else {
        return None;
    };
    let mut out = Vec::with_capacity(a.len());
    for e in a.iter() {
        let Ok(CallReply::Array(e)) = e else {
            return None;
        };
        let id = e.get(0).as_ref().and_then(bytes)?;
        let fields = match e.get(1) {
            Some(Ok(CallReply::Array(f))) => f.iter().filter_map(|v| bytes(&v)).collect(),
            _ => Vec::new(),
        };
        out.push((id, fields));
    }
    Some(out)
}

/// The ID of the last entry of `dlq` (`XREVRANGE dlq + - COUNT 1`) and its length (`XLEN`).
fn dlq_end(ctx: &Context, dlq: &[u8]) -> (Vec<u8>, u64) {
    let args: [&[u8]; 5] = [dlq, b"+", b"-", b"COUNT", b"1"];
    let r: CallResult = ctx.call_ext("XREVRANGE", &read_opts(), &args[..]);
    let end = match r {
        Ok(CallReply::Array(a)) => match a.get(0) {
            Some(Ok(CallReply::Array(e))) => e.get(0).as_ref().and_then(bytes),
            _ => None,
        },
        _ => None,
    };
    let r: CallResult = ctx.call_ext("XLEN", &read_opts(), &[dlq][..]);
    let len = match r {
        Ok(CallReply::I64(i)) => i.to_i64().max(0) as u64,
        _ => 0,
    };
    (end.unwrap_or_else(|| b"0-0".to_vec()), len)
}

/// Whether `stream` still holds entry `id` (the module stream API over `[id, id]`).
fn stream_has(ctx: &Context, stream: &[u8], id: &[u8]) -> bool {
    let Some((ms, seq)) = crate::model::planner::parse_id(id) else {
        return false;
    };
    let name = RedisString::create_from_slice(ctx.ctx, stream);
    let key = ctx.open_key(&name);
    if key.key_type() != KeyType::Stream {
        return false;
    }
    let sid = redis_module::raw::RedisModuleStreamID { ms, seq };
    let found = match key.get_stream_range_iterator(Some(sid), Some(sid), false, false) {
        Ok(mut it) => it.next().is_some(),
        Err(_) => false,
    };
    found
}

/// Whether `id` is pending in `group` already (`XPENDING stream group id id 1`, O(log N)); an
/// error reply (no group) counts as pending, so the entry is left alone.
fn is_pending(ctx: &Context, o: &Origin) -> bool {
    let args: [&[u8]; 5] = [&o.stream, &o.group, &o.id, &o.id, b"1"];
    let r: CallResult = ctx.call_ext("XPENDING", &read_opts(), &args[..]);
    !matches!(r, Ok(CallReply::Array(a)) if a.len() == 0)
}

/// `XCLAIM stream group claimant 0 id FORCE RETRYCOUNT 0 JUSTID` through `!`: whether the entry
/// is now pending for the claimant.
fn claim_back(ctx: &Context, o: &Origin, claimant: &[u8]) -> bool {
    let args: [&[u8]; 9] = [
        &o.stream,
        &o.group,
        claimant,
        b"0",
        &o.id,
        b"FORCE",
        b"RETRYCOUNT",
        b"0",
        b"JUSTID",
    ];
    let r: CallResult = ctx.call_ext("XCLAIM", &write_opts(), &args[..]);
    matches!(r, Ok(CallReply::Array(a)) if a.len() == 1)
}

/// What one entry's move back did.
enum Moved {
    /// Back in its group.
    Back,
    /// Left in the DLQ.
    Skipped,
    /// Not of the task's `SOURCE`.
    Other,
    /// The task's user may not write the entry's stream: left in the DLQ, and the task stops.
    Denied,
}

/// Moves DLQ entry (`did`, `fields`) of `dlq` back to its group, or leaves it (see the module
/// docs). The XCLAIM, the XDEL and the SADD are propagated in the caller's callback.
/// `delivered` caches the groups' last-delivered IDs for the step (one `XINFO GROUPS` per
/// (stream, group) per step, at most).
#[allow(clippy::too_many_arguments)]
fn move_back(
    ctx: &Context,
    db: i32,
    dlq: &[u8],
    moved_key: &[u8],
    t: &Task,
    user: Option<&ffi::AclUser>,
    did: &[u8],
    fields: &[Vec<u8>],
    delivered: &mut Delivered,
) -> Moved {
    let Some(o) = origin(fields) else {
        return Moved::Skipped;
    };
    if let Some((sk, sg)) = &t.opts.source {
        if (sk, sg) != (&o.stream, &o.group) {
            return Moved::Other;
        }
    }
    let Some(policy) = store::get(ctx, &o.stream, &o.group) else {
        return Moved::Skipped;
    };
    // Without SOURCE, the caller's ACL was checked against the streams of the policies whose DLQ
    // is this one ([`dlq_streams`]): an entry naming a policy with another DLQ (its DLQ changed
    // since, or the entry was written by hand) is left alone.
    if t.opts.source.is_none() && policy.dlq.as_deref() != Some(dlq) {
        return Moved::Skipped;
    }
    if !stream_has(ctx, &o.stream, &o.id) {
        return Moved::Skipped;
    }
    // An entry above the group's last-delivered ID was never delivered to the group, so it is
    // no dead letter of it (a record written by hand): XCLAIM FORCE would make it pending with
    // delivery count 0, and RECLAIM.READGROUP would hand it out as new, even while paused.
    let last = *delivered
        .entry((o.stream.clone(), o.group.clone()))
        .or_insert_with(|| last_delivered(ctx, &o.stream, &o.group));
    match (last, crate::model::planner::parse_id(&o.id)) {
        (Some(last), Some(id)) if id <= last => {}
        _ => return Moved::Skipped,
    }
    if is_pending(ctx, &o) {
        return Moved::Skipped;
    }
    // The start checked the user's permissions; a stream of a policy given this DLQ since, or
    // an ACL changed since, is checked here.
    if user.is_some_and(|u| !u.may_write(ctx, &o.stream)) {
        return Moved::Denied;
    }
    if !claim_back(ctx, &o, &policy.claimant) {
        return Moved::Skipped;
    }
    // The XCLAIM succeeded: the DLQ entry goes in the same MULTI/EXEC (XDEL of an existing
    // stream entry does not fail), so the entry is never in both places.
    let _: CallResult = ctx.call_ext("XDEL", &write_opts(), &[dlq, did][..]);
    let member = o.member();
    let r: CallResult = ctx.call_ext("SADD", &write_opts(), &[moved_key, &member][..]);
    if r.is_err() {
        // The step checked the moved set's type first, so this is not expected; the entry is
        // back in its group all the same, only its `failed-again` check is lost.
        ctx.log_warning("reclaim: RECLAIM.REDRIVE could not add a moved entry to its moved set");
    }
    crate::ffi::blocked::signal_if_waiting(ctx, db, &o.stream);
    Moved::Back
}

/// Counts the entries dead-lettered after `t.checked` that this task moved back
/// (`failed-again`), at most [`STEP_CHECKS`] per step.
fn check_failed_again(ctx: &Context, dlq: &[u8], moved_key: &[u8], t: &mut Task) {
    if t.moved == 0 {
        return;
    }
    let start = [b"(", t.checked.as_slice()].concat();
    let Some(new) = xrange(ctx, dlq, &start, b"+", STEP_CHECKS) else {
        return;
    };
    for (id, fields) in new {
        if let Some(o) = origin(&fields) {
            let member = o.member();
            let r: CallResult = ctx.call_ext("SISMEMBER", &read_opts(), &[moved_key, &member][..]);
            if matches!(r, Ok(CallReply::I64(i)) if i.to_i64() == 1) {
                t.failed_again += 1;
            }
        }
        t.checked = id;
    }
}

/// The task's user `name` for a step, when it may still act: known to this server and, when
/// `full`, `on` and allowed to run `RECLAIM.REDRIVE` on `dlq` (its commands and its keys) and to
/// write it. Otherwise why not, for the log.
fn user_for_step(
    ctx: &Context,
    name: &[u8],
    dlq: &[u8],
    full: bool,
) -> Result<ffi::AclUser, &'static str> {
    let u = ffi::AclUser::lookup(ctx, name).ok_or("is gone from this server")?;
    if !full {
        return Ok(u);
    }
    if !ffi::AclUser::is_on(ctx, name) {
        return Err("is off");
    }
    if !u.may_run(ctx, &[b"RECLAIM.REDRIVE", dlq]) || !u.may_write(ctx, dlq) {
        return Err("may no longer run RECLAIM.REDRIVE on the DLQ");
    }
    Ok(u)
}

/// Logs why the task of `dlq` stopped in state `denied` (STATUS shows only the state).
fn log_denied(dlq: &[u8], user: &[u8], why: &str) {
    ffi::log_warning(&format!(
        "reclaim: RECLAIM.REDRIVE of '{}' stopped (denied): user '{}' {why}",
        crate::model::text::printable(dlq),
        crate::model::text::printable(user)
    ));
}

/// One step of the task of `dlq` in database `db` (selected in `ctx`), with its `RATE` bucket.
/// Returns whether the task still runs.
fn step(ctx: &Context, db: i32, dlq: &[u8], bucket: &mut Bucket, deadline: Instant) -> bool {
    let key = keys::redrive_key(dlq);
    let moved_key = keys::redrive_moved_key(dlq);
    let Ok(Some(mut t)) = read_task(ctx, &key) else {
        return false;
    };
    if !t.phase.is_live() {
        return false;
    }
    if !moved_key_usable(ctx, &moved_key) {
        // A value of another type under the moved set's name (written by hand): never delete or
        // write it; wait (RECLAIM.REDRIVE CANCEL ends the task).
        return true;
    }
    let before = t.clone();
    let now = epoch_ms() as u64;
    match key_type(ctx, dlq) {
        KeyType::Stream => {}
        // The DLQ is gone: nothing is left to move back.
        KeyType::Empty => {
            t.examined = t.total;
            t.finish(Phase::Done, now);
        }
        // Another value under the DLQ's name: wait for it to be a stream again.
        _ => return true,
    }
    if t.phase.is_live() {
        check_failed_again(ctx, dlq, &moved_key, &mut t);
        t.check_canary(now);
    }
    let quota = match t.phase {
        Phase::Running => t.quota(bucket.available(t.opts.rate, now_ms())),
        _ => 0,
    };
    // The task's user, as this server knows it now, before a step that may move something: gone,
    // off, or no longer allowed to run the command on this DLQ (checked at most every
    // USER_RECHECK_MS), the task stops.
    let user = match &t.user {
        Some(name) if quota > 0 => {
            let mono = now_ms();
            let full = mono.saturating_sub(bucket.user_checked_ms) >= USER_RECHECK_MS
                || bucket.user_checked_ms == 0;
            if full {
                bucket.user_checked_ms = mono.max(1);
            }
            user_for_step(ctx, name, dlq, full).map(Some)
        }
        _ => Ok(None),
    };
    let user = match user {
        Ok(u) => u,
        Err(why) => {
            log_denied(dlq, t.user.as_deref().unwrap_or_default(), why);
            t.finish(Phase::Denied, now);
            None
        }
    };
    if t.phase == Phase::Running {
        let start = [b"(", t.cursor.as_slice()].concat();
        let reads = STEP_READS.min(quota.saturating_add(8));
        if quota > 0 {
            let Some(entries) = xrange(ctx, dlq, &start, &t.end_id, reads) else {
                return true;
            };
            let mut moves = 0;
            let mut stopped = false;
            let mut delivered = Delivered::new();
            for (handled, (did, fields)) in (0u64..).zip(&entries) {
                let at = Instant::now();
                if moves >= quota
                    || !bucket.may_start(deadline.saturating_duration_since(at), handled)
                {
                    stopped = true;
                    break;
                }
                let m = move_back(
                    ctx,
                    db,
                    dlq,
                    &moved_key,
                    &t,
                    user.as_ref(),
                    did,
                    fields,
                    &mut delivered,
                );
                bucket.note_entry(at.elapsed().as_micros() as u64);
                match m {
                    Moved::Back => {
                        moves += 1;
                        t.moved += 1;
                    }
                    Moved::Skipped => t.skipped += 1,
                    Moved::Other => {}
                    Moved::Denied => {
                        let stream = origin(fields).map(|o| o.stream).unwrap_or_default();
                        let why = format!(
                            "may not write the stream '{}' an entry goes back to",
                            crate::model::text::printable(&stream)
                        );
                        log_denied(dlq, t.user.as_deref().unwrap_or_default(), &why);
                        t.finish(Phase::Denied, now);
                        stopped = true;
                        break;
                    }
                }
                t.examined += 1;
                t.cursor = did.clone();
                if t.quota(u64::MAX) == 0 {
                    // COUNT reached, or the canary's entries are back.
                    stopped = true;
                    break;
                }
            }
            bucket.spend(moves);
            let exhausted = !stopped && (entries.len() as u64) < reads;
            t.settle(now, exhausted);
        } else if t.opts.count > 0 && t.moved >= t.opts.count {
            t.settle(now, false);
        }
    }
    if t != before {
        write_task(ctx, &key, &t);
        if !t.phase.is_live() {
            del_moved(ctx, &moved_key);
        }
    }
    t.phase.is_live()
}

/// One round over the running tasks, from the timer (the scheduler calls it only on a primary,
/// not loading, not paused, not out of memory): a step of each until `deadline`. Looks for tasks
/// the index does not know first, when asked to ([`rediscover`]). Returns whether it stepped a
/// task (the scheduler then counts its time as a tick's, in `INFO reclaim`).
pub fn run(ctx: &Context, deadline: Instant) -> bool {
    if DISCOVER.swap(false, Ordering::Relaxed) {
        discover(ctx);
    }
    let mut list: Vec<(i32, Vec<u8>)> = tasks().keys().cloned().collect();
    if list.is_empty() {
        return false;
    }
    // Each round starts one task further, so that a budget used up by the first tasks does not
    // starve the last ones.
    let first = ROUND.fetch_add(1, Ordering::Relaxed) % list.len();
    list.rotate_left(first);
    let db_before = ffi::selected_db(ctx);
    for (db, dlq) in list {
        if Instant::now() >= deadline {
            break;
        }
        let mut bucket = tasks().get(&(db, dlq.clone())).copied().unwrap_or_default();
        let keep = ffi::select_db(ctx, db) && step(ctx, db, &dlq, &mut bucket, deadline);
        let mut all = tasks();
        if keep {
            all.insert((db, dlq), bucket);
        } else {
            all.remove(&(db, dlq));
        }
    }
    ffi::select_db(ctx, db_before);
    true
}

/// Registers the running tasks of the DLQs that known policies name (one key lookup per policy).
fn discover(ctx: &Context) {
    let db_before = ffi::selected_db(ctx);
    let mut found = Vec::new();
    for id in crate::state::registry::all_ids() {
        if !ffi::select_db(ctx, id.db) {
            continue;
        }
        let Some(dlq) = store::get(ctx, &id.stream, &id.group).and_then(|p| p.dlq) else {
            continue;
        };
        if let Ok(Some(t)) = read_task(ctx, &keys::redrive_key(&dlq)) {
            if t.phase.is_live() {
                found.push((id.db, dlq));
            }
        }
    }
    ffi::select_db(ctx, db_before);
    for (db, dlq) in found {
        note(db, &dlq);
    }
}

/// The streams of the known policies of the selected database (database `db`) whose DLQ is
/// `dlq`, deduplicated: the consumer groups a task without `SOURCE` may write. One policy-key
/// read per stream with a known policy (the registry's policies of `db`), nothing else.
fn dlq_streams(ctx: &Context, db: i32, dlq: &[u8]) -> Vec<Vec<u8>> {
    let streams: std::collections::BTreeSet<Vec<u8>> = crate::state::registry::ids_in_db(db)
        .into_iter()
        .map(|id| id.stream)
        .collect();
    streams
        .into_iter()
        .filter(|s| store::uses_dlq(ctx, s, dlq))
        .collect()
}

/// Redis's error for a write on a replica, when this server is one.
fn refuse_on_replica(ctx: &Context) -> Result<(), ReclaimError> {
    if ctx.get_flags().contains(ContextFlags::MASTER) {
        Ok(())
    } else {
        Err(error::READONLY.into())
    }
}

/// `RECLAIM.REDRIVE dlq [SOURCE key group] [COUNT n] [RATE n] [CANARY k WINDOW ms]` -> the new
/// task's id (integer). Errors, in this order: the options' ([`parse_options`]); the DLQ or the
/// SOURCE key in the module's own namespace ([`keys::is_module_key`]); the SOURCE key equal to
/// the DLQ; READONLY on a replica; NOPERM when the caller may not write the SOURCE key or,
/// without SOURCE, the stream of every policy whose DLQ is this DLQ ([`dlq_streams`]); no such
/// DLQ; WRONGTYPE (the DLQ is not a stream); the DLQ is the stream of a policy (a work stream);
/// no policy for SOURCE's key and group; the task key taken; a task running; the moved set's key
/// taken. Writes the task (`DEL` of the old task and moved set, `HSET`) through `!`; the moves
/// run from the timer.
fn start(ctx: &Context, dlq: &[u8], opts: &[&[u8]]) -> CmdResult {
    let o = parse_options(opts)?;
    if keys::is_module_key(dlq) {
        return Err(error::DLQ_IS_MODULE_KEY.into());
    }
    if let Some((sk, _)) = &o.source {
        if keys::is_module_key(sk) {
            return Err(error::SOURCE_IS_MODULE_KEY.into());
        }
        if sk.as_slice() == dlq {
            return Err(error::REDRIVE_DLQ_IS_SOURCE.into());
        }
    }
    refuse_on_replica(ctx)?;
    if let Some((sk, _)) = &o.source {
        if !ffi::may_write_key(ctx, sk) {
            return Err(error::NOPERM_STREAM.into());
        }
    } else {
        let streams = dlq_streams(ctx, ffi::selected_db(ctx), dlq);
        let keys: Vec<&[u8]> = streams.iter().map(|s| s.as_slice()).collect();
        if !ffi::may_write_keys(ctx, &keys) {
            return Err(error::NOPERM_REDRIVE_STREAMS.into());
        }
    }
    match key_type(ctx, dlq) {
        KeyType::Stream => {}
        KeyType::Empty => return Err(error::REDRIVE_NO_DLQ.into()),
        _ => return Err(error::WRONGTYPE_DLQ.into()),
    }
    if store::has_policies(ctx, dlq) {
        return Err(error::REDRIVE_DLQ_IS_WORK_STREAM.into());
    }
    if let Some((sk, sg)) = &o.source {
        if store::get(ctx, sk, sg).is_none() {
            return Err(error::NO_POLICY.into());
        }
    }
    let key = keys::redrive_key(dlq);
    let previous = read_task(ctx, &key)?;
    if previous.as_ref().is_some_and(|t| t.phase.is_live()) {
        return Err(error::REDRIVE_RUNNING.into());
    }
    let moved_key = keys::redrive_moved_key(dlq);
    if !moved_key_usable(ctx, &moved_key) {
        return Err(error::REDRIVE_MOVED_KEY_TAKEN.into());
    }
    let (end_id, total) = dlq_end(ctx, dlq);
    let t = Task {
        id: previous.map_or(0, |p| p.id) + 1,
        phase: Phase::Running,
        opts: o,
        cursor: b"0-0".to_vec(),
        checked: end_id.clone(),
        end_id,
        total,
        started_ms: epoch_ms() as u64,
        user: ffi::current_user_name(ctx),
        ..Task::default()
    };
    del(ctx, &key);
    del_moved(ctx, &moved_key);
    write_task(ctx, &key, &t);
    note(ffi::selected_db(ctx), dlq);
    Ok(Reply::Int(t.id as i64))
}

/// `RECLAIM.REDRIVE STATUS dlq` -> nil without a task, else a map: `id`, `state` (`running`,
/// `canary`, `done`, `canceled`, `canary-failed`, `denied`), `source` (nil or `[key, group]`),
/// `count`, `rate`, `canary`, `window` (0 = not given), `moved`, `skipped`, `failed-again`,
/// `left`, `examined`, `total`, `end-id`, `cursor`, `started-ms`, `canary-until-ms`, `ended-ms`,
/// `user` (the ACL user who started it; nil for a task from before the module stored it).
/// Errors: the task key taken.
fn status(ctx: &Context, dlq: &[u8]) -> CmdResult {
    let Some(t) = read_task(ctx, &keys::redrive_key(dlq))? else {
        return Ok(Reply::Null);
    };
    if t.phase.is_live() && ctx.get_flags().contains(ContextFlags::MASTER) {
        note(ffi::selected_db(ctx), dlq);
    }
    let i = |v: u64| Reply::Int(v.min(i64::MAX as u64) as i64);
    let source = match &t.opts.source {
        Some((k, g)) => Reply::Array(vec![Reply::Bytes(k.clone()), Reply::Bytes(g.clone())]),
        None => Reply::Null,
    };
    Ok(Reply::Map(vec![
        ("id", i(t.id)),
        ("state", Reply::Bytes(t.phase.name().as_bytes().to_vec())),
        ("source", source),
        ("count", i(t.opts.count)),
        ("rate", i(t.opts.rate)),
        ("canary", i(t.opts.canary)),
        ("window", i(t.opts.window_ms)),
        ("moved", i(t.moved)),
        ("skipped", i(t.skipped)),
        ("failed-again", i(t.failed_again)),
        ("left", i(t.left())),
        ("examined", i(t.examined)),
        ("total", i(t.total)),
        ("end-id", Reply::Bytes(t.end_id.clone())),
        ("cursor", Reply::Bytes(t.cursor.clone())),
        ("started-ms", i(t.started_ms)),
        ("canary-until-ms", i(t.canary_until_ms)),
        ("ended-ms", i(t.ended_ms)),
        ("user", t.user.clone().map_or(Reply::Null, Reply::Bytes)),
    ]))
}

/// `RECLAIM.REDRIVE CANCEL dlq` -> 1 when a running task was canceled (state `canceled`; the
/// entries not moved yet stay in the DLQ), 0 when none runs. Errors: READONLY on a replica, the
/// task key taken.
fn cancel(ctx: &Context, dlq: &[u8]) -> CmdResult {
    refuse_on_replica(ctx)?;
    let key = keys::redrive_key(dlq);
    let Some(mut t) = read_task(ctx, &key)? else {
        return Ok(Reply::Int(0));
    };
    if !t.phase.is_live() {
        return Ok(Reply::Int(0));
    }
    t.finish(Phase::Canceled, epoch_ms() as u64);
    write_task(ctx, &key, &t);
    del_moved(ctx, &keys::redrive_moved_key(dlq));
    tasks().remove(&(ffi::selected_db(ctx), dlq.to_vec()));
    Ok(Reply::Int(1))
}

/// The keys of `RECLAIM.REDRIVE` for a getkeys request: the DLQ (read-only for `STATUS`, written
/// otherwise) and the `SOURCE` key (written).
fn report_keys(ctx: &Context, argv: &[&[u8]]) {
    const RW: u32 =
        redis_module::raw::REDISMODULE_CMD_KEY_RW | redis_module::raw::REDISMODULE_CMD_KEY_UPDATE;
    const RO: u32 =
        redis_module::raw::REDISMODULE_CMD_KEY_RO | redis_module::raw::REDISMODULE_CMD_KEY_ACCESS;
    match request(argv) {
        Request::Status(_) => ffi::key_at(ctx, 2, RO),
        Request::Cancel(_) => ffi::key_at(ctx, 2, RW),
        Request::Start(..) => {
            ffi::key_at(ctx, 1, RW);
            let mut i = 2;
            while i < argv.len() {
                if argv[i].eq_ignore_ascii_case(b"SOURCE") && i + 2 < argv.len() {
                    ffi::key_at(ctx, i + 1, RW);
                    i += 3;
                } else {
                    i += 2;
                }
            }
        }
    }
}

/// The handler of `RECLAIM.REDRIVE` (all three forms, see [`request`]).
pub fn redrive_cmd(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_slice()).collect();
    if ffi::is_keys_request(ctx) {
        report_keys(ctx, &a);
        return Ok(Reply::Done);
    }
    match request(&a) {
        Request::Start(dlq, opts) => start(ctx, dlq, opts),
        Request::Status(dlq) => status(ctx, dlq),
        Request::Cancel(dlq) => cancel(ctx, dlq),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(s: &str) -> Result<Options, ReclaimError> {
        let w: Vec<&[u8]> = s.split_whitespace().map(|w| w.as_bytes()).collect();
        parse_options(&w)
    }

    #[test]
    fn parses_options() {
        assert_eq!(opts("").unwrap(), Options::default());
        let o = opts("source s g count 5 RATE 100 CANARY 2 WINDOW 1000").unwrap();
        assert_eq!(o.source, Some((b"s".to_vec(), b"g".to_vec())));
        assert_eq!((o.count, o.rate, o.canary, o.window_ms), (5, 100, 2, 1000));
    }

    #[test]
    fn option_errors_have_their_texts() {
        let e = |s: &str| opts(s).unwrap_err().to_string();
        assert_eq!(e("FOO 1"), "ERR unknown option 'FOO'");
        assert_eq!(
            e("COUNT 1 COUNT 2"),
            "ERR option COUNT given more than once"
        );
        assert_eq!(e("RATE"), "ERR option RATE needs a value");
        assert_eq!(e("SOURCE s"), "ERR option SOURCE needs a value");
        assert_eq!(
            e("COUNT 0"),
            "ERR COUNT must be an integer from 1 to 1000000000"
        );
        assert_eq!(
            e("WINDOW 86400001 CANARY 1"),
            "ERR WINDOW must be an integer from 1 to 86400000 (ms)"
        );
        assert_eq!(e("CANARY 3"), error::REDRIVE_CANARY_WINDOW);
        assert_eq!(e("WINDOW 3"), error::REDRIVE_CANARY_WINDOW);
    }

    #[test]
    fn requests() {
        let r = |s: &'static str| -> Vec<&'static [u8]> {
            s.split_whitespace().map(|w| w.as_bytes()).collect()
        };
        let a = r("X status d");
        assert_eq!(request(&a), Request::Status(b"d"));
        let a = r("X CANCEL d");
        assert_eq!(request(&a), Request::Cancel(b"d"));
        let a = r("X STATUS");
        assert_eq!(request(&a), Request::Start(b"STATUS", &[]));
        let a = r("X d COUNT 5");
        assert!(matches!(request(&a), Request::Start(b"d", o) if o.len() == 2));
    }

    fn task(o: &str) -> Task {
        Task {
            id: 3,
            opts: opts(o).unwrap(),
            end_id: b"5-0".to_vec(),
            cursor: b"0-0".to_vec(),
            checked: b"5-0".to_vec(),
            total: 10,
            started_ms: 1000,
            ..Task::default()
        }
    }

    #[test]
    fn fields_round_trip() {
        for (o, user) in [
            ("", None),
            (
                "SOURCE {a}b g\x00 COUNT 4 RATE 9 CANARY 2 WINDOW 50",
                Some(b"ops\xff".to_vec()),
            ),
        ] {
            let mut t = task(o);
            t.moved = 2;
            t.phase = Phase::Denied;
            t.user = user;
            let pairs: Vec<(Vec<u8>, Vec<u8>)> = t
                .to_fields()
                .into_iter()
                .map(|(f, v)| (f.to_vec(), v))
                .collect();
            assert_eq!(Task::from_fields(&pairs), Some(t.clone()));
            assert_eq!(Task::from_fields(&pairs[1..]), None);
            // A task written before the `user` field: no user, no per-step check.
            let without: Vec<(Vec<u8>, Vec<u8>)> =
                pairs.into_iter().filter(|(f, _)| f != b"user").collect();
            assert_eq!(Task::from_fields(&without).and_then(|t| t.user), None);
        }
    }

    #[test]
    fn quota_respects_rate_count_and_canary() {
        let t = task("");
        assert_eq!(t.quota(0), STEP_MOVES);
        let t = task("RATE 5");
        assert_eq!(t.quota(3), 3);
        let mut t = task("COUNT 10 CANARY 4 WINDOW 100");
        t.moved = 3;
        assert_eq!(t.quota(100), 1);
        t.canary_until_ms = 9;
        assert_eq!(t.quota(100), 7);
    }

    #[test]
    fn canary_waits_then_fails_or_runs_on() {
        let mut t = task("CANARY 2 WINDOW 100");
        t.moved = 2;
        t.settle(1000, false);
        assert_eq!((t.phase, t.canary_until_ms), (Phase::Canary, 1100));
        t.check_canary(1050);
        assert_eq!(t.phase, Phase::Canary);
        let mut failed = t.clone();
        failed.failed_again = 1;
        failed.check_canary(1060);
        assert_eq!((failed.phase, failed.ended_ms), (Phase::CanaryFailed, 1060));
        t.check_canary(1100);
        assert_eq!(t.phase, Phase::Running);
        t.settle(1200, true);
        assert_eq!((t.phase, t.ended_ms), (Phase::Done, 1200));
    }

    #[test]
    fn a_short_dlq_still_checks_its_canary_and_count_ends_the_task() {
        let mut t = task("CANARY 5 WINDOW 100");
        t.moved = 2;
        t.settle(1000, true);
        assert_eq!(t.phase, Phase::Canary);
        let mut t = task("CANARY 5 WINDOW 100");
        t.settle(1000, true);
        assert_eq!(t.phase, Phase::Done);
        let mut t = task("COUNT 3");
        t.moved = 3;
        t.settle(1000, false);
        assert_eq!(t.phase, Phase::Done);
        let mut t = task("");
        t.moved = 3;
        t.settle(1000, false);
        assert_eq!(t.phase, Phase::Running);
    }

    #[test]
    fn origin_takes_the_last_reclaim_fields() {
        let f: Vec<Vec<u8>> = [
            "reclaim-id",
            "fake",
            "job",
            "1",
            "reclaim-stream",
            "s",
            "reclaim-group",
            "g",
            "reclaim-id",
            "7-1",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        let o = origin(&f).unwrap();
        assert_eq!(
            (o.stream, o.group, o.id),
            (b"s".to_vec(), b"g".to_vec(), b"7-1".to_vec())
        );
        assert_eq!(origin(&f[2..6]), None);
    }

    #[test]
    fn members_are_unambiguous() {
        let m = |s: &str, g: &str| {
            Origin {
                stream: s.into(),
                group: g.into(),
                id: b"1-0".to_vec(),
            }
            .member()
        };
        assert_ne!(m("a1", ":b"), m("a", "1:b"));
        assert_eq!(m("s", "g"), b"1:s1:g1-0".to_vec());
    }

    #[test]
    fn bucket_refills_at_the_rate() {
        let mut b = Bucket::default();
        assert_eq!(b.available(100, 1000), 1);
        b.spend(1);
        assert_eq!(b.available(100, 1005), 0);
        assert_eq!(b.available(100, 1010), 1);
        // At most a tenth of a second's worth.
        assert_eq!(b.available(100, 60_000), 10);
        b.spend(10);
        assert_eq!(b.available(100, 60_000), 0);
    }

    #[test]
    fn a_step_starts_an_entry_only_when_it_fits_but_never_stalls() {
        let us = Duration::from_micros;
        let mut b = Bucket::default();
        // Nothing measured yet: any time left will do.
        assert!(b.may_start(us(1), 0));
        b.note_entry(100);
        assert!(b.may_start(us(101), 0));
        assert!(b.may_start(us(101), 3));
        // Too little left: not a second entry; the first one is put off for one step only.
        assert!(!b.may_start(us(100), 1));
        assert!(!b.may_start(us(50), 0));
        assert!(b.may_start(us(0), 0));
        b.note_entry(100);
        assert!(!b.may_start(us(0), 0));
        // The estimate follows what entries cost (a moving average).
        b.note_entry(500);
        assert_eq!(b.entry_us, 200);
        assert!(b.may_start(us(201), 2));
        assert!(!b.may_start(us(200), 2));
    }
}
