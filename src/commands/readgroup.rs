//! `RECLAIM.READGROUP GROUP group consumer [COUNT count] [BLOCK ms] STREAMS key [key ...] > [> ...]`:
//! claim-on-read for every worker of a pool, the drop-in for `XREADGROUP ... >` that also hands
//! out redeliveries under the stream's policy.
//!
//! For each stream whose group has a policy, in this order, up to COUNT entries:
//! 1. entries due for redelivery, oldest (lowest ID) first: the CLAIMANT's inbox (always due) and
//!    other consumers' stale entries (a page of the PEL per read from a cursor, as XAUTOCLAIM's,
//!    only while what the policy learnt says some may be stale). Each is claimed for the caller with a plain
//!    `XCLAIM` (one delivery added, idle reset, fields returned); one whose next delivery would
//!    pass `MAX-DELIVERIES` is dead-lettered instead (append and acknowledge, atomically);
//!    entries deleted from the stream are purged by that `XCLAIM` and counted;
//! 2. then new entries, `XREADGROUP GROUP g consumer COUNT rest STREAMS key >`.
//!
//! A stream without a policy for the group is read exactly as `XREADGROUP ... >`. Every write
//! goes through `RM_Call` with `!`, so what the caller got is the same on the primary, in the
//! AOF and on replicas (`XCLAIM` and `XREADGROUP` propagate each delivery with its count).
//! Replies are forwarded from those calls (`RM_ReplyWithCallReply`), in XREADGROUP's shape: an
//! array of `[key, entries]` in RESP2, a map in RESP3, nil when there is nothing.
//!
//! `BLOCK` blocks on the streams' keys (`RM_BlockClientOnKeys`): an `XADD`, a move to the inbox
//! by the sweep ([`signal_if_waiting`]) or a destroyed group wakes the reader; a deleted stream
//! ends the wait with XREADGROUP's error ([`unblock_deleted`]).

use std::cell::Cell;
use std::collections::HashMap;
use std::os::raw::{c_int, c_void};
use std::sync::Mutex;

use lazy_static::lazy_static;
use redis_module::{raw, CallReply, CallResult, Context, ContextFlags, KeyType, RedisString};

use crate::engine::settle;
use crate::engine::sweep::Target;
use crate::ffi::{self, read_opts, write_opts, CmdResult, Reply};
use crate::model::clock::epoch_ms;
use crate::model::error::{self, ReclaimError};
use crate::model::outcome::Outcome;
use crate::model::planner::{self, Pending};
use crate::model::policy::Policy;
use crate::state::registry::{self, PolicyId};
use crate::state::store;

/// A parsed `RECLAIM.READGROUP`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Consumer group.
    pub group: Vec<u8>,
    /// The reading consumer.
    pub consumer: Vec<u8>,
    /// `COUNT` (0: no limit on new entries, as XREADGROUP; redeliveries then stop at the
    /// policy's `COUNT`).
    pub count: i64,
    /// `BLOCK` ms (`None`: do not block; 0: wait forever).
    pub block_ms: Option<i64>,
    /// The stream keys, in order.
    pub keys: Vec<Vec<u8>>,
}

