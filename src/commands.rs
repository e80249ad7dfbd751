//! Command handlers: parse into typed values, act through [`crate::store`] / [`crate::sweep`],
//! reply. Registration (flags, arity, key specs) is in [`register`]; syntax and replies are
//! documented in docs/commands.md.

use std::os::raw::c_int;

use redis_module::{raw, Context, ContextFlags, RedisString};

use crate::error::{self, ReclaimError};
use crate::ffi::{self, Owned, Reply, Spec};
use crate::policy::{self, Policy};
use crate::registry::{self, PolicyId, Runtime};
use crate::store;
use crate::sweep::{self, Stop};
use crate::timer;

type Handler = Result<Reply, String>;

const KEY_RW: u32 = raw::REDISMODULE_CMD_KEY_RW;
const KEY_RO: u32 = raw::REDISMODULE_CMD_KEY_RO;
const UPDATE: u32 = raw::REDISMODULE_CMD_KEY_UPDATE;
const INSERT: u32 = raw::REDISMODULE_CMD_KEY_INSERT;
const ACCESS: u32 = raw::REDISMODULE_CMD_KEY_ACCESS;
const DELETE: u32 = raw::REDISMODULE_CMD_KEY_DELETE;

fn slices(args: &[RedisString]) -> Vec<&[u8]> {
    args.iter().map(|a| a.as_slice()).collect()
}

fn err(e: ReclaimError) -> String {
    e.to_string()
}

fn policy_map(p: &Policy) -> Vec<(&'static str, Owned)> {
    vec![
        ("min-idle", Owned::Int(p.min_idle_ms)),
        ("max-deliveries", Owned::Int(p.max_deliveries)),
        (
            "dlq",
            p.dlq.clone().map(Owned::Bytes).unwrap_or(Owned::Null),
        ),
        ("claimant", Owned::Bytes(p.claimant.clone())),
        ("count", Owned::Int(p.count)),
        ("interval", Owned::Int(p.interval_ms)),
    ]
}

/// `RECLAIM.POLICY SET key group [MIN-IDLE ms] [MAX-DELIVERIES n] [DLQ dlq-key] [CLAIMANT consumer]
/// [COUNT n] [INTERVAL ms]` -> `+OK`. Replaces any policy of (key, group) in the selected db and
/// restarts its pass. Propagated to replicas and the AOF as the same command with every option
/// explicit. Errors: see [`policy::parse_set_options`], plus WRONGTYPE when the key or the DLQ
/// exists and is not a stream (not checked when the command comes from the primary or the AOF).
fn policy_set(ctx: &Context, args: &[RedisString]) -> Handler {
    let a = slices(args);
    if ffi::is_keys_request(ctx) {
        ffi::key_at(ctx, 2, KEY_RW | UPDATE);
        if let Some(pos) = policy::dlq_position(&a) {
            ffi::key_at(ctx, pos, KEY_RW | INSERT);
        }
        return Ok(Reply::Done);
    }
    let (stream, group) = (a[2], a[3]);
    let p = policy::parse_set_options(stream, &a[4..]).map_err(err)?;
    let from_primary = ctx
        .get_flags()
        .intersects(ContextFlags::REPLICATED | ContextFlags::LOADING);
    if !from_primary {
        if sweep::is_non_stream(ctx, stream) {
            return Err(error::WRONGTYPE_STREAM.into());
        }
        if let Some(d) = &p.dlq {
            if sweep::is_non_stream(ctx, d) {
                return Err(error::WRONGTYPE_DLQ.into());
            }
        }
    }
    let repl = store::set_command_args(stream, group, &p);
    store::put(ctx, stream, group, p)?;
    registry::reset(ffi::selected_db(ctx), stream, group);
    let r: Vec<&[u8]> = repl.iter().map(|v| v.as_slice()).collect();
    ctx.replicate("RECLAIM.POLICY", &r[..]);
    Ok(Reply::Value(Owned::Status("OK")))
}

