//! Consumer clean-up under a policy's `FORGET-IDLE`: at the end of a pass, the consumers of the
//! group idle at least that long with nothing pending are deleted (`XGROUP DELCONSUMER`, through
//! `RM_Call` with `!`, so replicas and the AOF delete them too), at most [`FORGET_MAX`] per pass;
//! never one with pending entries, never the module's own (the claimant, `<claimant>:delayed`).

use redis_module::{CallReply, CallResult, Context};

use crate::engine::pending;
use crate::ffi::write_opts;
use crate::model::policy::Policy;
use crate::state::config;
use crate::state::registry::{self, PolicyId};

/// Most consumers one pass deletes (the next pass goes on): bounds the step's time.
pub const FORGET_MAX: usize = 100;

/// Deletes the consumers of policy `id` (value `p`) that `FORGET-IDLE` forgets: one `XINFO
/// CONSUMERS`, a consumer's idle time the least of its `idle` and the time since it last talked
/// to the module (the sightings kept for `LIVENESS`), then one `XGROUP DELCONSUMER` each, at most
/// [`FORGET_MAX`]. Nothing while `FORGET-IDLE` is 0 or the policy is halted. Returns how many
/// were deleted. Call it with no lock held (the deletion fires `xgroup-delconsumer`).
pub fn forget_idle(ctx: &Context, id: &PolicyId, p: &Policy) -> u64 {
    if p.forget_idle_ms <= 0 || p.halted(config::enabled()).is_some() {
        return 0;
    }
    let (stream, group) = (id.stream.as_slice(), id.group.as_slice());
    let seen = if p.liveness_ms > 0 {
        registry::seen(id)
    } else {
        Vec::new()
    };
    let idle = |name: &[u8], idle_ms: i64| {
        seen.iter()
            .filter(|(c, _)| c.as_slice() == name)
            .fold(idle_ms, |m, (_, age)| {
                m.min(i64::try_from(*age).unwrap_or(i64::MAX))
            })
    };
    let mut forgotten = 0;
    for c in pending::consumers(ctx, stream, group)
        .into_iter()
        .filter(|c| p.forgets(&c.name, c.pending, idle(&c.name, c.idle_ms)))
        .take(FORGET_MAX)
    {
        let args: [&[u8]; 4] = [b"DELCONSUMER", stream, group, &c.name];
        let r: CallResult = ctx.call_ext("XGROUP", &write_opts(), &args[..]);
        // Its reply: the pending entries it had, none (nothing ran in between).
        if let Ok(CallReply::I64(_)) = r {
            forgotten += 1;
        }
    }
    forgotten
}
