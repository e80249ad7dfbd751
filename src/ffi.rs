//! The thin layer over the raw Redis module API that the `redis-module` crate does not wrap in a way
//! that loads on Redis 7.0 or that is panic-safe: command and subcommand registration with key
//! specs (Redis 7.0 `RM_CreateSubcommand`, `RM_SetCommandInfo`), a panic guard for every callback,
//! and ordered map replies (`RM_ReplyWithMap`, Redis 7.0; a flat array in RESP2).

use std::ffi::CString;
use std::os::raw::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use redis_module::{raw, Context, RedisString};

use crate::error;

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
        RedisModule_CommandFilterArgGet,
        RedisModule_CommandFilterArgsCount,
        RedisModule_CreateCommand,
        RedisModule_CreateString,
        RedisModule_CreateSubcommand,
        RedisModule_CreateTimer,
        RedisModule_DigestAddStringBuffer,
        RedisModule_DigestEndSequence,
        RedisModule_EmitAOF,
        RedisModule_FreeString,
        RedisModule_GetCommand,
        RedisModule_GetSelectedDb,
        RedisModule_InfoAddFieldULongLong,
        RedisModule_InfoAddSection,
        RedisModule_IsIOError,
        RedisModule_IsKeysPositionRequest,
        RedisModule_KeyAtPos,
        RedisModule_RegisterCommandFilter,
        RedisModule_RegisterInfoFunc,
        RedisModule_ReplyWithArray,
        RedisModule_ReplyWithLongLong,
        RedisModule_ReplyWithMap,
        RedisModule_ReplyWithNull,
        RedisModule_ReplyWithStringBuffer,
        RedisModule_SelectDb,
        RedisModule_SetCommandInfo,
        RedisModule_SetModuleOptions,
        RedisModule_StringPtrLen,
        RedisModule_SubscribeToKeyspaceEvents,
        RedisModule_SubscribeToServerEvent,
    );
    None
}

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
            crate::metrics::PANICS.add(1);
            log_warning(&format!("reclaim: internal error in {what}: {msg}"));
            None
        }
    }
}

/// Logs at warning level without a context (safe from any callback on the main thread).
pub fn log_warning(msg: &str) {
    redis_module::logging::log_warning(msg);
}

