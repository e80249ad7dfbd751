//! Dead-lettering, the one home of every write into a policy's DLQ: the sweep's dead-letters
//! and tombstones, `RECLAIM.READGROUP`'s (an entry whose next delivery would pass
//! `MAX-DELIVERIES`) and `RECLAIM.TERM`'s. For each entry, `XADD dlq * fields... reclaim-*`
//! and, only if the append succeeded, its `XACK`, in the same callback (one `MULTI`/`EXEC`),
//! counted against the `STORM` allowance ([`Dlq::dead_letters`]); with `TOMBSTONES yes`, a record
//! of each entry found deleted ([`Dlq::bury`]); after every append, the DLQ trims of `DLQ-MAXLEN`
//! and `DLQ-MAXAGE` ([`Dlq::trim_dlq`]), never on a DLQ that is itself a policy's stream.
//!
//! Dead letters are appended with `RM_StreamAdd` and propagated with `RM_Replicate`
//! ([`Appender`]); the other writes (`XACK`, `XTRIM`, tombstones' `XADD`) go through `RM_Call`
//! with `!` (replicated) and `E` (errors as replies), the tombstones' `XADD` also with `M`.
//! `RM_StreamAdd` does not check `maxmemory`, and `M` reads a state taken before the command (or
//! before the timer, stale): the server's live OOM state is checked before each append, as `XADD`
//! would be refused with `-OOM`, with at most [`READ_AHEAD_BYTES`] of the module's own copies of
//! the next entries' fields held ([`Bodies`]). What work did is settled afterwards
//! ([`crate::engine::settle`]).

use std::cell::{Cell, RefCell};
use std::sync::atomic::AtomicPtr;

use redis_module::{
    raw, CallOptions, CallOptionsBuilder, CallReply, CallResult, Context, ContextFlags, RedisString,
};

use crate::engine::guards::is_non_stream;
use crate::ffi::cluster::{self, Refusal};
use crate::ffi::events;
use crate::ffi::streams::{self, Fields, Key, KeyKind, StreamId};
use crate::ffi::{read_opts, write_opts};
use crate::model::clock::epoch_ms;
use crate::model::keys;
use crate::model::outcome::{Outcome, Stop};
use crate::model::planner::{self, Pending};
use crate::model::policy::Policy;
use crate::model::retention;
use crate::state::store;

/// `reclaim-reason` of an entry dead-lettered by the rule (its deliveries used up).
pub const REASON_LIMIT: &[u8] = b"max-deliveries";

/// `reclaim-reason` of a tombstone: the record of a pending entry deleted from the stream
/// (`TOMBSTONES yes`).
pub const REASON_DELETED: &[u8] = b"deleted";

fn append_opts() -> CallOptions {
    CallOptionsBuilder::new()
        .replicate()
        .errors_as_replies()
        .verify_oom()
        .build()
}

/// The [`Stop`] of an error reply of a stream command on the policy's stream.
pub fn error_stop(e: &[u8]) -> Stop {
    if e.starts_with(b"NOGROUP") {
        Stop::NoGroup
    } else if e.starts_with(b"WRONGTYPE") {
        Stop::WrongTypeStream
    } else {
        other_stop(e)
    }
}

/// The [`Stop`] of an error reply other than the stream's own: the server's cluster refusals
/// (the cluster is down: sweeps wait for it, [`cluster::note_down`]; the slot not served here
/// now: waiting), else [`Stop::Error`] with its text.
fn other_stop(e: &[u8]) -> Stop {
    match cluster::refusal(e) {
        Some(Refusal::Down) => {
            cluster::note_down();
            Stop::ClusterDown
        }
        Some(Refusal::NotServed) => Stop::NotServed,
        None => Stop::Error(crate::model::text::printable(e)),
    }
}

/// The names of the `reclaim-*` fields of a dead letter, in the order they are appended.
const NAMES: [&[u8]; 7] = [
    b"reclaim-stream",
    b"reclaim-group",
    b"reclaim-id",
    b"reclaim-consumer",
    b"reclaim-deliveries",
    b"reclaim-reason",
    b"reclaim-moved-ms",
];

/// [`NAMES`] as module strings, each made once for the server's life ([`crate::ffi::kept`]).
static KEPT_NAMES: [AtomicPtr<raw::RedisModuleString>; 7] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; 7];

