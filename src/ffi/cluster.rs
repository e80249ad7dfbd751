//! What this node knows of its Redis Cluster, asked through `RM_Call`: whether the cluster is
//! down ([`down`], [`is_down`]: sweeps wait), why the server refused one of the module's calls
//! ([`refusal`]), whether it serves a key's slot ([`key_served`]), where a migrating slot goes
//! ([`migrating_to`]), and whether the server runs a blocked reader's command again through the
//! slot check ([`reprocesses_blocked`]). Only meaningful in cluster mode.
//!
//! While the cluster is down (`cluster_state:fail`) the server refuses every keyed command, the
//! module's own `RM_Call`s too: sweeps wait, and a policy's status is `cluster-down`, not an
//! error.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use redis_module::{raw, CallReply, CallResult, Context};

use crate::ffi::read_opts;
use crate::model::clock::now_ms;
use crate::model::keys;

/// Whether the cluster was down at the last look (see [`down`]).
static DOWN: AtomicBool = AtomicBool::new(false);
/// Monotonic ms of the last look at the cluster's state (0: never, or due at once).
static LOOKED_MS: AtomicU64 = AtomicU64::new(0);
/// How often (ms) the cluster's state is looked at again: `CLUSTER INFO` walks the 16384 slots.
pub const LOOK_EVERY_MS: u64 = 100;

/// How `RM_Call` words its refusal of a keyed command while the cluster is down (`ENETDOWN`;
/// Redis 7.0 to 8.x and Valkey: `Can not execute a command '...' while the cluster is down`,
/// `... while the cluster is down and readonly`).
const DOWN_TEXT: &[u8] = b"while the cluster is down";
/// How `RM_Call` words its refusal of a key of a slot this node does not serve now (`EPERM`: the
/// slot is served elsewhere, is importing, or a multi-key call meets a migration).
const NOT_LOCAL_TEXT: &[u8] = b"non local key";

/// Why the server refused a call of the module for its cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The cluster is down.
    Down,
    /// This node does not serve the key's slot now.
    NotServed,
}

/// Whether (and why) the error reply `e` of an `RM_Call` is the server's cluster refusal.
pub fn refusal(e: &[u8]) -> Option<Refusal> {
    let has = |needle: &[u8]| e.windows(needle.len()).any(|w| w == needle);
    if has(DOWN_TEXT) {
        Some(Refusal::Down)
    } else if has(NOT_LOCAL_TEXT) {
        Some(Refusal::NotServed)
    } else {
        None
    }
}

/// Whether this Redis Cluster node serves `key`'s slot now, as `RM_Call` routes a client's
/// command (`EXISTS key`): `Some(true)`, `Some(false)` (another node serves it, or it is
/// migrating and the key is not here), `None` while the cluster is down.
pub fn key_served(ctx: &Context, key: &[u8]) -> Option<bool> {
    let r: CallResult = ctx.call_ext("EXISTS", &read_opts(), &[key][..]);
    match r {
        Ok(_) => Some(true),
        Err(e) if refusal(e.as_bytes()) == Some(Refusal::Down) => None,
        Err(_) => Some(false),
    }
}

/// Whether this Redis Cluster node sees its cluster down (`CLUSTER INFO`'s `cluster_state` is not
/// `ok`). Looked at once per [`LOOK_EVERY_MS`] at most, and at once after a call met the refusal
/// ([`note_down`]); in between, the last look's answer. Only meaningful in cluster mode.
pub fn down(ctx: &Context) -> bool {
    let now = now_ms();
    if now.saturating_sub(LOOKED_MS.load(Ordering::Relaxed)) < LOOK_EVERY_MS {
        return DOWN.load(Ordering::Relaxed);
    }
    LOOKED_MS.store(now.max(1), Ordering::Relaxed);
    let r: CallResult = ctx.call_ext("CLUSTER", &read_opts(), &[&b"INFO"[..]][..]);
    let down = match r {
        Ok(CallReply::String(s)) => !s
            .as_bytes()
            .split(|&b| b == b'\n')
            .any(|l| l.trim_ascii() == b"cluster_state:ok"),
        // Unreadable: do not stop the sweeps on a guess.
        _ => false,
    };
    DOWN.store(down, Ordering::Relaxed);
    down
}

/// A call was refused because the cluster is down: sweeps stop until a look at the cluster's
/// state finds it `ok` again (the next look is due at once).
pub fn note_down() {
    DOWN.store(true, Ordering::Relaxed);
    LOOKED_MS.store(0, Ordering::Relaxed);
}

/// Whether sweeps are stopped because the cluster is down (as last seen; no call into Redis).
pub fn is_down() -> bool {
    DOWN.load(Ordering::Relaxed)
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_as_the_servers_word_them() {
        // Redis 7.0.15 and 8.2 `RM_Call` texts (module.c).
        let down = b"ERR Can not execute a command 'xpending' while the cluster is down";
        assert_eq!(refusal(down), Some(Refusal::Down));
        let ro =
            b"ERR Can not execute a write command 'xclaim' while the cluster is down and readonly";
        assert_eq!(refusal(ro), Some(Refusal::Down));
        let moved = b"ERR Attempted to access a non local key in a cluster node";
        assert_eq!(refusal(moved), Some(Refusal::NotServed));
        assert_eq!(
            refusal(b"NOGROUP No such key 's' or consumer group 'g'"),
            None
        );
        assert_eq!(refusal(b""), None);
    }
}
