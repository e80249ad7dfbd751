//! The touches the command filter saw, confirmed before they count. The filter
//! (`server::filter`) runs before the server checks a command: a command refused by
//! authentication, ACL, arity or memory, or queued in a `MULTI` that is discarded, passes it too.
//! So the filter only notes what a command would touch ([`crate::state::registry::touch`]), and
//! the touch changes a policy's state (its next pass checks that consumer first; with `IDLE` or
//! `TIME` it forgets when entries can turn stale) only once the consumer it names was seen by the
//! server at or after the command: `XCLAIM`, `XAUTOCLAIM` and `XREADGROUP` stamp the consumer when
//! they run, a refused command does not.

use redis_module::Context;

use crate::engine::pending;
use crate::ffi;
use crate::state::registry::{self, PolicyId};

/// Confirms the touches of policy `id` (database selected in `ctx`) that wait: one
/// `XINFO CONSUMERS` (O(consumers)) when some do, nothing otherwise. Called before the state they
/// change is used or shown: each visit of the timer, `RECLAIM.READGROUP`'s redeliveries,
/// `RECLAIM.STATS`.
pub fn confirm(ctx: &Context, id: &PolicyId) {
    if !registry::wants_confirmation(id) {
        return;
    }
    let idle = pending::consumers_idle(ctx, &id.stream, &id.group);
    // Read after the call: no earlier than the time XINFO measured `idle` from, so a consumer is
    // never taken as seen earlier than it was.
    let now = ffi::clock_ms();
    let seen = idle
        .into_iter()
        .map(|(c, ms)| (c, now.saturating_sub(ms.max(0) as u64)))
        .collect();
    registry::confirm(id, &seen);
}