/// Parses the arguments after the command name, as XREADGROUP does (options in any order before
/// `STREAMS`, then keys and as many IDs), accepting only the ID `>`.
pub fn parse(args: &[&[u8]]) -> Result<Request, ReclaimError> {
    let mut req = Request {
        group: Vec::new(),
        consumer: Vec::new(),
        count: 0,
        block_ms: None,
        keys: Vec::new(),
    };
    let mut group_given = false;
    let mut i = 0;
    while i < args.len() {
        let more = args.len() - i - 1;
        let o = args[i];
        if o.eq_ignore_ascii_case(b"BLOCK") && more > 0 {
            let ms =
                crate::model::text::parse_i64(args[i + 1]).ok_or(error::TIMEOUT_NOT_INTEGER)?;
            if ms < 0 {
                return Err(error::TIMEOUT_NEGATIVE.into());
            }
            req.block_ms = Some(ms);
            i += 2;
        } else if o.eq_ignore_ascii_case(b"COUNT") && more > 0 {
            let n = crate::model::text::parse_i64(args[i + 1]).ok_or(error::NOT_AN_INTEGER)?;
            req.count = n.max(0);
            i += 2;
        } else if o.eq_ignore_ascii_case(b"GROUP") && more >= 2 {
            req.group = args[i + 1].to_vec();
            req.consumer = args[i + 2].to_vec();
            group_given = true;
            i += 3;
        } else if o.eq_ignore_ascii_case(b"NOACK") {
            return Err(error::READGROUP_NOACK.into());
        } else if o.eq_ignore_ascii_case(b"STREAMS") && more > 0 {
            let rest = &args[i + 1..];
            if rest.len() % 2 != 0 {
                return Err(error::READGROUP_UNBALANCED.into());
            }
            let (keys, ids) = rest.split_at(rest.len() / 2);
            if ids.iter().any(|id| *id != b">") {
                return Err(error::READGROUP_ONLY_NEW.into());
            }
            req.keys = keys.iter().map(|k| k.to_vec()).collect();
            break;
        } else {
            return Err(error::SYNTAX.into());
        }
    }
    if req.keys.is_empty() {
        return Err(error::SYNTAX.into());
    }
    if !group_given {
        return Err(error::READGROUP_NO_GROUP.into());
    }
    Ok(req)
}

/// What one stream gave a read: the replies whose entries are forwarded.
struct StreamRead {
    key: Vec<u8>,
    /// The `XCLAIM` of the redeliveries: `[entry, ...]`.
    redelivered: Option<CallResult<'static>>,
    /// The `XREADGROUP` of new entries: nil or `[[key, [entry, ...]]]`.
    new: Option<CallResult<'static>>,
}

impl StreamRead {
    /// The entries to forward, redeliveries first: each `[id, [field, value, ...]]` element, as
    /// a raw call reply (valid while `self` lives).
    fn entries(&self) -> Vec<*mut raw::RedisModuleCallReply> {
        let mut out = Vec::new();
        if let Some(Ok(r)) = &self.redelivered {
            out.extend(raw_elements(r));
        }
        if let Some(Ok(CallReply::Array(streams))) = &self.new {
            for pair in streams.iter() {
                if let Ok(CallReply::Array(pair)) = pair {
                    if let Some(Ok(entries)) = pair.get(1) {
                        out.extend(raw_elements(&entries));
                    }
                }
            }
        }
        out
    }
}

/// The raw replies of the array elements of `r` that are arrays (entries).
fn raw_elements(r: &CallReply) -> Vec<*mut raw::RedisModuleCallReply> {
    let CallReply::Array(a) = r else {
        return Vec::new();
    };
    a.iter()
        .filter_map(|e| match e {
            Ok(CallReply::Array(x)) => Some(x.get_raw()),
            _ => None,
        })
        .collect()
}

/// `WRONGTYPE` when `key` exists and is not a stream.
fn check_type(ctx: &Context, key: &[u8]) -> Result<(), ReclaimError> {
    let name = RedisString::create_from_slice(ctx.ctx, key);
    match ctx.open_key(&name).key_type() {
        KeyType::Stream | KeyType::Empty => Ok(()),
        _ => Err(error::WRONGTYPE_STREAM.into()),
    }
}

/// Checks a key before reading it, as XREADGROUP does: a stream with the group.
fn check_key(ctx: &Context, key: &[u8], group: &[u8]) -> Result<(), ReclaimError> {
    let name = RedisString::create_from_slice(ctx.ctx, key);
    match ctx.open_key(&name).key_type() {
        KeyType::Stream => {}
        KeyType::Empty => return Err(no_group(key, group)),
        _ => return Err(error::WRONGTYPE_STREAM.into()),
    }
    let args: [&[u8]; 6] = [key, group, b"-", b"+", b"1", b"\x00"];
    let r: CallResult = ctx.call_ext("XPENDING", &read_opts(), &args[..]);
    match r {
        Err(e) if e.as_bytes().starts_with(b"NOGROUP") => Err(no_group(key, group)),
        _ => Ok(()),
    }
}

fn no_group(key: &[u8], group: &[u8]) -> ReclaimError {
    ReclaimError::NoGroup(
        crate::model::text::printable(key),
        crate::model::text::printable(group),
    )
}