/// The module strings of [`NAMES`].
fn names() -> [*mut raw::RedisModuleString; 7] {
    std::array::from_fn(|i| crate::ffi::kept(&KEPT_NAMES[i], NAMES[i]))
}

/// A module string made for one value and kept while the next values are the same (an entry's
/// consumer and delivery count are most often the previous entry's).
struct Last<'a> {
    ctx: &'a Context,
    last: RefCell<Option<(Vec<u8>, RedisString)>>,
}

impl<'a> Last<'a> {
    fn new(ctx: &'a Context) -> Self {
        Last {
            ctx,
            last: RefCell::new(None),
        }
    }

    /// The module string of `value`: the last one when it holds the same bytes.
    fn of(&self, value: &[u8]) -> *mut raw::RedisModuleString {
        let mut last = self.last.borrow_mut();
        match &*last {
            Some((v, s)) if v.as_slice() == value => s.inner,
            _ => {
                let s = RedisString::create_from_slice(self.ctx.ctx, value);
                let p = s.inner;
                *last = Some((value.to_vec(), s));
                p
            }
        }
    }
}

/// Appends dead letters to a DLQ with `RM_StreamAdd`, each propagated as the `XADD dlq <id>
/// ...` Redis would propagate (`RM_Replicate`, in the same callback, so with the `XACK` that
/// follows in one `MULTI`/`EXEC`), and its `xadd` event fired: what `XADD dlq * ...` through
/// `RM_Call` did, without a command's round trip per entry. The `reclaim-*` names are kept for
/// the server's life, the values that are the same for every entry made once per batch, and a
/// consumer's name or a delivery count once per run of entries that share it.
struct Appender<'a> {
    ctx: &'a Context,
    dlq: &'a RedisString,
    /// Opened for writing at the first append (a key opened so and closed counts as modified).
    key: std::cell::OnceCell<Key>,
    /// [`NAMES`]' strings.
    names: [*mut raw::RedisModuleString; 7],
    /// The stream, the group, the reason and the time of the moves (`reclaim-moved-ms`).
    fixed: [RedisString; 4],
    consumer: Last<'a>,
    deliveries: Last<'a>,
}

impl<'a> Appender<'a> {
    fn new(d: &Dlq<'a>, dlq: &'a RedisString, reason: &[u8]) -> Self {
        let c = d.ctx.ctx;
        let s = |b: &[u8]| RedisString::create_from_slice(c, b);
        let mut moved = itoa::Buffer::new();
        let moved = moved.format(crate::model::clock::epoch_ms());
        Appender {
            ctx: d.ctx,
            dlq,
            key: std::cell::OnceCell::new(),
            names: names(),
            fixed: [s(d.stream), s(d.group), s(reason), s(moved.as_bytes())],
            consumer: Last::new(d.ctx),
            deliveries: Last::new(d.ctx),
        }
    }

    /// Appends `e` with `fields` and the `reclaim-*` fields, as the sweep always did; with `last`
    /// (the consumer and reason of the `RECLAIM.NACK` that ended its last delivery), that
    /// consumer as `reclaim-consumer` and the reason, if one was given, as `reclaim-last-error`,
    /// last.
    fn append(
        &self,
        e: &Pending,
        fields: &[RedisString],
        last: Option<&Last2>,
    ) -> Result<(), Stop> {
        let key = self.key.get_or_init(|| Key::open(self.ctx, self.dlq, true));
        match key.kind() {
            KeyKind::Other => return Err(Stop::WrongTypeDlq),
            KeyKind::Empty | KeyKind::Stream => {}
        }
        let id = RedisString::create_from_slice(self.ctx.ctx, &e.id);
        let mut count = itoa::Buffer::new();
        let deliveries = self
            .deliveries
            .of(count.format(e.deliveries as u64).as_bytes());
        let consumer = self.consumer.of(last.map_or(&e.consumer[..], |l| &l.0[..]));
        let [stream, group, reason, moved] = &self.fixed;
        let s = |b: &[u8]| RedisString::create_from_slice(self.ctx.ctx, b);
        let last_error = last
            .filter(|l| !l.1.is_empty())
            .map(|l| [s(LAST_ERROR), s(&l.1)]);
        let n = &self.names;
        let mut argv: Vec<*mut raw::RedisModuleString> = Vec::with_capacity(fields.len() + 14);
        argv.extend(fields.iter().map(|x| x.inner));
        argv.extend([n[0], stream.inner, n[1], group.inner, n[2], id.inner]);
        argv.extend([n[3], consumer, n[4], deliveries]);
        argv.extend([n[5], reason.inner, n[6], moved.inner]);
        if let Some([name, text]) = &last_error {
            argv.extend([name.inner, text.inner]);
        }
        let Some(added) = key.add(&mut argv) else {
            return Err(Stop::Error("XADD to the DLQ failed".into()));
        };
        streams::replicate_xadd(self.ctx, self.dlq, added, &mut argv);
        Ok(())
    }
}

