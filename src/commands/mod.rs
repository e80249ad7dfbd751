//! Command handlers, thin: parse into typed values, act through [`crate::state::store`],
//! [`crate::state::registry`] and [`crate::engine::sweep`], reply. Each returns `Result<Reply, ReclaimError>`;
//! [`crate::ffi::run_command`] sends either. Registration (flags, arity, key specs) is the table
//! [`COMMANDS`]; syntax and replies are documented in docs/commands.md.

pub mod health;
pub mod readgroup;
pub mod redrive;
pub mod verbs;

use std::os::raw::c_int;

use redis_module::{raw, Context, ContextFlags, RedisString};

use crate::engine::guards;
use crate::engine::pending;
use crate::engine::settle;
use crate::engine::sweep::{self, Simulation, Target};
use crate::ffi::{self, CmdResult, CommandSpec, Reply, Spec};
use crate::model::breaker::Breaker;
use crate::model::clock::{epoch_ms, now_ms};
use crate::model::error::{self, ReclaimError};
use crate::model::export;
use crate::model::keys;
use crate::model::metrics::Stat;
use crate::model::outcome::Stop;
use crate::model::planner::{Action, Tally};
use crate::model::policy::{self, Policy, State};
use crate::state::config;
use crate::state::registry::{self, PolicyId};
use crate::state::runtime::Runtime;
use crate::state::store;

const KEY_RW: u32 = raw::REDISMODULE_CMD_KEY_RW;
const KEY_RO: u32 = raw::REDISMODULE_CMD_KEY_RO;
const UPDATE: u32 = raw::REDISMODULE_CMD_KEY_UPDATE;
const INSERT: u32 = raw::REDISMODULE_CMD_KEY_INSERT;
const ACCESS: u32 = raw::REDISMODULE_CMD_KEY_ACCESS;
const DELETE: u32 = raw::REDISMODULE_CMD_KEY_DELETE;

fn slices(args: &[RedisString]) -> Vec<&[u8]> {
    args.iter().map(|a| a.as_slice()).collect()
}

fn policy_map(p: &Policy) -> Vec<(&'static str, Reply)> {
    vec![
        ("min-idle", Reply::Int(p.min_idle_ms)),
        ("max-deliveries", Reply::Int(p.max_deliveries)),
        (
            "dlq",
            p.dlq.clone().map(Reply::Bytes).unwrap_or(Reply::Null),
        ),
        ("claimant", Reply::Bytes(p.claimant.clone())),
        ("count", Reply::Int(p.count)),
        ("interval", Reply::Int(p.interval_ms)),
        ("backoff", Reply::Bytes(p.backoff_words().join(&b' '))),
        ("liveness", Reply::Int(p.liveness_ms)),
        (
            "storm",
            p.storm.map_or(Reply::Null, |s| {
                Reply::Bytes(format!("{} {}", s.max, s.window_ms).into_bytes())
            }),
        ),
        ("dlq-maxlen", Reply::Int(p.dlq_maxlen)),
        ("dlq-maxage", Reply::Int(p.dlq_maxage_ms)),
        (
            "tombstones",
            Reply::Bytes(crate::model::text::yes_no(p.tombstones).to_vec()),
        ),
        ("state", Reply::Bytes(p.state.name().as_bytes().to_vec())),
    ]
}

/// `RECLAIM.POLICY SET key group [MIN-IDLE ms] [MAX-DELIVERIES n] [DLQ dlq-key] [CLAIMANT consumer]
/// [COUNT n] [INTERVAL ms] [BACKOFF ...] [LIVENESS ms] [STORM n window-ms] [DLQ-MAXLEN n]
/// [DLQ-MAXAGE ms] [TOMBSTONES yes|no]` -> `+OK`. Replaces any policy of (key, group) in the selected db and
/// restarts its pass. Propagated to replicas and the AOF as the same command with every option
/// explicit. Errors: see [`policy::parse_set_options`], plus WRONGTYPE when the key or the DLQ
/// exists and is not a stream (not checked when the command comes from the primary or the AOF).
fn policy_set(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a = slices(args);
    if ffi::is_keys_request(ctx) {
        ffi::key_at(ctx, 2, KEY_RW | UPDATE);
        if let Some(pos) = policy::dlq_position(&a) {
            ffi::key_at(ctx, pos, KEY_RW | INSERT);
        }
        return Ok(Reply::Done);
    }
    let (stream, group) = (a[2], a[3]);
    let p = policy::parse_set_options(stream, &a[4..])?;
    let from_primary = ctx
        .get_flags()
        .intersects(ContextFlags::REPLICATED | ContextFlags::LOADING);
    if !from_primary {
        if guards::is_non_stream(ctx, stream) {
            return Err(error::WRONGTYPE_STREAM.into());
        }
        if let Some(d) = &p.dlq {
            if guards::is_non_stream(ctx, d) {
                return Err(error::WRONGTYPE_DLQ.into());
            }
        }
    }
    apply_set(ctx, stream, group, p)?;
    Ok(Reply::Status("OK"))
}