/// `XPENDING key group - + n [consumer]`, parsed (errors read as nothing).
fn pending(t: &Target, n: i64, consumer: Option<&[u8]>) -> Vec<Pending> {
    pending_range(t, b"-", n, consumer)
}

/// `XPENDING key group start + n`, parsed (errors read as nothing).
fn pending_from(t: &Target, start: &[u8], n: i64) -> Vec<Pending> {
    pending_range(t, start, n, None)
}

fn pending_range(t: &Target, start: &[u8], n: i64, consumer: Option<&[u8]>) -> Vec<Pending> {
    let count = n.to_string();
    let mut args: Vec<&[u8]> = vec![t.stream, t.group, start, b"+", count.as_bytes()];
    if let Some(c) = consumer {
        args.push(c);
    }
    let r: CallResult = t.ctx.call_ext("XPENDING", &read_opts(), &args[..]);
    let Ok(CallReply::Array(a)) = r else {
        return Vec::new();
    };
    a.iter()
        .filter_map(|e| {
            let Ok(CallReply::Array(e)) = e else {
                return None;
            };
            let s = |i: usize| match e.get(i) {
                Some(Ok(CallReply::String(s))) => Some(s.as_bytes().to_vec()),
                _ => None,
            };
            let n = |i: usize| match e.get(i) {
                Some(Ok(CallReply::I64(v))) => Some(v.to_i64()),
                _ => None,
            };
            Some(Pending {
                id: s(0)?,
                consumer: s(1)?,
                idle_ms: n(2)?,
                deliveries: n(3)?,
            })
        })
        .collect()
}

/// Most entries a read looks at among the oldest pending ones to find other consumers' stale
/// entries (bounds the cost of a read without COUNT that finds none).
const STALE_LOOKUP_MAX: i64 = 1000;

/// The entries due for redelivery to a reader of `t`, at most `limit`, oldest first: the
/// CLAIMANT's inbox, then other consumers' stale entries in one page of the PEL (twice as many
/// entries as are still wanted) from the policy's read cursor, looked for only when neither the
/// policy's last pass nor the last round of reads says none can be stale yet.
fn due_entries(t: &Target, id: &PolicyId, limit: i64) -> Vec<Pending> {
    let mut due = pending(t, limit, Some(&t.policy.claimant));
    let wanted = limit - due.len() as i64;
    let now = epoch_ms();
    if wanted <= 0 || now < registry::update(id, |rt| rt.read_horizon()).unwrap_or(0) {
        return due;
    }
    // One page of the PEL after the read cursor, as XAUTOCLAIM's cursor goes.
    let size = wanted.saturating_mul(2).min(STALE_LOOKUP_MAX);
    let start = match registry::update(id, |rt| rt.read_cursor()).flatten() {
        Some(c) => [b"(", c.as_slice()].concat(),
        None => b"-".to_vec(),
    };
    let page = pending_from(t, &start, size);
    let p = t.policy;
    let owners = t.owners_of(&page);
    let others = || page.iter().filter(|e| !planner::in_inbox(e, p));
    let (stale, later): (Vec<&Pending>, Vec<&Pending>) = others()
        .partition(|e| planner::is_stale(e, p) && !planner::held(e, p, owners.quiet(&e.consumer)));
    // The least time one of the others needs: until due, or 0 when held by a live owner.
    let remaining = later
        .iter()
        .map(|e| (p.due_idle(e.deliveries) - e.idle_ms).max(0))
        .min();
    let last = (page.len() as i64 == size)
        .then(|| page.last().map(|e| e.id.clone()))
        .flatten();
    // A round over the whole PEL that found nothing due: none can be before the least time it
    // saw (idle times only grow; a client's XCLAIM IDLE/TIME, which can set an older one, clears
    // this, as it clears the passes' horizon).
    let found = !stale.is_empty();
    registry::update(id, |rt| {
        rt.note_read_page(last, found, remaining, now, p.min_idle_ms)
    });
    due.extend(stale.into_iter().cloned());
    due.sort_by_key(|e| planner::parse_id(&e.id));
    due.dedup_by(|a, b| a.id == b.id);
    due.truncate(limit.max(0) as usize);
    due
}

