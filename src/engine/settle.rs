//! Settling stream work that may have dead-lettered (the sweep's steps, `RECLAIM.SWEEP`,
//! `RECLAIM.READGROUP`, `RECLAIM.TERM`): what it did is counted in the policy's run-time state,
//! its dead-letters in the `STORM` window, and when the work stopped at the breaker the breaker
//! opens. One step, run once the work is done.
//!
//! The counting runs under the registry's lock and calls nothing of Redis; the lock is released
//! before the breaker opens, which writes the policy key, fires `reclaim-storm` and replicates
//! `RECLAIM.POLICY PAUSE key group STORM`: no lock is held while the module writes keys,
//! replicates or fires events (a keyspace-event handler that takes the lock cannot deadlock).

use redis_module::Context;

use crate::engine::{consumers, pending};
use crate::model::clock::now_ms;
use crate::model::outcome::{Outcome, Stop};
use crate::model::policy::{Policy, State};
use crate::state::registry::{self, PolicyId};
use crate::state::runtime::Runtime;
use crate::state::store;

/// Settles work on policy `id` (whose value is `p`) that reported `out`: `account` counts it in
/// the policy's run-time state (under the registry's lock: it must call nothing of Redis), its
/// dead-letters go into the `STORM` window; then, with the lock released, the breaker opens when
/// the work stopped at it ([`must_open`], [`open_breaker`]). Nothing for a policy the registry
/// does not know.
pub fn settle<R>(
    ctx: &Context,
    id: &PolicyId,
    p: &Policy,
    out: &Outcome,
    account: impl FnOnce(&mut Runtime) -> R,
) -> Option<R> {
    let now = now_ms();
    let known = registry::update(id, |rt| {
        if out.claimed > 0 {
            // Moved into the inbox: the next read looks there.
            rt.inbox_filled();
        }
        let r = account(rt);
        rt.note_dead_letters(p.storm, now, out.dead_lettered);
        r
    });
    if known.is_some() && must_open(p, out) && open_breaker(ctx, &id.stream, &id.group) {
        registry::update(id, Runtime::storm_opened);
    }
    known
}

/// The bookkeeping after every step of a pass (the timer's, [`crate::server::scheduler`], and
/// `RECLAIM.SWEEP`'s): `fold` counts the step in the policy's run-time state (under the lock), its
/// dead-letters are settled ([`settle`]), a step that ended the pass deletes the consumers
/// `FORGET-IDLE` forgets ([`consumers::forget_idle`], counted) and notes the PEL's summary
/// for `RECLAIM.HEALTH` and `INFO reclaim`: the one the step read, in the same spell under the
/// lock, else read now (`XPENDING key group`, with no lock held). Returns `fold`'s result
/// (`None`: the policy is not known).
pub fn after_step<R>(
    ctx: &Context,
    id: &PolicyId,
    p: &Policy,
    out: &Outcome,
    fold: impl FnOnce(&mut Runtime) -> R,
) -> Option<R> {
    let kept = out.summary.clone().filter(|_| out.pass_done);
    // A pass ended: the consumers `FORGET-IDLE` forgets go (no lock held).
    let forgotten = if out.pass_done {
        consumers::forget_idle(ctx, id, p)
    } else {
        0
    };
    let r = settle(ctx, id, p, out, |rt| {
        let r = fold(rt);
        rt.count_forgotten(forgotten);
        if let Some(s) = kept {
            rt.note_summary(s);
        }
        r
    });
    if out.pass_done && out.summary.is_none() {
        if let Some(s) = pending::summary(ctx, &id.stream, &id.group, &p.claimant, |_, _| {}) {
            registry::update(id, |rt| rt.note_summary(s));
        }
    }
    r
}

/// Whether work that reported `out` under policy `p` opens the `STORM` breaker: it stopped at the
/// breaker ([`Stop::Storm`]) while the policy was active with `STORM`.
pub fn must_open(p: &Policy, out: &Outcome) -> bool {
    out.problem == Some(Stop::Storm) && p.state == State::Active && p.storm.is_some()
}

/// Opens the `STORM` breaker of policy (stream, group) in the selected database: state `storm` in
/// the keyspace (its `reclaim-storm` event), propagated as `RECLAIM.POLICY PAUSE stream group
/// STORM` (with the work's own writes, in one MULTI/EXEC), a notice in the log. Returns whether
/// it opened it (the policy was active); the caller then notes it in the run-time state
/// ([`Runtime::storm_opened`]). Call it with no lock held.
pub fn open_breaker(ctx: &Context, stream: &[u8], group: &[u8]) -> bool {
    if store::set_state(ctx, stream, group, State::Storm) != Some(State::Active) {
        return false;
    }
    if let Some(args) = store::state_command_args(stream, group, State::Storm) {
        let r: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        ctx.replicate("RECLAIM.POLICY", &r[..]);
    }
    crate::ffi::notice(ctx, &format!(
        "reclaim: STORM breaker opened for stream '{}' group '{}': no dead-letters until RECLAIM.POLICY RESUME",
        crate::model::text::printable(stream),
        crate::model::text::printable(group)
    ));
    true
}
