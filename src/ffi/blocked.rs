//! Clients blocked on stream keys (`RM_BlockClientOnKeys`, Redis 7.0) and the index of who waits
//! on which key, so that the module wakes them when it moves entries they may read
//! ([`signal_if_waiting`]) and ends their wait when a key is deleted ([`unblock_deleted`]; Redis
//! 7.0 does not wake module clients blocked on a deleted key by itself). That end is deferred to an
//! event-loop one-shot, out of the keyspace callback that reports the deletion (see
//! [`unblock_deleted`] for why).
//!
//! What a blocked client does when it wakes is its [`Waiter`]'s: the command that blocked it
//! passes it down, so this file calls nothing above the raw API. The index holds one entry per key
//! of each client blocked now, removed when its wait ends, whatever ends it.

use std::collections::{HashMap, HashSet};
use std::os::raw::{c_int, c_void};
use std::sync::{Mutex, MutexGuard};

use lazy_static::lazy_static;
use redis_module::{raw, Context, RedisString};

use crate::ffi::command::reply_null_array;
use crate::ffi::{guard, selected_db};
use crate::model::error;

/// What a blocked client waits for, and what it does when its wait ends.
pub trait Waiter: Sized + 'static {
    /// The command's name, for the log when a callback fails.
    const NAME: &'static str;

    /// The keys it waits on.
    fn keys(&self) -> &[Vec<u8>];

    /// A key was signalled ready: serves the client (replying) and returns `true`, or returns
    /// `false` (no reply) to keep waiting.
    fn ready(&self, ctx: &Context) -> bool;

    /// The wait ended without being served (its timeout, or [`unblock_deleted`]): replies.
    fn timeout(&self, ctx: &Context);
}

/// A blocked client: its waiter, its database, and its handle (for [`unblock_deleted`]).
struct Blocked<W> {
    waiter: W,
    db: i32,
    bc: Handle,
}

/// A blocked client's handle (`RedisModuleBlockedClient *`) and the serial number of its wait
/// (a handle's address can be reused by a later wait once the earlier one is freed).
type Handle = (usize, u64);

/// Blocked clients by (db, key), as handles.
type Waiting = HashMap<(i32, Vec<u8>), Vec<Handle>>;

lazy_static! {
    static ref WAITING: Mutex<Waiting> = Mutex::new(HashMap::new());
    /// Clients whose key was deleted, to unblock at the next event-loop one-shot
    /// ([`unblock_deleted`]); at most one entry per blocked client.
    static ref DELETED: Mutex<HashSet<Handle>> = Mutex::new(HashSet::new());
}

/// The serial number of the next wait.
static NEXT_SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn waiting() -> MutexGuard<'static, Waiting> {
    WAITING.lock().unwrap_or_else(|e| e.into_inner())
}

/// Blocks the client of `ctx` on the keys of `waiter` for `ms` ms (0: forever).
pub fn block<W: Waiter>(ctx: &Context, waiter: W, ms: i64) {
    let db = selected_db(ctx);
    let keys: Vec<RedisString> = waiter
        .keys()
        .iter()
        .map(|k| RedisString::create_from_slice(ctx.ctx, k))
        .collect();
    let mut key_ptrs: Vec<*mut raw::RedisModuleString> = keys.iter().map(|k| k.inner).collect();
    let watched = waiter.keys().to_vec();
    let serial = NEXT_SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let data = Box::into_raw(Box::new(Blocked {
        waiter,
        db,
        bc: (0, serial),
    }));
    let bc = unsafe {
        raw::RedisModule_BlockClientOnKeys.unwrap()(
            ctx.ctx,
            Some(on_ready::<W>),
            Some(on_timeout::<W>),
            Some(free_blocked::<W>),
            ms,
            key_ptrs.as_mut_ptr(),
            key_ptrs.len() as c_int,
            data.cast::<c_void>(),
        )
    };
    unsafe { (*data).bc.0 = bc as usize };
    let mut w = waiting();
    for k in watched {
        w.entry((db, k)).or_default().push((bc as usize, serial));
    }
}

unsafe fn blocked_data<'a, W>(ctx: *mut raw::RedisModuleCtx) -> Option<&'a Blocked<W>> {
    let p = unsafe { raw::RedisModule_GetBlockedClientPrivateData.unwrap()(ctx) };
    unsafe { p.cast::<Blocked<W>>().as_ref() }
}

/// A key of a blocked client was signalled ready: [`Waiter::ready`]; keeps waiting
/// (`REDISMODULE_ERR`) when it served nothing.
unsafe extern "C" fn on_ready<W: Waiter>(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let context = Context::new(ctx);
    let served = guard(&format!("{} wake-up", W::NAME), || {
        match unsafe { blocked_data::<W>(ctx) } {
            Some(b) => b.waiter.ready(&context),
            None => false,
        }
    });
    match served {
        Some(true) => raw::REDISMODULE_OK as c_int,
        Some(false) => raw::REDISMODULE_ERR as c_int,
        None => {
            crate::ffi::command::reply_error(&context, error::INTERNAL);
            raw::REDISMODULE_OK as c_int
        }
    }
}

