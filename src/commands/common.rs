//! What the command handlers share: their arguments as bytes, the policy a command names, and
//! the flags of key specs (the command tables' and the getkeys callbacks'), and the arguments
//! `key group` that most commands start with.

use redis_module::{raw, Context, RedisString};

use crate::ffi;
use crate::model::args::{key, string, Arg};
use crate::model::error::{self, ReclaimError};
use crate::model::policy::Policy;
use crate::state::registry::{self, PolicyId};
use crate::state::store;

/// Key spec flags (`REDISMODULE_CMD_KEY_*`).
pub const KEY_RW: u32 = raw::REDISMODULE_CMD_KEY_RW;
pub const KEY_RO: u32 = raw::REDISMODULE_CMD_KEY_RO;
pub const UPDATE: u32 = raw::REDISMODULE_CMD_KEY_UPDATE;
pub const INSERT: u32 = raw::REDISMODULE_CMD_KEY_INSERT;
pub const ACCESS: u32 = raw::REDISMODULE_CMD_KEY_ACCESS;
pub const DELETE: u32 = raw::REDISMODULE_CMD_KEY_DELETE;
/// The flags of a stream key of `RECLAIM.READGROUP` (as XREADGROUP's): read and written, its
/// entries read, the group's state updated. Its key spec and its getkeys callback report them.
pub const READGROUP_KEY: u32 = KEY_RW | ACCESS | UPDATE;

/// `key group`: the arguments of `RECLAIM.POLICY GET` and `DEL`, `RECLAIM.STATS` and `HEALTH`,
/// and the head of others.
pub const KEY_GROUP: &[Arg] = &[key("key", 0), string("group")];

/// The arguments of a command as byte slices (the command name first).
pub fn slices(args: &[RedisString]) -> Vec<&[u8]> {
    args.iter().map(|a| a.as_slice()).collect()
}

/// The policy of (stream, group) in the selected database, registered if the registry did not
/// know it; [`error::NO_POLICY`] when there is none.
pub fn policy_or_error(
    ctx: &Context,
    stream: &[u8],
    group: &[u8],
) -> Result<(PolicyId, Policy), ReclaimError> {
    let p = store::get(ctx, stream, group).ok_or(ReclaimError::Static(error::NO_POLICY))?;
    let db = ffi::selected_db(ctx);
    registry::register(db, stream, group);
    Ok((PolicyId::new(db, stream, group), p))
}