/// The field of a DLQ entry that holds the reason of the last `RECLAIM.NACK ... REASON` of an
/// entry dead-lettered by `MAX-DELIVERIES`.
pub const LAST_ERROR: &[u8] = b"reclaim-last-error";

/// The consumer and reason of an entry's last NACK record that applies to it.
type Last2 = (Vec<u8>, Vec<u8>);

/// Bytes of entry fields a batch of moves copies out ahead of the move in progress: the live OOM
/// check before each move sees at most this much of the module's own copies of entries not yet
/// moved (the entry being moved is copied after its check), so a move is refused only when
/// `XADD` would refuse it, whatever the batch. A run of small entries is still read in one walk.
const READ_AHEAD_BYTES: usize = 16 * 1024;

/// At most this many entries are read in one walk of [`Bodies`].
const READ_AHEAD_ENTRIES: usize = 64;

/// The stream entries' fields a batch of dead-letter moves appends, read as the moves go
/// ([`Key::read_entries_upto`]): each read starts at the entry about to move and takes the
/// entries after it, up to [`READ_AHEAD_BYTES`] of fields.
struct Bodies<'a> {
    ctx: &'a Context,
    stream: RedisString,
    /// Entries read and not taken yet (`None`: gone from the stream, or already taken).
    read: std::collections::HashMap<StreamId, Option<Fields>>,
}

impl<'a> Bodies<'a> {
    fn new(ctx: &'a Context, stream: &[u8]) -> Self {
        Bodies {
            ctx,
            stream: RedisString::create_from_slice(ctx.ctx, stream),
            read: std::collections::HashMap::new(),
        }
    }

    /// The fields of `rest[0]` (`None`: gone from the stream, or an ID it already gave), read
    /// with the entries of `rest` after it, in one walk, when not read yet.
    fn take(&mut self, rest: &[Pending]) -> Option<Fields> {
        let id = planner::parse_id(&rest.first()?.id)?;
        if !self.read.contains_key(&id) {
            let mut ids: Vec<StreamId> = rest
                .iter()
                .filter_map(|e| planner::parse_id(&e.id))
                .filter(|i| *i >= id && !self.read.contains_key(i))
                .take(READ_AHEAD_ENTRIES)
                .collect();
            ids.sort_unstable();
            ids.dedup();
            let key = Key::open(self.ctx, &self.stream, false);
            let got = key.read_entries_upto(&ids, READ_AHEAD_BYTES);
            self.read.extend(ids.into_iter().zip(got));
        }
        self.read.get_mut(&id).and_then(Option::take)
    }
}

/// The DLQ of a policy as work on one (stream, group) writes to it: the database selected in
/// `ctx`, the stream and group, the policy, and the dead-letters the `STORM` breaker allows.
pub struct Dlq<'a> {
    /// The context whose selected database holds the stream.
    pub ctx: &'a Context,
    /// Stream key.
    pub stream: &'a [u8],
    /// Consumer group.
    pub group: &'a [u8],
    /// The policy (its `DLQ`, `TOMBSTONES`, `DLQ-MAXLEN`, `DLQ-MAXAGE`).
    pub policy: &'a Policy,
    /// How many more entries may be dead-lettered before the `STORM` breaker opens
    /// (`u64::MAX`: no limit; 0: the breaker is open). Each dead-letter takes one.
    pub dead_letters: Cell<u64>,
}