/// The wait ended without being served: [`Waiter::timeout`] (a null array without a waiter).
unsafe extern "C" fn on_timeout<W: Waiter>(
    ctx: *mut raw::RedisModuleCtx,
    _argv: *mut *mut raw::RedisModuleString,
    _argc: c_int,
) -> c_int {
    let context = Context::new(ctx);
    let done = guard(&format!("{} timeout", W::NAME), || {
        match unsafe { blocked_data::<W>(ctx) } {
            Some(b) => b.waiter.timeout(&context),
            None => reply_null_array(&context),
        }
    });
    if done.is_none() {
        crate::ffi::command::reply_error(&context, error::INTERNAL);
    }
    raw::REDISMODULE_OK as c_int
}

/// The wait is over (served, timed out, unblocked, or the client went away): forgets the client.
unsafe extern "C" fn free_blocked<W: Waiter>(_ctx: *mut raw::RedisModuleCtx, data: *mut c_void) {
    guard(&format!("{} free", W::NAME), || {
        if data.is_null() {
            return;
        }
        let b = unsafe { Box::from_raw(data.cast::<Blocked<W>>()) };
        let mut w = waiting();
        for k in b.waiter.keys() {
            let slot = (b.db, k.clone());
            if let Some(v) = w.get_mut(&slot) {
                v.retain(|x| *x != b.bc);
                if v.is_empty() {
                    w.remove(&slot);
                }
            }
        }
        if w.is_empty() {
            w.shrink_to_fit();
        }
    });
}

/// Wakes the clients blocked on (db, `key`) (`RM_SignalKeyAsReady`): the module moved entries
/// they may read. `ctx` has database `db` selected. Nothing when none waits.
pub fn signal_if_waiting(ctx: &Context, db: i32, key: &[u8]) {
    if !waiting().contains_key(&(db, key.to_vec())) {
        return;
    }
    let k = RedisString::create_from_slice(ctx.ctx, key);
    unsafe {
        raw::RedisModule_SignalKeyAsReady.unwrap()(ctx.ctx, k.inner);
    }
}

/// The keys clients are blocked on now, as (db, key): at most one per blocked client and key.
pub fn waiting_keys() -> Vec<(i32, Vec<u8>)> {
    waiting().keys().cloned().collect()
}

/// The key (db, `key`) was deleted (or renamed away, expired, evicted): the clients blocked on it
/// end their wait (`RM_UnblockClient` runs their timeout callback, [`Waiter::timeout`]), at the
/// next event-loop one-shot (`RM_EventLoopAddOneShot`, Redis 7.0), not here.
///
/// Why not here: this runs inside the keyspace callback, and the timeout callback reads the
/// waiter's other streams with `RM_Call` (`XPENDING`, no `!`). On Redis 7.0, when the event is an
/// eviction (`performEvictions` before a command) or an active expiry, the DELs of the keys
/// evicted before it in the same cycle are still waiting in the server's propagation array; the
/// `RM_Call` ends in `afterCommand`, which flushes that array while the call has replication
/// turned off (`server.replication_allowed = 0`), so those DELs were dropped: never sent to the
/// replicas or the AOF, and the replica kept keys its primary had evicted (issue 29; 7.2+ keep
/// the array until the whole eviction ends). Deferred, nothing calls into Redis during the
/// eviction.
pub fn unblock_deleted(db: i32, key: &[u8]) {
    let bcs = waiting()
        .get(&(db, key.to_vec()))
        .cloned()
        .unwrap_or_default();
    if bcs.is_empty() {
        return;
    }
    let Some(add) = (unsafe { raw::RedisModule_EventLoopAddOneShot }) else {
        unblock(&bcs);
        return;
    };
    let mut d = deleted();
    let first = d.is_empty();
    d.extend(bcs);
    drop(d);
    if first {
        unsafe { add(Some(unblock_deferred), std::ptr::null_mut()) };
    }
}

fn deleted() -> MutexGuard<'static, HashSet<Handle>> {
    DELETED.lock().unwrap_or_else(|e| e.into_inner())
}

/// The one-shot of [`unblock_deleted`]: ends the wait of the clients noted since, those still
/// blocked in the same wait (a client served, timed out or gone meanwhile is left alone).
unsafe extern "C" fn unblock_deferred(_data: *mut c_void) {
    guard("unblock deleted", || {
        let noted: Vec<Handle> = deleted().drain().collect();
        deleted().shrink_to_fit();
        let live: HashSet<Handle> = waiting().values().flatten().copied().collect();
        let still: Vec<Handle> = noted.into_iter().filter(|h| live.contains(h)).collect();
        unblock(&still);
    });
}

/// `RM_UnblockClient` for each handle (each runs its timeout callback at once).
fn unblock(bcs: &[Handle]) {
    for (bc, _) in bcs {
        unsafe {
            raw::RedisModule_UnblockClient.unwrap()(
                *bc as *mut raw::RedisModuleBlockedClient,
                std::ptr::null_mut(),
            );
        }
    }
}

/// Clients blocked now (for `INFO reclaim`).
pub fn blocked_clients() -> usize {
    let w = waiting();
    let mut all: Vec<Handle> = w.values().flatten().copied().collect();
    all.sort_unstable();
    all.dedup();
    all.len()
}
