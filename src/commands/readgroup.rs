//! `RECLAIM.READGROUP GROUP group consumer [COUNT count] [BLOCK ms] [DELIVERY-METADATA] STREAMS key
//! [key ...] > [> ...]`:
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
//! nothing. With `DELIVERY-METADATA` each entry is `[id, fields, idle-ms, delivery-count]`, as
//! Redis 8.4's `XREADGROUP ... CLAIM` replies: a redelivered entry's idle time and count as the
//! PEL had them just before this delivery, `0 0` for a new entry (known without a call).
//!
//! `BLOCK` blocks on the streams' keys ([`crate::ffi::blocked`]): an `XADD`, a move to the inbox
//! by the sweep or a destroyed group wakes the reader; a deleted stream ends the wait with
//! XREADGROUP's error.

use smallvec::SmallVec;

use redis_module::{raw, CallReply, CallResult, Context, ContextFlags, RedisString};

use crate::commands::common::READGROUP_KEY;
use crate::engine::guards;
use crate::engine::readgroup::{
    note_reader, nothing_due, read_as_asked, read_new, read_new_raw, redeliver, Handed, Redelivery,
};
use crate::ffi::acl::{seeds, Caller, Seeds};
use crate::ffi::blocked::{self, Waiter};
use crate::ffi::command::{CmdResult, CommandSpec, Reply, Spec};
use crate::ffi::{self, cluster};
use crate::model::access::{self, ReadWrites};
use crate::model::args::V020;
use crate::model::error::{self, ReclaimError};
use crate::model::keys;
use crate::model::outcome::Stop;
use crate::model::policy::Policy;
use crate::model::readgroup::{self, key_positions, parse_args, Request};
use crate::model::text::printable;
use crate::state::metrics;
use crate::state::store;

/// The command's table entry; its arguments are read from its grammar table
/// ([`readgroup::OPTIONS`]), its keys found as XREADGROUP's (`STREAMS`, then half the rest).
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        parent: None,
        name: "reclaim.readgroup",
        func: entry!("RECLAIM.READGROUP", readgroup_cmd),
        flags: "write blocking getkeys-api",
        acl: "write stream slow blocking",
        first_key: 0,
        arity: -7,
        summary: "Read new and due entries from streams of a consumer group, with redelivery under the policies (a drop-in for XREADGROUP ... >)",
        complexity: "As XREADGROUP, plus O(log N + M) per stream with a policy for the M entries handed over again",
        since: V020,
        args: readgroup::ARGS,
        keys: &[Spec::HalfAfterKeyword(readgroup::STREAMS, 4, READGROUP_KEY)],
    },
];

/// The bytes of a command's arguments, on the stack while they are few.
type Bytes<'a> = SmallVec<[&'a [u8]; 12]>;

/// One stream of a read, with its group's policy (read once per serve) and what a read under it
/// may write.
struct Stream<'a> {
    key: &'a [u8],
    policy: Option<Policy>,
    writes: Option<ReadWrites>,
}

/// The streams of `req` with their group's policies: one policy read per key. A policy that is
/// invalid where it is ([`store::fault`]) counts as none: the stream is read as XREADGROUP reads
/// it (new entries only, no redelivery, no dead-letter) until a `SET` replaces it.
fn streams<'a>(ctx: &Context, req: &'a Request) -> Vec<Stream<'a>> {
    req.keys
        .iter()
        .map(|key| {
            let policy =
                store::get(ctx, key, &req.group).filter(|p| store::fault(key, p).is_none());
            Stream {
                key,
                writes: policy.as_ref().map(ReadWrites::of),
                policy,
            }
        })
        .collect()
}

/// What one stream gave a read: the redeliveries (with their fields), then the reply of the new
/// entries' `XREADGROUP`, whose entries are forwarded as Redis wrote them.
struct StreamRead {
    key: Vec<u8>,
    /// The entries handed over again, oldest first.
    redelivered: Vec<Handed>,
    /// The `XREADGROUP` of new entries: nil or `[[key, [entry, ...]]]`.
    new: Option<CallResult<'static>>,
}

