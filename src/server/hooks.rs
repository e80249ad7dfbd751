//! What the module hears from the server, and what it tells `INFO`: keyspace events, server
//! events (SWAPDB, FLUSHDB, loads, syncs), the command filter, and the `INFO reclaim` section.
//! Each hook is thin: it decodes what Redis passes and calls [`crate::state::registry`] or
//! [`crate::state::store`]. `lib.rs` registers them.

use std::os::raw::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

use redis_module::{raw, CallReply, CallResult, Context, RedisString};

use crate::ffi::{self, bytes_of};
use crate::model::keys;
use crate::model::metrics;
use crate::model::watch;
use crate::server::scheduler;
use crate::state::registry;
use crate::state::store::{self, POLICY_TYPE};

/// Keyspace events (classes generic, stream, expired, evicted; see `on_key_event`). For an
/// event the module does not use, a few byte compares.
pub unsafe extern "C" fn on_keyspace_event(
    ctx: *mut raw::RedisModuleCtx,
    _type: c_int,
    event: *const c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    ffi::guard("keyspace event", || {
        let ev = unsafe { std::ffi::CStr::from_ptr(event) }.to_bytes();
        let context = Context::new(ctx);
        on_key_event(&context, ev, unsafe { bytes_of(key) });
        if matches!(ev, b"move_to" | b"copy_to") {
            restore_caller_db(&context);
        }
    });
    raw::REDISMODULE_OK as c_int
}

/// What a keyspace event on `name` (in the database selected in `ctx`) means to the registry:
/// - a policy key leaves (DEL, UNLINK, expiry, eviction, the source side of RENAME and MOVE): its
///   policies are forgotten at once;
/// - a policy key arrives (RENAME, MOVE, COPY, RESTORE): its policies are registered, and belong
///   to the stream the key is named after (the value follows its new name);
/// - a stream or its group appears (`xgroup-create`, `xgroup-setid`, a stream arriving by RENAME,
///   MOVE, COPY, RESTORE): policies waiting for it start on the next tick;
/// - a stream, its group or consumers go (DEL, RENAME, `xgroup-destroy`, `xgroup-delconsumer`):
///   what its policies tracked about them is released.
fn on_key_event(ctx: &Context, ev: &[u8], name: &[u8]) {
    let db = ffi::selected_db(ctx);
    let policy_stream = keys::stream_of_policy_key(name);
    match ev {
        b"del" | b"expired" | b"evicted" | b"rename_from" | b"move_from" => match policy_stream {
            Some(stream) => registry::forget_stream(db, &stream),
            None => {
                registry::forget_tracking(db, name);
                crate::ffi::blocked::unblock_deleted(db, name);
            }
        },
        b"xgroup-destroy" => registry::forget_tracking(db, name),
        b"xgroup-delconsumer" => forget_deleted_consumers(ctx, db, name),
        b"rename_to" | b"move_to" | b"copy_to" | b"restore" | b"xgroup-create"
        | b"xgroup-setid" => match policy_stream {
            Some(stream) => adopt_policy_key(ctx, db, name, stream),
            None if !name.starts_with(keys::POLICY_KEY_PREFIX) => registry::wake(db, name),
            None => {}
        },
        _ => {}
    }
}

/// A policy key arrived at (db, `name`): its value now belongs to `stream`, and its policies are
/// registered.
fn adopt_policy_key(ctx: &Context, db: i32, name: &[u8], stream: Vec<u8>) {
    let k = RedisString::create_from_slice(ctx.ctx, name);
    let key = ctx.open_key_writable(&k);
    if let Ok(Some(set)) = key.get_value::<store::PolicySet>(&POLICY_TYPE) {
        set.stream = stream;
        for g in set.groups.keys() {
            registry::register(db, &set.stream, g);
        }
    }
}

/// Consumers of stream (db, `stream`) were deleted (`XGROUP DELCONSUMER`; the event does not say
/// which): the tracked consumers with no pending entry left are forgotten, one
/// `XPENDING key group - + 1 consumer` each (at most `runtime::MAX_TRACKED` per policy).
fn forget_deleted_consumers(ctx: &Context, db: i32, stream: &[u8]) {
    let opts = ffi::read_opts();
    let idle: Vec<(Vec<u8>, Vec<u8>)> = registry::tracked(db, stream)
        .into_iter()
        .filter(|(group, consumer)| {
            let args: [&[u8]; 6] = [stream, group, b"-", b"+", b"1", consumer];
            let r: CallResult = ctx.call_ext("XPENDING", &opts, &args[..]);
            matches!(r, Ok(CallReply::Array(a)) if a.len() == 0)
        })
        .collect();
    if !idle.is_empty() {
        registry::forget_idle_consumers(db, stream, &idle);
    }
}

