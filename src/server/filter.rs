//! The command filter: every command of clients, scripts and other modules passes here (not the
//! module's own). It counts them (a drain knows whether it shares the server), notes whose
//! delivery counts or idle times a command may change ([`crate::model::watch`]), and notes what
//! the keyspace events need to keep a client in its database around `MOVE` and `COPY ... DB`
//! ([`caller_db`]).

use redis_module::raw;
use std::os::raw::c_int;

use crate::ffi::{self, bytes_of};
use crate::model::watch;
use crate::server::caller_db;
use crate::server::scheduler;
use crate::state::registry;

/// Command filter (Redis `RM_RegisterCommandFilter`, with `NOSELF`; it sees every command of
/// clients, Lua scripts, functions and other modules, not the module's own): counts them, so a
/// drain knows whether it shares the server, and notes whose delivery counts or idle times a
/// command may change ([`crate::model::watch`], [`registry::touch`]); `MULTI`, `EXEC`, `DISCARD`,
/// `SELECT`, `COPY` and scripts go to [`caller_db::note`]. For any other command it costs an
/// atomic increment and an atomic load, one argument read and a few length compares.
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
        if caller_db::filter_wants(name) {
            let argv: Vec<&[u8]> = (0..argc.min(8)).map(arg).collect();
            caller_db::note(f, &argv);
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
