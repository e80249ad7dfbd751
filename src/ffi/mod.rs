//! The thin layer over the raw Redis module API that the `redis-module` crate does not wrap in a way
//! that loads on Redis 7.0 or that is panic-safe: command and subcommand registration with key
//! specs (Redis 7.0 `RM_CreateSubcommand`, `RM_SetCommandInfo`), a panic guard for every callback,
//! and ordered map replies (`RM_ReplyWithMap`, Redis 7.0; a flat array in RESP2).

pub mod alloc;
pub mod blocked;
pub mod events;

use std::ffi::CString;
use std::os::raw::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use redis_module::{raw, CallReply, CallResult, Context, RedisString};

use crate::model::error::{self, ReclaimError};

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
        RedisModule_InfoAddFieldCString,
        RedisModule_InfoAddFieldULongLong,
        RedisModule_BlockClientOnKeys,
        RedisModule_Call,
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
            crate::model::metrics::PANICS.add(1);
            log_warning(&format!("reclaim: internal error in {what}: {msg}"));
            None
        }
    }
}

/// Logs at warning level without a context (safe from any callback on the main thread).
pub fn log_warning(msg: &str) {
    redis_module::logging::log_warning(msg);
}

/// What a command replies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Integer reply.
    Int(i64),
    /// Bulk string reply (binary-safe).
    Bytes(Vec<u8>),
    /// Null reply (`nil` in RESP2, `_` in RESP3).
    Null,
    /// Field/value map (RESP3 map, flat array in RESP2), in the given order.
    Map(Vec<(&'static str, Reply)>),
    /// Array reply.
    Array(Vec<Reply>),
    /// Simple status reply (`+OK`).
    Status(&'static str),
    /// Nothing to send: the handler answered a getkeys request instead.
    Done,
}

/// Writes `v` as the reply of the command running in `ctx`.
pub fn reply(ctx: &Context, v: &Reply) {
    let c = ctx.ctx;
    unsafe {
        match v {
            Reply::Int(i) => {
                raw::RedisModule_ReplyWithLongLong.unwrap()(c, *i);
            }
            Reply::Bytes(b) => {
                raw::RedisModule_ReplyWithStringBuffer.unwrap()(
                    c,
                    b.as_ptr().cast::<c_char>(),
                    b.len(),
                );
            }
            Reply::Null => {
                raw::RedisModule_ReplyWithNull.unwrap()(c);
            }
            Reply::Map(pairs) => {
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
            Reply::Array(items) => {
                raw::RedisModule_ReplyWithArray.unwrap()(c, items.len() as _);
                for it in items {
                    reply(ctx, it);
                }
            }
            Reply::Status(s) => {
                ctx.reply_simple_string(s);
            }
            Reply::Done => {}
        }
    }
}

/// What a command handler returns.
pub type CmdResult = Result<Reply, ReclaimError>;

/// A command handler: the arguments (the command name first) in, a reply or an error out.
pub type Handler = fn(&Context, &[RedisString]) -> CmdResult;

/// The body of every registered command: decodes argv, runs `handler` under [`guard`] and
/// replies (an error with its exact wire text). A panic replies [`error::INTERNAL`] and leaves
/// the server running.
pub fn run_command(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    name: &str,
    handler: Handler,
) -> c_int {
    let context = Context::new(ctx);
    let out = guard(name, || {
        let args = redis_module::decode_args(ctx, argv, argc);
        match handler(&context, &args) {
            Ok(v) => reply(&context, &v),
            Err(e) => {
                context.reply_error_string(&e.to_string());
            }
        }
    });
    if out.is_none() {
        context.reply_error_string(error::INTERNAL);
    }
    raw::REDISMODULE_OK as c_int
}

/// A key spec of a [`CommandSpec`]: the key at a fixed argv index (`Index`) or found by the
/// command's getkeys callback (`Unknown`, with `VARIABLE_FLAGS`).
pub enum Spec {
    /// `argv[pos]` is a key with these `REDISMODULE_CMD_KEY_*` flags.
    Index(i32, u32),
    /// The keys follow the keyword (searched from argv index `from`) and take the first half of
    /// the arguments after it, as XREADGROUP's `STREAMS key... id...` (flags as `Index`).
    HalfAfterKeyword(&'static str, i32, u32),
    /// Keys the getkeys callback reports (flags vary with the arguments).
    Callback(u32),
}

/// One command as the module registers it (Redis 7.0 `RM_CreateCommand` /
/// `RM_CreateSubcommand` + `RM_SetCommandInfo`).
pub struct CommandSpec {
    /// The container command, for a subcommand (`reclaim.policy`).
    pub parent: Option<&'static str>,
    /// Command (or subcommand) name, lower case.
    pub name: &'static str,
    /// The entry point (`None` for a container command).
    pub func: raw::RedisModuleCmdFunc,
    /// Command flags (`write deny-oom`, `readonly`...).
    pub flags: &'static str,
    /// argv index of the first key (0: no key; then first = last, step 1).
    pub first_key: i32,
    /// Arity as Redis counts it (negative: at least that many).
    pub arity: i32,
    /// `COMMAND DOCS` summary.
    pub summary: &'static str,
    /// `COMMAND DOCS` complexity.
    pub complexity: &'static str,
    /// Key specs.
    pub keys: &'static [Spec],
}

/// The version a command appeared in, for `COMMAND DOCS`.
const SINCE: &str = "0.1.0";

/// Creates the command (or subcommand) of `c`; its handle, or `None` after logging.
unsafe fn create(ctx: &Context, c: &CommandSpec) -> Option<*mut raw::RedisModuleCommand> {
    let (Ok(name), Ok(flags)) = (CString::new(c.name), CString::new(c.flags)) else {
        return None;
    };
    let (last, step) = if c.first_key > 0 {
        (c.first_key, 1)
    } else {
        (0, 0)
    };
    let ok = raw::REDISMODULE_OK as c_int;
    let full = match c.parent {
        None => {
            let rc = raw::RedisModule_CreateCommand.unwrap()(
                ctx.ctx,
                name.as_ptr(),
                c.func,
                flags.as_ptr(),
                c.first_key,
                last,
                step,
            );
            (rc == ok).then(|| c.name.to_string())
        }
        Some(p) => {
            let cp = CString::new(p).ok()?;
            let pc = raw::RedisModule_GetCommand.unwrap()(ctx.ctx, cp.as_ptr());
            let rc = (!pc.is_null()).then(|| {
                raw::RedisModule_CreateSubcommand.unwrap()(
                    pc,
                    name.as_ptr(),
                    c.func,
                    flags.as_ptr(),
                    c.first_key,
                    last,
                    step,
                )
            });
            (rc == Some(ok)).then(|| format!("{p}|{}", c.name))
        }
    };
    let Some(full) = full else {
        log_warning(&format!("reclaim: cannot create command {}", c.name));
        return None;
    };
    let cfull = CString::new(full).ok()?;
    let cmd = raw::RedisModule_GetCommand.unwrap()(ctx.ctx, cfull.as_ptr());
    (!cmd.is_null()).then_some(cmd)
}

/// The key specs of `specs` in the layout `RM_SetCommandInfo` takes, zero-terminated.
unsafe fn key_specs(specs: &[Spec]) -> Vec<raw::RedisModuleCommandKeySpec> {
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
                Spec::HalfAfterKeyword(word, from, fl) => {
                    k.flags = *fl as u64;
                    k.begin_search_type =
                        raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_KEYWORD;
                    // A 'static NUL-terminated copy: Redis keeps the pointer.
                    k.bs.keyword.keyword = keyword_cstr(word);
                    k.bs.keyword.startfrom = *from;
                    k.find_keys_type =
                        raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
                    k.fk.range.lastkey = -1;
                    k.fk.range.keystep = 1;
                    k.fk.range.limit = 2;
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
    ks
}

/// A NUL-terminated copy of `word` that lives as long as the server (key specs keep it).
fn keyword_cstr(word: &str) -> *const std::os::raw::c_char {
    let c = CString::new(word).unwrap_or_default();
    let p = c.as_ptr();
    std::mem::forget(c);
    p
}

/// Registers the command of `c` with its flags, arity, summary and key specs. Returns `false`
/// (after logging) when Redis refuses it.
pub fn register(ctx: &Context, c: &CommandSpec) -> bool {
    let (Ok(summary), Ok(complexity), Ok(since)) = (
        CString::new(c.summary),
        CString::new(c.complexity),
        CString::new(SINCE),
    ) else {
        return false;
    };
    unsafe {
        let Some(cmd) = create(ctx, c) else {
            return false;
        };
        let mut ks = key_specs(c.keys);
        let version = raw::RedisModuleCommandInfoVersion {
            version: 1,
            sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
            sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
            sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
        };
        let mut info = raw::RedisModuleCommandInfo {
            version: &version,
            summary: summary.as_ptr(),
            complexity: complexity.as_ptr(),
            since: since.as_ptr(),
            history: ptr::null_mut(),
            tips: ptr::null(),
            arity: c.arity,
            key_specs: if c.keys.is_empty() {
                ptr::null_mut()
            } else {
                ks.as_mut_ptr()
            },
            args: ptr::null_mut(),
        };
        if raw::RedisModule_SetCommandInfo.unwrap()(cmd, &mut info) != raw::REDISMODULE_OK as c_int
        {
            log_warning(&format!("reclaim: cannot set command info of {}", c.name));
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

/// The name of the user running the command in `ctx` (`RM_GetCurrentUserName`, Redis 7.0);
/// `None` when the server has no such API or the context has no user.
pub fn current_user_name(ctx: &Context) -> Option<Vec<u8>> {
    unsafe {
        let cur = raw::RedisModule_GetCurrentUserName?;
        let name = cur(ctx.ctx);
        if name.is_null() {
            return None;
        }
        let bytes = bytes_of(name).to_vec();
        raw::RedisModule_FreeString.unwrap()(ctx.ctx, name);
        Some(bytes)
    }
}

/// An ACL user looked up by name (`RM_GetModuleUserFromUserName`, Redis 7.0), to check what it
/// may write while no client of its runs (a redrive step on the timer). Freed on drop.
pub struct AclUser(*mut raw::RedisModuleUser);

impl AclUser {
    /// The user named `name` now. `None` when the server knows no such user (deleted, or never
    /// created on this server); a handle that allows everything when the server has no ACL API.
    pub fn lookup(ctx: &Context, name: &[u8]) -> Option<AclUser> {
        unsafe {
            let Some(getu) = raw::RedisModule_GetModuleUserFromUserName else {
                return Some(AclUser(std::ptr::null_mut()));
            };
            let n = RedisString::create_from_slice(ctx.ctx, name);
            let user = getu(n.inner);
            (!user.is_null()).then_some(AclUser(user))
        }
    }

    /// Whether the user may run the command `argv` (name and arguments) now
    /// (`RM_ACLCheckCommandPermissions`: its commands and categories, and its keys).
    pub fn may_run(&self, ctx: &Context, argv: &[&[u8]]) -> bool {
        if self.0.is_null() {
            return true;
        }
        unsafe {
            let Some(check) = raw::RedisModule_ACLCheckCommandPermissions else {
                return true;
            };
            let args: Vec<RedisString> = argv
                .iter()
                .map(|a| RedisString::create_from_slice(ctx.ctx, a))
                .collect();
            let mut ptrs: Vec<*mut raw::RedisModuleString> = args.iter().map(|a| a.inner).collect();
            check(self.0, ptrs.as_mut_ptr(), ptrs.len() as c_int) == raw::REDISMODULE_OK as c_int
        }
    }

    /// Whether the user `name` is `on` (`ACL GETUSER name`, its `flags`; the module API has no
    /// such check). `true` when the reply cannot be read, so a server that answers otherwise does
    /// not stop anything.
    pub fn is_on(ctx: &Context, name: &[u8]) -> bool {
        let args: [&[u8]; 2] = [b"GETUSER", name];
        let r: CallResult = ctx.call_ext("ACL", &read_opts(), &args[..]);
        let Ok(CallReply::Array(a)) = r else {
            return true;
        };
        for i in (0..a.len()).step_by(2) {
            let is_flags =
                matches!(a.get(i), Some(Ok(CallReply::String(k))) if k.as_bytes() == b"flags");
            if !is_flags {
                continue;
            }
            if let Some(Ok(CallReply::Array(flags))) = a.get(i + 1) {
                return !flags
                    .iter()
                    .any(|f| matches!(f, Ok(CallReply::String(s)) if s.as_bytes() == b"off"));
            }
        }
        true
    }

    /// Whether the user may write (insert into) `key` now (`RM_ACLCheckKeyPermissions`).
    pub fn may_write(&self, ctx: &Context, key: &[u8]) -> bool {
        if self.0.is_null() {
            return true;
        }
        unsafe {
            let Some(check) = raw::RedisModule_ACLCheckKeyPermissions else {
                return true;
            };
            let k = RedisString::create_from_slice(ctx.ctx, key);
            check(self.0, k.inner, raw::REDISMODULE_CMD_KEY_INSERT as c_int)
                == raw::REDISMODULE_OK as c_int
        }
    }
}

impl Drop for AclUser {
    fn drop(&mut self) {
        if self.0.is_null() {
            return;
        }
        unsafe {
            if let Some(freeu) = raw::RedisModule_FreeModuleUser {
                freeu(self.0);
            }
        }
    }
}

/// Checks that the user running the command in `ctx` may write `key` (Redis 7.0
/// `RM_ACLCheckKeyPermissions` with `RM_GetModuleUserFromUserName`). `true` when allowed or when
/// the server has no such API.
pub fn may_write_key(ctx: &Context, key: &[u8]) -> bool {
    may_write_keys(ctx, &[key])
}

/// Checks that the user running the command in `ctx` may write every key of `keys` (one user
/// lookup for all of them, then `RM_ACLCheckKeyPermissions` per key, stopping at the first
/// refused). `true` when all are allowed, when `keys` is empty, or when the server has no such
/// API.
pub fn may_write_keys(ctx: &Context, keys: &[&[u8]]) -> bool {
    if keys.is_empty() {
        return true;
    }
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
        let ok = keys.iter().all(|key| {
            let k = RedisString::create_from_slice(ctx.ctx, key);
            check(user, k.inner, raw::REDISMODULE_CMD_KEY_INSERT as c_int)
                == raw::REDISMODULE_OK as c_int
        });
        freeu(user);
        ok
    }
}

/// Whether this node may write `key` now, as Redis Cluster routes it (`RM_Call` refuses a key of
/// a slot served elsewhere, or any key while the cluster is down, the checks a client's command
/// goes through): asked with `EXISTS key`. Only meaningful in cluster mode.
pub fn serves_key(ctx: &Context, key: &[u8]) -> bool {
    let res: redis_module::CallResult = ctx.call_ext("EXISTS", &read_opts(), &[key][..]);
    res.is_ok()
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

/// Replies a null array (`*-1` in RESP2, `_` in RESP3): XREADGROUP's "nothing".
pub fn reply_null_array(ctx: &Context) {
    unsafe {
        raw::RedisModule_ReplyWithNullArray.unwrap()(ctx.ctx);
    }
}

/// Replies `keyed` in XREADGROUP's shape for the client's protocol: per key, its name and its
/// entries as the call replies they came in (forwarded as Redis wrote them), an array of `[key,
/// entries]` pairs in RESP2, a map in RESP3. The call replies must live until it returns.
pub fn reply_keyed_entries(ctx: &Context, keyed: &[(&[u8], &[*mut raw::RedisModuleCallReply])]) {
    let resp3 = ctx
        .get_flags()
        .contains(redis_module::ContextFlags::FLAGS_RESP3);
    unsafe {
        if resp3 {
            raw::RedisModule_ReplyWithMap.unwrap()(ctx.ctx, keyed.len() as _);
        } else {
            raw::RedisModule_ReplyWithArray.unwrap()(ctx.ctx, keyed.len() as _);
        }
        for (key, entries) in keyed {
            if !resp3 {
                raw::RedisModule_ReplyWithArray.unwrap()(ctx.ctx, 2);
            }
            reply(ctx, &Reply::Bytes(key.to_vec()));
            raw::RedisModule_ReplyWithArray.unwrap()(ctx.ctx, entries.len() as _);
            for e in *entries {
                raw::RedisModule_ReplyWithCallReply.unwrap()(ctx.ctx, *e);
            }
        }
    }
}

/// A reply of a raw `RM_Call`, never parsed: forwarded as Redis wrote it. Freed on drop.
pub struct RawReply(*mut raw::RedisModuleCallReply);

impl RawReply {
    /// `cmd args...` through `RM_Call` with `!` (propagated) and `E` (errors as replies), in the
    /// client's protocol (`3` for a RESP3 client), so that its reply is exactly what the client
    /// expects.
    pub fn call(ctx: &Context, cmd: &std::ffi::CStr, args: &[Vec<u8>]) -> RawReply {
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

    /// The reply's RESP bytes.
    fn proto(&self) -> &[u8] {
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
