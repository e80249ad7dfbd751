//! `RECLAIM.REDRIVE dlq [SOURCE key group] [IDS n id [id ...]] [COUNT n] [RATE n] [CANARY k WINDOW ms]`, `STATUS dlq`
//! and `CANCEL dlq`: start a task that moves a DLQ's entries back to the consumer groups they
//! failed in, show it, cancel it. The task ([`crate::model::redrive::Task`]) lives in the keyspace
//! ([`crate::state::redrive`]); its steps run from the timer ([`crate::engine::redrive`]).

use redis_module::{Context, ContextFlags, KeyType, RedisString};

use crate::commands::common::{KEY_RW, UPDATE};
use crate::engine::redrive::dlq_end;
use crate::ffi;
use crate::ffi::acl::Caller;
use crate::ffi::command::{CmdResult, CommandSpec, Reply, Spec};
use crate::model::access;
use crate::model::args::{block, int, key, one_of, string, word, Arg, V020};
use crate::model::clock::epoch_ms;
use crate::model::error::{self, ReclaimError};
use crate::model::keys;
use crate::model::redrive::{parse_options, request, source_at, Options, Phase, Request, Task};
use crate::state::redrive::{
    self as tasks, del, del_moved, key_type, moved_key_usable, read_task, write_task,
};
use crate::state::{registry, store};

/// Three forms: start a task, `STATUS`, `CANCEL` (one key spec, the getkeys callback's, covers
/// the DLQ and `SOURCE`'s key).
const ARGS: &[Arg] = &[one_of(
    "form",
    &[
        block(
            "start",
            &[
                key("dlq", 0),
                block("source", &[key("key", 0), string("group")])
                    .token("SOURCE")
                    .optional(),
                block("ids", &[int("n"), string("id").multiple()])
                    .token("IDS")
                    .optional(),
                int("n").token("COUNT").optional(),
                int("entries-per-s").token("RATE").optional(),
                block("canary", &[int("k"), int("ms").token("WINDOW")])
                    .token("CANARY")
                    .optional(),
            ],
        ),
        block("status", &[word("STATUS"), key("dlq", 0)]),
        block("cancel", &[word("CANCEL"), key("dlq", 0)]),
    ],
)];

/// The command's table entry: one key spec, its getkeys callback's.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        parent: None,
        name: "reclaim.redrive",
        func: entry!("RECLAIM.REDRIVE", redrive_cmd),
        flags: "may-replicate getkeys-api",
        acl: "write slow",
        first_key: 1,
        arity: -2,
        summary: "Move a DLQ's entries back to the consumer groups they failed in, as a task (STATUS, CANCEL)",
        complexity: "O(1) to start, STATUS or CANCEL; the task moves each entry in O(log N)",
        since: V020,
        args: ARGS,
        keys: &[Spec::Callback(KEY_RW | UPDATE)],
    },
];

/// The known policies of the selected database (database `db`) whose DLQ is `dlq`: (stream,
/// group, claimant) each, the consumer groups a task without `SOURCE` may write. One policy-key
/// read per policy the registry knows in `db`, nothing else.
fn dlq_policies(ctx: &Context, db: i32, dlq: &[u8]) -> Vec<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    registry::ids_in_db(db)
        .into_iter()
        .filter_map(|id| {
            let p = store::get(ctx, &id.stream, &id.group)?;
            (p.dlq.as_deref() == Some(dlq)).then_some((id.stream, id.group, p.claimant))
        })
        .collect()
}

/// Whether the caller may start a task on `dlq` with options `o`: what the task does to the DLQ
/// ([`access::redrive_dlq`]) and to the groups its entries go back to ([`access::redrive_back`]:
/// `SOURCE`'s, or without it those of every policy whose DLQ is this one, [`dlq_policies`]).
fn check_start(ctx: &Context, dlq: &[u8], o: &Options) -> Result<(), ReclaimError> {
    let caller = Caller::of(ctx);
    caller.check(ctx, &access::redrive_dlq(dlq))?;
    match &o.source {
        Some((sk, sg)) => {
            let claimant = store::get(ctx, sk, sg)
                .map(|p| p.claimant)
                .unwrap_or_default();
            let back = access::redrive_back(sk, sg, &claimant, None).on(error::KEY_SOURCE);
            caller.check(ctx, &[back])
        }
        None => {
            let policies = dlq_policies(ctx, ffi::selected_db(ctx), dlq);
            let backs: Vec<access::As> = policies
                .iter()
                .map(|(s, g, c)| access::redrive_back(s, g, c, None).on(error::KEY_DLQ_STREAMS))
                .collect();
            caller.check(ctx, &backs)
        }
    }
}

