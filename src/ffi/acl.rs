//! ACL checks the module makes itself, as the Redis command that would do the same
//! ([`crate::model::access::As`]): `RM_ACLCheckCommandPermissions` (Redis 7.0) checks the command
//! and its keys together, selector by selector, for the user running the command ([`Caller`]) or
//! for a user looked up by name ([`AclUser`]: a redrive step on the timer, where no client of its
//! runs). Never `RM_ACLCheckKeyPermissions` alone: it passes when any selector's pattern matches
//! the key, whatever commands that selector allows.

use std::os::raw::c_int;
use std::sync::atomic::AtomicPtr;

use redis_module::{raw, CallReply, CallResult, Context, ContextFlags, RedisString};

use crate::ffi::{bytes_of, read_opts};
use crate::model::access::{Arg, As, Word, MAX_ARGS};
use crate::model::error::ReclaimError;

/// The words of the checks' commands ([`Word`]) as module strings, each created once (without a
/// context) and kept for the server's life: the same in every check, so a check creates only the
/// strings of its names.
static WORDS: [AtomicPtr<raw::RedisModuleString>; Word::COUNT] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; Word::COUNT];

/// The kept module string of `word` ([`crate::ffi::kept`]).
fn word(word: Word) -> *mut raw::RedisModuleString {
    crate::ffi::kept(&WORDS[word as usize], word.text().as_bytes())
}

/// A command argument the checks may use for a name it holds: its bytes and its module string.
pub type Seed<'a> = (&'a [u8], *mut raw::RedisModuleString);

/// Seeds, on the stack while they are few (a command's arguments, then the names made for a
/// round of checks).
pub type Seeds<'a> = smallvec::SmallVec<[Seed<'a>; 16]>;

/// The seeds of `args` (a command's arguments), with their bytes `bytes` (the same strings'; may
/// leave out the first arguments: the seeds are the last `bytes.len()` of `args`).
pub fn seeds<'a>(args: &'a [RedisString], bytes: &[&'a [u8]]) -> Seeds<'a> {
    let skip = args.len().saturating_sub(bytes.len());
    let mut out = Seeds::new();
    out.extend(
        bytes
            .iter()
            .copied()
            .zip(args[skip..].iter().map(|s| s.inner)),
    );
    out
}

/// The module strings of the names of one round of checks, each looked up once: the command's
/// own argument when one holds the name (`seeds`), else a string made for the round.
struct Names<'a> {
    ctx: &'a Context,
    /// The seeds' bytes and strings, then each name made for the round.
    known: Seeds<'a>,
    /// The strings made for the round (freed with it).
    made: Vec<RedisString>,
}

impl<'a> Names<'a> {
    fn new(ctx: &'a Context, seeds: Seeds<'a>) -> Self {
        Names {
            ctx,
            known: seeds,
            made: Vec::new(),
        }
    }

    /// The module string of `name`: a seed's (the same bytes, most often the very same slice),
    /// or made once for the round.
    fn name(&mut self, name: &'a [u8]) -> *mut raw::RedisModuleString {
        let same = |b: &[u8]| {
            (std::ptr::eq(b.as_ptr(), name.as_ptr()) && b.len() == name.len()) || b == name
        };
        if let Some((_, p)) = self.known.iter().find(|(b, _)| same(b)) {
            return *p;
        }
        let s = RedisString::create_from_slice(self.ctx.ctx, name);
        let p = s.inner;
        self.made.push(s);
        self.known.push((name, p));
        p
    }

    /// Whether `user` may do `what`: its argument vector (words kept, names made once per
    /// round), checked by `RM_ACLCheckCommandPermissions`.
    fn allowed(&mut self, user: &AclUser, what: &As<'a>) -> bool {
        let mut argv = [std::ptr::null_mut(); MAX_ARGS];
        for (slot, a) in argv.iter_mut().zip(what.argv()) {
            *slot = match *a {
                Arg::Word(w) => word(w),
                Arg::Name(n) => self.name(n),
            };
        }
        user.allows(&mut argv[..what.argv().len()])
    }
}