/// One value of a reply built by [`reply`].
pub enum Val<'a> {
    /// Integer reply.
    Int(i64),
    /// Bulk string reply (binary-safe).
    Bytes(&'a [u8]),
    /// Null reply (`nil` in RESP2, `_` in RESP3).
    Null,
    /// Field/value map (RESP3 map, flat array in RESP2), in the given order.
    Map(Vec<(&'static str, Val<'a>)>),
    /// Array reply.
    Array(Vec<Val<'a>>),
    /// Simple status reply (`+OK`).
    Status(&'a str),
}

/// Writes `v` as the reply of the command running in `ctx`.
pub fn reply(ctx: &Context, v: &Val) {
    let c = ctx.ctx;
    unsafe {
        match v {
            Val::Int(i) => {
                raw::RedisModule_ReplyWithLongLong.unwrap()(c, *i);
            }
            Val::Bytes(b) => {
                raw::RedisModule_ReplyWithStringBuffer.unwrap()(
                    c,
                    b.as_ptr().cast::<c_char>(),
                    b.len(),
                );
            }
            Val::Null => {
                raw::RedisModule_ReplyWithNull.unwrap()(c);
            }
            Val::Map(pairs) => {
                raw::RedisModule_ReplyWithMap.unwrap()(c, pairs.len() as _);
                for (k, val) in pairs {
                    raw::RedisModule_ReplyWithStringBuffer.unwrap()(
                        c,
                        k.as_ptr().cast::<c_char>(),
                        k.len(),
                    );
                    reply(ctx, val);
                }
            }
            Val::Array(items) => {
                raw::RedisModule_ReplyWithArray.unwrap()(c, items.len() as _);
                for it in items {
                    reply(ctx, it);
                }
            }
            Val::Status(s) => {
                ctx.reply_simple_string(s);
            }
        }
    }
}

/// What a command handler returns: a reply value, or an error (its `Display` is the wire text).
pub type CmdResult<'a> = Result<Val<'a>, String>;

/// The body of every registered command: decodes argv, runs `handler` under [`guard`] and
/// replies. A panic replies [`error::INTERNAL`] and leaves the server running.
pub fn run_command(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    name: &str,
    handler: fn(&Context, &[RedisString]) -> Result<Reply, String>,
) -> c_int {
    let context = Context::new(ctx);
    let out = guard(name, || {
        let args = redis_module::decode_args(ctx, argv, argc);
        match handler(&context, &args) {
            Ok(Reply::Done) => {}
            Ok(Reply::Value(v)) => reply(&context, &v.as_val()),
            Err(e) => {
                context.reply_error_string(&e);
            }
        }
    });
    if out.is_none() {
        context.reply_error_string(error::INTERNAL);
    }
    raw::REDISMODULE_OK as c_int
}

/// An owned reply value (so handlers can build replies from data they own).
pub enum Owned {
    /// Integer.
    Int(i64),
    /// Bulk string.
    Bytes(Vec<u8>),
    /// Null.
    Null,
    /// Ordered field/value map.
    Map(Vec<(&'static str, Owned)>),
    /// Array.
    Array(Vec<Owned>),
    /// Simple status string (`+OK`).
    Status(&'static str),
}

impl Owned {
    fn as_val(&self) -> Val<'_> {
        match self {
            Owned::Int(i) => Val::Int(*i),
            Owned::Bytes(b) => Val::Bytes(b),
            Owned::Null => Val::Null,
            Owned::Map(m) => Val::Map(m.iter().map(|(k, v)| (*k, v.as_val())).collect()),
            Owned::Array(a) => Val::Array(a.iter().map(|v| v.as_val()).collect()),
            Owned::Status(s) => Val::Status(s),
        }
    }
}

/// What a handler asks [`run_command`] to send.
pub enum Reply {
    /// The handler already replied (status replies, getkeys requests).
    Done,
    /// Send this value.
    Value(Owned),
}

/// A key spec for [`set_command_info`]: the key at a fixed argv index (`Index`) or found by the
/// command's getkeys callback (`Unknown`, with `VARIABLE_FLAGS`).
pub enum Spec {
    /// `argv[pos]` is a key with these `REDISMODULE_CMD_KEY_*` flags.
    Index(i32, u32),
    /// Keys the getkeys callback reports (flags vary with the arguments).
    Callback(u32),
}

/// Registers command `name` (or subcommand `name` of `parent` when given) with `func`, `flags`,
/// arity, summary and key specs (Redis 7.0 `RM_CreateCommand`/`RM_CreateSubcommand` +
/// `RM_SetCommandInfo`). Returns `false` (after logging) when Redis refuses it.
#[allow(clippy::too_many_arguments)]
pub fn register(
    ctx: &Context,
    parent: Option<&str>,
    name: &str,
    func: raw::RedisModuleCmdFunc,
    flags: &str,
    first_key: i32,
    arity: i32,
    summary: &str,
    complexity: &str,
    specs: &[Spec],
) -> bool {
    let (Ok(cname), Ok(cflags), Ok(csummary), Ok(ccomplexity), Ok(since)) = (
        CString::new(name),
        CString::new(flags),
        CString::new(summary),
        CString::new(complexity),
        CString::new("0.1.0"),
    ) else {
        return false;
    };
    let (last, step) = if first_key > 0 {
        (first_key, 1)
    } else {
        (0, 0)
    };
    unsafe {
        let cmd = match parent {
            None => {
                if raw::RedisModule_CreateCommand.unwrap()(
                    ctx.ctx,
                    cname.as_ptr(),
                    func,
                    cflags.as_ptr(),
                    first_key,
                    last,
                    step,
                ) != raw::REDISMODULE_OK as c_int
                {
                    log_warning(&format!("reclaim: cannot create command {name}"));
                    return false;
                }
                raw::RedisModule_GetCommand.unwrap()(ctx.ctx, cname.as_ptr())
            }
            Some(p) => {
                let Ok(cp) = CString::new(p) else {
                    return false;
                };
                let pc = raw::RedisModule_GetCommand.unwrap()(ctx.ctx, cp.as_ptr());
                if pc.is_null()
                    || raw::RedisModule_CreateSubcommand.unwrap()(
                        pc,
                        cname.as_ptr(),
                        func,
                        cflags.as_ptr(),
                        first_key,
                        last,
                        step,
                    ) != raw::REDISMODULE_OK as c_int
                {
                    log_warning(&format!("reclaim: cannot create subcommand {p}|{name}"));
                    return false;
                }
                let full = CString::new(format!("{p}|{name}")).unwrap_or_default();
                raw::RedisModule_GetCommand.unwrap()(ctx.ctx, full.as_ptr())
            }
        };
        if cmd.is_null() {
            log_warning(&format!(
                "reclaim: cannot find command {name} after creating it"
            ));
            return false;
        }
        let mut ks: Vec<raw::RedisModuleCommandKeySpec> = specs
            .iter()
            .map(|s| {
                let mut k: raw::RedisModuleCommandKeySpec = std::mem::zeroed();
                match s {
                    Spec::Index(pos, fl) => {
                        k.flags = *fl as u64;
                        k.begin_search_type =
                            raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
                        k.bs.index.pos = *pos;
                        k.find_keys_type =
                            raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
                        k.fk.range.lastkey = 0;
                        k.fk.range.keystep = 1;
                        k.fk.range.limit = 0;
                    }
                    Spec::Callback(fl) => {
                        k.flags = (*fl | raw::REDISMODULE_CMD_KEY_VARIABLE_FLAGS) as u64;
                        k.begin_search_type =
                            raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_UNKNOWN;
                        k.find_keys_type =
                            raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_UNKNOWN;
                    }
                }
                k
            })
            .collect();
        ks.push(std::mem::zeroed()); // terminator
        let version = raw::RedisModuleCommandInfoVersion {
            version: 1,
            sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
            sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
            sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
        };
        let mut info = raw::RedisModuleCommandInfo {
            version: &version,
            summary: csummary.as_ptr(),
            complexity: ccomplexity.as_ptr(),
            since: since.as_ptr(),
            history: ptr::null_mut(),
            tips: ptr::null(),
            arity,
            key_specs: if specs.is_empty() {
                ptr::null_mut()
            } else {
                ks.as_mut_ptr()
            },
            args: ptr::null_mut(),
        };
        if raw::RedisModule_SetCommandInfo.unwrap()(cmd, &mut info) != raw::REDISMODULE_OK as c_int
        {
            log_warning(&format!("reclaim: cannot set command info of {name}"));
            return false;
        }
    }
    true
}

/// Reports `argv[pos]` as a key with `flags` to a getkeys request (Redis 7.0
/// `RM_KeyAtPosWithFlags`; falls back to `RM_KeyAtPos`).
pub fn key_at(ctx: &Context, pos: usize, flags: u32) {
    unsafe {
        if let Some(f) = raw::RedisModule_KeyAtPosWithFlags {
            f(ctx.ctx, pos as c_int, flags as c_int);
        } else {
            raw::RedisModule_KeyAtPos.unwrap()(ctx.ctx, pos as c_int);
        }
    }
}

/// True when the command is being called for `COMMAND GETKEYS` / ACL / cluster key extraction.
pub fn is_keys_request(ctx: &Context) -> bool {
    unsafe { raw::RedisModule_IsKeysPositionRequest.unwrap()(ctx.ctx) != 0 }
}

/// Selects database `db` in `ctx` (Redis `RM_SelectDb`).
pub fn select_db(ctx: &Context, db: i32) -> bool {
    unsafe { raw::RedisModule_SelectDb.unwrap()(ctx.ctx, db) == raw::REDISMODULE_OK as c_int }
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

/// Checks that the user running the command in `ctx` may write `key` (Redis 7.0
/// `RM_ACLCheckKeyPermissions` with `RM_GetModuleUserFromUserName`). `true` when allowed or when
/// the server has no such API.
pub fn may_write_key(ctx: &Context, key: &[u8]) -> bool {
    unsafe {
        let (Some(cur), Some(getu), Some(check), Some(freeu)) = (
            raw::RedisModule_GetCurrentUserName,
            raw::RedisModule_GetModuleUserFromUserName,
            raw::RedisModule_ACLCheckKeyPermissions,
            raw::RedisModule_FreeModuleUser,
        ) else {
            return true;
        };
        let name = cur(ctx.ctx);
        if name.is_null() {
            return true;
        }
        let user = getu(name);
        raw::RedisModule_FreeString.unwrap()(ctx.ctx, name);
        if user.is_null() {
            return true;
        }
        let k = RedisString::create_from_slice(ctx.ctx, key);
        let ok = check(user, k.inner, raw::REDISMODULE_CMD_KEY_INSERT as c_int)
            == raw::REDISMODULE_OK as c_int;
        freeu(user);
        ok
    }
}