/// Redis's error for a write on a replica, when this server is one.
fn refuse_on_replica(ctx: &Context) -> Result<(), ReclaimError> {
    if ctx.get_flags().contains(ContextFlags::MASTER) {
        Ok(())
    } else {
        Err(error::READONLY.into())
    }
}

/// `RECLAIM.REDRIVE dlq [SOURCE key group] [IDS n id [id ...]] [COUNT n] [RATE n] [CANARY k WINDOW ms]` -> the new
/// task's id (integer). Errors, in this order: the options' ([`parse_options`]); the DLQ or the
/// SOURCE key in the module's own namespace ([`keys::is_module_key`]); the SOURCE key equal to
/// the DLQ; READONLY on a replica; NOPERM when the caller may not do what the task does
/// ([`check_start`]: to the DLQ, and to the SOURCE key or, without SOURCE, to the stream of every
/// policy whose DLQ is this DLQ); no such
/// DLQ; WRONGTYPE (the DLQ is not a stream); the DLQ is the stream of a policy (a work stream);
/// no policy for SOURCE's key and group; the task key taken; a task running; the moved set's key
/// taken. Writes the task (`DEL` of the old task and moved set, `HSET`) through `!`; the moves
/// run from the timer.
fn start(ctx: &Context, dlq: &[u8], opts: &[&[u8]]) -> CmdResult {
    let o = parse_options(opts)?;
    if keys::is_module_key(dlq) {
        return Err(error::DLQ_IS_MODULE_KEY.into());
    }
    if let Some((sk, _)) = &o.source {
        if keys::is_module_key(sk) {
            return Err(error::SOURCE_IS_MODULE_KEY.into());
        }
        if sk.as_slice() == dlq {
            return Err(error::REDRIVE_DLQ_IS_SOURCE.into());
        }
    }
    refuse_on_replica(ctx)?;
    check_start(ctx, dlq, &o)?;
    match key_type(ctx, dlq) {
        KeyType::Stream => {}
        KeyType::Empty => return Err(error::REDRIVE_NO_DLQ.into()),
        _ => return Err(error::WRONGTYPE_DLQ.into()),
    }
    if store::has_policies(ctx, dlq) {
        return Err(error::REDRIVE_DLQ_IS_WORK_STREAM.into());
    }
    if let Some((sk, sg)) = &o.source {
        if store::get(ctx, sk, sg).is_none() {
            return Err(error::NO_POLICY.into());
        }
    }
    let key = keys::redrive_key(dlq);
    let previous = read_task(ctx, &key)?;
    if previous.as_ref().is_some_and(|t| t.phase.is_live()) {
        return Err(error::REDRIVE_RUNNING.into());
    }
    let moved_key = keys::redrive_moved_key(dlq);
    if !moved_key_usable(ctx, &moved_key) {
        return Err(error::REDRIVE_MOVED_KEY_TAKEN.into());
    }
    let (end_id, dlq_len) = dlq_end(ctx, dlq);
    let total = o.task_total(dlq_len);
    let t = Task {
        id: previous.map_or(0, |p| p.id) + 1,
        phase: Phase::Running,
        opts: o,
        cursor: b"0-0".to_vec(),
        checked: end_id.clone(),
        end_id,
        total,
        started_ms: epoch_ms() as u64,
        user: ffi::acl::current_user_name(ctx),
        ..Task::default()
    };
    del(ctx, &key);
    del_moved(ctx, &moved_key);
    write_task(ctx, &key, &t);
    tasks::note(ffi::selected_db(ctx), dlq);
    Ok(Reply::Int(t.id as i64))
}

