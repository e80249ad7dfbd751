//! redis-reclaim: a Redis module (name `reclaim`) that reclaims stale Redis Streams consumer-group
//! entries inside redis-server and moves poison entries to a dead-letter stream atomically.
//!
//! This file only registers things: the policy data type, configs, commands, events, the INFO
//! section and the sweep timer. See docs/design.md for how the pieces fit.

#![allow(clippy::missing_safety_doc)]

pub mod commands;
pub mod config;
pub mod error;
pub mod ffi;
pub mod keys;
pub mod metrics;
pub mod planner;
pub mod policy;
pub mod registry;
pub mod store;
pub mod sweep;
pub mod timer;
pub mod watch;

use std::os::raw::{c_char, c_int, c_void};

use redis_module::configuration::{
    get_i64_default_config_value, register_i64_configuration, ConfigurationFlags,
};
use redis_module::{raw, Context, RedisString, Status};

use crate::store::POLICY_TYPE;

/// Every allocation of the module goes through Redis's allocator (`RM_Alloc`), so `INFO memory`
/// and `maxmemory` count it. Unit tests run without Redis and use the system allocator.
#[cfg(not(test))]
#[global_allocator]
static ALLOCATOR: redis_module::alloc::RedisAlloc = redis_module::alloc::RedisAlloc;

/// Keyspace events on policy keys that bring a policy to a new (db, key): RENAME, MOVE, COPY,
/// RESTORE; that take it away: DEL (also UNLINK), expiry, eviction, and the source side of RENAME
/// and MOVE; and on streams, the events that end a policy's wait (`xgroup-create`, ...). FLUSHDB
/// is `on_flush`. For any other event, a few byte compares.
unsafe extern "C" fn on_generic_event(
    ctx: *mut raw::RedisModuleCtx,
    _type: c_int,
    event: *const c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    ffi::guard("keyspace event", || {
        let ev = unsafe { std::ffi::CStr::from_ptr(event) }.to_bytes();
        on_key_event(ctx, ev, key);
        if matches!(ev, b"move_to" | b"copy_to") {
            timer::restore_caller_db(&Context::new(ctx));
        }
    });
    raw::REDISMODULE_OK as c_int
}

fn on_key_event(ctx: *mut raw::RedisModuleCtx, ev: &[u8], key: *mut raw::RedisModuleString) {
    {
        let gone = matches!(
            ev,
            b"del" | b"expired" | b"evicted" | b"rename_from" | b"move_from"
        );
        if !gone
            && !matches!(
                ev,
                b"rename_to"
                    | b"move_to"
                    | b"copy_to"
                    | b"restore"
                    | b"xgroup-create"
                    | b"xgroup-setid"
            )
        {
            return;
        }
        let mut len = 0usize;
        let p = unsafe { raw::RedisModule_StringPtrLen.unwrap()(key, &mut len) };
        let name = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) };
        let context = Context::new(ctx);
        if gone {
            // A policy key left this (db, name): its policies stop counting at once (INFO
            // reclaim_policies), not only when the sweeper next looks for them.
            if let Some(stream) = keys::stream_of_policy_key(name) {
                registry::forget_stream(ffi::selected_db(&context), &stream);
            }
            return;
        }
        if !name.starts_with(keys::POLICY_KEY_PREFIX) {
            // A stream (or its group) appeared: policies waiting for it start on the next tick.
            registry::wake(ffi::selected_db(&context), name);
            return;
        }
        // The policies belong to the stream the key is named after: after RENAME, MOVE, COPY or
        // RESTORE under another stream's policy key name, the value follows its new name.
        let Some(stream) = keys::stream_of_policy_key(name) else {
            return;
        };
        let k = RedisString::create_from_slice(ctx, name);
        let key = context.open_key_writable(&k);
        if let Ok(Some(set)) = key.get_value::<store::PolicySet>(&POLICY_TYPE) {
            set.stream = stream;
            let db = ffi::selected_db(&context);
            for g in set.groups.keys() {
                registry::register(db, &set.stream, g);
            }
        }
    }
}