impl<'a> Dlq<'a> {
    /// The DLQ of `policy` for work on (`stream`, `group`) in the database selected in `ctx`,
    /// with `dead_letters` allowed before the `STORM` breaker opens.
    pub fn new(
        ctx: &'a Context,
        stream: &'a [u8],
        group: &'a [u8],
        policy: &'a Policy,
        dead_letters: u64,
    ) -> Self {
        Dlq {
            ctx,
            stream,
            group,
            policy,
            dead_letters: Cell::new(dead_letters),
        }
    }

    /// The DLQ that tombstones go to: the policy's DLQ with `TOMBSTONES yes`, `None` otherwise.
    pub fn tombstones(&self) -> Option<&[u8]> {
        match (&self.policy.dlq, self.policy.tombstones) {
            (Some(d), true) => Some(d),
            _ => None,
        }
    }

    /// Moves `entries` to the policy's DLQ (nothing without one), with `reason` as
    /// `reclaim-reason`: for each, in order, `XADD dlq * fields...
    /// reclaim-*` (entries gone from the stream are only dropped from the PEL); then one `XACK` of
    /// exactly the entries whose append succeeded. Stops at the first failed append (DLQ of the
    /// wrong type, out of memory): that entry and the ones after it stay pending, untouched.
    pub fn dead_letter(
        &self,
        entries: &[Pending],
        out: &mut Outcome,
        reason: &[u8],
    ) -> Result<(), Stop> {
        let Some(dlq) = self.policy.dlq.as_deref() else {
            return Ok(());
        };
        // The entries' fields, read as the moves go (runs of small entries in one walk).
        let mut bodies = Bodies::new(self.ctx, self.stream);
        let dname = RedisString::create_from_slice(self.ctx.ctx, dlq);
        let appender = Appender::new(self, &dname, reason);
        // The NACK records of the entries: read to name the last worker (dead-letters by the
        // limit), and dropped with the entries whatever the reason.
        let (mut records, found) = self.nack_records(entries);
        if reason != REASON_LIMIT {
            records.clear();
        }
        let mut moved: Vec<&[u8]> = Vec::with_capacity(entries.len());
        let mut gone: Vec<&Pending> = Vec::new();
        let mut failure = None;
        for (k, e) in entries.iter().enumerate() {
            if self.dead_letters.get() == 0 {
                failure = Some(Stop::Storm);
                break;
            }
            // What XADD would refuse (`-OOM`): RM_StreamAdd does not check. Live, before the
            // body is copied (a large entry could itself push memory over the limit), with at
            // most READ_AHEAD_BYTES of the module's copies of the next entries held. Every move
            // of the batch not done counts as skipped.
            if self.out_of_memory() {
                out.oom_skips += (entries.len() - k) as u64;
                failure = Some(Stop::Oom);
                break;
            }
            let Some(fields) = bodies.take(&entries[k..]) else {
                gone.push(e);
                continue;
            };
            match appender.append(e, &fields, records.get(k).and_then(Option::as_ref)) {
                Ok(()) => {
                    moved.push(&e.id);
                    self.dead_letters
                        .set(self.dead_letters.get().saturating_sub(1));
                }
                Err(f) => {
                    failure = Some(f);
                    break;
                }
            }
        }
        // The DLQ key is closed here: readers blocked on it are served after this callback.
        drop(appender);
        // The appends are done: their acknowledgement follows in the same callback (one
        // MULTI/EXEC). XACK cannot find an entry already acknowledged here (nothing else runs in
        // between); if it ever did, the DLQ entry is kept (at-least-once) and still counted.
        if !moved.is_empty() {
            let n = self.ack(&moved)?;
            if n < moved.len() as i64 {
                crate::ffi::log_warning(
                    "reclaim: XACK after a DLQ append found an entry already acknowledged",
                );
            }
            out.dead_lettered += moved.len() as u64;
            events::notify(self.ctx, self.stream, events::DEADLETTER);
        }
        let (buried, res) = self.bury(&gone, out);
        self.drop_nack_records(&found, &moved, &gone);
        self.trim_dlq(moved.len() as u64 + buried, out);
        match (failure, res) {
            (Some(f), _) | (None, Err(f)) => Err(f),
            (None, Ok(())) => Ok(()),
        }
    }

