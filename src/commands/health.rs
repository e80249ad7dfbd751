//! `RECLAIM.HEALTH key group`: the signals to watch on a consumer group (its PEL's size and
//! trend, who holds what, delivery counts, the inbox, the DLQ), each with the time it was taken.
//!
//! Read-only, and on replicas too. What it reads now costs O(consumers), never O(PEL): the
//! summary form `XPENDING key group` and `XLEN dlq`. Everything else is what the passes and
//! commands already learnt ([`crate::state::runtime::Health`], the counters): on a replica, which runs
//! no pass, those figures are absent (taken-at 0, nil).

use redis_module::{CallReply, CallResult, Context, RedisString};

use crate::commands::common::{ACCESS, KEY_GROUP, KEY_RO};
use crate::engine::pending;
use crate::ffi;
use crate::ffi::acl::Caller;
use crate::ffi::command::{CmdResult, CommandSpec, Reply, Spec};
use crate::model::access;
use crate::model::args::V020;
use crate::model::clock::epoch_ms;
use crate::model::error::{self, ReclaimError};
use crate::model::metrics::Stat;
use crate::model::planner::{PassKind, Tally, MAX_BUCKETS};
use crate::model::policy::Policy;
use crate::state::registry::{self, PolicyId};
use crate::state::runtime::Runtime;
use crate::state::store;

/// The command's table entry (commands/mod.rs registers it).
pub const COMMANDS: &[CommandSpec] = &[CommandSpec {
    parent: None,
    name: "reclaim.health",
    func: entry!("RECLAIM.HEALTH", health_cmd),
    flags: "readonly",
    acl: "read slow",
    first_key: 1,
    arity: 3,
    summary:
        "Health signals of a consumer group under a reclaim policy, each with the time it was taken",
    complexity: "O(C) with C consumers of the group",
    since: V020,
    args: KEY_GROUP,
    keys: &[Spec::Index(1, KEY_RO | ACCESS)],
}];

/// Most consumers `RECLAIM.HEALTH` lists by name (those holding the most entries); the others
/// are counted.
pub const MAX_LISTED: usize = 64;

/// The names of the histogram's buckets: `1` to [`MAX_BUCKETS`], then `above`.
const BUCKETS: [&str; MAX_BUCKETS] = [
    "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15", "16", "17",
    "18", "19", "20", "21", "22", "23", "24", "25", "26", "27", "28", "29", "30", "31", "32",
];

fn opt_int(v: Option<i64>) -> Reply {
    v.map_or(Reply::Null, Reply::Int)
}

/// What `XPENDING key group` says now: `pending`, `inbox`, `consumers` and
/// `max-consumer-pending` (the CLAIMANT left out, as in `last-pass` and `INFO reclaim`),
/// `oldest-pending-age-ms`, the consumers holding the most entries (the CLAIMANT included:
/// its count is the inbox), `delayed` (given back with `RECLAIM.NACK ... DELAY`: held by
/// `<claimant>:delayed` or parked) and `next-due-ms` (the earliest due time of a parked entry, from
/// the first records of the delay key); nil when it cannot be read (no stream or group).
fn live(ctx: &Context, stream: &[u8], group: &[u8], p: &Policy, now: i64) -> Reply {
    let mut holders: Vec<(Vec<u8>, u64)> = Vec::new();
    let each = |c: &[u8], n| holders.push((c.to_vec(), n));
    let Some(s) = pending::summary(ctx, stream, group, &p.claimant, each) else {
        return Reply::Null;
    };
    let delayed: u64 = holders
        .iter()
        .filter(|(c, _)| p.is_delayed(c) || p.is_parked(c))
        .map(|(_, n)| n)
        .sum();
    let next_due = crate::engine::parked::next_due(ctx, stream, group);
    holders.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    holders.truncate(MAX_LISTED);
    Reply::Map(vec![
        ("pending", Reply::Int(s.pending as i64)),
        ("inbox", Reply::Int(s.inbox as i64)),
        ("consumers", Reply::Int(s.consumers as i64)),
        (
            "max-consumer-pending",
            Reply::Int(s.max_consumer_pending as i64),
        ),
        (
            "oldest-pending-age-ms",
            opt_int(
                s.oldest_id_ms
                    .map(|ms| now.saturating_sub(ms as i64).max(0)),
            ),
        ),
        (
            "by-consumer",
            Reply::Array(
                holders
                    .into_iter()
                    .map(|(c, n)| Reply::Array(vec![Reply::Bytes(c), Reply::Int(n as i64)]))
                    .collect(),
            ),
        ),
        ("delayed", Reply::Int(delayed as i64)),
        ("next-due-ms", opt_int(next_due)),
    ])
}

/// `XLEN dlq`, nil without a DLQ, when it is not a stream, or when the caller may not read its
/// length ([`access::dlq_length`]).
fn dlq_length(ctx: &Context, caller: &Caller, dlq: Option<&[u8]>) -> Reply {
    let Some(d) = dlq else {
        return Reply::Null;
    };
    if !caller.may(ctx, &access::dlq_length(d)) {
        return Reply::Null;
    }
    let r: CallResult = ctx.call_ext("XLEN", &ffi::read_opts(), &[d][..]);
    match r {
        Ok(CallReply::I64(n)) => Reply::Int(n.to_i64()),
        _ => Reply::Null,
    }
}