/// SWAPDB moves policies between databases (server event `SwapDB`, Redis 6.0+).
pub unsafe extern "C" fn on_swapdb(
    _ctx: *mut raw::RedisModuleCtx,
    _e: raw::RedisModuleEvent,
    _sub: u64,
    data: *mut c_void,
) {
    ffi::guard("swapdb event", || {
        let info = unsafe { &*(data as *const raw::RedisModuleSwapDbInfo) };
        registry::swap_db(info.dbnum_first, info.dbnum_second);
        crate::state::redrive::rediscover();
    });
}

/// FLUSHDB / FLUSHALL (also the flush before a full sync): forget the policies of the flushed
/// database(s) (server event `FlushDB`, Redis 6.0+). Policies loaded afterwards register again.
pub unsafe extern "C" fn on_flush(
    _ctx: *mut raw::RedisModuleCtx,
    _e: raw::RedisModuleEvent,
    sub: u64,
    data: *mut c_void,
) {
    ffi::guard("flushdb event", || {
        if sub != raw::REDISMODULE_SUBEVENT_FLUSHDB_START {
            return;
        }
        let info = unsafe { &*(data as *const raw::RedisModuleFlushInfo) };
        registry::forget_db(info.dbnum);
    });
}

/// Loads (server event `Loading`, Redis 6.0+): policies read during a load are registered when it
/// ends well, and dropped when it fails ([`registry::take_load`]).
pub unsafe extern "C" fn on_loading(
    ctx: *mut raw::RedisModuleCtx,
    _e: raw::RedisModuleEvent,
    sub: u64,
    _data: *mut c_void,
) {
    ffi::guard("loading event", || match sub {
        raw::REDISMODULE_SUBEVENT_LOADING_RDB_START
        | raw::REDISMODULE_SUBEVENT_LOADING_AOF_START
        | raw::REDISMODULE_SUBEVENT_LOADING_REPL_START => registry::load_started(false),
        raw::REDISMODULE_SUBEVENT_LOADING_ENDED => {
            if let Some(load) = registry::take_load() {
                store::register_loaded(&Context::new(ctx), load);
            }
            crate::state::redrive::rediscover();
        }
        raw::REDISMODULE_SUBEVENT_LOADING_FAILED => drop(registry::take_load()),
        _ => {}
    });
}

/// Diskless `swapdb` syncs on a replica (server event `ReplAsyncLoad`, Redis 7.0+): the sync loads
/// into temporary databases while the old ones keep serving; the policies it read replace the old
/// ones only when the server swaps the databases in (COMPLETED), and are dropped when it throws
/// them away (ABORTED).
pub unsafe extern "C" fn on_async_load(
    ctx: *mut raw::RedisModuleCtx,
    _e: raw::RedisModuleEvent,
    sub: u64,
    _data: *mut c_void,
) {
    ffi::guard("async-load event", || match sub {
        raw::REDISMODULE_SUBEVENT_REPL_ASYNC_LOAD_STARTED => registry::load_started(true),
        raw::REDISMODULE_SUBEVENT_REPL_ASYNC_LOAD_COMPLETED => {
            // The old databases, and every policy in them, are gone.
            registry::forget_db(-1);
            if let Some(load) = registry::take_load() {
                store::register_loaded(&Context::new(ctx), load);
            }
        }
        raw::REDISMODULE_SUBEVENT_REPL_ASYNC_LOAD_ABORTED => drop(registry::take_load()),
        _ => {}
    });
}

