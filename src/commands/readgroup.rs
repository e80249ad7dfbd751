//! `RECLAIM.READGROUP GROUP group consumer [COUNT count] [BLOCK ms] STREAMS key [key ...] > [> ...]`:
//! claim-on-read for every worker of a pool, the drop-in for `XREADGROUP ... >` that also hands
//! out redeliveries under the stream's policy.
//!
//! For each stream, in order, up to COUNT entries: first, when its group has a policy, the
//! entries due for redelivery ([`crate::engine::readgroup`]: the inbox and other consumers' stale
//! entries, dead-letters at the limit); then new entries, `XREADGROUP GROUP g consumer COUNT rest
//! STREAMS key >`. A stream without a policy for the group is read exactly as `XREADGROUP ... >`.
//! Every write goes through `RM_Call` with `!`, so what the caller got is the same on the
//! primary, in the AOF and on replicas (`XCLAIM` and `XREADGROUP` propagate each delivery with
//! its count). Replies are forwarded from those calls (`RM_ReplyWithCallReply`), in
//! XREADGROUP's shape: an array of `[key, entries]` in RESP2, a map in RESP3, nil when there is
//! nothing.
//!
//! `BLOCK` blocks on the streams' keys ([`crate::ffi::blocked`]): an `XADD`, a move to the inbox
//! by the sweep or a destroyed group wakes the reader; a deleted stream ends the wait with
//! XREADGROUP's error.

use redis_module::{raw, CallReply, CallResult, Context, ContextFlags, KeyType, RedisString};

use crate::commands::common::READGROUP_KEY;
use crate::engine::pending::{self, Failed, Query};
use crate::engine::readgroup::redeliver;
use crate::ffi::blocked::{self, Waiter};
use crate::ffi::command::{CmdResult, Reply};
use crate::ffi::{self, cluster, write_opts, RawReply};
use crate::model::access;
use crate::model::error::{self, ReclaimError};
use crate::model::keys;
use crate::model::policy::Policy;
use crate::model::readgroup::{key_positions, parse, Request};
use crate::model::text::printable;
use crate::state::store;

/// One stream of a read, with its group's policy (read once per serve).
struct Stream<'a> {
    key: &'a [u8],
    policy: Option<Policy>,
}

/// The streams of `req` with their group's policies: one policy read per key.
fn streams<'a>(ctx: &Context, req: &'a Request) -> Vec<Stream<'a>> {
    req.keys
        .iter()
        .map(|key| Stream {
            key,
            policy: store::get(ctx, key, &req.group),
        })
        .collect()
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
    let q = Query::range(b"-", b"+", 1).of(Some(b"\x00"));
    match pending::read(ctx, key, group, &q) {
        Err(Failed::Reply(e)) if e.starts_with(b"NOGROUP") => Err(no_group(key, group)),
        _ => Ok(()),
    }
}

fn no_group(key: &[u8], group: &[u8]) -> ReclaimError {
    ReclaimError::NoGroup(printable(key), printable(group))
}

/// Whether the reader may do what the read does to each stream now, each checked as the Redis
/// command that would do the same ([`access::read_group`]: `XREADGROUP`, and under a policy its
/// `XCLAIM`, and the `XACK` and DLQ writes of its dead-letters and tombstones). The first
/// refused fails the read before anything changes; checked again when a blocked read wakes.
/// `args`: the command's arguments, whose strings the checks use for the names they hold.
fn check_access(
    ctx: &Context,
    args: &[RedisString],
    req: &Request,
    streams: &[Stream],
) -> Result<(), ReclaimError> {
    let mut what = Vec::with_capacity(streams.len() * 5);
    for s in streams {
        access::read_group(
            s.key,
            &req.group,
            &req.consumer,
            s.policy.as_ref(),
            &mut what,
        );
    }
    ffi::acl::Caller::of(ctx).check_with(ctx, args, &what)
}

/// XREADGROUP's arguments for the new entries of `key`: `GROUP g consumer [COUNT n] STREAMS key
/// >`, `count` holding `n`'s digits (`"0"`: no COUNT).
fn xreadgroup_args<'a>(req: &'a Request, key: &'a [u8], count: &'a str) -> Vec<&'a [u8]> {
    let mut args: Vec<&[u8]> = vec![b"GROUP", &req.group, &req.consumer];
    if count != "0" {
        args.extend_from_slice(&[b"COUNT", count.as_bytes()]);
    }
    args.extend_from_slice(&[b"STREAMS", key, b">"]);
    args
}

/// Serves `req` on `streams` (COUNT per stream, as XREADGROUP) and replies; `false` when no
/// stream gave anything (no reply sent). A read of one stream that hands nothing over again (the
/// common case) forwards the new entries' `XREADGROUP` reply as Redis wrote it, unparsed, in the
/// client's protocol: the cost of a plain `XREADGROUP` plus one `RM_Call`.
fn serve(ctx: &Context, req: &Request, streams: &[Stream]) -> bool {
    let single = streams.len() == 1;
    let mut reads = Vec::with_capacity(streams.len());
    for s in streams {
        let (redelivered, handed) = match &s.policy {
            Some(p) => {
                let r = redeliver(ctx, s.key, &req.group, &req.consumer, p, req.count);
                (r.reply, r.handed as i64)
            }
            None => (None, 0),
        };
        if single && handed == 0 {
            let count = req.count.to_string();
            let r = RawReply::call(ctx, c"XREADGROUP", &xreadgroup_args(req, s.key, &count));
            if r.is_nil() {
                return false;
            }
            r.forward(ctx);
            return true;
        }
        let mut read = StreamRead {
            key: s.key.to_vec(),
            redelivered,
            new: None,
        };
        if req.count == 0 || handed < req.count {
            let rest = if req.count == 0 {
                0
            } else {
                req.count - handed
            };
            let count = rest.to_string();
            let args = xreadgroup_args(req, s.key, &count);
            read.new = Some(ctx.call_ext("XREADGROUP", &write_opts(), &args[..]));
        }
        let entries = read.entries();
        if single || !entries.is_empty() {
            reads.push((read, entries));
        }
    }
    if reads.is_empty() {
        return false;
    }
    let keyed: Vec<(&[u8], &[*mut raw::RedisModuleCallReply])> = reads
        .iter()
        .map(|(r, entries)| (r.key.as_slice(), entries.as_slice()))
        .collect();
    ffi::command::reply_keyed_entries(ctx, &keyed);
    true
}

