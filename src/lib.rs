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

use redis_module::configuration::ConfigurationFlags;
use redis_module::{raw, redis_module, Context, RedisString, Status};

use crate::store::POLICY_TYPE;

#[cfg(not(test))]
type Allocator = redis_module::alloc::RedisAlloc;
#[cfg(not(test))]
const ALLOCATOR: Allocator = redis_module::alloc::RedisAlloc;
#[cfg(test)]
type Allocator = std::alloc::System;
#[cfg(test)]
const ALLOCATOR: Allocator = std::alloc::System;

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
    for pair in args.chunks(2) {
        let name = pair[0].as_slice();
        if name != b"tick-interval-ms" && name != b"tick-budget-us" {
            ctx.log_warning(&format!(
                "reclaim: unknown module argument '{}' (known: tick-interval-ms, tick-budget-us)",
                policy::printable(name)
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
    for (name, v, lo, hi) in [
        (
            "tick-interval-ms",
            config::TICK_INTERVAL_MS.load(std::sync::atomic::Ordering::Relaxed),
            config::MIN_TICK_INTERVAL_MS,
            config::MAX_TICK_INTERVAL_MS,
        ),
        (
            "tick-budget-us",
            config::TICK_BUDGET_US.load(std::sync::atomic::Ordering::Relaxed),
            config::MIN_TICK_BUDGET_US,
            config::MAX_TICK_BUDGET_US,
        ),
    ] {
        if !(lo..=hi).contains(&v) {
            ctx.log_warning(&format!("reclaim: {name} {v} is out of range ({lo}..{hi})"));
            return Status::Err;
        }
    }
    if !commands::register(ctx) {
        return Status::Err;
    }
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

redis_module! {
    name: "reclaim",
    version: 1,
    allocator: (Allocator, ALLOCATOR),
    data_types: [POLICY_TYPE],
    init: init,
    configurations: [
        i64: [
            ["tick-interval-ms", &config::TICK_INTERVAL_MS, config::DEFAULT_TICK_INTERVAL_MS, config::MIN_TICK_INTERVAL_MS, config::MAX_TICK_INTERVAL_MS, ConfigurationFlags::DEFAULT, None],
            ["tick-budget-us", &config::TICK_BUDGET_US, config::DEFAULT_TICK_BUDGET_US, config::MIN_TICK_BUDGET_US, config::MAX_TICK_BUDGET_US, ConfigurationFlags::DEFAULT, None],
        ],
        string: [],
        bool: [],
        enum: [],
        module_args_as_configuration: true,
    ]
}
