//! What the module hears from the server: keyspace events (a policy key or a stream comes or
//! goes, a group appears or goes) and server events (SWAPDB, FLUSHDB, loads, syncs). Each hook is
//! thin: it decodes what Redis passes and calls [`crate::state::registry`] or
//! [`crate::state::store`]. `lib.rs` subscribes them.

use std::ffi::c_char;
use std::os::raw::{c_int, c_void};

use redis_module::{raw, Context, RedisString};

use crate::engine::guards;
use crate::engine::pending::{self, Query};
use crate::ffi::{self, bytes_of};
use crate::model::keys;
use crate::server::caller_db;
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
        let name = unsafe { bytes_of(key) };
        on_key_event(&context, ev, name);
        if matches!(ev, b"move_from" | b"move_to" | b"copy_to") {
            caller_db::keep(&context, ev, name);
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
    if ev == b"evicted" {
        crate::server::eviction::on_evicted(ctx, db, name);
    }
    crate::server::eviction::on_key_event(db, ev, name);
    let policy_stream = keys::stream_of_policy_key(name);
    match ev {
        b"del" | b"expired" | b"evicted" | b"rename_from" | b"move_from" => match policy_stream {
            Some(stream) => {
                crate::state::eviction::forget_policies(db, &stream, None);
                registry::forget_stream(db, &stream)
            }
            None => {
                registry::forget_tracking(db, name, None);
                crate::ffi::blocked::unblock_deleted(db, name);
            }
        },
        b"xgroup-destroy" => forget_destroyed_groups(ctx, db, name),
        b"xgroup-delconsumer" => forget_deleted_consumers(ctx, db, name),
        b"rename_to" | b"move_to" | b"copy_to" | b"restore" => match policy_stream {
            Some(stream) => adopt_policy_key(ctx, db, name, stream, ev),
            None => {
                warn_if_stray(ctx, db, name, ev);
                if !name.starts_with(keys::POLICY_KEY_PREFIX) {
                    registry::wake(db, name);
                }
            }
        },
        b"xgroup-create" | b"xgroup-setid"
            if policy_stream.is_none() && !name.starts_with(keys::POLICY_KEY_PREFIX) =>
        {
            registry::wake(db, name)
        }
        _ => {}
    }
}

/// A policy key arrived at (db, `name`) by `ev` (`rename_to`, `move_to`, `copy_to`, `restore`):
/// its value now belongs to `stream`, and its policies are registered, each with its fault where
/// it landed (a DLQ that is now the stream itself, ...: logged, see [`store::fault`]).
fn adopt_policy_key(ctx: &Context, db: i32, name: &[u8], stream: Vec<u8>, ev: &[u8]) {
    let k = RedisString::create_from_slice(ctx.ctx, name);
    let key = ctx.open_key_writable(&k);
    if let Ok(Some(set)) = key.get_value::<store::PolicySet>(&POLICY_TYPE) {
        set.stream = stream;
        for (g, p) in &set.groups {
            let fault = store::fault(&set.stream, p);
            if let Some(f) = &fault {
                let what = command_of(ev);
                crate::ffi::log_warning(&store::invalid_warning(what, db, &set.stream, g, f));
            }
            registry::register_held(db, &set.stream, g, p.state, fault);
        }
        registry::forget_read_facts(db, &set.stream);
    }
}

/// The command that fired a key's arrival event.
fn command_of(ev: &[u8]) -> &'static str {
    match ev {
        b"rename_to" => "RENAME",
        b"move_to" => "MOVE",
        b"copy_to" => "COPY",
        _ => "RESTORE",
    }
}

/// A key arrived at (db, `name`), a name that is no stream's policy key: when it holds a policy
/// value, that value is kept as it is and does nothing (the module reads a stream's own policy
/// key only); logged, so the operator knows why its policies stopped.
fn warn_if_stray(ctx: &Context, db: i32, name: &[u8], ev: &[u8]) {
    let k = RedisString::create_from_slice(ctx.ctx, name);
    let key = ctx.open_key(&k);
    if let Ok(Some(set)) = key.get_value::<store::PolicySet>(&POLICY_TYPE) {
        use crate::model::text::printable;
        crate::ffi::log_warning(&format!(
            "reclaim: {} put the policies of stream '{}' under key '{}' (db {db}), which is not that stream's policy key: kept as they are, they do nothing there (RENAME it back to {} or DEL it)",
            command_of(ev),
            printable(&set.stream),
            printable(name),
            printable(&keys::policy_key(&set.stream)),
        ));
    }
}

/// Consumers of stream (db, `stream`) were deleted (`XGROUP DELCONSUMER`; the event does not say
/// which): the tracked consumers with no pending entry left are forgotten, one
/// `XPENDING key group - + 1 consumer` each (at most `runtime::MAX_TRACKED` per policy).
fn forget_deleted_consumers(ctx: &Context, db: i32, stream: &[u8]) {
    let idle: Vec<(Vec<u8>, Vec<u8>)> = registry::tracked(db, stream)
        .into_iter()
        .filter(|(group, consumer)| {
            let q = Query::range(b"-", b"+", 1).of(Some(consumer));
            pending::none(ctx, stream, group, &q)
        })
        .collect();
    if !idle.is_empty() {
        registry::forget_idle_consumers(db, stream, &idle);
    }
}

/// A group of stream (db, `stream`) was destroyed (`XGROUP DESTROY`; the event does not say
/// which): the policies whose group is gone forget what they tracked; those of the stream's
/// other groups keep it (a touch they have not confirmed yet still counts). One O(1) `XPENDING`
/// per policy of the stream ([`guards::no_group`]).
fn forget_destroyed_groups(ctx: &Context, db: i32, stream: &[u8]) {
    for group in registry::groups_of(db, stream) {
        if guards::no_group(ctx, stream, &group) {
            registry::forget_tracking(db, stream, Some(&group));
        }
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
        crate::state::eviction::forget_db(-1);
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
        crate::state::eviction::forget_db(info.dbnum);
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
            crate::state::eviction::forget_db(-1);
            if let Some(load) = registry::take_load() {
                store::register_loaded(&Context::new(ctx), load);
            }
        }
        raw::REDISMODULE_SUBEVENT_REPL_ASYNC_LOAD_ABORTED => drop(registry::take_load()),
        _ => {}
    });
}