impl StreamRead {
    /// The new entries to forward: each `[id, [field, value, ...]]` element, as a raw call reply
    /// (valid while `self` lives).
    fn new_entries(&self) -> Vec<*mut raw::RedisModuleCallReply> {
        let mut out = Vec::new();
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
    if guards::is_non_stream(ctx, key) {
        return Err(error::WRONGTYPE_STREAM.into());
    }
    Ok(())
}

/// Checks a key before reading it, as XREADGROUP does: a stream with the group.
fn check_key(ctx: &Context, key: &[u8], group: &[u8]) -> Result<(), ReclaimError> {
    match guards::check_stream(ctx, key) {
        Some(Stop::WrongTypeStream) => Err(error::WRONGTYPE_STREAM.into()),
        Some(_) => Err(no_group(key, group)),
        None if guards::no_group(ctx, key, group) => Err(no_group(key, group)),
        None => Ok(()),
    }
}

fn no_group(key: &[u8], group: &[u8]) -> ReclaimError {
    ReclaimError::NoGroup(printable(key), printable(group))
}

/// Whether the reader may do what the read does to each stream now, each checked as the Redis
/// command that would do the same ([`access::read_group`]: `XREADGROUP`, and under a policy its
/// `XCLAIM`, and the `XACK` and DLQ writes of its dead-letters and tombstones). The first
/// refused fails the read before anything changes; checked again when a blocked read wakes.
/// `seeds`: the command's arguments, whose strings the checks use for the names they hold
/// ([`ffi::acl::seeds`]); `flags`: `ctx`'s.
fn check_access<'a>(
    ctx: &'a Context,
    seeds: Seeds<'a>,
    (group, consumer): (&'a [u8], &'a [u8]),
    streams: &'a [Stream<'_>],
    flags: &ContextFlags,
) -> Result<(), ReclaimError> {
    let mut what = access::AsList::new();
    for s in streams {
        access::read_group(s.key, group, consumer, s.writes.as_ref(), &mut what);
    }
    Caller::of_flags(ctx, flags).check_with(ctx, seeds, &what)
}

/// What [`serve`] did.
enum Served {
    /// It replied.
    Replied,
    /// Nothing for the reader (no reply sent); `more`: a search for due entries stopped at its
    /// bound, so entries further in the PEL may be due.
    Nothing { more: bool },
}

/// The new entries of a one-stream read that hands nothing over: XREADGROUP's reply forwarded
/// as Redis wrote it (the client's own arguments, `argv`, passed on when given); nothing replied
/// on nil (`more` as [`serve`] found it).
fn forward_new(
    ctx: &Context,
    req: &Request,
    key: &[u8],
    argv: Option<&[RedisString]>,
    more: bool,
) -> Served {
    let r = match argv {
        Some(a) => {
            let bytes: Bytes = a.iter().skip(1).map(|s| s.as_slice()).collect();
            read_as_asked(ctx, a, &bytes)
        }
        None => read_new_raw(ctx, (&req.group, &req.consumer), req.count, key),
    };
    if r.is_nil() {
        return Served::Nothing { more };
    }
    // An error goes out as every error of the module does (`reply_error`): XREADGROUP writes
    // the key and group names into its `NOGROUP` as they are.
    match r.error_text() {
        Some(e) => ffi::command::reply_error(ctx, &e),
        None => r.forward(ctx),
    }
    Served::Replied
}

