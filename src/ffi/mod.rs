//! The thin layer over the raw Redis module API that the `redis-module` crate does not wrap in a way
//! that loads on Redis 7.0 or that is panic-safe: the API check at load, a panic guard for every
//! callback, databases, latency samples, the `RM_Call` options of reads and writes and their
//! replies ([`RawReply`]: forwarded unparsed). Beside it: command registration and replies
//! ([`command`]) with the arguments `COMMAND DOCS` shows ([`args`]), ACL checks ([`acl`]), blocked
//! clients ([`blocked`]), keyspace events fired ([`events`]), the allocator ([`alloc`]), what this
//! node knows of its Redis Cluster ([`cluster`]). Calls nothing above it but [`crate::model`].

pub mod acl;
pub mod alloc;
pub mod args;
pub mod blocked;
pub mod cluster;
pub mod command;
pub mod events;
pub mod streams;

use std::os::raw::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};

use redis_module::{raw, CallReply, CallResult, Context, RedisString};

/// Whether the server offers every module API this module calls without checking (Redis 7.0+).
/// Checked once in `RedisModule_OnLoad`: the module refuses to load otherwise, so the
/// `RedisModule_*.unwrap()` calls on these pointers elsewhere can never panic.
pub fn missing_api() -> Option<&'static str> {
    macro_rules! need {
        ($($f:ident),* $(,)?) => {
            $(if unsafe { raw::$f }.is_none() { return Some(stringify!($f)); })*
        };
    }
    need!(
        RedisModule_ACLCheckCommandPermissions,
        RedisModule_CommandFilterArgGet,
        RedisModule_CommandFilterArgsCount,
        RedisModule_CreateCommand,
        RedisModule_CreateString,
        RedisModule_CreateSubcommand,
        RedisModule_CreateTimer,
        RedisModule_DigestAddStringBuffer,
        RedisModule_DigestEndSequence,
        RedisModule_EmitAOF,
        RedisModule_FreeModuleUser,
        RedisModule_FreeString,
        RedisModule_GetClientId,
        RedisModule_GetClientInfoById,
        RedisModule_GetCommand,
        RedisModule_GetCurrentUserName,
        RedisModule_GetModuleUserFromUserName,
        RedisModule_GetSelectedDb,
        RedisModule_GetExpire,
        RedisModule_GetContextFlags,
        RedisModule_InfoAddFieldCString,
        RedisModule_InfoAddFieldULongLong,
        RedisModule_BlockClientOnKeys,
        RedisModule_Call,
        RedisModule_CallReplyArrayElement,
        RedisModule_CallReplyProto,
        RedisModule_FreeCallReply,
        RedisModule_GetBlockedClientPrivateData,
        RedisModule_InfoAddSection,
        RedisModule_IsIOError,
        RedisModule_IsKeysPositionRequest,
        RedisModule_NotifyKeyspaceEvent,
        RedisModule_KeyAtPos,
        RedisModule_RegisterCommandFilter,
        RedisModule_RegisterInfoFunc,
        RedisModule_ReplyWithArray,
        RedisModule_ReplyWithCallReply,
        RedisModule_ReplyWithError,
        RedisModule_ReplyWithLongLong,
        RedisModule_ReplyWithMap,
        RedisModule_ReplyWithNull,
        RedisModule_ReplyWithNullArray,
        RedisModule_ReplyWithStringBuffer,
        RedisModule_SelectDb,
        RedisModule_SetCommandInfo,
        RedisModule_SetModuleOptions,
        RedisModule_SignalKeyAsReady,
        RedisModule_StringPtrLen,
        RedisModule_SubscribeToKeyspaceEvents,
        RedisModule_SubscribeToServerEvent,
        RedisModule_UnblockClient,
        RedisModule_OpenKey,
        RedisModule_CloseKey,
        RedisModule_KeyType,
        RedisModule_StreamAdd,
        RedisModule_StreamIteratorStart,
        RedisModule_StreamIteratorStop,
        RedisModule_StreamIteratorNextID,
        RedisModule_StreamIteratorNextField,
        RedisModule_Replicate,
        RedisModule_ReplyWithString,
    );
    None
}