/// What `RECLAIM.POLICY SET` does once its policy is checked (and `IMPORT` for each policy):
/// stores it, restarts its pass, and propagates `RECLAIM.POLICY SET` with every option explicit.
fn apply_set(ctx: &Context, stream: &[u8], group: &[u8], p: Policy) -> Result<(), ReclaimError> {
    let repl = store::set_command_args(stream, group, &p);
    store::put(ctx, stream, group, p)?;
    registry::reset(ffi::selected_db(ctx), stream, group);
    let r: Vec<&[u8]> = repl.iter().map(|v| v.as_slice()).collect();
    ctx.replicate("RECLAIM.POLICY", &r[..]);
    Ok(())
}

/// `RECLAIM.POLICY GET key group` -> the policy as a map (`min-idle`, `max-deliveries`, `dlq`,
/// `claimant`, `count`, `interval`), or nil.
fn policy_get(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a = slices(args);
    Ok(match store::get(ctx, a[2], a[3]) {
        Some(p) => Reply::Map(policy_map(&p)),
        None => Reply::Null,
    })
}

/// `RECLAIM.POLICY DEL key group` -> 1 when a policy was removed, else 0. Propagated verbatim
/// when it removed something.
fn policy_del(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a = slices(args);
    let removed = store::delete(ctx, a[2], a[3]);
    if removed {
        registry::remove(&PolicyId::new(ffi::selected_db(ctx), a[2], a[3]));
        ctx.replicate_verbatim();
    }
    Ok(Reply::Int(removed as i64))
}

/// Every policy of the selected database, ordered by key then group (byte order). O(policies of
/// all databases).
fn policies_in_db(ctx: &Context) -> Vec<(PolicyId, Policy)> {
    let mut ids = registry::ids_in_db(ffi::selected_db(ctx));
    ids.sort();
    ids.into_iter()
        .filter_map(|id| store::get(ctx, &id.stream, &id.group).map(|p| (id, p)))
        .collect()
}

/// `RECLAIM.POLICY LIST` -> one map per policy of the selected database (`key`, `group`, then the
/// fields of GET), ordered by key then group. O(policies of all databases).
fn policy_list(ctx: &Context, _args: &[RedisString]) -> CmdResult {
    let out = policies_in_db(ctx)
        .into_iter()
        .map(|(id, p)| {
            let mut m = vec![
                ("key", Reply::Bytes(id.stream)),
                ("group", Reply::Bytes(id.group)),
            ];
            m.extend(policy_map(&p));
            Reply::Map(m)
        })
        .collect();
    Ok(Reply::Array(out))
}

/// `RECLAIM.POLICY EXPORT` -> every policy of the selected database as one JSON document (bulk
/// string), ordered as LIST, every option explicit ([`export::to_json`]).
fn policy_export(ctx: &Context, _args: &[RedisString]) -> CmdResult {
    let all = policies_in_db(ctx);
    let json = export::to_json(
        all.iter()
            .map(|(id, p)| (id.stream.as_slice(), id.group.as_slice(), p)),
    )?;
    Ok(Reply::Bytes(json.into_bytes()))
}