/// SWAPDB moves policies between databases (server event `SwapDB`, Redis 6.0+).
unsafe extern "C" fn on_swapdb(
    _ctx: *mut raw::RedisModuleCtx,
    _e: raw::RedisModuleEvent,
    _sub: u64,
    data: *mut c_void,
) {
    ffi::guard("swapdb event", || {
        let info = unsafe { &*(data as *const raw::RedisModuleSwapDbInfo) };
        registry::swap_db(info.dbnum_first, info.dbnum_second);
    });
}

/// FLUSHDB / FLUSHALL (also the flush before a full sync): forget the policies of the flushed
/// database(s) (server event `FlushDB`, Redis 6.0+). Policies loaded afterwards register again.
unsafe extern "C" fn on_flush(
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
/// ends well, and dropped when it fails ([`registry::load_ended`]).
unsafe extern "C" fn on_loading(
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
        }
        raw::REDISMODULE_SUBEVENT_LOADING_FAILED => drop(registry::take_load()),
        _ => {}
    });
}

/// Diskless `swapdb` syncs on a replica (server event `ReplAsyncLoad`, Redis 7.0+): the sync loads
/// into temporary databases while the old ones keep serving; the policies it read replace the old
/// ones only when the server swaps the databases in (COMPLETED), and are dropped when it throws
/// them away (ABORTED).
unsafe extern "C" fn on_async_load(
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

unsafe extern "C" fn on_info(ctx: *mut raw::RedisModuleInfoCtx, _for_crash_report: c_int) {
    ffi::guard("INFO", || unsafe {
        // NULL: the module's default section, `# reclaim`, fields prefixed `reclaim_`.
        raw::RedisModule_InfoAddSection.unwrap()(ctx, std::ptr::null());
        for (name, v) in metrics::fields() {
            let Ok(n) = std::ffi::CString::new(name) else {
                continue;
            };
            raw::RedisModule_InfoAddFieldULongLong.unwrap()(ctx, n.as_ptr(), v);
        }
    });
}

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    if let Some(f) = ffi::missing_api() {
        ctx.log_warning(&format!(
            "reclaim: this server lacks {f}; redis-reclaim needs Redis 7.0 or later"
        ));
        return Status::Err;
    }
    // Loadmodule arguments: `name value` pairs of known configs, nothing else.
    let known = || -> String {
        let names: Vec<&str> = config::NUMERIC.iter().map(|c| c.name).collect();
        names.join(", ")
    };
    for pair in args.chunks(2) {
        let name = pair[0].as_slice();
        if !config::NUMERIC.iter().any(|c| c.name.as_bytes() == name) {
            ctx.log_warning(&format!(
                "reclaim: unknown module argument '{}' (known: {})",
                policy::printable(name),
                known()
            ));
            return Status::Err;
        }
        if pair.len() < 2 {
            ctx.log_warning(&format!(
                "reclaim: module argument '{}' needs a value",
                policy::printable(name)
            ));
            return Status::Err;
        }
    }
    // Loadmodule arguments become config defaults, which Redis does not range-check.
    for c in &config::NUMERIC {
        let v = c.var.load(std::sync::atomic::Ordering::Relaxed);
        if !(c.min..=c.max).contains(&v) {
            ctx.log_warning(&format!(
                "reclaim: {} {v} is out of range ({}..{})",
                c.name, c.min, c.max
            ));
            return Status::Err;
        }
    }
    if !commands::register(ctx) {
        return Status::Err;
    }
    // The policy type's rdb_load handles read errors, and loads into a temporary database (a
    // diskless `swapdb` sync) register nothing until the server swaps it in: without these,
    // Redis refuses diskless load on a replica whenever this module is loaded.
    ctx.set_module_options(
        redis_module::raw::ModuleOptions::HANDLE_IO_ERRORS
            | redis_module::raw::ModuleOptions::HANDLE_REPL_ASYNC_LOAD,
    );
    unsafe {
        if raw::RedisModule_SubscribeToKeyspaceEvents.unwrap()(
            ctx.ctx,
            raw::REDISMODULE_NOTIFY_GENERIC
                | raw::REDISMODULE_NOTIFY_STREAM
                | raw::REDISMODULE_NOTIFY_EXPIRED
                | raw::REDISMODULE_NOTIFY_EVICTED,
            Some(on_generic_event),
        ) != raw::REDISMODULE_OK as c_int
        {
            ctx.log_warning("reclaim: cannot subscribe to keyspace events");
            return Status::Err;
        }
        let swap = raw::RedisModuleEvent {
            id: raw::REDISMODULE_EVENT_SWAPDB,
            dataver: 1,
        };
        raw::RedisModule_SubscribeToServerEvent.unwrap()(ctx.ctx, swap, Some(on_swapdb));
        let flush = raw::RedisModuleEvent {
            id: raw::REDISMODULE_EVENT_FLUSHDB,
            dataver: 1,
        };
        raw::RedisModule_SubscribeToServerEvent.unwrap()(ctx.ctx, flush, Some(on_flush));
        for (id, cb) in [
            (
                raw::REDISMODULE_EVENT_LOADING,
                on_loading as unsafe extern "C" fn(_, _, _, _),
            ),
            (raw::REDISMODULE_EVENT_REPL_ASYNC_LOAD, on_async_load),
        ] {
            let ev = raw::RedisModuleEvent { id, dataver: 1 };
            raw::RedisModule_SubscribeToServerEvent.unwrap()(ctx.ctx, ev, Some(cb));
        }
        raw::RedisModule_RegisterInfoFunc.unwrap()(ctx.ctx, Some(on_info));
        let filter = raw::RedisModule_RegisterCommandFilter.unwrap()(
            ctx.ctx,
            Some(timer::on_client_command),
            raw::REDISMODULE_CMDFILTER_NOSELF as c_int,
        );
        if filter.is_null() {
            ctx.log_warning("reclaim: could not register the command filter");
            return Status::Err;
        }
        let cron = raw::RedisModuleEvent {
            id: raw::REDISMODULE_EVENT_CRON_LOOP,
            dataver: 1,
        };
        raw::RedisModule_SubscribeToServerEvent.unwrap()(ctx.ctx, cron, Some(timer::on_cron));
    }
    Status::Ok
}