    /// The NACK records of `entries` (`HMGET` of the stream's NACK record key, when it is a
    /// hash): per entry, the consumer and reason of a record written at its current delivery
    /// count (its last attempt ended with that NACK), and the IDs that have a record.
    fn nack_records(&self, entries: &[Pending]) -> (Vec<Option<Last2>>, Vec<Vec<u8>>) {
        let key = keys::nack_key(self.stream);
        let name = RedisString::create_from_slice(self.ctx.ctx, &key);
        if self.ctx.open_key(&name).key_type() != redis_module::KeyType::Hash {
            return (Vec::new(), Vec::new());
        }
        let fields: Vec<Vec<u8>> = entries
            .iter()
            .map(|e| keys::delay_member(self.group, &e.id))
            .collect();
        let mut args: Vec<&[u8]> = vec![&key];
        args.extend(fields.iter().map(Vec::as_slice));
        let r: CallResult = self.ctx.call_ext("HMGET", &read_opts(), &args[..]);
        let Ok(CallReply::Array(a)) = r else {
            return (Vec::new(), Vec::new());
        };
        let mut found = Vec::new();
        let records = a
            .iter()
            .zip(entries)
            .map(|(x, e)| {
                let Ok(CallReply::String(v)) = x else {
                    return None;
                };
                found.push(e.id.clone());
                let v = v.as_bytes();
                let (count, consumer, reason) = keys::parse_nack_record(v)?;
                (count == e.deliveries).then(|| (consumer.to_vec(), reason.to_vec()))
            })
            .collect();
        (records, found)
    }

    /// Drops the NACK records (`found`) of the entries that left the PEL (`moved`, `gone`):
    /// one `HDEL` (replicated); Redis deletes the key with its last field.
    fn drop_nack_records(&self, found: &[Vec<u8>], moved: &[&[u8]], gone: &[&Pending]) {
        if found.is_empty() {
            return;
        }
        let left_pel: std::collections::HashSet<&[u8]> = moved
            .iter()
            .copied()
            .chain(gone.iter().map(|g| g.id.as_slice()))
            .collect();
        let left: Vec<Vec<u8>> = found
            .iter()
            .filter(|id| left_pel.contains(id.as_slice()))
            .map(|id| keys::delay_member(self.group, id))
            .collect();
        if left.is_empty() {
            return;
        }
        let key = keys::nack_key(self.stream);
        let mut args: Vec<&[u8]> = vec![&key];
        args.extend(left.iter().map(Vec::as_slice));
        let _: CallResult = self.ctx.call_ext("HDEL", &write_opts(), &args[..]);
    }

    /// With `TOMBSTONES yes`, takes out of `entries` those whose stream entry is gone and gives
    /// them their tombstones with their `XACK` ([`Dlq::bury`], then the DLQ trim): what is
    /// left is what the stream still holds, for a hand-over (`RECLAIM.READGROUP`). Without
    /// `TOMBSTONES`, `entries` as they are (`XCLAIM` drops the deleted ones itself). The failure
    /// of a tombstone (out of memory, DLQ of the wrong type) leaves its entry pending and is
    /// noted in `out.problem`.
    pub fn bury_deleted(&self, entries: Vec<Pending>, out: &mut Outcome) -> Vec<Pending> {
        if self.tombstones().is_none() {
            return entries;
        }
        let sname = RedisString::create_from_slice(self.ctx.ctx, self.stream);
        let (kept, gone): (Vec<Pending>, Vec<Pending>) = entries
            .into_iter()
            .partition(|e| self.has_entry(&sname, &e.id));
        let refs: Vec<&Pending> = gone.iter().collect();
        let (buried, res) = self.bury(&refs, out);
        self.trim_dlq(buried, out);
        if let (Err(s), None) = (res, &out.problem) {
            out.problem = Some(s);
        }
        kept
    }