/// Claims `ids` for `consumer` with a plain `XCLAIM key group consumer 0 id...`: one delivery
/// added, idle reset, the entries returned with their fields; entries gone from the stream are
/// dropped from the PEL and left out. Returns the reply and how many came back.
fn deliver(t: &Target, consumer: &[u8], ids: &[Vec<u8>]) -> (CallResult<'static>, u64) {
    let mut args: Vec<&[u8]> = vec![t.stream, t.group, consumer, b"0"];
    args.extend(ids.iter().map(Vec::as_slice));
    let r: CallResult = t.ctx.call_ext("XCLAIM", &write_opts(), &args[..]);
    let n = match &r {
        Ok(CallReply::Array(a)) => a.len() as u64,
        _ => 0,
    };
    if n > 0 {
        crate::ffi::events::notify(t.ctx, t.stream, crate::ffi::events::DELIVER);
    }
    if (ids.len() as u64) > n && r.is_ok() {
        crate::ffi::events::notify(t.ctx, t.stream, crate::ffi::events::PURGE);
    }
    (r, n)
}

/// Reads one stream for `req`, with `want` entries at most (0: no limit on new ones).
fn read_stream(ctx: &Context, req: &Request, key: &[u8], want: i64) -> StreamRead {
    let mut read = StreamRead {
        key: key.to_vec(),
        redelivered: None,
        new: None,
    };
    let mut got = 0i64;
    if let Some(p) = store::get(ctx, key, &req.group) {
        got = redeliver(ctx, req, key, &p, want, &mut read.redelivered);
    }
    if want == 0 || got < want {
        let rest = if want == 0 { 0 } else { want - got };
        read.new = Some(new_entries(ctx, req, key, rest));
    }
    read
}

/// `XREADGROUP GROUP g consumer [COUNT n] STREAMS key >` (`n` 0: no COUNT), parsed.
fn new_entries(ctx: &Context, req: &Request, key: &[u8], n: i64) -> CallResult<'static> {
    let count = n.to_string();
    let mut args: Vec<&[u8]> = vec![b"GROUP", &req.group, &req.consumer];
    if n > 0 {
        args.extend_from_slice(&[b"COUNT", count.as_bytes()]);
    }
    args.extend_from_slice(&[b"STREAMS", key, b">"]);
    ctx.call_ext("XREADGROUP", &write_opts(), &args[..])
}

/// Step 1 of a read of a stream with policy `p`: hands the due entries to the reader (the reply
/// into `redelivered`), dead-letters those at their limit, and counts. Returns how many were handed over.
fn redeliver(
    ctx: &Context,
    req: &Request,
    key: &[u8],
    p: &Policy,
    want: i64,
    redelivered: &mut Option<CallResult<'static>>,
) -> i64 {
    let id = PolicyId::new(ffi::selected_db(ctx), key, &req.group);
    let seen = if p.liveness_ms > 0 {
        registry::saw(&id, &req.consumer, p.liveness_ms);
        registry::seen(&id)
    } else {
        Vec::new()
    };
    if p.halted(crate::state::config::enabled()).is_some() {
        // Paused or disabled: new entries only.
        return 0;
    }
    let t = Target {
        ctx,
        stream: key,
        group: &req.group,
        policy: p,
        seen: &seen,
        dead_letters: Cell::new(registry::dead_letter_allowance(&id, p)),
    };
    let limit = if want > 0 { want } else { p.count };
    let due = due_entries(&t, &id, limit);
    if due.is_empty() {
        return 0;
    }
    let (dead, give): (Vec<Pending>, Vec<Pending>) = due
        .into_iter()
        .partition(|e| planner::delivery_would_pass_limit(e, p));
    let mut out = Outcome::default();
    if let (false, Some(dlq)) = (dead.is_empty(), &p.dlq) {
        if let Err(s) = t.dead_letter(dlq, &dead, &mut out, crate::engine::sweep::REASON_LIMIT) {
            out.problem = Some(s);
        }
    }
    // With TOMBSTONES, entries deleted from the stream get their tombstones instead of being
    // dropped from the PEL by the hand-over's XCLAIM.
    let give = t.bury_deleted(give, &mut out);
    let mut handed = 0;
    if !give.is_empty() {
        let ids: Vec<Vec<u8>> = give.into_iter().map(|e| e.id).collect();
        let (r, n) = deliver(&t, &req.consumer, &ids);
        out.deleted += ids.len() as u64 - n;
        handed = n;
        *redelivered = Some(r);
    }
    settle::settle(ctx, &id, p, &out, |rt| {
        rt.count_outcome(&out);
        rt.count_redelivered(handed);
    });
    handed as i64
}

