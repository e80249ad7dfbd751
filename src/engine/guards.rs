//! Why stream work must not run now, checked before it runs: on this server (a replica, loading,
//! writes paused, its Redis Cluster down, out of memory: [`blocked`]), and on a policy's keys (no
//! stream, another type: [`check_stream`], [`is_non_stream`]; no stream or group: [`missing`]);
//! and so a policy's status checked live ([`status`]), and the server log told once when a policy
//! waits ([`notice_waiting`]).

use redis_module::{raw, Context, ContextFlags, KeyType, RedisString};

use crate::engine::pending::{self, Failed, Query};
use crate::ffi::cluster;
use crate::model::metrics::Counter;
use crate::model::outcome::Stop;
use crate::model::policy::{Policy, State};
use crate::model::text::printable;
use crate::state::config;
use crate::state::metrics;
use crate::state::registry::{self, PolicyId};
use crate::state::runtime::Runtime;

/// Why sweeping is off on this server right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocked {
    /// The server is a replica.
    Replica,
    /// An RDB, AOF or full sync is loading.
    Loading,
    /// Writes are paused (CLIENT PAUSE WRITE, FAILOVER).
    Paused,
    /// The server is over `maxmemory`.
    Oom,
    /// The server is a node of a Redis Cluster that is down (`cluster_state:fail`).
    ClusterDown,
}

impl Blocked {
    /// The `status` text of `RECLAIM.STATS`.
    pub fn status(self) -> &'static str {
        match self {
            Blocked::Replica => "replica",
            Blocked::Loading => "loading",
            Blocked::Paused => "client-paused",
            Blocked::Oom => "oom",
            Blocked::ClusterDown => "cluster-down",
        }
    }

    /// The `INFO reclaim` counter of the ticks skipped for this reason.
    pub fn skip_counter(self) -> &'static Counter {
        match self {
            Blocked::Replica => &metrics::SKIPPED_REPLICA,
            Blocked::Loading => &metrics::SKIPPED_LOADING,
            Blocked::Paused => &metrics::SKIPPED_PAUSED,
            Blocked::Oom => &metrics::SKIPPED_OOM,
            Blocked::ClusterDown => &metrics::SKIPPED_CLUSTER_DOWN,
        }
    }
}

/// Why sweeping is off on this server right now, if it is: only a primary sweeps
/// (`REDISMODULE_CTX_FLAGS_MASTER`); never while loading (RDB, AOF, full sync); never while
/// writes are paused (`RM_AvoidReplicaTraffic`: CLIENT PAUSE WRITE, FAILOVER; on Redis 7.0 a
/// timer write during a pause with AOF or replicas crashes the server); in Redis Cluster, never
/// while the cluster is down (every keyed call would be refused: an expected state, not an
/// error; [`cluster::down`]); never when out of memory (the live `REDISMODULE_CTX_FLAGS_OOM`,
/// not the stale state RM_Call's `M` flag reads in a timer).
pub fn blocked(ctx: &Context) -> Option<Blocked> {
    let flags = ctx.get_flags();
    if !flags.contains(ContextFlags::MASTER) {
        return Some(Blocked::Replica);
    }
    if flags.intersects(ContextFlags::LOADING | ContextFlags::ASYNC_LOADING) {
        return Some(Blocked::Loading);
    }
    let paused = unsafe {
        raw::RedisModule_AvoidReplicaTraffic
            .map(|f| f() != 0)
            .unwrap_or(false)
    };
    if paused {
        return Some(Blocked::Paused);
    }
    if flags.contains(ContextFlags::CLUSTER) && cluster::down(ctx) {
        return Some(Blocked::ClusterDown);
    }
    if flags.contains(ContextFlags::OOM) {
        return Some(Blocked::Oom);
    }
    None
}

/// Checks the stream key: `None` when it is a stream, the stop reason otherwise.
pub fn check_stream(ctx: &Context, stream: &[u8]) -> Option<Stop> {
    let name = RedisString::create_from_slice(ctx.ctx, stream);
    match ctx.open_key(&name).key_type() {
        KeyType::Stream => None,
        KeyType::Empty => Some(Stop::NoStream),
        _ => Some(Stop::WrongTypeStream),
    }
}

/// Whether `key` exists and holds something other than a stream.
pub fn is_non_stream(ctx: &Context, key: &[u8]) -> bool {
    let name = RedisString::create_from_slice(ctx.ctx, key);
    !matches!(
        ctx.open_key(&name).key_type(),
        KeyType::Stream | KeyType::Empty
    )
}

/// What the policy of (`stream`, `group`) waits for now: [`Stop::NoStream`] or
/// [`Stop::NoGroup`]; `None` when both exist, or when the key holds another type
/// ([`check_stream`] says so). One key lookup, and one `XPENDING` of a consumer that cannot exist
/// (O(1)).
pub fn missing(ctx: &Context, stream: &[u8], group: &[u8]) -> Option<Stop> {
    match check_stream(ctx, stream) {
        Some(Stop::NoStream) => Some(Stop::NoStream),
        Some(_) => None,
        None => no_group(ctx, stream, group).then_some(Stop::NoGroup),
    }
}