    /// Removes pending entries whose stream entry is gone (`XDEL`, `XTRIM`) from the PEL with one
    /// `XACK`, counted as `deleted`. With `TOMBSTONES yes`, each first gets a DLQ record
    /// (`XADD dlq * reclaim-stream ... reclaim-reason deleted ...`, the `reclaim-*` fields
    /// only: there is no payload left), counted in `tombstones`, and only the entries whose
    /// record was appended are acknowledged, in the same callback (one MULTI/EXEC); the first
    /// append that fails (out of memory, DLQ of the wrong type) leaves it and the entries after
    /// it pending, for the next pass. Tombstones do not take from the `STORM` allowance (they
    /// are not poison). Returns the records appended, and the failure if any.
    pub fn bury(&self, gone: &[&Pending], out: &mut Outcome) -> (u64, Result<(), Stop>) {
        if gone.is_empty() {
            return (0, Ok(()));
        }
        let mut acked: Vec<&[u8]> = Vec::with_capacity(gone.len());
        let mut failure = None;
        match self.tombstones() {
            None => acked.extend(gone.iter().map(|e| e.id.as_slice())),
            Some(dlq) => {
                for (k, e) in gone.iter().enumerate() {
                    if self.out_of_memory() {
                        out.oom_skips += (gone.len() - k) as u64;
                        failure = Some(Stop::Oom);
                        break;
                    }
                    match self.append_dead_letter(dlq, e, &[], REASON_DELETED) {
                        Ok(()) => acked.push(&e.id),
                        Err(f) => {
                            if f == Stop::Oom {
                                out.oom_skips += (gone.len() - k) as u64;
                            }
                            failure = Some(f);
                            break;
                        }
                    }
                }
            }
        }
        let buried = if self.tombstones().is_some() {
            acked.len() as u64
        } else {
            0
        };
        out.tombstones += buried;
        if !acked.is_empty() {
            match self.ack(&acked) {
                Ok(n) => {
                    out.deleted += n.max(0) as u64;
                    if n > 0 {
                        events::notify(self.ctx, self.stream, events::PURGE);
                    }
                }
                Err(e) => return (buried, Err(e)),
            }
        }
        (buried, failure.map_or(Ok(()), Err))
    }

    /// Trims the DLQ after `appended` records were appended to it (none: nothing to do), as
    /// `DLQ-MAXLEN` and `DLQ-MAXAGE` ask ([`retention::after_append`]): `XTRIM dlq MAXLEN ~ n`,
    /// then `XTRIM dlq MINID ~ <now - maxage>-0`. Both are approximate (`~`: only whole stream
    /// nodes go, so the DLQ may keep a node's worth above the limit, and Redis bounds the work of
    /// one call), run in the same callback as the moves (one MULTI/EXEC), and are propagated as Redis rewrites them (`MAXLEN = <len>`, `MINID =
    /// <id>`: exact, so replicas and the AOF trim the same entries). Their replies (the entries
    /// removed) are counted in `dlq_trimmed`. A failed trim is logged and the moves stand. Never
    /// when the DLQ is itself a policy's stream (a work stream, used as a retry queue): its
    /// pending work would go with the trim ([`crate::state::store::has_policies`]).
    pub fn trim_dlq(&self, appended: u64, out: &mut Outcome) {
        let trims = retention::after_append(self.policy, appended, epoch_ms());
        self.run_trims(&trims, out);
    }

    /// At the end of a pass: `DLQ-MAXAGE` trims the DLQ even when nothing was appended to it
    /// lately ([`retention::at_pass_end`], counted as after a move), so a dead letter goes within
    /// about an `INTERVAL` of passing the age, not only at the next move. Nothing when the DLQ
    /// holds a value of another type (the moves report that). Not on a paused policy: it runs no
    /// pass.
    pub fn trim_dlq_by_age(&self, out: &mut Outcome) {
        let Some(trim) = retention::at_pass_end(self.policy, epoch_ms()) else {
            return;
        };
        if let Some(dlq) = self.policy.dlq.as_deref() {
            if !is_non_stream(self.ctx, dlq) {
                self.run_trims(std::slice::from_ref(&trim), out);
            }
        }
    }

    /// Runs `trims` on the policy's DLQ, in order, unless it is a policy's stream.
    fn run_trims(&self, trims: &[retention::Trim], out: &mut Outcome) {
        let Some(dlq) = self.policy.dlq.as_deref() else {
            return;
        };
        if trims.is_empty() || store::has_policies(self.ctx, dlq) {
            return;
        }
        for t in trims {
            self.xtrim(dlq, t.strategy, &t.threshold, out);
        }
    }