/// Checks one policy of an IMPORT against the keyspace, in this order: the caller's write
/// permission on the stream and the DLQ (what SET's key specs ask of ACL), in Redis Cluster the
/// DLQ's slot and whether this node serves the stream's slot (what SET's routing and `CROSSSLOT`
/// check), the type of the stream and of the DLQ (SET's `WRONGTYPE` checks), the policy key
/// (SET's [`error::POLICY_KEY_TAKEN`]), then, without `REPLACE`, that (key, group) has no policy.
fn import_check(
    ctx: &Context,
    index: usize,
    p: &export::Imported,
    replace: bool,
) -> Result<(), ReclaimError> {
    let (stream, group, dlq) = (&p.stream, &p.group, p.policy.dlq.as_deref());
    let fail = |field: Option<&str>, e: ReclaimError| {
        export::in_policy(index, Some(stream), Some(group), field, e)
    };
    if !ffi::may_write_key(ctx, stream) {
        return Err(fail(Some("key"), error::NOPERM_STREAM.into()));
    }
    if dlq.is_some_and(|d| !ffi::may_write_key(ctx, d)) {
        return Err(fail(Some("dlq"), error::NOPERM_DLQ_KEY.into()));
    }
    if ctx.get_flags().contains(ContextFlags::CLUSTER) {
        if dlq.is_some_and(|d| keys::key_slot(d) != keys::key_slot(stream)) {
            return Err(fail(Some("dlq"), error::IMPORT_CROSSSLOT.into()));
        }
        if !ffi::serves_key(ctx, &keys::policy_key(stream)) {
            return Err(fail(Some("key"), error::IMPORT_NOT_SERVED.into()));
        }
    }
    if guards::is_non_stream(ctx, stream) {
        return Err(fail(Some("key"), error::WRONGTYPE_STREAM.into()));
    }
    if dlq.is_some_and(|d| guards::is_non_stream(ctx, d)) {
        return Err(fail(Some("dlq"), error::WRONGTYPE_DLQ.into()));
    }
    match store::has(ctx, stream, group) {
        Err(taken) => Err(fail(Some("key"), taken.into())),
        Ok(true) if !replace => Err(fail(None, error::IMPORT_EXISTS.into())),
        Ok(_) => Ok(()),
    }
}

/// `RECLAIM.POLICY IMPORT json [REPLACE]` (or `IMPORT REPLACE json`) -> the number of policies
/// imported. Checks the whole document first ([`export::parse_document`], then
/// [`import_check`] for each policy in order) and applies nothing unless all of it is good; then
/// each policy as `RECLAIM.POLICY SET` does ([`apply_set`]), in document order, each propagated
/// as its own `RECLAIM.POLICY SET` (Redis wraps them in one `MULTI`/`EXEC`), so replicas and the
/// AOF never read JSON. Policies the document does not name are not touched.
fn policy_import(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a = slices(args);
    let (doc, replace) = export::import_args(&a[2..])?;
    let policies = export::parse_document(doc)?;
    for (i, p) in policies.iter().enumerate() {
        import_check(ctx, i, p, replace)?;
    }
    let n = policies.len() as i64;
    for p in policies {
        apply_set(ctx, &p.stream, &p.group, p.policy)?;
    }
    Ok(Reply::Int(n))
}

/// `RECLAIM.POLICY PAUSE key group [STORM]` -> `+OK`: the policy moves, redelivers and
/// dead-letters nothing until `RECLAIM.POLICY RESUME` (state `paused`; with `STORM`, state
/// `storm`: only dead-letters stop, as when the breaker opens). Stored with the policy (RDB, AOF,
/// replicas); propagated verbatim when it changed the state. Errors: a word other than `STORM`,
/// the policy key taken, no policy.
fn policy_pause(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a = slices(args);
    let state = match a.get(4) {
        None => State::Paused,
        Some(w) if w.eq_ignore_ascii_case(b"STORM") && a.len() == 5 => State::Storm,
        Some(_) => return Err(error::PAUSE_SYNTAX.into()),
    };
    change_state(ctx, a[2], a[3], state)
}

/// `RECLAIM.POLICY RESUME key group` -> `+OK`: the policy runs again (state `active`); an open
/// `STORM` breaker closes, and does not open again for one window, so what it held back is
/// dead-lettered. Propagated verbatim when it changed the state. Errors: the policy key taken, no
/// policy.
fn policy_resume(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a = slices(args);
    change_state(ctx, a[2], a[3], State::Active)
}

