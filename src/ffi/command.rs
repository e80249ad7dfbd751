//! Commands as the module registers and answers them: registration from a [`CommandSpec`] with
//! its key specs (Redis 7.0 `RM_CreateCommand`/`RM_CreateSubcommand`, `RM_SetCommandInfo`), the
//! getkeys helpers, the body of every command ([`run_command`]: the handler under the panic guard,
//! its [`Reply`] or its error's exact wire text), and the replies (ordered maps:
//! `RM_ReplyWithMap`, Redis 7.0, a flat array in RESP2; XREADGROUP's shape).

use std::ffi::CString;
use std::os::raw::{c_char, c_int};
use std::ptr;

use redis_module::{raw, Context, RedisString};

use crate::ffi::args::CArgs;
use crate::ffi::{guard, log_warning};
use crate::model::args::Arg;
use crate::model::error::{self, ReclaimError};

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

/// Replies with the error `text` (its code word first: `ERR ...`, `WRONGTYPE ...`) through
/// `RM_ReplyWithError`, as [`error::wire`] writes it: UTF-8 kept, NUL, CR and LF escaped, bounded.
/// The one way the module answers with an error (the crate's own cuts each character to a byte,
/// and panics on what becomes a NUL).
pub fn reply_error(ctx: &Context, text: &str) {
    let mut b = error::wire(text);
    b.push(0);
    unsafe {
        raw::RedisModule_ReplyWithError.unwrap()(ctx.ctx, b.as_ptr().cast::<c_char>());
    }
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

/// The command's arguments as the crate's strings, borrowed from the client that sent them: not
/// retained and never freed here (dropping this forgets them, also when a panic unwinds through
/// the handler). They live until the command returns, which is as long as a handler holds them
/// (handlers copy what they keep: a blocked read its keys, a policy its names). Saves a retain
/// and a free per argument on every call.
struct Borrowed(smallvec::SmallVec<[RedisString; 12]>);

impl Borrowed {
    fn of(
        ctx: *mut raw::RedisModuleCtx,
        argv: *mut *mut raw::RedisModuleString,
        argc: c_int,
    ) -> Self {
        if argv.is_null() || argc <= 0 {
            return Borrowed(smallvec::SmallVec::new());
        }
        // SAFETY: the server passes `argc` valid strings in `argv` for the command's duration.
        let raw = unsafe { std::slice::from_raw_parts(argv, argc as usize) };
        Borrowed(
            raw.iter()
                .map(|&s| RedisString::from_redis_module_string(ctx, s))
                .collect(),
        )
    }
}

impl Drop for Borrowed {
    fn drop(&mut self) {
        for s in self.0.drain(..) {
            std::mem::forget(s);
        }
    }
}

/// The body of every registered command: borrows argv ([`Borrowed`]), runs `handler` under
/// [`guard`] and replies (an error with its exact wire text). A panic replies
/// [`error::INTERNAL`] and leaves the server running.
pub fn run_command(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
    name: &str,
    handler: Handler,
) -> c_int {
    let context = Context::new(ctx);
    let out = guard(name, || {
        let args = Borrowed::of(ctx, argv, argc);
        match handler(&context, &args.0) {
            Ok(v) => reply(&context, &v),
            Err(e) => reply_error(&context, &e.to_string()),
        }
    });
    if out.is_none() {
        reply_error(&context, error::INTERNAL);
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
    /// ACL categories (`write stream slow`...: Redis 7.2+ `RM_SetCommandACLCategories`; a module
    /// command is in no category otherwise, not even those its flags would give a Redis command).
    /// Empty for a container command.
    pub acl: &'static str,
    /// argv index of the first key (0: no key; then first = last, step 1).
    pub first_key: i32,
    /// Arity as Redis counts it (negative: at least that many).
    pub arity: i32,
    /// `COMMAND DOCS` summary.
    pub summary: &'static str,
    /// `COMMAND DOCS` complexity.
    pub complexity: &'static str,
    /// The module version the command appeared in (`COMMAND DOCS` `since`).
    pub since: &'static str,
    /// Its arguments (`COMMAND DOCS` `arguments`; redis-cli's hints).
    pub args: &'static [Arg],
    /// Key specs.
    pub keys: &'static [Spec],
}

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

/// Adds the ACL category `name` (Redis 7.4+ and Valkey 8 `RM_AddACLCategory`, during
/// `RedisModule_OnLoad` only). `false` when the server has no such API or refuses it (logged).
pub fn add_acl_category(ctx: &Context, name: &str) -> bool {
    let Some(add) = (unsafe { raw::RedisModule_AddACLCategory }) else {
        return false;
    };
    let Ok(cname) = CString::new(name) else {
        return false;
    };
    let ok = unsafe { add(ctx.ctx, cname.as_ptr()) } == raw::REDISMODULE_OK as c_int;
    if !ok {
        log_warning(&format!(
            "reclaim: cannot add the ACL category @{name}; the commands are not in it"
        ));
    }
    ok
}

/// Puts `cmd` in the ACL categories of `c` and in `own` (the module's category, when the server
/// added it), on servers with `RM_SetCommandACLCategories` (Redis 7.2+, Valkey 8; during
/// `RedisModule_OnLoad` only). On a server without it, or when it refuses them (logged), the
/// command stays in no category: ACL rules name it (docs/security.md).
unsafe fn set_categories(cmd: *mut raw::RedisModuleCommand, c: &CommandSpec, own: Option<&str>) {
    let Some(set) = raw::RedisModule_SetCommandACLCategories else {
        return;
    };
    if c.acl.is_empty() {
        return;
    }
    let all = match own {
        Some(o) => format!("{} {o}", c.acl),
        None => c.acl.to_string(),
    };
    let Ok(call) = CString::new(all) else {
        return;
    };
    if set(cmd, call.as_ptr()) != raw::REDISMODULE_OK as c_int {
        log_warning(&format!(
            "reclaim: cannot put command {} in its ACL categories ({})",
            c.name, c.acl
        ));
    }
}

/// Registers the command of `c` with its flags, arity, summary, version, key specs, arguments
/// and ACL categories (with `own`, the module's category when the server added it). Returns
/// `false` (after logging) when Redis refuses the command.
pub fn register(ctx: &Context, c: &CommandSpec, own: Option<&str>) -> bool {
    let (Ok(summary), Ok(complexity), Ok(since)) = (
        CString::new(c.summary),
        CString::new(c.complexity),
        CString::new(c.since),
    ) else {
        return false;
    };
    // Redis copies the arguments' strings: they need to live only until the call returns.
    let mut args = CArgs::new(c.args, c.since, c.keys.len());
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
            args: args.as_mut().map_or(ptr::null_mut(), CArgs::as_mut_ptr),
        };
        if raw::RedisModule_SetCommandInfo.unwrap()(cmd, &mut info) != raw::REDISMODULE_OK as c_int
        {
            log_warning(&format!("reclaim: cannot set command info of {}", c.name));
            return false;
        }
        set_categories(cmd, c, own);
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

/// Replies a null array (`*-1` in RESP2, `_` in RESP3): XREADGROUP's "nothing".
pub fn reply_null_array(ctx: &Context) {
    unsafe {
        raw::RedisModule_ReplyWithNullArray.unwrap()(ctx.ctx);
    }
}

/// Replies in XREADGROUP's shape for the client's protocol: per key of `keyed`, its name and an
/// array of its number of entries, which `entries(i)` writes for the `i`-th key; an array of
/// `[key, entries]` pairs in RESP2, a map in RESP3.
pub fn reply_keyed(ctx: &Context, keyed: &[(&[u8], usize)], mut entries: impl FnMut(usize)) {
    let resp3 = ctx
        .get_flags()
        .contains(redis_module::ContextFlags::FLAGS_RESP3);
    unsafe {
        if resp3 {
            raw::RedisModule_ReplyWithMap.unwrap()(ctx.ctx, keyed.len() as _);
        } else {
            raw::RedisModule_ReplyWithArray.unwrap()(ctx.ctx, keyed.len() as _);
        }
        for (i, (key, n)) in keyed.iter().enumerate() {
            if !resp3 {
                raw::RedisModule_ReplyWithArray.unwrap()(ctx.ctx, 2);
            }
            reply(ctx, &Reply::Bytes(key.to_vec()));
            raw::RedisModule_ReplyWithArray.unwrap()(ctx.ctx, *n as _);
            entries(i);
        }
    }
}

/// Forwards one element of a call reply as Redis wrote it.
///
/// # Safety
/// `r` is a live call reply (it must live until this returns).
pub unsafe fn reply_call_reply(ctx: &Context, r: *mut raw::RedisModuleCallReply) {
    unsafe {
        raw::RedisModule_ReplyWithCallReply.unwrap()(ctx.ctx, r);
    }
}

/// Forwards one entry of an `XREADGROUP` call reply (`[id, fields]`) with delivery metadata, as
/// Redis 8.4's `XREADGROUP ... CLAIM` replies a new entry: `[id, fields, idle, count]`, the two
/// integers given.
///
/// # Safety
/// `entry` is a live call reply of a two-element array (it must live until this returns).
pub unsafe fn reply_call_entry_with(
    ctx: &Context,
    entry: *mut raw::RedisModuleCallReply,
    (idle, count): (i64, i64),
) {
    unsafe {
        raw::RedisModule_ReplyWithArray.unwrap()(ctx.ctx, 4);
        for i in 0..2 {
            let e = raw::RedisModule_CallReplyArrayElement.unwrap()(entry, i);
            if e.is_null() {
                raw::RedisModule_ReplyWithNull.unwrap()(ctx.ctx);
            } else {
                raw::RedisModule_ReplyWithCallReply.unwrap()(ctx.ctx, e);
            }
        }
        raw::RedisModule_ReplyWithLongLong.unwrap()(ctx.ctx, idle);
        raw::RedisModule_ReplyWithLongLong.unwrap()(ctx.ctx, count);
    }
}