/// `INFO reclaim`: section `reclaim`, the module's state now (policies, tracked consumers,
/// memory), then the counters of [`metrics::fields`]; and section `reclaim_policies`, one line
/// per policy ([`PolicyRow`]), left out of crash reports.
pub unsafe extern "C" fn on_info(ctx: *mut raw::RedisModuleInfoCtx, for_crash_report: c_int) {
    ffi::guard("INFO", || unsafe {
        let totals = registry::totals();
        let state = [
            ("enabled", crate::state::config::enabled() as u64),
            ("policies", totals.policies),
            ("inbox", totals.inbox),
            ("tracked_consumers", totals.tracked_consumers),
            ("used_memory", crate::ffi::alloc::used_bytes()),
            (
                "blocked_readers",
                crate::ffi::blocked::blocked_clients() as u64,
            ),
        ];
        // NULL: the module's default section, `# reclaim`, fields prefixed `reclaim_`.
        raw::RedisModule_InfoAddSection.unwrap()(ctx, std::ptr::null());
        for (name, v) in metrics::fields(&state) {
            let Ok(n) = std::ffi::CString::new(name) else {
                continue;
            };
            raw::RedisModule_InfoAddFieldULongLong.unwrap()(ctx, n.as_ptr(), v);
        }
        if for_crash_report != 0 {
            return;
        }
        if raw::RedisModule_InfoAddSection.unwrap()(ctx, c"policies".as_ptr())
            != raw::REDISMODULE_OK as c_int
        {
            return; // INFO asked for another section
        }
        let mut name: Vec<u8> = Vec::with_capacity(32);
        policy_lines(|i, line| {
            name.clear();
            name.extend_from_slice(b"policy_");
            metrics::push_u64(&mut name, i as u64);
            name.push(0);
            raw::RedisModule_InfoAddFieldCString.unwrap()(
                ctx,
                name.as_ptr().cast(),
                line.as_ptr().cast(),
            );
        });
    });
}

/// Hands every policy's line (its label, then its [`PolicyRow`]), NUL-terminated, with its
/// position, to `emit`, ordered by database, stream, group. First a walk in the table's own order
/// copies each row's figures out of its runtime ([`registry::walk`]); then each line is written
/// and handed over at once, while it is in the cache (`RM_InfoAddFieldCString` only appends to
/// the reply: it calls nothing of the module, so it may run with the registry locked). With
/// 10,000 policies, waiting for memory was most of the cost: the walk asks for runtimes ahead,
/// and the labels are kept in key order ([`registry::with_sorted`]).
fn policy_lines(mut emit: impl FnMut(usize, &[u8])) {
    use crate::ffi::alloc::{prefetch, PREFETCH_AHEAD};
    let enabled = crate::state::config::enabled();
    registry::with_sorted(|all, sorted| {
        let mut rows: Vec<PolicyRow> = Vec::with_capacity(all.len());
        registry::walk(all, |_, rt| rows.push(PolicyRow::of(rt, enabled)));
        let mut line: Vec<u8> = Vec::with_capacity(512);
        for (n, (i, label)) in sorted.iter().enumerate() {
            if let Some(ahead) = sorted
                .get(n + PREFETCH_AHEAD)
                .and_then(|(i, _)| rows.get(*i as usize))
            {
                prefetch(std::ptr::from_ref(ahead).cast());
            }
            let Some(row) = rows.get(*i as usize) else {
                continue;
            };
            line.clear();
            line.extend_from_slice(label);
            row.write(&mut line);
            line.push(0);
            emit(n, &line);
        }
    })
}

/// One policy's line in `INFO reclaim` (section `reclaim_policies`), after
/// `reclaim_policy_<n>:` and its label ([`registry::PolicyId::write_label`]), in the keyspace
/// style: `db=0,stream=...,group=...,pending=...`. Only what passes already learnt: no call into
/// Redis. The PEL figures (`pending`, `inbox`, `consumers`, `max_consumer_pending`,
/// `oldest_pending_ms`) are those of the end of the last complete pass (`last_pass_ms`); the
/// counters are since the module was loaded; `status` is [`crate::state::runtime::Runtime::status`].
pub struct PolicyRow {
    summary: crate::model::outcome::Summary,
    /// claimed, dead_lettered, deleted, redelivered, errors, passes.
    counts: [u64; 6],
    last_pass_ms: i64,
    status: &'static str,
}

impl PolicyRow {
    /// The row of a policy now (`enabled`: `reclaim.enabled`).
    pub fn of(rt: &crate::state::runtime::Runtime, enabled: bool) -> Self {
        use crate::model::metrics::Stat::*;
        let c = rt.counters();
        PolicyRow {
            summary: rt.summary().clone(),
            counts: [Claimed, DeadLettered, Deleted, Redelivered, Errors, Passes].map(|s| c.get(s)),
            last_pass_ms: c.last_pass_ms,
            status: rt.status(enabled),
        }
    }