    /// `XTRIM dlq <strategy> ~ <threshold>`, its reply added to `out.dlq_trimmed`.
    fn xtrim(&self, dlq: &[u8], strategy: &[u8], threshold: &[u8], out: &mut Outcome) {
        let args: [&[u8]; 4] = [dlq, strategy, b"~", threshold];
        let res: CallResult = self.ctx.call_ext("XTRIM", &write_opts(), &args[..]);
        match res {
            Ok(CallReply::I64(i)) => out.dlq_trimmed += i.to_i64().max(0) as u64,
            Err(e) => crate::ffi::log_warning(&format!(
                "reclaim: XTRIM of the DLQ failed: {}",
                crate::model::text::printable(e.as_bytes())
            )),
            Ok(_) => crate::ffi::log_warning("reclaim: unexpected XTRIM reply"),
        }
    }

    fn ack(&self, ids: &[&[u8]]) -> Result<i64, Stop> {
        let mut args: Vec<&[u8]> = Vec::with_capacity(ids.len() + 2);
        args.push(self.stream);
        args.push(self.group);
        args.extend_from_slice(ids);
        let res: CallResult = self.ctx.call_ext("XACK", &write_opts(), &args[..]);
        match res {
            Ok(CallReply::I64(i)) => Ok(i.to_i64()),
            Err(e) => Err(error_stop(e.as_bytes())),
            Ok(_) => Err(Stop::Error("unexpected XACK reply".into())),
        }
    }

    fn out_of_memory(&self) -> bool {
        self.ctx.get_flags().contains(ContextFlags::OOM)
    }

    /// Whether the stream still holds entry `id` (the test [`Dlq::dead_letter`] makes before
    /// an append; `XCLAIM` makes the same one before a move).
    pub fn has_entry(&self, stream: &RedisString, id: &[u8]) -> bool {
        self.entry_fields(stream, id).is_some()
    }

    /// Reads the fields of entry `id` (Redis `RM_StreamIteratorStart` over `[id, id]`), `None`
    /// when the entry is gone.
    fn entry_fields(&self, stream: &RedisString, id: &[u8]) -> Option<Vec<Vec<u8>>> {
        let (ms, seq) = planner::parse_id(id)?;
        let key = self.ctx.open_key(stream);
        let sid = redis_module::raw::RedisModuleStreamID { ms, seq };
        let mut it = key
            .get_stream_range_iterator(Some(sid), Some(sid), false, false)
            .ok()?;
        let rec = it.next()?;
        let mut f = Vec::with_capacity(rec.fields.len() * 2);
        for (k, v) in &rec.fields {
            f.push(k.as_slice().to_vec());
            f.push(v.as_slice().to_vec());
        }
        Some(f)
    }

    /// Appends entry `e` (with `fields`) to `dlq` with the `reclaim-*` fields through `RM_Call`
    /// (tombstones) (`reason` as
    /// `reclaim-reason`): `Ok` when the append succeeded, the reason it did not otherwise.
    fn append_dead_letter(
        &self,
        dlq: &[u8],
        e: &Pending,
        fields: &[Vec<u8>],
        reason: &[u8],
    ) -> Result<(), Stop> {
        let deliveries = (e.deliveries as u64).to_string();
        let moved = crate::model::clock::epoch_ms().to_string();
        let mut xadd: Vec<&[u8]> = Vec::with_capacity(fields.len() + 16);
        xadd.push(dlq);
        xadd.push(b"*");
        xadd.extend(fields.iter().map(|f| f.as_slice()));
        xadd.extend_from_slice(&[
            b"reclaim-stream",
            self.stream,
            b"reclaim-group",
            self.group,
            b"reclaim-id",
            &e.id,
            b"reclaim-consumer",
            &e.consumer,
            b"reclaim-deliveries",
            deliveries.as_bytes(),
            b"reclaim-reason",
            reason,
            b"reclaim-moved-ms",
            moved.as_bytes(),
        ]);
        let res: CallResult = self.ctx.call_ext("XADD", &append_opts(), &xadd[..]);
        match res {
            Ok(CallReply::String(_)) => Ok(()),
            Err(err) => {
                let b = err.as_bytes();
                Err(if b.starts_with(b"WRONGTYPE") {
                    Stop::WrongTypeDlq
                } else if b.starts_with(b"OOM") {
                    Stop::Oom
                } else {
                    other_stop(b)
                })
            }
            Ok(_) => Err(Stop::Error("unexpected XADD reply".into())),
        }
    }
}