/// The module's entry point, called by Redis on `loadmodule` / `MODULE LOAD`: initialises the
/// module API, creates the policy data type, registers the configs (`loadmodule` arguments are
/// their defaults) and loads their configured values (`RM_LoadConfigs`, Redis 7.0), then runs
/// [`init`]. It does what the `redis_module!` macro of the redis-module crate does for this
/// module, without the crate's defrag registration, which registers nothing here but logs
/// `Skip register defrag callbacks ...` as a warning at every start on servers before Redis 7.4.
///
/// # Safety
/// Called by Redis only, with its module context and arguments.
#[no_mangle]
#[allow(non_snake_case)]
pub unsafe extern "C" fn RedisModule_OnLoad(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    let err = Status::Err as c_int;
    let init_api = unsafe {
        raw::Export_RedisModule_Init(
            ctx,
            c"reclaim".as_ptr(),
            1,
            raw::REDISMODULE_APIVER_1 as c_int,
        )
    };
    if init_api == err {
        return err;
    }
    let context = Context::new(ctx);
    // The crate's context-free logging needs it.
    let _ = redis_module::MODULE_CONTEXT.set_context(&context);
    let args = redis_module::decode_args(ctx, argv, argc);
    if POLICY_TYPE.create_data_type(ctx).is_err() {
        return err;
    }
    for c in &config::NUMERIC {
        let default = match get_i64_default_config_value(&args, c.name, c.default) {
            Ok(v) => v,
            Err(e) => {
                context.log_warning(&format!(
                    "reclaim: module argument {} must be an integer ({e})",
                    c.name
                ));
                return err;
            }
        };
        register_i64_configuration(
            &context,
            c.name,
            c.var,
            default,
            c.min,
            c.max,
            ConfigurationFlags::DEFAULT,
            None,
        );
    }
    if let Some(load_configs) = unsafe { raw::RedisModule_LoadConfigs } {
        unsafe { load_configs(ctx) };
    }
    init(&context, &args) as c_int
}