/// Serves `req` on `streams` (COUNT per stream, as XREADGROUP) and replies, unless no stream gave
/// anything. A read of one stream that hands nothing over again (the common case) forwards the
/// new entries' `XREADGROUP` reply as Redis wrote it, unparsed, in the client's protocol: the
/// cost of a plain `XREADGROUP` plus one `RM_Call`, with the client's own arguments (`argv`,
/// when called from the command) passed on as they are. With `DELIVERY-METADATA` the reply is
/// always written entry by entry, each with its metadata.
fn serve(ctx: &Context, req: &Request, streams: &[Stream], argv: Option<&[RedisString]>) -> Served {
    let single = streams.len() == 1;
    let mut more = false;
    let mut reads = Vec::with_capacity(streams.len());
    for s in streams {
        let red = match &s.policy {
            Some(p) => redeliver(ctx, s.key, &req.group, &req.consumer, p, req.count),
            None => Redelivery::default(),
        };
        more |= red.more;
        let handed = red.entries.len() as i64;
        if single && handed == 0 && !req.delivery_metadata {
            return forward_new(ctx, req, s.key, argv, more);
        }
        let mut read = StreamRead {
            key: s.key.to_vec(),
            redelivered: red.entries,
            new: None,
        };
        if req.count == 0 || handed < req.count {
            let rest = if req.count == 0 {
                0
            } else {
                req.count - handed
            };
            read.new = Some(read_new(ctx, (&req.group, &req.consumer), rest, s.key));
        }
        if let Some(Err(e)) = &read.new {
            // One stream read with its metadata, which met XREADGROUP's own error (a missing
            // group) before any write: the error, as the unparsed path replies it.
            ffi::command::reply_error(ctx, &String::from_utf8_lossy(e.as_bytes()));
            return Served::Replied;
        }
        let new = read.new_entries();
        if !read.redelivered.is_empty() || !new.is_empty() {
            reads.push((read, new));
        }
    }
    if reads.is_empty() {
        return Served::Nothing { more };
    }
    let keyed: Vec<(&[u8], usize)> = reads
        .iter()
        .map(|(r, new)| (r.key.as_slice(), r.redelivered.len() + new.len()))
        .collect();
    let meta = req.delivery_metadata;
    ffi::command::reply_keyed(ctx, &keyed, |i| {
        let (r, new) = &reads[i];
        for h in &r.redelivered {
            let m = meta.then_some((h.idle_ms, h.deliveries));
            ffi::streams::reply_entry(ctx, h.id, &h.fields, m);
        }
        for e in new {
            // SAFETY: the elements of `r.new`, which lives until the reply is written.
            unsafe {
                if meta {
                    // A new entry: never delivered before, as Redis 8.4 says of it.
                    ffi::command::reply_call_entry_with(ctx, *e, (0, 0));
                } else {
                    ffi::command::reply_call_reply(ctx, *e);
                }
            }
        }
    });
    Served::Replied
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
    let a: Bytes = args.iter().skip(1).map(|s| s.as_slice()).collect();
    let r = parse_args(&a)?;
    let flags = ctx.get_flags();
    if r.block_ms.is_some() && flags.contains(ContextFlags::LUA) {
        return Err(error::READGROUP_BLOCK_IN_SCRIPT.into());
    }
    if let [key] = r.keys[..] {
        // Nothing can be due (what earlier reads learnt): XREADGROUP's own reply, passed on,
        // once the caller may do every command a read under the policy may do (what an earlier
        // read kept of it: the policy is not read).
        if let Some(facts) = nothing_due(ctx, key, r.group) {
            let stream = Stream {
                key,
                policy: None,
                writes: Some(facts.writes),
            };
            let who = (r.group, r.consumer);
            check_access(
                ctx,
                seeds(args, &a),
                who,
                std::slice::from_ref(&stream),
                &flags,
            )?;
            note_reader(ctx, key, r.group, r.consumer, facts.liveness_ms);
            if r.delivery_metadata {
                // New entries only, written with their metadata (`0 0`: no call to learn it).
                let req = r.to_request();
                if let Served::Nothing { more } =
                    serve(ctx, &req, std::slice::from_ref(&stream), None)
                {
                    wait_or_nil(ctx, req, flags, more);
                }
                return Ok(Reply::Done);
            }
            let reply = read_as_asked(ctx, args, &a);
            if reply.is_nil() {
                wait_or_nil(ctx, r.to_request(), flags, false);
            } else {
                reply.forward(ctx);
            }
            return Ok(Reply::Done);
        }
    }
    let req = r.to_request();
    let streams = streams(ctx, &req);
    let who = (req.group.as_slice(), req.consumer.as_slice());
    check_access(ctx, seeds(args, &a), who, &streams, &flags)?;
    if req.keys.len() == 1 {
        // One stream: its own calls meet a missing group first, before any write, and XREADGROUP
        // answers it with its own error.
        check_type(ctx, &req.keys[0])?;
    } else {
        for key in &req.keys {
            check_key(ctx, key, &req.group)?;
        }
    }
    let Served::Nothing { more } = serve(ctx, &req, &streams, Some(args)) else {
        return Ok(Reply::Done);
    };
    drop(streams);
    wait_or_nil(ctx, req, flags, more);
    Ok(Reply::Done)
}

/// Nothing for the reader: with `BLOCK` (where blocking is allowed) it waits on its streams,
/// otherwise the reply is nil. `more`: a search for due entries stopped at its bound; it goes
/// on once the event loop has turned (the timer wakes readers of streams where entries may be
/// due), which is not counted as a wait.
fn wait_or_nil(ctx: &Context, req: Request, flags: ContextFlags, more: bool) {
    match req.block_ms {
        Some(ms) if !flags.contains(ContextFlags::DENY_BLOCKING) => {
            if !more {
                metrics::READS_BLOCKED.add(1);
            }
            blocked::block(ctx, BlockedRead(req), ms)
        }
        _ => ffi::command::reply_null_array(ctx),
    }
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
            match guards::check_stream(ctx, key) {
                None => {}
                Some(Stop::NoStream) => {
                    let ask = migrated_away(ctx, key);
                    return Some(ask.unwrap_or_else(|| error::UNBLOCKED_NO_STREAM.to_string()));
                }
                Some(_) => return Some(error::UNBLOCKED_NO_STREAM.to_string()),
            }
            if guards::no_group(ctx, key, &self.0.group) {
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
            ffi::command::reply_error(ctx, &e);
            return true;
        }
        let streams = streams(ctx, &self.0);
        let who = (self.0.group.as_slice(), self.0.consumer.as_slice());
        if let Err(e) = check_access(ctx, Seeds::new(), who, &streams, &ctx.get_flags()) {
            ctx.reply_error_string(&e.to_string());
            return true;
        }
        matches!(serve(ctx, &self.0, &streams, None), Served::Replied)
    }

    /// The timeout, or a stream was deleted: XREADGROUP's error, or nil.
    fn timeout(&self, ctx: &Context) {
        match self.gone(ctx) {
            Some(e) => ffi::command::reply_error(ctx, &e),
            None => ffi::command::reply_null_array(ctx),
        }
    }
}