/// The command handler.
pub fn readgroup_cmd(ctx: &Context, args: &[RedisString]) -> CmdResult {
    if ffi::command::is_keys_request(ctx) {
        // The server's own slot check (MOVED, ASK, TRYAGAIN, CROSSSLOT, CLUSTERDOWN) sees the
        // keys of a module command only through this callback or first/last/step.
        let argv: Vec<&[u8]> = args.iter().map(|s| s.as_slice()).collect();
        for pos in key_positions(&argv) {
            ffi::command::key_at(ctx, pos, READGROUP_KEY);
        }
        return Ok(Reply::Done);
    }
    let a: Vec<&[u8]> = args.iter().skip(1).map(|s| s.as_slice()).collect();
    let req = parse(&a)?;
    let flags = ctx.get_flags();
    if req.block_ms.is_some() && flags.contains(ContextFlags::LUA) {
        return Err(error::READGROUP_BLOCK_IN_SCRIPT.into());
    }
    let streams = streams(ctx, &req);
    check_access(ctx, args, &req, &streams)?;
    if req.keys.len() == 1 {
        // One stream: its own calls meet a missing group first, before any write, and XREADGROUP
        // answers it with its own error.
        check_type(ctx, &req.keys[0])?;
    } else {
        for key in &req.keys {
            check_key(ctx, key, &req.group)?;
        }
    }
    if serve(ctx, &req, &streams) {
        return Ok(Reply::Done);
    }
    drop(streams);
    match req.block_ms {
        Some(ms) if !flags.contains(ContextFlags::DENY_BLOCKING) => {
            blocked::block(ctx, BlockedRead(req), ms)
        }
        _ => ffi::command::reply_null_array(ctx),
    }
    Ok(Reply::Done)
}

/// A reader blocked on its streams' keys.
struct BlockedRead(Request);

impl BlockedRead {
    /// The wait cannot go on: a stream is gone (or not a stream), or a group. The error is the
    /// one a blocked XREADGROUP gets: a stream that `MIGRATE` moved away while its slot is
    /// migrating gets `ASK` on Redis 7.2+ (which runs the blocked XREADGROUP again through the
    /// cluster's slot check), `UNBLOCKED` on 7.0.
    fn gone(&self, ctx: &Context) -> Option<String> {
        for key in &self.0.keys {
            let name = RedisString::create_from_slice(ctx.ctx, key);
            match ctx.open_key(&name).key_type() {
                KeyType::Stream => {}
                KeyType::Empty => {
                    let ask = migrated_away(ctx, key);
                    return Some(ask.unwrap_or_else(|| error::UNBLOCKED_NO_STREAM.to_string()));
                }
                _ => return Some(error::UNBLOCKED_NO_STREAM.to_string()),
            }
            if let Err(ReclaimError::NoGroup(..)) = check_key(ctx, key, &self.0.group) {
                return Some(error::UNBLOCKED_NO_GROUP.to_string());
            }
        }
        None
    }
}

/// `ASK <slot> <ip:port>` when `key` (which no longer exists here) is in a slot this Redis Cluster
/// node is migrating, on a server where a blocked XREADGROUP gets that (7.2+); `None` otherwise.
fn migrated_away(ctx: &Context, key: &[u8]) -> Option<String> {
    if !ctx.get_flags().contains(ContextFlags::CLUSTER) || !cluster::reprocesses_blocked() {
        return None;
    }
    let slot = keys::key_slot(key);
    let to = cluster::migrating_to(ctx, slot)?;
    Some(error::ask(slot, &to))
}

impl Waiter for BlockedRead {
    const NAME: &'static str = "RECLAIM.READGROUP";

    fn keys(&self) -> &[Vec<u8>] {
        &self.0.keys
    }

    /// A key was signalled (XADD, XGROUP DESTROY, a move to the inbox): reads again, checked as
    /// at the call (the policies and the user's ACL may have changed while it waited).
    fn ready(&self, ctx: &Context) -> bool {
        if let Some(e) = self.gone(ctx) {
            ctx.reply_error_string(&e);
            return true;
        }
        let streams = streams(ctx, &self.0);
        if let Err(e) = check_access(ctx, &[], &self.0, &streams) {
            ctx.reply_error_string(&e.to_string());
            return true;
        }
        serve(ctx, &self.0, &streams)
    }

    /// The timeout, or a stream was deleted: XREADGROUP's error, or nil.
    fn timeout(&self, ctx: &Context) {
        match self.gone(ctx) {
            Some(e) => {
                ctx.reply_error_string(&e);
            }
            None => ffi::command::reply_null_array(ctx),
        }
    }
}
