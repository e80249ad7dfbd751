//! The command filter: every command of clients, scripts and other modules passes here (not the
//! module's own). It counts them (a drain knows whether it shares the server), notes whose
//! delivery counts or idle times a command may change ([`crate::model::watch`]), and keeps the
//! caller's database across `MOVE` and `COPY` for the keyspace events.

use std::os::raw::c_int;
use std::sync::atomic::{AtomicU64, Ordering};

use redis_module::{raw, Context};

use crate::ffi::{self, bytes_of};
use crate::model::watch;
use crate::server::scheduler;
use crate::state::registry;

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
            registry::touch_on_exec(ffi::server_ms());
            return;
        }
        if !watch::may_touch(name) {
            return;
        }
        let argv: Vec<&[u8]> = (0..argc).map(arg).collect();
        // Only noted: the server has not checked the command yet (authentication, ACL, arity,
        // memory, a MULTI that may be discarded). A touch counts once its consumer is seen at or
        // after this time (`engine::touches::confirm`), which a refused command never makes.
        let at = ffi::server_ms();
        for t in watch::touches(&argv) {
            registry::touch(t.stream, t.group, t.consumer, t.sets_idle, at);
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
pub fn restore_caller_db(ctx: &Context) {
    let db = CALLER_DB.swap(0, Ordering::Relaxed);
    if db > 0 {
        ffi::select_db(ctx, (db - 1) as i32);
    }
}