/// Sets the state of the policy of (stream, group), propagates the command when it changed, and
/// makes the policy due at once. Errors: the policy key holds something else
/// ([`error::POLICY_KEY_TAKEN`], as SET), no policy.
fn change_state(ctx: &Context, stream: &[u8], group: &[u8], state: State) -> CmdResult {
    store::has(ctx, stream, group)?;
    let (id, p) = policy_or_error(ctx, stream, group)?;
    if store::set_state(ctx, stream, group, state) != Some(state) {
        ctx.replicate_verbatim();
        // Announced by store::set_state.
        registry::update(&id, |rt| rt.state_changed(state, p.storm, now_ms()));
        registry::due_now(&id);
    }
    Ok(Reply::Status("OK"))
}

/// The policy of (stream, group) in the selected database, registered if the registry did not
/// know it; [`error::NO_POLICY`] when there is none.
fn policy_or_error(
    ctx: &Context,
    stream: &[u8],
    group: &[u8],
) -> Result<(PolicyId, Policy), ReclaimError> {
    let p = store::get(ctx, stream, group).ok_or(ReclaimError::Static(error::NO_POLICY))?;
    let db = ffi::selected_db(ctx);
    registry::register(db, stream, group);
    Ok((PolicyId::new(db, stream, group), p))
}

/// `RECLAIM.SWEEP key group [LIMIT n]` -> map `claimed`, `dead-lettered`, `deleted`,
/// `dlq-trimmed` (`DLQ-MAXLEN`/`DLQ-MAXAGE`), `tombstones` (`TOMBSTONES yes`): one complete
/// pass over the group's PEL now, from its head (or over at most n pending entries), with the
/// policy's rules; the timer's own cursor is not moved. O(PEL) for a complete pass; all its writes
/// reach replicas and the AOF as one MULTI/EXEC. Zeros while the stream or group does not exist.
/// Errors: no policy, LIMIT not a positive integer, WRONGTYPE (stream or DLQ), NOPERM when the
/// caller may not write the DLQ.
fn sweep_cmd(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a = slices(args);
    let (stream, group) = (a[1], a[2]);
    let limit = policy::parse_sweep_options(&a[3..])?;
    let (id, p) = policy_or_error(ctx, stream, group)?;
    if let Some(e) = p.halted(config::enabled()) {
        return Err(e.into());
    }
    if let Some(d) = &p.dlq {
        if !ffi::may_write_key(ctx, d) {
            return Err(error::NOPERM_DLQ.into());
        }
        if guards::is_non_stream(ctx, d) {
            return Err(error::WRONGTYPE_DLQ.into());
        }
    }
    let seen = registry::seen(&id);
    let allowance = registry::dead_letter_allowance(&id, &p);
    let target = Target::new(ctx, stream, group, &p, &seen, allowance);
    let mut remaining = limit.unwrap_or(i64::MAX);
    let mut cursor: Option<Vec<u8>> = None;
    let (mut claimed, mut dead, mut deleted) = (0u64, 0u64, 0u64);
    let (mut trimmed, mut tombstones) = (0u64, 0u64);
    let mut tally = Tally::default();
    let t0 = std::time::Instant::now();
    loop {
        let max = p.count.min(remaining);
        let out = sweep::step_page(&target, None, cursor.as_deref(), max, None);
        claimed += out.claimed;
        dead += out.dead_lettered;
        deleted += out.deleted;
        trimmed += out.dlq_trimmed;
        tombstones += out.tombstones;
        remaining -= out.examined as i64;
        tally.merge(&out.tally);
        let us = t0.elapsed().as_micros() as i64;
        settle::after_step(ctx, &id, &p, &out, |rt| {
            rt.count_step(&out);
            if out.pass_done {
                rt.note_full_pass(std::mem::take(&mut tally), us, epoch_ms());
            }
        });
        match &out.stop {
            Some(Stop::WrongTypeStream) => return Err(error::WRONGTYPE_STREAM.into()),
            Some(_) => break,
            None => {}
        }
        if out.pass_done {
            break;
        }
        if remaining <= 0 {
            break;
        }
        cursor = out.cursor;
    }
    Ok(Reply::Map(vec![
        ("claimed", Reply::Int(claimed as i64)),
        ("dead-lettered", Reply::Int(dead as i64)),
        ("deleted", Reply::Int(deleted as i64)),
        ("dlq-trimmed", Reply::Int(trimmed as i64)),
        ("tombstones", Reply::Int(tombstones as i64)),
    ]))
}

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
        Some(p) => p,
        None if changes.is_empty() => return Err(error::NO_POLICY.into()),
        None => Policy::default(),
    };
    changes.apply(base, stream)
}

