//! Keyspace events the module fires on a stream's key when it acts on the stream's PEL, and when
//! a policy's state changes (Redis `RM_NotifyKeyspaceEvent`).
//!
//! All are of the stream class (`REDISMODULE_NOTIFY_STREAM`, the `t` of `notify-keyspace-events`),
//! like the `xadd`, `xclaim` and `xgroup-*` events Redis fires on the same key: `notify-keyspace-events
//! Kt` (or `Et`, or any setting with `A`, which includes `t`) turns them on; with the setting empty
//! (the default) they cost a function call each. One event per call that did something (a batch of
//! entries), not one per entry: an event names the key only.
//!
//! | event | when |
//! |---|---|
//! | `reclaim-claim` | stale entries were moved to the CLAIMANT (its inbox) |
//! | `reclaim-deliver` | `RECLAIM.READGROUP` handed entries from the PEL to a reader (redeliveries, not new entries) |
//! | `reclaim-deadletter` | entries were moved to the DLQ (the DLQ's own key gets Redis's `xadd`) |
//! | `reclaim-purge` | pending entries whose stream entry was gone were removed from the PEL |
//! | `reclaim-<state>` | the sweep's state changed: `reclaim-active`, `reclaim-waiting`, `reclaim-oom`, `reclaim-error` ([`notify_state`]) |
//! | `reclaim-paused` | `RECLAIM.POLICY PAUSE` paused the policy ([`notify_policy_state`]) |
//! | `reclaim-storm` | the `STORM` breaker opened (or `RECLAIM.POLICY PAUSE ... STORM`) |
//! | `reclaim-resumed` | `RECLAIM.POLICY RESUME` made a paused or storm policy active again |
//! | `reclaim-evicted` | the server evicted one of the module's keys (`maxmemory-policy`): a policy key, a stream with policies, a DLQ, a redrive key; fired on that key |
//!
//! Everything here is a leaf: it calls no other module of the crate.

use std::ffi::CStr;
use std::os::raw::c_int;

use redis_module::{raw, Context, RedisString};

/// Stale entries were moved to the CLAIMANT.
pub const CLAIM: &CStr = c"reclaim-claim";
/// `RECLAIM.READGROUP` handed pending entries to a reader.
pub const DELIVER: &CStr = c"reclaim-deliver";
/// Entries were moved to the DLQ.
pub const DEADLETTER: &CStr = c"reclaim-deadletter";
/// Entries gone from the stream were removed from the PEL.
pub const PURGE: &CStr = c"reclaim-purge";

/// The server evicted one of the module's keys (fired on that key).
pub const EVICTED: &CStr = c"reclaim-evicted";

/// A paused or storm policy was made active again (`RECLAIM.POLICY RESUME`).
pub const RESUMED: &CStr = c"reclaim-resumed";

/// Every policy state, and the event that announces it (`reclaim-<state>`). The sweep announces
/// `active`, `waiting`, `oom`, `error` and `invalid` itself (see `Runtime::state`); `paused`
/// and `storm` are announced where the stored state changes ([`notify_policy_state`]).
pub const STATES: [(&str, &CStr); 7] = [
    ("active", c"reclaim-active"),
    ("waiting", c"reclaim-waiting"),
    ("oom", c"reclaim-oom"),
    ("error", c"reclaim-error"),
    ("paused", c"reclaim-paused"),
    ("storm", c"reclaim-storm"),
    ("invalid", c"reclaim-invalid"),
];

/// Fires `event` (class stream) on `key` in the database selected in `ctx`.
pub fn notify(ctx: &Context, key: &[u8], event: &CStr) {
    let k = RedisString::create_from_slice(ctx.ctx, key);
    unsafe {
        if let Some(f) = raw::RedisModule_NotifyKeyspaceEvent {
            f(
                ctx.ctx,
                raw::REDISMODULE_NOTIFY_STREAM as c_int,
                event.as_ptr(),
                k.inner,
            );
        }
    }
}

/// Announces that the policy of `stream_key` (in the database selected in `ctx`) is now in
/// `state`, one of [`STATES`], with the event `reclaim-<state>`. Call it on a change only. An
/// unknown state fires nothing.
pub fn notify_state(ctx: &Context, stream_key: &[u8], state: &str) {
    if let Some((_, ev)) = STATES.iter().find(|(s, _)| *s == state) {
        notify(ctx, stream_key, ev);
    }
}

/// Announces that the stored state of the policy of `stream_key` changed to `state` (its name,
/// `crate::model::policy::State::name`): `reclaim-paused`, `reclaim-storm`, or `reclaim-resumed` for
/// `active` (a paused or storm policy runs again).
pub fn notify_policy_state(ctx: &Context, stream_key: &[u8], state: &str) {
    if state == "active" {
        notify(ctx, stream_key, RESUMED);
    } else {
        notify_state(ctx, stream_key, state);
    }
}