/// A module string of `text`, made once (without a context) and kept in `slot` for the server's
/// life: the words every call of a kind passes (command names, field names), so a call creates
/// only the strings of what varies. Main thread only, as every module API call.
pub fn kept(
    slot: &std::sync::atomic::AtomicPtr<raw::RedisModuleString>,
    text: &[u8],
) -> *mut raw::RedisModuleString {
    use std::sync::atomic::Ordering;
    let kept = slot.load(Ordering::Relaxed);
    if !kept.is_null() {
        return kept;
    }
    let s = unsafe {
        raw::RedisModule_CreateString.unwrap()(
            std::ptr::null_mut(),
            text.as_ptr().cast::<c_char>(),
            text.len(),
        )
    };
    slot.store(s, Ordering::Relaxed);
    s
}

/// Panics caught at the FFI boundary by [`guard`] (should stay 0; each one is logged): `panics`
/// in `INFO reclaim`.
pub static PANICS: crate::model::metrics::Counter = crate::model::metrics::Counter::new();

/// Runs `f`, turning a panic into `None` and a line in the server log, so that no Rust panic ever
/// unwinds into redis-server (which would abort it).
pub fn guard<T>(what: &str, f: impl FnOnce() -> T) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => Some(v),
        Err(e) => {
            let msg = e
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| e.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            PANICS.add(1);
            log_warning(&format!("reclaim: internal error in {what}: {msg}"));
            None
        }
    }
}

/// Logs `msg` at `level` (`warning`, `notice`) through `RM_Log`, with `ctx` (its module's name
/// in front) or without (null). The text is the argument of a `%s`, never the format: the crate's
/// own log functions pass it as the format, so a `%` in a key name a client chose (`%s%n`) made
/// the server read arguments that are not there and crash. NUL, CR and LF are escaped as in
/// error replies ([`crate::model::error::wire`]).
fn log_at(ctx: *mut raw::RedisModuleCtx, level: &std::ffi::CStr, msg: &str) {
    let mut text = crate::model::error::wire(msg);
    text.push(0);
    unsafe {
        if let Some(f) = raw::RedisModule_Log {
            f(
                ctx,
                level.as_ptr(),
                c"%s".as_ptr(),
                text.as_ptr().cast::<c_char>(),
            );
        }
    }
}

/// Logs at warning level without a context (safe from any callback on the main thread).
pub fn log_warning(msg: &str) {
    log_at(std::ptr::null_mut(), c"warning", msg);
}

/// Logs at warning level with `ctx` (the module's name in front).
pub fn warn(ctx: &Context, msg: &str) {
    log_at(ctx.ctx, c"warning", msg);
}

/// Logs at notice level with `ctx` (the module's name in front).
pub fn notice(ctx: &Context, msg: &str) {
    log_at(ctx.ctx, c"notice", msg);
}

/// Selects database `db` in `ctx` (Redis `RM_SelectDb`).
pub fn select_db(ctx: &Context, db: i32) -> bool {
    unsafe { raw::RedisModule_SelectDb.unwrap()(ctx.ctx, db) == raw::REDISMODULE_OK as c_int }
}

/// The server's clock (ms since the epoch) as its commands see it: the time cached for the
/// command running now (`RM_CachedMicroseconds`, Redis 7.2+ and Valkey, whose stream commands
/// stamp consumers with it), else the time now (`RM_Milliseconds`, Redis 7.0, whose stream
/// commands stamp consumers with it).
pub fn server_ms() -> u64 {
    unsafe {
        if let Some(f) = raw::RedisModule_CachedMicroseconds {
            return (f() / 1000).max(0) as u64;
        }
        raw::RedisModule_Milliseconds.map_or(0, |f| f().max(0) as u64)
    }
}

/// The time now (ms since the epoch, `RM_Milliseconds`): no earlier than any stamp a command
/// has put on a consumer.
pub fn clock_ms() -> u64 {
    unsafe { raw::RedisModule_Milliseconds.map_or(0, |f| f().max(0) as u64) }
}

/// Whether the server runs in Redis Cluster mode (`cluster-enabled`, fixed at start-up), noted
/// once when the module loads ([`note_cluster_mode`]).
static CLUSTER_MODE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Notes whether the server runs in Redis Cluster mode (`REDISMODULE_CTX_FLAGS_CLUSTER`).
pub fn note_cluster_mode(ctx: &Context) {
    let on = ctx
        .get_flags()
        .contains(redis_module::ContextFlags::CLUSTER);
    CLUSTER_MODE.store(on, std::sync::atomic::Ordering::Relaxed);
}

/// Whether the server runs in Redis Cluster mode, as noted at load.
pub fn cluster_mode() -> bool {
    CLUSTER_MODE.load(std::sync::atomic::Ordering::Relaxed)
}

