//! Why stream work must not run now, checked before it runs: on this server (a replica, loading,
//! writes paused, its Redis Cluster down, out of memory: [`blocked`]), and on a policy's keys (no
//! stream, another type: [`check_stream`], [`is_non_stream`]).

use redis_module::{raw, Context, ContextFlags, KeyType, RedisString};

use crate::ffi::cluster;
use crate::model::metrics;
use crate::model::outcome::Stop;

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
    pub fn skip_counter(self) -> &'static metrics::Counter {
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