/// The name of the user running the command in `ctx` (`RM_GetCurrentUserName`, Redis 7.0);
/// `None` for a command Redis runs without a user (from the primary, or the AOF at load).
pub fn current_user_name(ctx: &Context) -> Option<Vec<u8>> {
    if unchecked(ctx) {
        return None;
    }
    unsafe {
        let name = raw::RedisModule_GetCurrentUserName.unwrap()(ctx.ctx);
        if name.is_null() {
            return None;
        }
        let bytes = bytes_of(name).to_vec();
        raw::RedisModule_FreeString.unwrap()(ctx.ctx, name);
        Some(bytes)
    }
}

/// Whether the command in `ctx` runs without ACL, as Redis runs it: it came from the primary or
/// from the AOF at load, or its client is no connection (a script's, or another module's
/// `RM_Call`) and has no user (Redis runs it as the superuser then). `RM_GetCurrentUserName` must
/// not be asked about a client without a user. A connection always has one, as do scripts run by
/// one and a module's `RM_Call` with `C`: those are checked.
fn unchecked(ctx: &Context) -> bool {
    unchecked_flags(ctx, &ctx.get_flags())
}

/// [`unchecked`], `flags` being `ctx`'s.
fn unchecked_flags(ctx: &Context, flags: &ContextFlags) -> bool {
    if flags.intersects(ContextFlags::REPLICATED | ContextFlags::LOADING) {
        return true;
    }
    let linked = unsafe {
        let id = raw::RedisModule_GetClientId.unwrap()(ctx.ctx);
        raw::RedisModule_GetClientInfoById.unwrap()(std::ptr::null_mut(), id)
            == raw::REDISMODULE_OK as c_int
    };
    !linked && !has_user(ctx)
}

/// Whether the client of `ctx` has an ACL user: `RM_Call` with `C` answers `ENOTSUP` for a client
/// without one before it looks the command up (`ENOENT` for this command, which does not exist).
/// An `RM_Call`: only for clients that are no connection (scripts, other modules' calls).
fn has_user(ctx: &Context) -> bool {
    unsafe {
        let r = raw::RedisModule_Call.unwrap()(
            ctx.ctx,
            c"reclaim.no-such-command".as_ptr(),
            c"C".as_ptr(),
        );
        let errno = std::io::Error::last_os_error().raw_os_error();
        if !r.is_null() {
            raw::RedisModule_FreeCallReply.unwrap()(r);
            return true;
        }
        errno != Some(libc::ENOTSUP)
    }
}

/// An ACL user (`RM_GetModuleUserFromUserName`, Redis 7.0), to check what it may do now. Freed
/// on drop.
pub struct AclUser(*mut raw::RedisModuleUser);

impl AclUser {
    /// The user named `name` now; `None` when the server knows no such user (deleted, or never
    /// created on this server).
    pub fn lookup(ctx: &Context, name: &[u8]) -> Option<AclUser> {
        let n = RedisString::create_from_slice(ctx.ctx, name);
        Self::from_name(n.inner)
    }

    fn from_name(name: *mut raw::RedisModuleString) -> Option<AclUser> {
        let user = unsafe { raw::RedisModule_GetModuleUserFromUserName.unwrap()(name) };
        if user.is_null() {
            return None;
        }
        Some(AclUser(user))
    }

    /// Whether the user may run the command `argv` (name and arguments) now
    /// (`RM_ACLCheckCommandPermissions`: its commands and categories, and its keys, in one
    /// selector).
    pub fn may_run(&self, ctx: &Context, argv: &[&[u8]]) -> bool {
        let args: Vec<RedisString> = argv
            .iter()
            .map(|a| RedisString::create_from_slice(ctx.ctx, a))
            .collect();
        let mut ptrs: Vec<*mut raw::RedisModuleString> = args.iter().map(|a| a.inner).collect();
        self.allows(&mut ptrs)
    }

    /// `RM_ACLCheckCommandPermissions` of the command `argv`.
    fn allows(&self, argv: &mut [*mut raw::RedisModuleString]) -> bool {
        let check = unsafe { raw::RedisModule_ACLCheckCommandPermissions.unwrap() };
        unsafe {
            check(self.0, argv.as_mut_ptr(), argv.len() as c_int) == raw::REDISMODULE_OK as c_int
        }
    }