/// `RECLAIM.REDRIVE STATUS dlq` -> nil without a task, else a map: `id`, `state` (`running`,
/// `canary`, `done`, `canceled`, `canary-failed`, `denied`), `source` (nil or `[key, group]`),
/// `count`, `rate`, `canary`, `window` (0 = not given), `moved`, `skipped`, `failed-again`,
/// `left`, `examined`, `total`, `end-id`, `cursor`, `started-ms`, `canary-until-ms`, `ended-ms`,
/// `user` (the ACL user who started it; nil for a task from before the module stored it), `ids`
/// (how many IDs `IDS` gave; 0: all entries).
/// Errors: the task key taken.
fn status(ctx: &Context, dlq: &[u8]) -> CmdResult {
    let Some(t) = read_task(ctx, &keys::redrive_key(dlq))? else {
        return Ok(Reply::Null);
    };
    if t.phase.is_live() && ctx.get_flags().contains(ContextFlags::MASTER) {
        tasks::note(ffi::selected_db(ctx), dlq);
    }
    let i = |v: u64| Reply::Int(v.min(i64::MAX as u64) as i64);
    let source = match &t.opts.source {
        Some((k, g)) => Reply::Array(vec![Reply::Bytes(k.clone()), Reply::Bytes(g.clone())]),
        None => Reply::Null,
    };
    Ok(Reply::Map(vec![
        ("id", i(t.id)),
        ("state", Reply::Bytes(t.phase.name().as_bytes().to_vec())),
        ("source", source),
        ("count", i(t.opts.count)),
        ("rate", i(t.opts.rate)),
        ("canary", i(t.opts.canary)),
        ("window", i(t.opts.window_ms)),
        ("moved", i(t.moved)),
        ("skipped", i(t.skipped)),
        ("failed-again", i(t.failed_again)),
        ("left", i(t.left())),
        ("examined", i(t.examined)),
        ("total", i(t.total)),
        ("end-id", Reply::Bytes(t.end_id.clone())),
        ("cursor", Reply::Bytes(t.cursor.clone())),
        ("started-ms", i(t.started_ms)),
        ("canary-until-ms", i(t.canary_until_ms)),
        ("ended-ms", i(t.ended_ms)),
        ("user", t.user.clone().map_or(Reply::Null, Reply::Bytes)),
        ("ids", i(t.opts.ids.len() as u64)),
    ]))
}

/// `RECLAIM.REDRIVE CANCEL dlq` -> 1 when a running task was canceled (state `canceled`; the
/// entries not moved yet stay in the DLQ), 0 when none runs. Errors: READONLY on a replica, the
/// task key taken.
fn cancel(ctx: &Context, dlq: &[u8]) -> CmdResult {
    refuse_on_replica(ctx)?;
    let key = keys::redrive_key(dlq);
    let Some(mut t) = read_task(ctx, &key)? else {
        return Ok(Reply::Int(0));
    };
    if !t.phase.is_live() {
        return Ok(Reply::Int(0));
    }
    t.finish(Phase::Canceled, epoch_ms() as u64);
    write_task(ctx, &key, &t);
    del_moved(ctx, &keys::redrive_moved_key(dlq));
    tasks::forget(ffi::selected_db(ctx), dlq);
    Ok(Reply::Int(1))
}

/// The keys of `RECLAIM.REDRIVE` for a getkeys request: the DLQ (read-only for `STATUS`, written
/// otherwise) and the `SOURCE` key (written).
fn report_keys(ctx: &Context, argv: &[&[u8]]) {
    const RW: u32 =
        redis_module::raw::REDISMODULE_CMD_KEY_RW | redis_module::raw::REDISMODULE_CMD_KEY_UPDATE;
    const RO: u32 =
        redis_module::raw::REDISMODULE_CMD_KEY_RO | redis_module::raw::REDISMODULE_CMD_KEY_ACCESS;
    match request(argv) {
        Request::Status(_) => ffi::command::key_at(ctx, 2, RO),
        Request::Cancel(_) => ffi::command::key_at(ctx, 2, RW),
        Request::Start(..) => {
            ffi::command::key_at(ctx, 1, RW);
            if let Some(at) = source_at(argv.get(2..).unwrap_or(&[])) {
                ffi::command::key_at(ctx, 2 + at, RW);
            }
        }
    }
}

/// The handler of `RECLAIM.REDRIVE` (all three forms, see [`request`]).
pub fn redrive_cmd(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a: Vec<&[u8]> = args.iter().map(|s| s.as_slice()).collect();
    if ffi::command::is_keys_request(ctx) {
        report_keys(ctx, &a);
        return Ok(Reply::Done);
    }
    match request(&a) {
        Request::Start(dlq, opts) => start(ctx, dlq, opts),
        Request::Status(dlq) => status(ctx, dlq),
        Request::Cancel(dlq) => cancel(ctx, dlq),
    }
}