/// `RECLAIM.POLICY GET key group` -> the policy as a map (`min-idle`, `max-deliveries`, `dlq`,
/// `claimant`, `count`, `interval`), or nil.
fn policy_get(ctx: &Context, args: &[RedisString]) -> Handler {
    if ffi::is_keys_request(ctx) {
        ffi::key_at(ctx, 2, KEY_RO | ACCESS);
        return Ok(Reply::Done);
    }
    let a = slices(args);
    Ok(Reply::Value(match store::get(ctx, a[2], a[3]) {
        Some(p) => Owned::Map(policy_map(&p)),
        None => Owned::Null,
    }))
}

/// `RECLAIM.POLICY DEL key group` -> 1 when a policy was removed, else 0. Propagated verbatim
/// when it removed something.
fn policy_del(ctx: &Context, args: &[RedisString]) -> Handler {
    if ffi::is_keys_request(ctx) {
        ffi::key_at(ctx, 2, KEY_RW | DELETE);
        return Ok(Reply::Done);
    }
    let a = slices(args);
    let removed = store::delete(ctx, a[2], a[3]);
    if removed {
        registry::remove(&PolicyId {
            db: ffi::selected_db(ctx),
            stream: a[2].to_vec(),
            group: a[3].to_vec(),
        });
        ctx.replicate_verbatim();
    }
    Ok(Reply::Value(Owned::Int(removed as i64)))
}

/// `RECLAIM.POLICY LIST` -> one map per policy of the selected database (`key`, `group`, then the
/// fields of GET), ordered by key then group. O(policies of all databases).
fn policy_list(ctx: &Context, _args: &[RedisString]) -> Handler {
    let db = ffi::selected_db(ctx);
    let mut ids = registry::ids_in_db(db);
    ids.sort();
    let mut out = Vec::new();
    for id in ids {
        if let Some(p) = store::get(ctx, &id.stream, &id.group) {
            let mut m = vec![
                ("key", Owned::Bytes(id.stream.clone())),
                ("group", Owned::Bytes(id.group.clone())),
            ];
            m.extend(policy_map(&p));
            out.push(Owned::Map(m));
        }
    }
    Ok(Reply::Value(Owned::Array(out)))
}

fn policy_or_error(
    ctx: &Context,
    stream: &[u8],
    group: &[u8],
) -> Result<(PolicyId, Policy), String> {
    let p = store::get(ctx, stream, group).ok_or_else(|| error::NO_POLICY.to_string())?;
    let db = ffi::selected_db(ctx);
    registry::register(db, stream, group);
    Ok((
        PolicyId {
            db,
            stream: stream.to_vec(),
            group: group.to_vec(),
        },
        p,
    ))
}

/// `RECLAIM.SWEEP key group [LIMIT n]` -> map `claimed`, `dead-lettered`, `deleted`: one complete
/// pass over the group's PEL now, from its head (or over at most n pending entries), with the
/// policy's rules; the timer's own cursor is not moved. O(PEL) for a complete pass; all its writes
/// reach replicas and the AOF as one MULTI/EXEC. Zeros while the stream or group does not exist.
/// Errors: no policy, LIMIT not a positive integer, WRONGTYPE (stream or DLQ), NOPERM when the
/// caller may not write the DLQ.
fn sweep_cmd(ctx: &Context, args: &[RedisString]) -> Handler {
    if ffi::is_keys_request(ctx) {
        ffi::key_at(ctx, 1, KEY_RW | UPDATE);
        return Ok(Reply::Done);
    }
    let a = slices(args);
    let (stream, group) = (a[1], a[2]);
    let limit = policy::parse_sweep_options(&a[3..]).map_err(err)?;
    let (id, p) = policy_or_error(ctx, stream, group)?;
    if let Some(d) = &p.dlq {
        if !ffi::may_write_key(ctx, d) {
            return Err(error::NOPERM_DLQ.into());
        }
        if sweep::is_non_stream(ctx, d) {
            return Err(error::WRONGTYPE_DLQ.into());
        }
    }
    let mut remaining = limit.unwrap_or(i64::MAX);
    let mut cursor: Option<Vec<u8>> = None;
    let (mut claimed, mut dead, mut deleted) = (0u64, 0u64, 0u64);
    let t0 = std::time::Instant::now();
    let mut rt = Runtime::default();
    loop {
        let max = p.count.min(remaining);
        let out = sweep::step(ctx, stream, group, &p, None, cursor.as_deref(), max, None);
        claimed += out.claimed;
        dead += out.dead_lettered;
        deleted += out.deleted;
        remaining -= out.examined as i64;
        let now = registry::now_ms();
        timer::apply(&mut rt, &out, 0, &p, now);
        match &out.stop {
            Some(Stop::WrongTypeStream) => {
                registry::update(&id, |r| r.counters.errors += 1);
                return Err(error::WRONGTYPE_STREAM.into());
            }
            Some(_) => break,
            None => {}
        }
        if out.pass_done || remaining <= 0 {
            break;
        }
        cursor = out.cursor;
    }
    let pass_us = t0.elapsed().as_micros() as i64;
    let c = rt.counters;
    registry::update(&id, |r| {
        r.counters.claimed += c.claimed;
        r.counters.dead_lettered += c.dead_lettered;
        r.counters.deleted += c.deleted;
        r.counters.oom_skips += c.oom_skips;
        r.counters.errors += c.errors;
        if c.passes > 0 {
            r.counters.passes += c.passes;
            r.counters.last_pass_ms = c.last_pass_ms;
            r.counters.last_pass_us = pass_us;
        }
    });
    Ok(Reply::Value(Owned::Map(vec![
        ("claimed", Owned::Int(claimed as i64)),
        ("dead-lettered", Owned::Int(dead as i64)),
        ("deleted", Owned::Int(deleted as i64)),
    ])))
}

