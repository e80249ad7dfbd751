//! `RECLAIM.SIMULATE`: what `RECLAIM.SWEEP key group LIMIT n` would do now, entry by entry,
//! under the live policy or a proposed one, decided by the sweep's own code
//! ([`crate::engine::sweep::simulate`]); writes nothing.

use redis_module::{Context, RedisString};

use crate::commands::common::{slices, ACCESS, KEY_RO};
use crate::commands::policy::{policy_map, SET_OPTIONS};
use crate::engine::guards;
use crate::engine::sweep::{self, Simulation, Target};
use crate::ffi;
use crate::ffi::acl::Caller;
use crate::ffi::command::{CmdResult, CommandSpec, Reply, Spec};
use crate::model::access;
use crate::model::args::{concat, int, key, string, Arg, V020};
use crate::model::breaker::Breaker;
use crate::model::clock::{epoch_ms, now_ms};
use crate::model::error::{self, ReclaimError};
use crate::model::outcome::Stop;
use crate::model::planner::{Action, Rule};
use crate::model::policy::{self, Policy, State};
use crate::state::config;
use crate::state::registry::{self, PolicyId};
use crate::state::store;

/// `key group [LIMIT n]` and the options of `RECLAIM.POLICY SET` (the what-ifs). The DLQ of a
/// what-if is no key of `SIMULATE` (it reads none): shown as a string.
const HEAD: &[Arg] = &[
    key("key", 0),
    string("group"),
    int("n").token("LIMIT").optional(),
];
const ARGS: &[Arg] = &concat::<{ HEAD.len() + SET_OPTIONS.len() }>(HEAD, SET_OPTIONS);

/// The command's table entry: its arguments are `key group [LIMIT n]` and `SET`'s options.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        parent: None,
        name: "reclaim.simulate",
        func: entry!("RECLAIM.SIMULATE", simulate_cmd),
        flags: "readonly",
        acl: "read slow",
        first_key: 1,
        arity: -3,
        summary: "Show what one reclaim pass would do now to the first pending entries of a consumer group, entry by entry, under its policy or a proposed one (writes nothing)",
        complexity: "O(L) with L = LIMIT (default COUNT) pending entries examined, plus O(consumers) with LIVENESS",
        since: V020,
        args: ARGS,
        keys: &[Spec::Index(1, KEY_RO | ACCESS)],
    },
];

/// The actions in the order of `RECLAIM.SIMULATE`'s `totals` (that of SWEEP's reply, then
/// `none`).
const ACTIONS: [Action; 4] = [
    Action::Move,
    Action::DeadLetter,
    Action::Purge,
    Action::Untouched,
];

/// The policy `RECLAIM.SIMULATE` evaluates: the live one with `changes` applied or, when there
/// is none, the defaults with them (the policy `RECLAIM.POLICY SET` would create);
/// [`error::NO_POLICY`] when there is none and nothing is proposed. Registers nothing.
fn proposed(
    ctx: &Context,
    stream: &[u8],
    group: &[u8],
    changes: policy::Changes,
) -> Result<Policy, ReclaimError> {
    let base = match store::get(ctx, stream, group) {
        // The live policy as it is, even one invalid where it is (`halted` says so).
        Some(p) if changes.is_empty() => return Ok(p),
        Some(p) => p,
        None if changes.is_empty() => return Err(error::NO_POLICY.into()),
        None => Policy::default(),
    };
    changes.apply(base, stream)
}

/// Why no pass of `p` (the policy of `stream`) runs now as planned, the name `RECLAIM.SIMULATE`
/// shows in `halted`: `invalid` (the live policy cannot run where it is: [`store::fault`]),
/// `disabled` (`reclaim.enabled` is `no`: `enabled` false), else the policy's state when it is not
/// active (`paused`, `storm`); `None` when a pass runs now.
fn halted_reason(stream: &[u8], p: &Policy, enabled: bool) -> Option<&'static str> {
    if store::fault(stream, p).is_some() {
        Some("invalid")
    } else if !enabled {
        Some("disabled")
    } else if p.state != State::Active {
        Some(p.state.name())
    } else {
        None
    }
}

/// How many dead-letters the plan of `RECLAIM.SIMULATE` for policy `id` (evaluated as `p`) may
/// make before the `STORM` breaker stops it (the `dead_letters` of [`sweep_cmd`]'s `Target`, for
/// the pass the plan shows): with a proposed `STORM` (`fresh`), a new breaker of that size (its
/// `n`); for a paused or open
/// (`storm`) policy, what `RECLAIM.POLICY RESUME` leaves (the breaker closed, in its grace:
/// unlimited); else the live breaker's allowance ([`registry::dead_letter_allowance`]).
fn simulated_allowance(id: &PolicyId, p: &Policy, fresh: bool) -> u64 {
    let now = now_ms();
    if fresh {
        Breaker::default().allowance(p.storm, now)
    } else if p.state != State::Active {
        let mut b = Breaker::default();
        b.resume(p.storm, now);
        b.allowance(p.storm, now)
    } else {
        registry::dead_letter_allowance(id, p)
    }
}