/// The database selected in `ctx` (Redis `RM_GetSelectedDb`).
pub fn selected_db(ctx: &Context) -> i32 {
    unsafe { raw::RedisModule_GetSelectedDb.unwrap()(ctx.ctx) }
}

/// Records a latency sample for `LATENCY LATEST` / `LATENCY HISTORY` (Redis `RM_LatencyAddSample`;
/// Redis keeps it only when `ms` >= `latency-monitor-threshold`).
pub fn latency_sample(event: &'static [u8], ms: i64) {
    unsafe {
        if let Some(f) = raw::RedisModule_LatencyAddSample {
            f(event.as_ptr().cast::<c_char>(), ms);
        }
    }
}

/// The bytes of a module string (empty for a null pointer).
///
/// # Safety
/// `s` is null or a live module string; the slice must not outlive it.
pub unsafe fn bytes_of<'a>(s: *mut raw::RedisModuleString) -> &'a [u8] {
    let mut len = 0usize;
    if s.is_null() {
        return &[];
    }
    let p = unsafe { raw::RedisModule_StringPtrLen.unwrap()(s, &mut len) };
    if p.is_null() {
        return &[];
    }
    unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }
}

/// Whether this node may write `key` now, as Redis Cluster routes it (`RM_Call` refuses a key of
/// a slot served elsewhere, or any key while the cluster is down, the checks a client's command
/// goes through): asked with `EXISTS key`. Only meaningful in cluster mode.
pub fn serves_key(ctx: &Context, key: &[u8]) -> bool {
    let res: redis_module::CallResult = ctx.call_ext("EXISTS", &read_opts(), &[key][..]);
    res.is_ok()
}

/// Whether `key` (in the database selected in `ctx`) exists and has a TTL: `RM_OpenKey` for
/// reading without touching its LRU/LFU (`REDISMODULE_OPEN_KEY_NOTOUCH`: the check must not change
/// what the server evicts first), then `RM_GetExpire`. O(1).
pub fn has_ttl(ctx: &Context, key: &[u8]) -> bool {
    let k = RedisString::create_from_slice(ctx.ctx, key);
    let mode = (raw::REDISMODULE_READ | raw::REDISMODULE_OPEN_KEY_NOTOUCH) as c_int;
    unsafe {
        let h = raw::RedisModule_OpenKey.unwrap()(ctx.ctx, k.inner, mode);
        if h.is_null() {
            return false;
        }
        let ttl = raw::RedisModule_GetExpire.unwrap()(h);
        raw::RedisModule_CloseKey.unwrap()(h);
        ttl != raw::REDISMODULE_NO_EXPIRE as i64
    }
}

/// The context flags `REDISMODULE_CTX_FLAGS_MAXMEMORY | REDISMODULE_CTX_FLAGS_EVICT` of `ctx` now:
/// whether `maxmemory` is set (and applies here) and its policy may evict keys. O(1).
pub fn memory_flags(ctx: &Context) -> u32 {
    let all = unsafe { raw::RedisModule_GetContextFlags.unwrap()(ctx.ctx) } as u32;
    all & (raw::REDISMODULE_CTX_FLAGS_MAXMEMORY | raw::REDISMODULE_CTX_FLAGS_EVICT)
}

/// `RM_Call` options of the module's reads: errors come back as replies (`E`), nothing is
/// propagated.
pub fn read_opts() -> redis_module::CallOptions {
    redis_module::CallOptionsBuilder::new()
        .errors_as_replies()
        .build()
}

/// `RM_Call` options of the module's writes: errors as replies (`E`), and the command is
/// propagated to replicas and the AOF (`!`); the writes of one command or timer callback reach
/// them as one `MULTI`/`EXEC` (Redis 7.0+).
pub fn write_opts() -> redis_module::CallOptions {
    redis_module::CallOptionsBuilder::new()
        .replicate()
        .errors_as_replies()
        .build()
}

/// The bytes of a string reply of `RM_Call` (`None` for any other reply).
pub fn call_bytes(r: &CallResult) -> Option<Vec<u8>> {
    match r {
        Ok(CallReply::String(s)) => Some(s.as_bytes().to_vec()),
        _ => None,
    }
}

/// The value of an integer reply of `RM_Call` (`None` for any other reply).
pub fn call_int(r: &CallResult) -> Option<i64> {
    match r {
        Ok(CallReply::I64(i)) => Some(i.to_i64()),
        _ => None,
    }
}

/// A reply of a raw `RM_Call`, never parsed: forwarded as Redis wrote it. Freed on drop.
pub struct RawReply(*mut raw::RedisModuleCallReply);