/// Whether the reader may write the policies' DLQs it may dead-letter into; the first key whose
/// DLQ it may not write fails the read before anything changes.
fn check_dlq_permissions(ctx: &Context, req: &Request) -> Result<(), ReclaimError> {
    for key in &req.keys {
        if let Some(p) = store::get(ctx, key, &req.group) {
            if let (true, Some(d)) = (p.max_deliveries > 0, &p.dlq) {
                if !ffi::may_write_key(ctx, d) {
                    return Err(error::NOPERM_DLQ.into());
                }
            }
        }
    }
    Ok(())
}

/// A reply of a raw `RM_Call`, never parsed: forwarded as Redis wrote it.
struct RawReply(*mut raw::RedisModuleCallReply);

impl RawReply {
    /// `XREADGROUP GROUP g consumer [COUNT n] STREAMS key >` through `RM_Call` with `!` (its
    /// deliveries propagate) and `E` (errors as replies), in the client's protocol (`3` for a
    /// RESP3 client), so that its reply is exactly what the client expects.
    fn xreadgroup(ctx: &Context, req: &Request, key: &[u8], count: i64) -> RawReply {
        let count_s = count.to_string();
        let mut words: Vec<&[u8]> = vec![b"GROUP", &req.group, &req.consumer];
        if count > 0 {
            words.extend_from_slice(&[b"COUNT", count_s.as_bytes()]);
        }
        words.extend_from_slice(&[b"STREAMS", key, b">"]);
        let args: Vec<RedisString> = words
            .iter()
            .map(|w| RedisString::create_from_slice(ctx.ctx, w))
            .collect();
        let mut argv: Vec<*mut raw::RedisModuleString> = args.iter().map(|a| a.inner).collect();
        let resp3 = ctx.get_flags().contains(ContextFlags::FLAGS_RESP3);
        let fmt = if resp3 { c"!Ev3" } else { c"!Ev" };
        let r = unsafe {
            raw::RedisModule_Call.unwrap()(
                ctx.ctx,
                c"XREADGROUP".as_ptr(),
                fmt.as_ptr(),
                argv.as_mut_ptr(),
                argv.len(),
            )
        };
        RawReply(r)
    }

    /// The reply's RESP bytes.
    fn proto(&self) -> &[u8] {
        if self.0.is_null() {
            return b"";
        }
        let mut len = 0usize;
        let p = unsafe { raw::RedisModule_CallReplyProto.unwrap()(self.0, &mut len) };
        if p.is_null() {
            return b"";
        }
        unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }
    }

    /// Whether the reply is nil (`*-1` in RESP2, `_` in RESP3): nothing was read.
    fn is_nil(&self) -> bool {
        let p = self.proto();
        p.is_empty() || p.starts_with(b"*-1") || p.starts_with(b"_")
    }

    fn forward(&self, ctx: &Context) {
        unsafe {
            raw::RedisModule_ReplyWithCallReply.unwrap()(ctx.ctx, self.0);
        }
    }
}

impl Drop for RawReply {
    fn drop(&mut self) {
        if !self.0.is_null() {
            unsafe { raw::RedisModule_FreeCallReply.unwrap()(self.0) };
        }
    }
}

