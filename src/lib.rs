//! redis-reclaim: a Redis module (name `reclaim`) that reclaims stale Redis Streams consumer-group
//! entries inside redis-server and moves poison entries to a dead-letter stream atomically.
//!
//! This file only registers things: the policy data type, configs, commands, events, the INFO
//! section and the sweep timer. docs/design.md opens with a map of the modules.

#![allow(clippy::missing_safety_doc)]

pub mod commands;
pub mod engine;
pub mod ffi;
/// The pure core, its own crate (core/, `reclaim-core`): no Redis call, no `redis_module` import.
pub use reclaim_core as model;
pub mod server;
pub mod state;

use std::os::raw::c_int;

use redis_module::configuration::{
    get_bool_default_config_value, get_i64_default_config_value, register_bool_configuration,
    register_i64_configuration, ConfigurationFlags,
};
use redis_module::{raw, Context, RedisString, Status};

use crate::state::store::POLICY_TYPE;

/// Every allocation of the module goes through Redis's allocator (`RM_Alloc`), so `INFO memory`
/// and `maxmemory` count it, and is counted for `INFO reclaim` ([`ffi::alloc`]). Unit tests run without
/// Redis, with the system allocator (see `alloc`).
#[cfg(not(test))]
#[global_allocator]
static ALLOCATOR: ffi::alloc::CountingAlloc = ffi::alloc::CountingAlloc;

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    if let Some(f) = ffi::missing_api() {
        crate::ffi::warn(
            ctx,
            &format!("reclaim: this server lacks {f}; redis-reclaim needs Redis 7.0 or later"),
        );
        return Status::Err;
    }
    // Loadmodule arguments: `name value` pairs of known configs, nothing else.
    let known = || -> String {
        let names: Vec<&str> = state::config::names().collect();
        names.join(", ")
    };
    for pair in args.chunks(2) {
        let name = pair[0].as_slice();
        if !state::config::names().any(|c| c.as_bytes() == name) {
            crate::ffi::warn(
                ctx,
                &format!(
                    "reclaim: unknown module argument '{}' (known: {})",
                    crate::model::text::printable(name),
                    known()
                ),
            );
            return Status::Err;
        }
        if pair.len() < 2 {
            crate::ffi::warn(
                ctx,
                &format!(
                    "reclaim: module argument '{}' needs a value",
                    crate::model::text::printable(name)
                ),
            );
            return Status::Err;
        }
    }
    for c in &state::config::BOOLEAN {
        let v = args
            .chunks(2)
            .find(|p| p[0].as_slice() == c.name.as_bytes())
            .and_then(|p| p.get(1));
        if v.is_some_and(|v| v.as_slice() != b"yes" && v.as_slice() != b"no") {
            crate::ffi::warn(
                ctx,
                &format!("reclaim: module argument {} must be yes or no", c.name),
            );
            return Status::Err;
        }
    }
    // Loadmodule arguments become config defaults, which Redis does not range-check.
    for c in &state::config::NUMERIC {
        let v = c.var.load(std::sync::atomic::Ordering::Relaxed);
        if !(c.min..=c.max).contains(&v) {
            crate::ffi::warn(
                ctx,
                &format!(
                    "reclaim: {} {v} is out of range ({}..{})",
                    c.name, c.min, c.max
                ),
            );
            return Status::Err;
        }
    }
    ffi::note_cluster_mode(ctx);
    if !commands::register(ctx) {
        return Status::Err;
    }
    // The policy type's rdb_load handles read errors, and loads into a temporary database (a
    // diskless `swapdb` sync) register nothing until the server swaps it in: without these,
    // Redis refuses diskless load on a replica whenever this module is loaded.
    ctx.set_module_options(
        raw::ModuleOptions::HANDLE_IO_ERRORS | raw::ModuleOptions::HANDLE_REPL_ASYNC_LOAD,
    );
    if !subscribe(ctx) {
        return Status::Err;
    }
    Status::Ok
}