/// Whether the stream `stream` (which exists) has no consumer group `group`.
pub fn no_group(ctx: &Context, stream: &[u8], group: &[u8]) -> bool {
    let q = Query::range(b"-", b"+", 1).of(Some(b"\x00"));
    matches!(
        pending::read(ctx, stream, group, &q),
        Err(Failed::Reply(e)) if e.starts_with(b"NOGROUP")
    )
}

/// The `status` of the policy `p` of (`stream`, `group`), checked live (`RECLAIM.STATS`,
/// `RECLAIM.POLICY GET` and `LIST`): `invalid: <reason>` when the stored policy cannot run where
/// it is ([`crate::state::store::fault`]), what stops every policy of this server ([`blocked`],
/// `reclaim.enabled`), its own state (`paused`, `storm`), its keys now (`waiting: no stream
/// <stream>`, `waiting: no group <group>`, the wrong type of key; `waiting: stream evicted...`
/// when `evicted`: the server evicted the stream), then its last step's trouble
/// (`problem`: `oom: ...`, `error: ...`); otherwise `active`. Binary-safe.
pub fn status(
    ctx: &Context,
    stream: &[u8],
    group: &[u8],
    p: &Policy,
    (problem, evicted): (Option<Stop>, bool),
) -> Vec<u8> {
    if let Some(why) = crate::state::store::fault(stream, p) {
        let reason = crate::model::error::reason(&why);
        return [b"invalid: ".as_slice(), reason.as_bytes()].concat();
    }
    if let Some(b) = blocked(ctx) {
        return b.status().into();
    }
    if !config::enabled() {
        return b"disabled".to_vec();
    }
    if p.state != State::Active {
        return p.state.name().into();
    }
    let missing =
        check_stream(ctx, stream).or_else(|| no_group(ctx, stream, group).then_some(Stop::NoGroup));
    if let Some(s) = missing {
        let mut out = Vec::new();
        if evicted && s.is_missing() {
            s.write_evicted_status(&mut out, group, |o, n| o.extend_from_slice(n));
            return out;
        }
        return s.status_of(stream, group);
    }
    if let Some(d) = &p.dlq {
        if is_non_stream(ctx, d) {
            return Stop::WrongTypeDlq.status().into_bytes();
        }
    }
    // Problems about the keys were checked live above; what is left is the last step's own trouble.
    match problem {
        Some(s @ (Stop::Oom | Stop::Error(_))) => s.status().into_bytes(),
        _ => b"active".to_vec(),
    }
}

/// The policy `id` was just set (`RECLAIM.POLICY SET`, `IMPORT`): on a primary that is not
/// loading, what it waits for now, noted in its run-time state (so `INFO` and `RECLAIM.HEALTH`
/// say so before its first step) and told to the log ([`notice_waiting`]). Returns it.
pub fn check_new_policy(ctx: &Context, id: &PolicyId) -> Option<Stop> {
    let flags = ctx.get_flags();
    if !flags.contains(ContextFlags::MASTER)
        || flags.intersects(ContextFlags::LOADING | ContextFlags::ASYNC_LOADING)
    {
        return None;
    }
    let m = missing(ctx, &id.stream, &id.group)?;
    let noted = m.clone();
    registry::update(id, |rt| rt.wait_for(noted));
    notice_waiting(ctx, id);
    Some(m)
}

/// Tells the server log, at notice level, what the policy `id` waits for, once per wait
/// ([`Runtime::waiting_notice`]): a group or stream name with a typo would otherwise wait in
/// silence.
pub fn notice_waiting(ctx: &Context, id: &PolicyId) {
    if let Some(Some(stop)) = registry::update(id, Runtime::waiting_notice) {
        crate::ffi::notice(ctx, &waiting_notice(id, &stop));
    }
}

/// The log line of [`notice_waiting`]. For a policy whose stream the server evicted
/// ([`Runtime::evicted`]) it says that, not "a typo?": a stream made again by `XADD` has no group.
pub fn waiting_notice(id: &PolicyId, stop: &Stop) -> String {
    if registry::read(id, Runtime::evicted) == Some(true) {
        return format!(
            "reclaim: the policy of stream '{}' group '{}' (db {}) is waiting: the server evicted \
             the stream (maxmemory-policy), and it is back without group '{}' (its pending \
             entries are lost). It starts when the group exists (XGROUP CREATE creates it); set \
             maxmemory-policy noeviction to keep this from happening again",
            printable(&id.stream),
            printable(&id.group),
            id.db,
            printable(&id.group)
        );
    }
    let (what, name, create) = match stop {
        Stop::NoStream => (
            "stream",
            &id.stream,
            "XGROUP CREATE ... MKSTREAM creates both",
        ),
        _ => ("group", &id.group, "XGROUP CREATE creates it"),
    };
    format!(
        "reclaim: the policy of stream '{}' group '{}' (db {}) is waiting: no {what} '{}'. It \
         starts when it exists ({create}); a typo? RECLAIM.POLICY DEL it and set the right name",
        printable(&id.stream),
        printable(&id.group),
        id.db,
        printable(name)
    )
}