/// Serves a read of one stream and replies; `false` when there was nothing (no reply sent).
/// When nothing is handed over again (the common case), the new entries' `XREADGROUP` reply is
/// forwarded as Redis wrote it, unparsed, in the client's protocol: the cost of a plain
/// `XREADGROUP` plus one `RM_Call`.
fn serve_one(ctx: &Context, req: &Request, key: &[u8]) -> bool {
    if let Some(p) = store::get(ctx, key, &req.group) {
        let mut redelivered = None;
        if redeliver(ctx, req, key, &p, req.count, &mut redelivered) > 0 {
            let mut read = StreamRead {
                key: key.to_vec(),
                redelivered,
                new: None,
            };
            let got = read.entries().len() as i64;
            if req.count == 0 || got < req.count {
                read.new = Some(new_entries(ctx, req, key, req.count - got));
            }
            let entries = read.entries();
            reply(ctx, &[(read, entries)]);
            return true;
        }
    }
    let r = RawReply::xreadgroup(ctx, req, key, req.count);
    if r.is_nil() {
        return false;
    }
    r.forward(ctx);
    true
}

/// Reads every stream of `req` (COUNT per stream, as XREADGROUP); `None` when none gave anything.
fn serve(
    ctx: &Context,
    req: &Request,
) -> Option<Vec<(StreamRead, Vec<*mut raw::RedisModuleCallReply>)>> {
    let mut out = Vec::new();
    for key in &req.keys {
        let r = read_stream(ctx, req, key, req.count);
        let entries = r.entries();
        if !entries.is_empty() {
            out.push((r, entries));
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Serves `req` and replies; `false` when no stream gave anything (no reply sent).
fn serve_and_reply(ctx: &Context, req: &Request) -> bool {
    if req.keys.len() == 1 {
        return serve_one(ctx, req, &req.keys[0]);
    }
    match serve(ctx, req) {
        Some(read) => {
            reply(ctx, &read);
            true
        }
        None => false,
    }
}

/// Sends what [`serve`] read, in XREADGROUP's shape for the client's protocol.
fn reply(ctx: &Context, read: &[(StreamRead, Vec<*mut raw::RedisModuleCallReply>)]) {
    let resp3 = ctx.get_flags().contains(ContextFlags::FLAGS_RESP3);
    unsafe {
        if resp3 {
            raw::RedisModule_ReplyWithMap.unwrap()(ctx.ctx, read.len() as _);
        } else {
            raw::RedisModule_ReplyWithArray.unwrap()(ctx.ctx, read.len() as _);
        }
        for (r, entries) in read {
            if !resp3 {
                raw::RedisModule_ReplyWithArray.unwrap()(ctx.ctx, 2);
            }
            ffi::reply(ctx, &Reply::Bytes(r.key.clone()));
            raw::RedisModule_ReplyWithArray.unwrap()(ctx.ctx, entries.len() as _);
            for e in entries {
                raw::RedisModule_ReplyWithCallReply.unwrap()(ctx.ctx, *e);
            }
        }
    }
}

fn reply_nil(ctx: &Context) {
    unsafe {
        raw::RedisModule_ReplyWithNullArray.unwrap()(ctx.ctx);
    }
}

/// The command handler.
pub fn readgroup_cmd(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a: Vec<&[u8]> = args.iter().skip(1).map(|s| s.as_slice()).collect();
    let req = parse(&a)?;
    let flags = ctx.get_flags();
    if req.block_ms.is_some() && flags.contains(ContextFlags::LUA) {
        return Err(error::READGROUP_BLOCK_IN_SCRIPT.into());
    }
    if req.keys.len() == 1 {
        // One stream: its own calls meet a missing group first, before any write, and XREADGROUP
        // answers it with its own error.
        check_type(ctx, &req.keys[0])?;
    } else {
        for key in &req.keys {
            check_key(ctx, key, &req.group)?;
        }
    }
    check_dlq_permissions(ctx, &req)?;
    if serve_and_reply(ctx, &req) {
        return Ok(Reply::Done);
    }
    match req.block_ms {
        Some(ms) if !flags.contains(ContextFlags::DENY_BLOCKING) => block(ctx, req, ms),
        _ => reply_nil(ctx),
    }
    Ok(Reply::Done)
}

/// A blocked reader: its request, its database, and its handle (for [`unblock_deleted`]).
struct Blocked {
    req: Request,
    db: i32,
    bc: usize,
}

/// Blocked readers by (db, stream key), as handles.
type Waiting = HashMap<(i32, Vec<u8>), Vec<usize>>;

lazy_static! {
    /// Blocked readers by (db, stream key), as handles: one entry per key of each reader that is
    /// blocked now (removed when its wait ends, whatever ends it).
    static ref WAITING: Mutex<Waiting> = Mutex::new(HashMap::new());
}

fn waiting() -> std::sync::MutexGuard<'static, Waiting> {
    WAITING.lock().unwrap_or_else(|e| e.into_inner())
}

fn block(ctx: &Context, req: Request, ms: i64) {
    let db = ffi::selected_db(ctx);
    let keys: Vec<RedisString> = req
        .keys
        .iter()
        .map(|k| RedisString::create_from_slice(ctx.ctx, k))
        .collect();
    let mut key_ptrs: Vec<*mut raw::RedisModuleString> = keys.iter().map(|k| k.inner).collect();
    let stream_keys = req.keys.clone();
    let data = Box::into_raw(Box::new(Blocked { req, db, bc: 0 }));
    let bc = unsafe {
        raw::RedisModule_BlockClientOnKeys.unwrap()(
            ctx.ctx,
            Some(on_ready),
            Some(on_timeout),
            Some(free_blocked),
            ms,
            key_ptrs.as_mut_ptr(),
            key_ptrs.len() as c_int,
            data.cast::<c_void>(),
        )
    };
    unsafe { (*data).bc = bc as usize };
    let mut w = waiting();
    for k in stream_keys {
        w.entry((db, k)).or_default().push(bc as usize);
    }
}

/// The wait of a blocked reader cannot go on: a stream is gone (or not a stream), or a group.
fn gone(ctx: &Context, b: &Blocked) -> Option<&'static str> {
    for key in &b.req.keys {
        let name = RedisString::create_from_slice(ctx.ctx, key);
        if ctx.open_key(&name).key_type() != KeyType::Stream {
            return Some(error::UNBLOCKED_NO_STREAM);
        }
        if let Err(ReclaimError::NoGroup(..)) = check_key(ctx, key, &b.req.group) {
            return Some(error::UNBLOCKED_NO_GROUP);
        }
    }
    None
}

unsafe fn blocked_data<'a>(ctx: *mut raw::RedisModuleCtx) -> Option<&'a Blocked> {
    let p = unsafe { raw::RedisModule_GetBlockedClientPrivateData.unwrap()(ctx) };
    unsafe { p.cast::<Blocked>().as_ref() }
}

/// A key of a blocked reader was signalled ready (XADD, XGROUP DESTROY, a move to the inbox):
/// reads again; keeps waiting (`REDISMODULE_ERR`) when there is still nothing.
unsafe extern "C" fn on_ready(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let context = Context::new(ctx);
    let served = ffi::guard("RECLAIM.READGROUP wake-up", || {
        let Some(b) = (unsafe { blocked_data(ctx) }) else {
            return false;
        };
        if let Some(e) = gone(&context, b) {
            context.reply_error_string(e);
            return true;
        }
        serve_and_reply(&context, &b.req)
    });
    match served {
        Some(true) => raw::REDISMODULE_OK as c_int,
        Some(false) => raw::REDISMODULE_ERR as c_int,
        None => {
            context.reply_error_string(error::INTERNAL);
            raw::REDISMODULE_OK as c_int
        }
    }
}

/// The wait ended without entries: the timeout, or [`unblock_deleted`] (a stream was deleted).
unsafe extern "C" fn on_timeout(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let context = Context::new(ctx);
    let done = ffi::guard("RECLAIM.READGROUP timeout", || {
        match unsafe { blocked_data(ctx) }.and_then(|b| gone(&context, b)) {
            Some(e) => {
                context.reply_error_string(e);
            }
            None => reply_nil(&context),
        }
    });
    if done.is_none() {
        context.reply_error_string(error::INTERNAL);
    }
    raw::REDISMODULE_OK as c_int
}

/// The wait is over (served, timed out, unblocked, or the client went away): forgets the reader.
unsafe extern "C" fn free_blocked(_ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    ffi::guard("RECLAIM.READGROUP free", || {
        if data.is_null() {
            return;
        }
        let b = unsafe { Box::from_raw(data.cast::<Blocked>()) };
        let mut w = waiting();
        for k in &b.req.keys {
            let slot = (b.db, k.clone());
            if let Some(v) = w.get_mut(&slot) {
                v.retain(|x| *x != b.bc);
                if v.is_empty() {
                    w.remove(&slot);
                }
            }
        }
        if w.is_empty() {
            w.shrink_to_fit();
        }
    });
}

/// Wakes the readers blocked on (db, `stream`) (`RM_SignalKeyAsReady`): the sweep moved entries
/// into the inbox. `ctx` has database `db` selected. Nothing when no reader waits.
pub fn signal_if_waiting(ctx: &Context, db: i32, stream: &[u8]) {
    if !waiting().contains_key(&(db, stream.to_vec())) {
        return;
    }
    let k = RedisString::create_from_slice(ctx.ctx, stream);
    unsafe {
        raw::RedisModule_SignalKeyAsReady.unwrap()(ctx.ctx, k.inner);
    }
}

/// The stream (db, `stream`) was deleted (or renamed away, expired, evicted): its blocked readers
/// end their wait with XREADGROUP's error (`RM_UnblockClient` runs their timeout callback). Redis
/// 7.0 does not wake module readers of a deleted key by itself.
pub fn unblock_deleted(db: i32, stream: &[u8]) {
    let bcs = waiting()
        .get(&(db, stream.to_vec()))
        .cloned()
        .unwrap_or_default();
    for bc in bcs {
        unsafe {
            raw::RedisModule_UnblockClient.unwrap()(
                bc as *mut raw::RedisModuleBlockedClient,
                std::ptr::null_mut(),
            );
        }
    }
}

/// Readers blocked now (for `INFO reclaim`).
pub fn blocked_readers() -> usize {
    let w = waiting();
    let mut all: Vec<usize> = w.values().flatten().copied().collect();
    all.sort_unstable();
    all.dedup();
    all.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Request, String> {
        let a: Vec<&[u8]> = s.split(' ').map(str::as_bytes).collect();
        parse(&a).map_err(|e| e.to_string())
    }

    #[test]
    fn parses_like_xreadgroup() {
        let r = p("GROUP g c COUNT 10 BLOCK 0 STREAMS a b > >").unwrap();
        assert_eq!(r.group, b"g");
        assert_eq!(r.consumer, b"c");
        assert_eq!((r.count, r.block_ms), (10, Some(0)));
        assert_eq!(r.keys, vec![b"a".to_vec(), b"b".to_vec()]);
        // Options in any order, COUNT below 0 is no limit, names that read like options.
        let r = p("count -5 group STREAMS COUNT streams s >").unwrap();
        assert_eq!(
            (r.count, r.group.as_slice(), r.consumer.as_slice()),
            (0, &b"STREAMS"[..], &b"COUNT"[..])
        );
        assert_eq!(r.block_ms, None);
    }

    #[test]
    fn errors_as_xreadgroup_gives_them() {
        let cases = [
            ("GROUP g c STREAMS a b >", error::READGROUP_UNBALANCED),
            ("GROUP g c STREAMS a 0", error::READGROUP_ONLY_NEW),
            ("GROUP g c STREAMS a $", error::READGROUP_ONLY_NEW),
            ("GROUP g c NOACK STREAMS a >", error::READGROUP_NOACK),
            ("GROUP g c BOGUS STREAMS a >", error::SYNTAX),
            ("GROUP g c COUNT", error::SYNTAX),
            ("GROUP g c", error::SYNTAX),
            ("STREAMS a >", error::READGROUP_NO_GROUP),
            ("GROUP g c COUNT x STREAMS a >", error::NOT_AN_INTEGER),
            ("GROUP g c BLOCK x STREAMS a >", error::TIMEOUT_NOT_INTEGER),
            ("GROUP g c BLOCK -1 STREAMS a >", error::TIMEOUT_NEGATIVE),
        ];
        for (args, want) in cases {
            assert_eq!(p(args).unwrap_err(), want, "{args}");
        }
    }

    proptest::proptest! {
        #[test]
        fn parser_never_panics(args in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..8), 0..10)) {
            let a: Vec<&[u8]> = args.iter().map(|x| x.as_slice()).collect();
            let _ = parse(&a);
        }
    }
}
