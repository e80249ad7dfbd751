//! What this node knows of its Redis Cluster, asked through `RM_Call`: where a migrating slot
//! goes ([`migrating_to`]), and whether the server runs a blocked reader's command again through
//! the slot check ([`reprocesses_blocked`]). Only meaningful in cluster mode.

use redis_module::{raw, CallReply, CallResult, Context};

use crate::ffi::read_opts;
use crate::model::keys;

/// First server version (`0x00MMmmpp`) that runs a blocked XREADGROUP again through the slot
/// check when its key is deleted (Redis 7.2, redis#11012; Valkey).
const REPROCESSES_BLOCKED: i32 = 0x0007_0200;

/// Whether a blocked XREADGROUP whose stream was deleted goes through the cluster's slot check
/// again on this server (Redis 7.2+, Valkey: it then gets `ASK` during a migration), rather than
/// `UNBLOCKED` (7.0).
pub fn reprocesses_blocked() -> bool {
    let version = unsafe { raw::RedisModule_GetServerVersion.map_or(0, |f| f()) };
    version >= REPROCESSES_BLOCKED
}

/// Where this node is migrating `slot` to (`ip:port`, as an `ASK` names it), from its `CLUSTER
/// NODES`; `None` when the slot is not migrating or the text cannot be read.
pub fn migrating_to(ctx: &Context, slot: u16) -> Option<Vec<u8>> {
    let r: CallResult = ctx.call_ext("CLUSTER", &read_opts(), &[&b"NODES"[..]][..]);
    let Ok(CallReply::String(text)) = r else {
        return None;
    };
    keys::migrating_target(text.as_bytes(), slot)
}