/// Subscribes the hooks ([`server::events`], [`server::info`], [`server::filter`],
/// [`server::scheduler::on_cron`]): keyspace events, server events, the
/// INFO section and the command filter. `false` (after logging) when Redis refuses one.
fn subscribe(ctx: &Context) -> bool {
    let server_events: [(u64, raw::RedisModuleEventCallback); 6] = [
        (
            raw::REDISMODULE_EVENT_SWAPDB,
            Some(server::events::on_swapdb),
        ),
        (
            raw::REDISMODULE_EVENT_FLUSHDB,
            Some(server::events::on_flush),
        ),
        (
            raw::REDISMODULE_EVENT_LOADING,
            Some(server::events::on_loading),
        ),
        (
            raw::REDISMODULE_EVENT_REPL_ASYNC_LOAD,
            Some(server::events::on_async_load),
        ),
        (
            raw::REDISMODULE_EVENT_CONFIG,
            Some(server::eviction::on_config),
        ),
        (
            raw::REDISMODULE_EVENT_CRON_LOOP,
            Some(server::scheduler::on_cron),
        ),
    ];
    unsafe {
        let keyspace = raw::REDISMODULE_NOTIFY_GENERIC
            | raw::REDISMODULE_NOTIFY_STREAM
            | raw::REDISMODULE_NOTIFY_EXPIRED
            | raw::REDISMODULE_NOTIFY_EVICTED;
        let ok = raw::REDISMODULE_OK as c_int;
        if raw::RedisModule_SubscribeToKeyspaceEvents.unwrap()(
            ctx.ctx,
            keyspace,
            Some(server::events::on_keyspace_event),
        ) != ok
        {
            crate::ffi::warn(ctx, "reclaim: cannot subscribe to keyspace events");
            return false;
        }
        for (id, cb) in server_events {
            let ev = raw::RedisModuleEvent { id, dataver: 1 };
            if raw::RedisModule_SubscribeToServerEvent.unwrap()(ctx.ctx, ev, cb) != ok {
                crate::ffi::warn(
                    ctx,
                    &format!("reclaim: cannot subscribe to server event {id}"),
                );
                return false;
            }
        }
        raw::RedisModule_RegisterInfoFunc.unwrap()(ctx.ctx, Some(server::info::on_info));
        let filter = raw::RedisModule_RegisterCommandFilter.unwrap()(
            ctx.ctx,
            Some(server::filter::on_client_command),
            raw::REDISMODULE_CMDFILTER_NOSELF as c_int,
        );
        if filter.is_null() {
            crate::ffi::warn(ctx, "reclaim: could not register the command filter");
            return false;
        }
    }
    true
}

/// The module's version as `MODULE LIST` shows it (`ver`): major * 10000 + minor * 100 + patch of
/// the crate's version (0.2.0 is 200), the convention of Redis's own modules.
pub const MODULE_VERSION: c_int = decimal(env!("CARGO_PKG_VERSION_MAJOR")) * 10000
    + decimal(env!("CARGO_PKG_VERSION_MINOR")) * 100
    + decimal(env!("CARGO_PKG_VERSION_PATCH"));

// Minor and patch must fit in two digits each for the number to read back.
const _: () = assert!(decimal(env!("CARGO_PKG_VERSION_MINOR")) < 100);
const _: () = assert!(decimal(env!("CARGO_PKG_VERSION_PATCH")) < 100);

/// The value of a string of decimal digits, at compile time.
const fn decimal(s: &str) -> c_int {
    let b = s.as_bytes();
    let mut n: c_int = 0;
    let mut i = 0;
    while i < b.len() {
        assert!(b[i].is_ascii_digit());
        n = n * 10 + (b[i] - b'0') as c_int;
        i += 1;
    }
    n
}

/// The module's entry point, called by Redis on `loadmodule` / `MODULE LOAD`: initialises the
/// module API, registers the configs (`loadmodule` arguments are their defaults) and loads their
/// configured values (`RM_LoadConfigs`, Redis 7.0), creates the policy data type, then runs
/// `init`. It does what the `redis_module!` macro of the redis-module crate does for this
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
            MODULE_VERSION,
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
    for c in &state::config::NUMERIC {
        let default = match get_i64_default_config_value(&args, c.name, c.default) {
            Ok(v) => v,
            Err(e) => {
                crate::ffi::warn(
                    &context,
                    &format!(
                        "reclaim: module argument {} must be an integer ({e})",
                        c.name
                    ),
                );
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
    for c in &state::config::BOOLEAN {
        let default = get_bool_default_config_value(&args, c.name, c.default).unwrap_or(c.default);
        register_bool_configuration(
            &context,
            c.name,
            c.var,
            default,
            ConfigurationFlags::DEFAULT,
            None,
        );
    }
    // A configured value Redis refuses (redis.conf, `--reclaim.*`, `MODULE LOADEX ... CONFIG`) fails
    // the load here, before anything else is registered: left loaded, the module would be unloaded
    // by the server, which Valkey 8.1 does not survive (SIGSEGV in moduleUnload) and Redis 7.0 cannot
    // do once the data type exists (the module stays, with its defaults).
    if let Some(load_configs) = unsafe { raw::RedisModule_LoadConfigs } {
        if unsafe { load_configs(ctx) } != Status::Ok as c_int {
            crate::ffi::warn(
                &context,
                "reclaim: the server refused a reclaim.* config given at load (the line above says which); not loaded",
            );
            return err;
        }
    }
    if POLICY_TYPE.create_data_type(ctx).is_err() {
        return err;
    }
    let status = init(&context, &args);
    if matches!(status, Status::Ok) {
        // The eviction risk at load: the settings read, and the log told when there is one.
        server::eviction::tick(&context);
    }
    status as c_int
}