/// The `status` field of `RECLAIM.STATS`, checked live.
fn status(ctx: &Context, stream: &[u8], group: &[u8], p: &Policy, rt: &Runtime) -> String {
    if let Some(b) = timer::blocked(ctx) {
        return b.to_string();
    }
    if let Some(s) = sweep::check_stream(ctx, stream) {
        return s.status();
    }
    let args: [&[u8]; 5] = [stream, group, b"-", b"+", b"1"];
    let opts = redis_module::CallOptionsBuilder::new()
        .errors_as_replies()
        .build();
    let res: redis_module::CallResult = ctx.call_ext("XPENDING", &opts, &args[..]);
    if let Err(e) = res {
        if e.as_bytes().starts_with(b"NOGROUP") {
            return Stop::NoGroup.status();
        }
    }
    if let Some(d) = &p.dlq {
        if sweep::is_non_stream(ctx, d) {
            return Stop::WrongTypeDlq.status();
        }
    }
    // Problems about the keys were checked live above; what is left is the last step's own trouble.
    match &rt.problem {
        Some(s @ (Stop::Oom | Stop::Error(_))) => s.status(),
        _ => "active".into(),
    }
}

/// `RECLAIM.STATS key group` -> map `passes`, `claimed`, `dead-lettered`, `deleted`,
/// `oom-skips`, `errors`, `last-pass-ms` (ms since the epoch, 0 = none yet), `last-pass-us`
/// (duration of the last complete pass), `full-passes` (passes that paged every entry to check
/// delivery counts), `scans-skipped` (passes that only purged trimmed entries), `consumer-checks`
/// (consumers' own PELs paged after a command that could raise their counts), `stale-not-before`
/// (ms since the epoch before which no pending entry can be stale, 0 = unknown), `cursor`
/// (`0-0` at the head of the PEL), `status`.
/// Counters are since the module was loaded on this server. Errors: no policy.
fn stats(ctx: &Context, args: &[RedisString]) -> Handler {
    if ffi::is_keys_request(ctx) {
        ffi::key_at(ctx, 1, KEY_RO | ACCESS);
        return Ok(Reply::Done);
    }
    let a = slices(args);
    let (id, p) = policy_or_error(ctx, a[1], a[2])?;
    let rt = registry::get(&id).unwrap_or_default();
    let st = status(ctx, a[1], a[2], &p, &rt);
    let c = &rt.counters;
    Ok(Reply::Value(Owned::Map(vec![
        ("passes", Owned::Int(c.passes as i64)),
        ("claimed", Owned::Int(c.claimed as i64)),
        ("dead-lettered", Owned::Int(c.dead_lettered as i64)),
        ("deleted", Owned::Int(c.deleted as i64)),
        ("oom-skips", Owned::Int(c.oom_skips as i64)),
        ("errors", Owned::Int(c.errors as i64)),
        ("last-pass-ms", Owned::Int(c.last_pass_ms)),
        ("last-pass-us", Owned::Int(c.last_pass_us)),
        ("full-passes", Owned::Int(c.full_passes as i64)),
        ("scans-skipped", Owned::Int(c.scans_skipped as i64)),
        ("consumer-checks", Owned::Int(c.consumer_checks as i64)),
        ("stale-not-before", Owned::Int(rt.stale_not_before_ms)),
        (
            "cursor",
            Owned::Bytes(rt.cursor.clone().unwrap_or_else(|| b"0-0".to_vec())),
        ),
        ("status", Owned::Bytes(st.into_bytes())),
    ])))
}

