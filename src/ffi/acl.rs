//! ACL checks the module makes itself: the caller's key permissions (`RM_ACLCheckKeyPermissions`
//! with `RM_GetModuleUserFromUserName`, Redis 7.0), and a user looked up by name ([`AclUser`]) for
//! checks while no client of its runs (a redrive step on the timer).

use std::os::raw::c_int;

use redis_module::{raw, CallReply, CallResult, Context, RedisString};

use crate::ffi::{bytes_of, read_opts};

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
