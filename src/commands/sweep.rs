//! `RECLAIM.SWEEP` (a pass over a group's PEL now, with the policy's rules) and `RECLAIM.STATS`
//! (a policy's counters and status).

use redis_module::{Context, RedisString};

use crate::commands::common::{policy_or_error, slices, ACCESS, KEY_GROUP, KEY_RO, KEY_RW, UPDATE};
use crate::engine::pending;
use crate::engine::sweep::{self, Target};
use crate::engine::{guards, settle};
use crate::ffi;
use crate::ffi::command::{CmdResult, CommandSpec, Reply, Spec};
use crate::model::access;
use crate::model::args::{int, key, string, Arg, V010};
use crate::model::clock::epoch_ms;
use crate::model::error::{self, ReclaimError};
use crate::model::metrics::Stat;
use crate::model::outcome::Stop;
use crate::model::planner::Tally;
use crate::model::policy;
use crate::state::config;
use crate::state::registry;
use crate::state::store;

const SWEEP_ARGS: &[Arg] = &[
    key("key", 0),
    string("group"),
    int("n").token("LIMIT").optional(),
];

/// `RECLAIM.SWEEP` and `RECLAIM.STATS`.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        parent: None,
        name: "reclaim.sweep",
        func: entry!("RECLAIM.SWEEP", sweep_cmd),
        flags: "write deny-oom",
        acl: "write slow",
        first_key: 1,
        arity: -3,
        summary: "Run one reclaim pass over a consumer group's PEL now",
        complexity: "O(N) with N pending entries of the group (or LIMIT)",
        since: V010,
        args: SWEEP_ARGS,
        keys: &[Spec::Index(1, KEY_RW | UPDATE)],
    },
    CommandSpec {
        parent: None,
        name: "reclaim.stats",
        func: entry!("RECLAIM.STATS", stats),
        flags: "readonly",
        acl: "read slow",
        first_key: 1,
        arity: 3,
        summary: "Counters and status of a reclaim policy",
        complexity: "O(1)",
        since: V010,
        args: KEY_GROUP,
        keys: &[Spec::Index(1, KEY_RO | ACCESS)],
    },
];

/// `RECLAIM.SWEEP key group [LIMIT n]` -> map `claimed`, `dead-lettered`, `deleted`,
/// `dlq-trimmed` (`DLQ-MAXLEN`/`DLQ-MAXAGE`), `tombstones` (`TOMBSTONES yes`): one complete
/// pass over the group's PEL now, from its head (or over at most n pending entries), with the
/// policy's rules; the timer's own cursor is not moved. O(PEL) for a complete pass; all its writes
/// reach replicas and the AOF as one MULTI/EXEC. Zeros while the stream or group does not exist.
/// Errors: no policy, LIMIT not a positive integer, NOPERM when the caller may not do what the
/// pass does ([`access::policy_work`], as `RECLAIM.POLICY SET` checks it), WRONGTYPE (stream or
/// DLQ).
pub(super) fn sweep_cmd(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a = slices(args);
    let (stream, group) = (a[1], a[2]);
    let limit = policy::parse_sweep_options(&a[3..])?;
    let (id, p) = policy_or_error(ctx, stream, group)?;
    ffi::acl::check_caller(ctx, &access::policy_work(stream, group, &p))?;
    if let Some(why) = store::fault(stream, &p) {
        return Err(ReclaimError::Invalid(Box::new(why)));
    }
    if let Some(e) = p.halted(config::enabled()) {
        return Err(e.into());
    }
    if let Some(d) = &p.dlq {
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
            rt.note_oom_skips(&out);
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

/// `RECLAIM.STATS key group` -> map `passes`, `claimed`, `dead-lettered`, `deleted`,
/// `oom-skips`, `errors`, `last-pass-ms` (ms since the epoch, 0 = none yet), `last-pass-us`
/// (duration of the last complete pass), `full-passes` (passes that paged every entry to check
/// delivery counts), `scans-skipped` (passes that only purged trimmed entries), `consumer-checks`
/// (consumers' own PELs paged after a command that could raise their counts), `redelivered`,
/// `storms`, `dlq-trimmed` (dead letters trimmed by `DLQ-MAXLEN`/`DLQ-MAXAGE`), `tombstones`
/// (DLQ records of entries deleted while pending), `evicted-keys` (its stream and DLQ evicted by
/// the server), `inbox`, `stale-not-before`
/// (ms since the epoch before which no pending entry can be stale, 0 = unknown), `cursor`
/// (`0-0` at the head of the PEL), `status`.
/// Counters are since the module was loaded on this server. Errors: NOPERM when the caller may
/// not read the group's PEL ([`access::read_pel`]), no policy.
pub(super) fn stats(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a = slices(args);
    ffi::acl::check_caller(ctx, &[access::read_pel(a[1], a[2])])?;
    let (id, p) = policy_or_error(ctx, a[1], a[2])?;
    crate::engine::touches::confirm(ctx, &id);
    let rt = registry::get(&id).unwrap_or_default();
    let st = guards::status(ctx, a[1], a[2], &p, (rt.problem().cloned(), rt.evicted()));
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
        n(Stat::EvictedKeys),
        n(Stat::ConsumersForgotten),
        ("inbox", Reply::Int(inbox)),
        ("stale-not-before", Reply::Int(rt.stale_not_before_ms())),
        (
            "cursor",
            Reply::Bytes(rt.cursor().unwrap_or(b"0-0").to_vec()),
        ),
        ("status", Reply::Bytes(st)),
    ]))
}