    /// Whether the user may do `what` now.
    pub fn may<'a>(&self, ctx: &'a Context, what: &As<'a>) -> bool {
        Names::new(ctx, Seeds::new()).allowed(self, what)
    }

    /// `Ok` when the user may do all of `what` now, else the error of the first it may not
    /// (each name's string made once for all of them).
    pub fn check<'a>(&self, ctx: &'a Context, what: &[As<'a>]) -> Result<(), ReclaimError> {
        self.check_with(ctx, Seeds::new(), what)
    }

    /// [`AclUser::check`], the names taken from `seeds` (the command's own arguments) where they
    /// hold them.
    fn check_with<'a>(
        &self,
        ctx: &'a Context,
        seeds: Seeds<'a>,
        what: &[As<'a>],
    ) -> Result<(), ReclaimError> {
        let mut names = Names::new(ctx, seeds);
        match what.iter().find(|w| !names.allowed(self, w)) {
            Some(w) => Err(w.refused()),
            None => Ok(()),
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
}

impl Drop for AclUser {
    fn drop(&mut self) {
        if !self.0.is_null() {
            unsafe { raw::RedisModule_FreeModuleUser.unwrap()(self.0) };
        }
    }
}

/// Who a command works for, as its checks see it (looked up once per command call).
pub enum Caller {
    /// The command came from the primary or the AOF: Redis runs it without ACL, so does the module.
    Unchecked,
    /// The user running the command.
    User(AclUser),
    /// The client's user is not known to the server (cannot happen for a connected client:
    /// `ACL DELUSER` disconnects them): everything is refused.
    Gone,
}

impl Caller {
    /// The caller of the command running in `ctx`.
    pub fn of(ctx: &Context) -> Caller {
        Caller::of_flags(ctx, &ctx.get_flags())
    }

    /// [`Caller::of`], `flags` being `ctx`'s (`RM_GetContextFlags`, read already).
    pub fn of_flags(ctx: &Context, flags: &ContextFlags) -> Caller {
        if unchecked_flags(ctx, flags) {
            return Caller::Unchecked;
        }
        unsafe {
            let name = raw::RedisModule_GetCurrentUserName.unwrap()(ctx.ctx);
            if name.is_null() {
                return Caller::Gone;
            }
            let user = AclUser::from_name(name);
            raw::RedisModule_FreeString.unwrap()(ctx.ctx, name);
            user.map_or(Caller::Gone, Caller::User)
        }
    }

    /// Whether the caller may do `what` now.
    pub fn may<'a>(&self, ctx: &'a Context, what: &As<'a>) -> bool {
        match self {
            Caller::Unchecked => true,
            Caller::User(u) => u.may(ctx, what),
            Caller::Gone => false,
        }
    }

    /// `Ok` when the caller may do all of `what` now, else the error of the first it may not.
    pub fn check<'a>(&self, ctx: &'a Context, what: &[As<'a>]) -> Result<(), ReclaimError> {
        self.check_with(ctx, Seeds::new(), what)
    }

    /// [`Caller::check`], the names taken from `seeds` (the command's own arguments: no string is
    /// made for them, [`seeds`]) where they hold them.
    pub fn check_with<'a>(
        &self,
        ctx: &'a Context,
        seeds: Seeds<'a>,
        what: &[As<'a>],
    ) -> Result<(), ReclaimError> {
        match self {
            Caller::Unchecked => Ok(()),
            Caller::User(u) => u.check_with(ctx, seeds, what),
            Caller::Gone => what.first().map_or(Ok(()), |w| Err(w.refused())),
        }
    }
}

/// `Ok` when the user running the command in `ctx` may do all of `what` now (each checked as
/// its Redis command), else the error of the first it may not.
pub fn check_caller<'a>(ctx: &'a Context, what: &[As<'a>]) -> Result<(), ReclaimError> {
    if what.is_empty() {
        return Ok(());
    }
    Caller::of(ctx).check(ctx, what)
}