/// The PEL sizes at the end of the last passes, and the change from the first to the last.
fn sizes(rt: &Runtime) -> (Reply, Reply) {
    let Some(h) = rt.health() else {
        return (Reply::Array(Vec::new()), Reply::Null);
    };
    let list = h
        .sizes
        .iter()
        .map(|(at, n)| Reply::Array(vec![Reply::Int(*at), Reply::Int(*n as i64)]))
        .collect();
    let change = match (h.sizes.front(), h.sizes.back()) {
        (Some(a), Some(b)) => Reply::Int(b.1 as i64 - a.1 as i64),
        _ => Reply::Null,
    };
    (Reply::Array(list), change)
}

/// The histogram of delivery counts the last full pass or scan read.
fn deliveries(rt: &Runtime) -> Reply {
    let empty = Tally::default();
    let (t, at, kind) = match rt.health() {
        Some(h) => (&h.tally, h.tally_ms, h.tally_kind),
        None => (&empty, 0, None),
    };
    let n = t.buckets.len().saturating_sub(1);
    let mut buckets: Vec<(&'static str, Reply)> = BUCKETS[..n.min(MAX_BUCKETS)]
        .iter()
        .zip(&t.buckets)
        .map(|(name, c)| (*name, Reply::Int(*c as i64)))
        .collect();
    if let Some(above) = t.buckets.last() {
        buckets.push(("above", Reply::Int(*above as i64)));
    }
    let pass = match kind {
        Some(PassKind::Full) => Reply::Bytes(b"full".to_vec()),
        Some(PassKind::Scan) => Reply::Bytes(b"scan".to_vec()),
        _ => Reply::Null,
    };
    Reply::Map(vec![
        ("taken-at-ms", Reply::Int(at)),
        ("pass", pass),
        ("entries", Reply::Int(t.entries as i64)),
        ("buckets", Reply::Map(buckets)),
        ("most-idle-ms", opt_int(t.most_idle.map(|m| m.0))),
        ("most-idle-seen-at-ms", opt_int(t.most_idle.map(|m| m.1))),
    ])
}

/// `RECLAIM.HEALTH key group` -> map `now-ms`, `live` (read now), `last-pass` (the PEL at the
/// end of the last complete pass), `pel-sizes` and `pel-change` (the last passes), `deliveries`
/// (the histogram of the last full pass or scan), `dead-letters` (counted as they happen).
/// docs/commands.md has every field. Errors: NOPERM when the caller may not read the group's PEL
/// ([`access::read_pel`]); no policy (as `RECLAIM.STATS`); WRONGTYPE when the key holds
/// something other than a stream (as `RECLAIM.SIMULATE` and `RECLAIM.SWEEP`: `live` cannot be
/// read).
pub fn health_cmd(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let (stream, group) = (args[1].as_slice(), args[2].as_slice());
    let caller = Caller::of(ctx);
    caller.check(ctx, &[access::read_pel(stream, group)])?;
    let p = store::get(ctx, stream, group).ok_or(ReclaimError::Static(error::NO_POLICY))?;
    if crate::engine::guards::is_non_stream(ctx, stream) {
        return Err(error::WRONGTYPE_STREAM.into());
    }
    let id = PolicyId::new(ffi::selected_db(ctx), stream, group);
    registry::register(id.db, stream, group);
    let rt = registry::get(&id).unwrap_or_default();
    let now = epoch_ms();
    let last = rt.summary().clone();
    let (sizes, change) = sizes(&rt);
    let recent = &rt.counters().recent_dead;
    let mut status = Vec::new();
    // Checked live: `invalid` from the stored policy now, else what the passes learnt.
    if let Some(why) = store::fault(stream, &p) {
        status.extend_from_slice(b"invalid: ");
        status.extend_from_slice(error::reason(&why).as_bytes());
    } else {
        rt.write_status(
            &mut status,
            (
                crate::state::config::enabled(),
                crate::ffi::cluster::is_down(),
            ),
            stream,
            group,
            |o, n| o.extend_from_slice(n),
        );
    }
    Ok(Reply::Map(vec![
        ("now-ms", Reply::Int(now)),
        ("live", live(ctx, stream, group, &p, now)),
        (
            "last-pass",
            Reply::Map(vec![
                ("taken-at-ms", Reply::Int(last.at_ms)),
                ("pending", Reply::Int(last.pending as i64)),
                ("inbox", Reply::Int(last.inbox as i64)),
                ("consumers", Reply::Int(last.consumers as i64)),
                (
                    "max-consumer-pending",
                    Reply::Int(last.max_consumer_pending as i64),
                ),
                (
                    "oldest-pending-age-ms",
                    Reply::Int(last.oldest_pending_ms() as i64),
                ),
            ]),
        ),
        ("pel-sizes", sizes),
        ("pel-change", change),
        ("deliveries", deliveries(&rt)),
        (
            "dead-letters",
            Reply::Map(vec![
                ("dlq-length", dlq_length(ctx, &caller, p.dlq.as_deref())),
                ("last-minute", Reply::Int(recent.last_minute(now) as i64)),
                ("last-hour", Reply::Int(recent.last_hour(now) as i64)),
                (
                    "total",
                    Reply::Int(rt.counters().get(Stat::DeadLettered) as i64),
                ),
            ]),
        ),
        ("status", Reply::Bytes(status)),
        (
            "eviction-risk",
            Reply::Bytes(crate::state::eviction::now().1.into_bytes()),
        ),
    ]))
}