/// Why no pass of `p` runs now as planned, the name `RECLAIM.SIMULATE` shows in `halted`:
/// `disabled` (`reclaim.enabled` is `no`: `enabled` false), else the policy's state when it is not
/// active (`paused`, `storm`); `None` when a pass runs now.
fn halted_reason(p: &Policy, enabled: bool) -> Option<&'static str> {
    if !enabled {
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
/// after the last one examined): what `RECLAIM.SWEEP key group LIMIT n` would do now (for a
/// halted policy: once it runs again, after `RECLAIM.POLICY RESUME` or `CONFIG SET
/// reclaim.enabled yes`), decided by the sweep's own code ([`sweep::simulate`]), dead-letters
/// cut at the `STORM` allowance ([`simulated_allowance`]). `LIMIT` defaults to the evaluated
/// policy's `COUNT`. An empty plan while the stream or the group does not exist. Read-only:
/// writes and propagates nothing, changes no run-time state (sightings and the breaker are
/// read, not noted), runs on replicas.
/// Errors: the options' (as SET's, and LIMIT), no policy and no option, the proposed policy's
/// (as SET's), WRONGTYPE (DLQ, stream).
fn simulate_cmd(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a = slices(args);
    let (stream, group) = (a[1], a[2]);
    let (limit, changes) = policy::parse_simulate_options(&a[3..])?;
    let fresh_breaker = changes.storm().is_some();
    let p = proposed(ctx, stream, group, changes)?;
    if let Some(d) = &p.dlq {
        if guards::is_non_stream(ctx, d) {
            return Err(error::WRONGTYPE_DLQ.into());
        }
    }
    let id = PolicyId::new(ffi::selected_db(ctx), stream, group);
    let seen = registry::seen(&id);
    let halted = halted_reason(&p, config::enabled());
    let allowance = simulated_allowance(&id, &p, fresh_breaker);
    let target = Target::new(ctx, stream, group, &p, &seen, allowance);
    let now = epoch_ms();
    let plan = match sweep::simulate(&target, limit.unwrap_or(p.count)) {
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
    Ok(Reply::Map(vec![
        ("policy", Reply::Map(policy_map(&p))),
        ("halted", halted.map_or(Reply::Null, name)),
        ("now-ms", Reply::Int(now)),
        ("entries", Reply::Array(entries)),
        ("totals", Reply::Map(totals)),
        ("more", Reply::Int(plan.more as i64)),
    ]))
}

/// The `status` field of `RECLAIM.STATS`, checked live.
fn status(ctx: &Context, stream: &[u8], group: &[u8], p: &Policy, rt: &Runtime) -> String {
    if let Some(b) = guards::blocked(ctx) {
        return b.status().to_string();
    }
    if !config::enabled() {
        return "disabled".into();
    }
    if p.state != State::Active {
        return p.state.name().into();
    }
    if let Some(s) = guards::check_stream(ctx, stream) {
        return s.status();
    }
    let args: [&[u8]; 5] = [stream, group, b"-", b"+", b"1"];
    let res: redis_module::CallResult = ctx.call_ext("XPENDING", &ffi::read_opts(), &args[..]);
    if let Err(e) = res {
        if e.as_bytes().starts_with(b"NOGROUP") {
            return Stop::NoGroup.status();
        }
    }
    if let Some(d) = &p.dlq {
        if guards::is_non_stream(ctx, d) {
            return Stop::WrongTypeDlq.status();
        }
    }
    // Problems about the keys were checked live above; what is left is the last step's own trouble.
    match rt.problem() {
        Some(s @ (Stop::Oom | Stop::Error(_))) => s.status(),
        _ => "active".into(),
    }
}

/// `RECLAIM.STATS key group` -> map `passes`, `claimed`, `dead-lettered`, `deleted`,
/// `oom-skips`, `errors`, `last-pass-ms` (ms since the epoch, 0 = none yet), `last-pass-us`
/// (duration of the last complete pass), `full-passes` (passes that paged every entry to check
/// delivery counts), `scans-skipped` (passes that only purged trimmed entries), `consumer-checks`
/// (consumers' own PELs paged after a command that could raise their counts), `redelivered`,
/// `storms`, `dlq-trimmed` (dead letters trimmed by `DLQ-MAXLEN`/`DLQ-MAXAGE`), `tombstones`
/// (DLQ records of entries deleted while pending), `inbox`, `stale-not-before`
/// (ms since the epoch before which no pending entry can be stale, 0 = unknown), `cursor`
/// (`0-0` at the head of the PEL), `status`.
/// Counters are since the module was loaded on this server. Errors: no policy.
fn stats(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a = slices(args);
    let (id, p) = policy_or_error(ctx, a[1], a[2])?;
    let rt = registry::get(&id).unwrap_or_default();
    let st = status(ctx, a[1], a[2], &p, &rt);
    let c = rt.counters();
    let summary = pending::summary(ctx, a[1], a[2], &p.claimant, |_, _| {});
    let inbox = summary.map_or(0, |s| s.inbox as i64);
    let n = |s: Stat| (s.stats_name(), Reply::Int(c.get(s) as i64));
    Ok(Reply::Map(vec![
        n(Stat::Passes),
        n(Stat::Claimed),
        n(Stat::DeadLettered),
        n(Stat::Deleted),
        n(Stat::OomSkips),
        n(Stat::Errors),
        ("last-pass-ms", Reply::Int(c.last_pass_ms)),
        ("last-pass-us", Reply::Int(c.last_pass_us)),
        n(Stat::FullPasses),
        n(Stat::ScansSkipped),
        n(Stat::ConsumerChecks),
        n(Stat::Redelivered),
        n(Stat::Storms),
        n(Stat::DlqTrimmed),
        n(Stat::Tombstones),
        ("inbox", Reply::Int(inbox)),
        ("stale-not-before", Reply::Int(rt.stale_not_before_ms())),
        (
            "cursor",
            Reply::Bytes(rt.cursor().unwrap_or(b"0-0").to_vec()),
        ),
        ("status", Reply::Bytes(st.into_bytes())),
    ]))
}

/// `RECLAIM.POLICY HELP` -> the subcommands, one line each (the Redis convention for container
/// commands, as `XINFO HELP`).
fn policy_help(_ctx: &Context, _args: &[RedisString]) -> CmdResult {
    let lines: &[&str] = &[
        "RECLAIM.POLICY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "SET <key> <group> [MIN-IDLE <ms>] [MAX-DELIVERIES <n>] [DLQ <dlq-key>] [CLAIMANT <consumer>] [COUNT <n>] [INTERVAL <ms>] [BACKOFF FIXED|EXPONENTIAL <max-ms>|LIST <ms> [<ms> ...]] [LIVENESS <ms>] [STORM <n> <window-ms>] [DLQ-MAXLEN <n>] [DLQ-MAXAGE <ms>] [TOMBSTONES yes|no]",
        "    Set (replace) the reclaim policy of a stream's consumer group.",
        "GET <key> <group>",
        "    Return the policy as field/value pairs, or nil.",
        "DEL <key> <group>",
        "    Delete the policy (1 if it existed, else 0).",
        "LIST",
        "    Return every policy of the selected database.",
        "EXPORT",
        "    Return every policy of the selected database as one JSON document.",
        "IMPORT <json> [REPLACE]",
        "    Set the policies of a JSON document (as EXPORT writes it), all or none; REPLACE replaces existing ones.",
        "PAUSE <key> <group> [STORM]",
        "    Stop the policy's moves, redeliveries and dead-letters (STORM: only its dead-letters).",
        "RESUME <key> <group>",
        "    Let a paused policy run again, or close its STORM breaker.",
        "HELP",
        "    Print this help.",
    ];
    Ok(Reply::Array(
        lines.iter().map(|l| Reply::Status(l)).collect(),
    ))
}

macro_rules! entry {
    ($fname:ident, $name:expr, $handler:path) => {
        extern "C" fn $fname(
            ctx: *mut raw::RedisModuleCtx,
            argv: *mut *mut raw::RedisModuleString,
            argc: c_int,
        ) -> c_int {
            ffi::run_command(ctx, argv, argc, $name, $handler)
        }
    };
}

entry!(c_policy_set, "RECLAIM.POLICY SET", policy_set);
entry!(c_policy_get, "RECLAIM.POLICY GET", policy_get);
entry!(c_policy_del, "RECLAIM.POLICY DEL", policy_del);
entry!(c_policy_list, "RECLAIM.POLICY LIST", policy_list);
entry!(c_policy_export, "RECLAIM.POLICY EXPORT", policy_export);
entry!(c_policy_import, "RECLAIM.POLICY IMPORT", policy_import);
entry!(c_policy_help, "RECLAIM.POLICY HELP", policy_help);
entry!(c_sweep, "RECLAIM.SWEEP", sweep_cmd);
entry!(c_stats, "RECLAIM.STATS", stats);
entry!(c_simulate, "RECLAIM.SIMULATE", simulate_cmd);
entry!(
    c_health,
    "RECLAIM.HEALTH",
    crate::commands::health::health_cmd
);
entry!(c_policy_pause, "RECLAIM.POLICY PAUSE", policy_pause);
entry!(c_policy_resume, "RECLAIM.POLICY RESUME", policy_resume);
entry!(
    c_readgroup,
    "RECLAIM.READGROUP",
    crate::commands::readgroup::readgroup_cmd
);
entry!(
    c_extend,
    "RECLAIM.EXTEND",
    crate::commands::verbs::extend_cmd
);
entry!(c_nack, "RECLAIM.NACK", crate::commands::verbs::nack_cmd);
entry!(c_term, "RECLAIM.TERM", crate::commands::verbs::term_cmd);
entry!(
    c_redrive,
    "RECLAIM.REDRIVE",
    crate::commands::redrive::redrive_cmd
);

/// Every command of the module, registered in this order (a container before its subcommands).
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        parent: None,
        name: "reclaim.policy",
        func: None,
        flags: "",
        first_key: 0,
        arity: -2,
        summary: "Manage reclaim policies",
        complexity: "O(1)",
        keys: &[],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "set",
        func: Some(c_policy_set),
        flags: "write deny-oom getkeys-api",
        first_key: 2,
        arity: -4,
        summary: "Set the reclaim policy of a stream's consumer group",
        complexity: "O(log N) with N policies of the stream",
        keys: &[
            Spec::Index(2, KEY_RW | UPDATE),
            Spec::Callback(KEY_RW | INSERT),
        ],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "get",
        func: Some(c_policy_get),
        flags: "readonly",
        first_key: 2,
        arity: 4,
        summary: "Get a reclaim policy",
        complexity: "O(1)",
        keys: &[Spec::Index(2, KEY_RO | ACCESS)],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "del",
        func: Some(c_policy_del),
        flags: "write",
        first_key: 2,
        arity: 4,
        summary: "Delete a reclaim policy",
        complexity: "O(1)",
        keys: &[Spec::Index(2, KEY_RW | DELETE)],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "pause",
        func: Some(c_policy_pause),
        flags: "write fast",
        first_key: 2,
        arity: -4,
        summary: "Pause a reclaim policy (or open its STORM breaker)",
        complexity: "O(1)",
        keys: &[Spec::Index(2, KEY_RW | UPDATE)],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "resume",
        func: Some(c_policy_resume),
        flags: "write fast",
        first_key: 2,
        arity: 4,
        summary: "Resume a paused reclaim policy, or close its STORM breaker",
        complexity: "O(1)",
        keys: &[Spec::Index(2, KEY_RW | UPDATE)],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "list",
        func: Some(c_policy_list),
        flags: "readonly",
        first_key: 0,
        arity: 2,
        summary: "List the reclaim policies of the selected database",
        complexity: "O(P) with P policies",
        keys: &[],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "export",
        func: Some(c_policy_export),
        flags: "readonly",
        first_key: 0,
        arity: 2,
        summary: "Export the reclaim policies of the selected database as one JSON document",
        complexity: "O(P) with P policies",
        keys: &[],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "import",
        func: Some(c_policy_import),
        flags: "write deny-oom",
        first_key: 0,
        arity: -3,
        summary: "Import reclaim policies from a JSON document (as EXPORT writes it), all or none",
        complexity: "O(N + P log M) with N the document's length, P its policies, M the policies of a stream",
        keys: &[],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "help",
        func: Some(c_policy_help),
        flags: "readonly fast",
        first_key: 0,
        arity: 2,
        summary: "Show helpful text about the different subcommands",
        complexity: "O(1)",
        keys: &[],
    },
    CommandSpec {
        parent: None,
        name: "reclaim.sweep",
        func: Some(c_sweep),
        flags: "write deny-oom",
        first_key: 1,
        arity: -3,
        summary: "Run one reclaim pass over a consumer group's PEL now",
        complexity: "O(N) with N pending entries of the group (or LIMIT)",
        keys: &[Spec::Index(1, KEY_RW | UPDATE)],
    },
    CommandSpec {
        parent: None,
        name: "reclaim.stats",
        func: Some(c_stats),
        flags: "readonly",
        first_key: 1,
        arity: 3,
        summary: "Counters and status of a reclaim policy",
        complexity: "O(1)",
        keys: &[Spec::Index(1, KEY_RO | ACCESS)],
    },
    CommandSpec {
        parent: None,
        name: "reclaim.simulate",
        func: Some(c_simulate),
        flags: "readonly",
        first_key: 1,
        arity: -3,
        summary: "Show what one reclaim pass would do now to the first pending entries of a consumer group, entry by entry, under its policy or a proposed one (writes nothing)",
        complexity: "O(L) with L = LIMIT (default COUNT) pending entries examined, plus O(consumers) with LIVENESS",
        keys: &[Spec::Index(1, KEY_RO | ACCESS)],
    },
    CommandSpec {
        parent: None,
        name: "reclaim.health",
        func: Some(c_health),
        flags: "readonly",
        first_key: 1,
        arity: 3,
        summary: "Health signals of a consumer group under a reclaim policy, each with the time it was taken",
        complexity: "O(C) with C consumers of the group",
        keys: &[Spec::Index(1, KEY_RO | ACCESS)],
    },
    CommandSpec {
        parent: None,
        name: "reclaim.readgroup",
        func: Some(c_readgroup),
        flags: "write blocking",
        first_key: 0,
        arity: -7,
        summary: "Read new and due entries from streams of a consumer group, with redelivery under the policies (a drop-in for XREADGROUP ... >)",
        complexity: "As XREADGROUP, plus O(log N + M) per stream with a policy for the M entries handed over again",
        keys: &[Spec::HalfAfterKeyword("STREAMS", 4, KEY_RW | ACCESS | UPDATE)],
    },
    CommandSpec {
        parent: None,
        name: "reclaim.extend",
        func: Some(c_extend),
        flags: "write fast",
        first_key: 1,
        arity: -5,
        summary: "Renew the lease of a consumer's own pending entries (idle reset, count unchanged)",
        complexity: "O(M log N) for M IDs",
        keys: &[Spec::Index(1, KEY_RW | UPDATE)],
    },
    CommandSpec {
        parent: None,
        name: "reclaim.nack",
        func: Some(c_nack),
        flags: "write fast",
        first_key: 1,
        arity: -5,
        summary: "Give a consumer's own pending entries back for redelivery, now or after a delay",
        complexity: "O(M log N) for M IDs",
        keys: &[Spec::Index(1, KEY_RW | UPDATE)],
    },
    CommandSpec {
        parent: None,
        name: "reclaim.term",
        func: Some(c_term),
        flags: "write deny-oom",
        first_key: 1,
        arity: -5,
        summary: "Dead-letter a consumer's own pending entries at once (never retried)",
        complexity: "O(M log N) for M IDs",
        keys: &[Spec::Index(1, KEY_RW | UPDATE)],
    },
    CommandSpec {
        parent: None,
        name: "reclaim.redrive",
        func: Some(c_redrive),
        flags: "may-replicate getkeys-api",
        first_key: 1,
        arity: -2,
        summary: "Move a DLQ's entries back to the consumer groups they failed in, as a task (STATUS, CANCEL)",
        complexity: "O(1) to start, STATUS or CANCEL; the task moves each entry in O(log N)",
        keys: &[Spec::Callback(KEY_RW | UPDATE)],
    },
];

/// Registers every command of [`COMMANDS`]. `false` if Redis refused one.
pub fn register(ctx: &Context) -> bool {
    COMMANDS.iter().all(|c| ffi::register(ctx, c))
}