    /// Appends the row to `out`, after the label (`,pending=...`; ASCII, no NUL byte), without
    /// the formatting machinery: `INFO reclaim` writes one per policy.
    pub fn write(&self, out: &mut Vec<u8>) {
        let s = &self.summary;
        let [claimed, dead_lettered, deleted, redelivered, errors, passes] = self.counts;
        let num = |out: &mut Vec<u8>, field: &[u8], n: u64| {
            out.extend_from_slice(field);
            metrics::push_u64(out, n);
        };
        num(out, b",pending=", s.pending);
        num(out, b",inbox=", s.inbox);
        num(out, b",claimed=", claimed);
        num(out, b",dead_lettered=", dead_lettered);
        num(out, b",deleted=", deleted);
        num(out, b",oldest_pending_ms=", s.oldest_pending_ms());
        out.extend_from_slice(b",status=");
        out.extend_from_slice(self.status.as_bytes());
        num(out, b",consumers=", s.consumers);
        num(out, b",max_consumer_pending=", s.max_consumer_pending);
        num(out, b",redelivered=", redelivered);
        num(out, b",errors=", errors);
        num(out, b",passes=", passes);
        num(out, b",last_pass_ms=", self.last_pass_ms.max(0) as u64);
    }
}

/// Command filter (Redis `RM_RegisterCommandFilter`, with `NOSELF`; it sees every command of
/// clients, Lua scripts, functions and other modules, not the module's own): counts them, so a
/// drain knows whether it shares the server, and notes whose delivery counts or idle times a
/// command may change ([`crate::model::watch`], [`registry::touch`]). For any other command it costs
/// an atomic increment, one argument read and a length compare.
pub unsafe extern "C" fn on_client_command(f: *mut raw::RedisModuleCommandFilterCtx) {
    scheduler::client_command();
    ffi::guard("command filter", || {
        let argc = raw::RedisModule_CommandFilterArgsCount.unwrap()(f).max(0);
        let arg = |i: c_int| -> &[u8] {
            let s = raw::RedisModule_CommandFilterArgGet.unwrap()(f, i);
            if s.is_null() {
                &[]
            } else {
                bytes_of(s)
            }
        };
        if argc == 0 {
            return;
        }
        let name = arg(0);
        if watch::names_another_db(name) {
            remember_caller_db(f);
            return;
        }
        if watch::is_exec(name) {
            registry::touch_on_exec();
            return;
        }
        if !watch::may_touch(name) {
            return;
        }
        let argv: Vec<&[u8]> = (0..argc).map(arg).collect();
        for t in watch::touches(&argv) {
            registry::touch(t.stream, t.group, t.consumer, t.sets_idle);
        }
    });
}

/// The database (+ 1; 0 = none) of the client running the current `MOVE` or `COPY`, for
/// [`restore_caller_db`].
static CALLER_DB: AtomicU64 = AtomicU64::new(0);

/// Notes the caller's database before a `MOVE` or `COPY` runs (Redis 7.2+ / Valkey
/// `RM_CommandFilterGetClientId` and `RM_GetClientInfoById`; nothing on 7.0, which does not need
/// it).
unsafe fn remember_caller_db(f: *mut raw::RedisModuleCommandFilterCtx) {
    CALLER_DB.store(0, Ordering::Relaxed);
    let (Some(get_id), Some(get_info)) = (
        raw::RedisModule_CommandFilterGetClientId,
        raw::RedisModule_GetClientInfoById,
    ) else {
        return;
    };
    let id = get_id(f);
    let mut info: raw::RedisModuleClientInfo = std::mem::zeroed();
    info.version = 1;
    if get_info((&mut info as *mut raw::RedisModuleClientInfo).cast(), id)
        == raw::REDISMODULE_OK as c_int
    {
        CALLER_DB.store(info.db as u64 + 1, Ordering::Relaxed);
    }
}

/// Called at the end of the `move_to` and `copy_to` keyspace events: selects the caller's database
/// again. Valkey 8.1 runs module keyspace callbacks on the client that ran the command and selects
/// the event's database on it without restoring it (valkey-io/valkey#1819, fixed by #4024), so
/// after `MOVE key 1` or `COPY a b DB 1` that client was left in database 1 whenever a module
/// subscribed to generic events. On Redis the callback's client is a temporary one, and this
/// changes nothing.
fn restore_caller_db(ctx: &Context) {
    let db = CALLER_DB.swap(0, Ordering::Relaxed);
    if db > 0 {
        ffi::select_db(ctx, (db - 1) as i32);
    }
}