/// `RECLAIM.SIMULATE key group [LIMIT n] [MIN-IDLE ms] [MAX-DELIVERIES n] [DLQ dlq-key]
/// [CLAIMANT consumer] [COUNT n] [INTERVAL ms] [BACKOFF ...] [LIVENESS ms] [STORM n window-ms]
/// [DLQ-MAXLEN n] [DLQ-MAXAGE ms] [TOMBSTONES yes|no]` -> map `policy` (the policy evaluated, as GET shows it, its `state` the live one), `halted`
/// (nil, or why no pass runs now: [`halted_reason`]), `now-ms`, `entries` (per entry examined,
/// in PEL order: `id`, `consumer`, `idle`, `deliveries`, `action`, `rule`), `totals` (entries
/// per action: `move`, `dead-letter`, `purge`, `none`) and `more` (1 when the PEL has entries
/// after the last one examined), `delayed` (entries examined given back with a delay and not due
/// yet: rules `delayed` and `parked`) and `next-due-ms` (the earliest due time of the group's
/// parked entries, nil: none): what `RECLAIM.SWEEP key group LIMIT n` would do now (for a
/// halted policy: once it runs again, after `RECLAIM.POLICY RESUME` or `CONFIG SET
/// reclaim.enabled yes`), decided by the sweep's own code ([`sweep::simulate`]), dead-letters
/// cut at the `STORM` allowance ([`simulated_allowance`]). `LIMIT` defaults to the evaluated
/// policy's `COUNT`. An empty plan while the stream or the group does not exist. Read-only:
/// writes and propagates nothing, changes no run-time state (sightings and the breaker are
/// read, not noted), runs on replicas.
/// Errors: the options' (as SET's, and LIMIT), NOPERM when the caller may not read the group's
/// PEL ([`access::read_pel`]), no policy and no option, the proposed policy's (as SET's), NOPERM
/// when it may not read the evaluated policy's DLQ ([`access::dlq_length`]: its type is checked),
/// WRONGTYPE (DLQ, stream).
pub(super) fn simulate_cmd(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a = slices(args);
    let (stream, group) = (a[1], a[2]);
    let (limit, changes) = policy::parse_simulate_options(&a[3..])?;
    let caller = Caller::of(ctx);
    caller.check(ctx, &[access::read_pel(stream, group)])?;
    let fresh_breaker = changes.storm().is_some();
    let p = proposed(ctx, stream, group, changes)?;
    if let Some(d) = &p.dlq {
        caller.check(ctx, &[access::dlq_length(d)])?;
        if guards::is_non_stream(ctx, d) {
            return Err(error::WRONGTYPE_DLQ.into());
        }
    }
    let id = PolicyId::new(ffi::selected_db(ctx), stream, group);
    let seen = registry::seen(&id);
    let halted = halted_reason(stream, &p, config::enabled());
    let allowance = simulated_allowance(&id, &p, fresh_breaker);
    let target = Target::new(ctx, stream, group, &p, &seen, allowance);
    let now = epoch_ms();
    // An invalid policy's options may be anything (a COUNT of 0 or of 2^63): nothing is read.
    let simulated = if halted == Some("invalid") {
        Ok(Simulation::default())
    } else {
        sweep::simulate(&target, limit.unwrap_or(p.count))
    };
    let plan = match simulated {
        Ok(s) => s,
        Err(Stop::NoStream | Stop::NoGroup) => Simulation::default(),
        Err(Stop::WrongTypeStream) => return Err(error::WRONGTYPE_STREAM.into()),
        Err(Stop::Error(e)) if !e.starts_with(|c: char| c.is_ascii_lowercase()) => {
            return Err(ReclaimError::Redis(e))
        }
        Err(other) => return Err(ReclaimError::Redis(format!("ERR {}", other.status()))),
    };
    let name = |s: &str| Reply::Bytes(s.as_bytes().to_vec());
    let entries = plan
        .entries
        .iter()
        .map(|e| {
            Reply::Map(vec![
                ("id", Reply::Bytes(e.entry.id.clone())),
                ("consumer", Reply::Bytes(e.entry.consumer.clone())),
                ("idle", Reply::Int(e.entry.idle_ms)),
                ("deliveries", Reply::Int(e.entry.deliveries)),
                ("action", name(e.rule.action().name())),
                ("rule", name(e.rule.name())),
            ])
        })
        .collect();
    let totals = ACTIONS
        .iter()
        .map(|a| {
            let n = plan.entries.iter().filter(|e| e.rule.action() == *a);
            (a.name(), Reply::Int(n.count() as i64))
        })
        .collect();
    // Given back with a delay and not due yet: delayed or parked.
    let delayed = plan
        .entries
        .iter()
        .filter(|e| matches!(e.rule, Rule::Delayed | Rule::Parked))
        .count();
    Ok(Reply::Map(vec![
        ("policy", Reply::Map(policy_map(&p))),
        ("halted", halted.map_or(Reply::Null, name)),
        ("now-ms", Reply::Int(now)),
        ("entries", Reply::Array(entries)),
        ("totals", Reply::Map(totals)),
        ("more", Reply::Int(plan.more as i64)),
        ("delayed", Reply::Int(delayed as i64)),
        (
            "next-due-ms",
            crate::engine::parked::next_due(ctx, stream, group).map_or(Reply::Null, Reply::Int),
        ),
    ]))
}