impl RawReply {
    /// `cmd args...` through `RM_Call` with `!` (propagated) and `E` (errors as replies), in the
    /// client's protocol (`3` for a RESP3 client), so that its reply is exactly what the client
    /// expects.
    pub fn call(ctx: &Context, cmd: &std::ffi::CStr, args: &[&[u8]]) -> RawReply {
        let args: Vec<RedisString> = args
            .iter()
            .map(|w| RedisString::create_from_slice(ctx.ctx, w))
            .collect();
        let mut argv: Vec<*mut raw::RedisModuleString> = args.iter().map(|a| a.inner).collect();
        let resp3 = ctx
            .get_flags()
            .contains(redis_module::ContextFlags::FLAGS_RESP3);
        let fmt = if resp3 { c"!Ev3" } else { c"!Ev" };
        let r = unsafe {
            raw::RedisModule_Call.unwrap()(
                ctx.ctx,
                cmd.as_ptr(),
                fmt.as_ptr(),
                argv.as_mut_ptr(),
                argv.len(),
            )
        };
        RawReply(r)
    }

    /// `cmd argv...` as [`RawReply::call`] runs it, with arguments that are module strings
    /// already (a client's own arguments: nothing copied).
    pub fn call_argv(
        ctx: &Context,
        cmd: &std::ffi::CStr,
        argv: &mut [*mut raw::RedisModuleString],
    ) -> RawReply {
        let resp3 = ctx
            .get_flags()
            .contains(redis_module::ContextFlags::FLAGS_RESP3);
        let fmt = if resp3 { c"!Ev3" } else { c"!Ev" };
        let r = unsafe {
            raw::RedisModule_Call.unwrap()(
                ctx.ctx,
                cmd.as_ptr(),
                fmt.as_ptr(),
                argv.as_mut_ptr(),
                argv.len(),
            )
        };
        RawReply(r)
    }

    /// `cmd args...` through `RM_Call` with `E` (errors as replies) only: a read, not
    /// propagated, its reply in RESP2 whatever the client speaks (for the module to read).
    pub fn read(ctx: &Context, cmd: &std::ffi::CStr, args: &[&[u8]]) -> RawReply {
        let args: Vec<RedisString> = args
            .iter()
            .map(|w| RedisString::create_from_slice(ctx.ctx, w))
            .collect();
        let mut argv: Vec<*mut raw::RedisModuleString> = args.iter().map(|a| a.inner).collect();
        let r = unsafe {
            raw::RedisModule_Call.unwrap()(
                ctx.ctx,
                cmd.as_ptr(),
                c"Ev".as_ptr(),
                argv.as_mut_ptr(),
                argv.len(),
            )
        };
        RawReply(r)
    }

    /// The reply's RESP bytes.
    pub fn proto(&self) -> &[u8] {
        if self.0.is_null() {
            return b"";
        }
        let mut len = 0usize;
        let p = unsafe { raw::RedisModule_CallReplyProto.unwrap()(self.0, &mut len) };
        if p.is_null() {
            return b"";
        }
        unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }
    }

    /// Whether the reply is nil (`*-1` in RESP2, `_` in RESP3).
    pub fn is_nil(&self) -> bool {
        let p = self.proto();
        p.is_empty() || p.starts_with(b"*-1") || p.starts_with(b"_")
    }

    /// The text of an error reply (without `-` and CRLF), its bytes read as UTF-8 (an invalid
    /// sequence becomes U+FFFD: the server writes a key name into some errors as it is); `None`
    /// for any other reply.
    pub fn error_text(&self) -> Option<String> {
        let line = self.proto().strip_prefix(b"-")?;
        let line = line.strip_suffix(b"\r\n").unwrap_or(line);
        Some(String::from_utf8_lossy(line).into_owned())
    }

    /// Sends the reply as is to the client of `ctx`.
    pub fn forward(&self, ctx: &Context) {
        unsafe {
            raw::RedisModule_ReplyWithCallReply.unwrap()(ctx.ctx, self.0);
        }
    }
}

impl Drop for RawReply {
    fn drop(&mut self) {
        if !self.0.is_null() {
            unsafe { raw::RedisModule_FreeCallReply.unwrap()(self.0) };
        }
    }
}

/// CPU time the calling thread has used, µs (`CLOCK_THREAD_CPUTIME_ID`; 0 if unavailable).
pub fn thread_cpu_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec it is given.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000)
        .saturating_add(ts.tv_nsec as u64 / 1000)
}