/// `RECLAIM.POLICY HELP` -> the subcommands, one line each (the Redis convention for container
/// commands, as `XINFO HELP`).
fn policy_help(_ctx: &Context, _args: &[RedisString]) -> Handler {
    let lines: &[&str] = &[
        "RECLAIM.POLICY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "SET <key> <group> [MIN-IDLE <ms>] [MAX-DELIVERIES <n>] [DLQ <dlq-key>] [CLAIMANT <consumer>] [COUNT <n>] [INTERVAL <ms>]",
        "    Set (replace) the reclaim policy of a stream's consumer group.",
        "GET <key> <group>",
        "    Return the policy as field/value pairs, or nil.",
        "DEL <key> <group>",
        "    Delete the policy (1 if it existed, else 0).",
        "LIST",
        "    Return every policy of the selected database.",
        "HELP",
        "    Print this help.",
    ];
    Ok(Reply::Value(Owned::Array(
        lines.iter().map(|l| Owned::Status(l)).collect(),
    )))
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
entry!(c_policy_help, "RECLAIM.POLICY HELP", policy_help);
entry!(c_sweep, "RECLAIM.SWEEP", sweep_cmd);
entry!(c_stats, "RECLAIM.STATS", stats);

/// Registers every command with its flags, arity and key specs. `false` if Redis refused one.
pub fn register(ctx: &Context) -> bool {
    let p = Some("reclaim.policy");
    ffi::register(
        ctx,
        None,
        "reclaim.policy",
        None,
        "",
        0,
        -2,
        "Manage reclaim policies",
        "O(1)",
        &[],
    ) && ffi::register(
        ctx,
        p,
        "set",
        Some(c_policy_set),
        "write deny-oom getkeys-api",
        2,
        -4,
        "Set the reclaim policy of a stream's consumer group",
        "O(log N) with N policies of the stream",
        &[
            Spec::Index(2, KEY_RW | UPDATE),
            Spec::Callback(KEY_RW | INSERT),
        ],
    ) && ffi::register(
        ctx,
        p,
        "get",
        Some(c_policy_get),
        "readonly",
        2,
        4,
        "Get a reclaim policy",
        "O(1)",
        &[Spec::Index(2, KEY_RO | ACCESS)],
    ) && ffi::register(
        ctx,
        p,
        "del",
        Some(c_policy_del),
        "write",
        2,
        4,
        "Delete a reclaim policy",
        "O(1)",
        &[Spec::Index(2, KEY_RW | DELETE)],
    ) && ffi::register(
        ctx,
        p,
        "list",
        Some(c_policy_list),
        "readonly",
        0,
        2,
        "List the reclaim policies of the selected database",
        "O(P) with P policies",
        &[],
    ) && ffi::register(
        ctx,
        p,
        "help",
        Some(c_policy_help),
        "readonly fast",
        0,
        2,
        "Show helpful text about the different subcommands",
        "O(1)",
        &[],
    ) && ffi::register(
        ctx,
        None,
        "reclaim.sweep",
        Some(c_sweep),
        "write deny-oom",
        1,
        -3,
        "Run one reclaim pass over a consumer group's PEL now",
        "O(N) with N pending entries of the group (or LIMIT)",
        &[Spec::Index(1, KEY_RW | UPDATE)],
    ) && ffi::register(
        ctx,
        None,
        "reclaim.stats",
        Some(c_stats),
        "readonly",
        1,
        3,
        "Counters and status of a reclaim policy",
        "O(1)",
        &[Spec::Index(1, KEY_RO | ACCESS)],
    )
}
