//! Where policies live: one key of the module data type `reclaimpl` per stream (named by
//! [`crate::model::keys::policy_key`]), holding that stream's policies by group; this file is the
//! safe keyspace API over them (`read`, `get`, `has`, `put`, `delete`, `set_state`,
//! `has_policies`), why a policy cannot run where it is (`fault`), and the registration of what a
//! load read (`register_loaded`). The value's encoding is the core's
//! ([`crate::model::encoding`]); the data type's callbacks are in [`crate::state::datatype`].
//!
//! Being keys, policies are saved in RDB, rewritten into the AOF (as `RECLAIM.POLICY SET` with
//! every option explicit, or, for a value under another name or not valid where it is, as
//! `RESTORE` of its serialized value), sent to replicas on full sync, migrate with their stream in
//! a cluster (same hash slot), belong to their database, and are removed by FLUSHDB/FLUSHALL. DEL
//! of the stream leaves them in place: they wait for the stream to come back. An RDB that holds
//! policy keys needs the module loaded to be read (as for any module data type). A `RESTORE`
//! registers through its keyspace event.

use std::collections::BTreeMap;

use redis_module::{Context, KeyType, RedisString};

use crate::model::error::ReclaimError;
use crate::model::keys;
use crate::model::policy::{Policy, State};
use crate::state::registry;

/// All policies of one stream, by consumer group: the value of a policy key (in the core).
pub use crate::model::encoding::PolicySet;
/// The module data type `reclaimpl` (its callbacks: [`crate::state::datatype`]).
pub use crate::state::datatype::POLICY_TYPE;

/// What [`read`] found at a stream's policy key.
pub enum Found {
    /// No policy key.
    Missing,
    /// The key exists and is not a policy value (someone wrote it by hand).
    Foreign,
    /// The policies.
    Set(PolicySet),
}

/// Reads the policies of `stream` in the database selected in `ctx`.
pub fn read(ctx: &Context, stream: &[u8]) -> Found {
    let name = RedisString::create_from_slice(ctx.ctx, &keys::policy_key(stream));
    let key = ctx.open_key(&name);
    match key.key_type() {
        KeyType::Empty => Found::Missing,
        KeyType::Module => match key.get_value::<PolicySet>(&POLICY_TYPE) {
            Ok(Some(v)) => Found::Set(v.clone()),
            _ => Found::Foreign,
        },
        _ => Found::Foreign,
    }
}

/// Whether `stream` has at least one policy in the selected database: it is a work stream, whose
/// entries may be pending (one key lookup, no copy). A DLQ with retention must never be trimmed
/// when it is one (see `engine::deadletter::Dlq::trim_dlq`), and `RECLAIM.REDRIVE` refuses it as a DLQ.
pub fn has_policies(ctx: &Context, stream: &[u8]) -> bool {
    let name = RedisString::create_from_slice(ctx.ctx, &keys::policy_key(stream));
    let key = ctx.open_key(&name);
    key.key_type() == KeyType::Module
        && matches!(key.get_value::<PolicySet>(&POLICY_TYPE), Ok(Some(v)) if !v.groups.is_empty())
}

/// Reads one policy of (stream, group) in the selected database (a copy of that policy only).
pub fn get(ctx: &Context, stream: &[u8], group: &[u8]) -> Option<Policy> {
    let name = RedisString::create_from_slice(ctx.ctx, &keys::policy_key(stream));
    let key = ctx.open_key(&name);
    if key.key_type() != KeyType::Module {
        return None;
    }
    match key.get_value::<PolicySet>(&POLICY_TYPE) {
        Ok(Some(v)) => v.groups.get(group).cloned(),
        _ => None,
    }
}

/// Whether (stream, group) has a policy in the selected database, without copying it. Errs with
/// [`crate::model::error::POLICY_KEY_TAKEN`] when the policy key holds something else (where
/// [`put`] would fail).
pub fn has(ctx: &Context, stream: &[u8], group: &[u8]) -> Result<bool, &'static str> {
    let name = RedisString::create_from_slice(ctx.ctx, &keys::policy_key(stream));
    let key = ctx.open_key(&name);
    match key.key_type() {
        KeyType::Empty => Ok(false),
        KeyType::Module => match key.get_value::<PolicySet>(&POLICY_TYPE) {
            Ok(Some(v)) => Ok(v.groups.contains_key(group)),
            _ => Err(crate::model::error::POLICY_KEY_TAKEN),
        },
        _ => Err(crate::model::error::POLICY_KEY_TAKEN),
    }
}

/// Sets (replaces) the options of the policy of (stream, group) in the selected database; a
/// policy that exists keeps its [`State`] (a paused policy stays paused). Errs with
/// [`crate::model::error::POLICY_KEY_TAKEN`] when the policy key holds something else.
pub fn put(
    ctx: &Context,
    stream: &[u8],
    group: &[u8],
    mut policy: Policy,
) -> Result<(), &'static str> {
    let taken = crate::model::error::POLICY_KEY_TAKEN;
    let name = RedisString::create_from_slice(ctx.ctx, &keys::policy_key(stream));
    let key = ctx.open_key_writable(&name);
    match key.key_type() {
        KeyType::Empty => {
            let mut set = PolicySet {
                stream: stream.to_vec(),
                groups: BTreeMap::new(),
            };
            set.groups.insert(group.to_vec(), policy);
            key.set_value(&POLICY_TYPE, set).map_err(|_| taken)
        }
        KeyType::Module => match key.get_value::<PolicySet>(&POLICY_TYPE) {
            Ok(Some(v)) => {
                if let Some(old) = v.groups.get(group) {
                    policy.state = old.state;
                }
                if v.stream != stream {
                    v.stream = stream.to_vec();
                }
                v.groups.insert(group.to_vec(), policy);
                Ok(())
            }
            _ => Err(taken),
        },
        _ => Err(taken),
    }
}

/// Sets the [`State`] of the policy of (stream, group) in the selected database. Returns the
/// state it had, `None` when there is no such policy (nothing changed). A change fires its
/// keyspace event on the stream's key ([`crate::ffi::events::notify_policy_state`]: `reclaim-paused`,
/// `reclaim-storm`, `reclaim-resumed`).
pub fn set_state(ctx: &Context, stream: &[u8], group: &[u8], state: State) -> Option<State> {
    let old = store_state(ctx, stream, group, state)?;
    if old != state {
        crate::ffi::events::notify_policy_state(ctx, stream, state.name());
    }
    Some(old)
}

fn store_state(ctx: &Context, stream: &[u8], group: &[u8], state: State) -> Option<State> {
    let name = RedisString::create_from_slice(ctx.ctx, &keys::policy_key(stream));
    let key = ctx.open_key_writable(&name);
    if key.key_type() != KeyType::Module {
        return None;
    }
    let Ok(Some(v)) = key.get_value::<PolicySet>(&POLICY_TYPE) else {
        return None;
    };
    let p = v.groups.get_mut(group)?;
    Some(std::mem::replace(&mut p.state, state))
}

/// The arguments after `RECLAIM.POLICY` that give a policy its state: none when active,
/// `PAUSE key group` when paused, `PAUSE key group STORM` when the breaker is open (AOF rewrite,
/// replication of the breaker).
pub fn state_command_args(stream: &[u8], group: &[u8], state: State) -> Option<Vec<Vec<u8>>> {
    let mut a = vec![b"PAUSE".to_vec(), stream.to_vec(), group.to_vec()];
    match state {
        State::Active => return None,
        State::Paused => {}
        State::Storm => a.push(b"STORM".to_vec()),
    }
    Some(a)
}

/// Deletes the policy of (stream, group); the key goes when its last policy goes. Returns whether
/// a policy was removed.
pub fn delete(ctx: &Context, stream: &[u8], group: &[u8]) -> bool {
    let name = RedisString::create_from_slice(ctx.ctx, &keys::policy_key(stream));
    let key = ctx.open_key_writable(&name);
    if key.key_type() != KeyType::Module {
        return false;
    }
    let Ok(Some(v)) = key.get_value::<PolicySet>(&POLICY_TYPE) else {
        return false;
    };
    let removed = v.groups.remove(group).is_some();
    if removed && v.groups.is_empty() {
        let _ = key.delete();
    }
    removed
}

/// Registers the policies a load read ([`registry::take_load`]), once it ended well. A load into
/// temporary databases (a `swapdb` sync) may have named the wrong database (Redis before 7.4), so
/// each stream it read is looked up in every database instead: O(streams x databases) key
/// lookups, once per sync. Leaves database `ctx` had selected as it was.
pub fn register_loaded(ctx: &Context, load: registry::Load) {
    let mut log = LoadLog::default();
    if load.strays > 0 {
        crate::ffi::log_warning(&format!(
            "reclaim: the load kept {} policy value(s) under key names that are not their stream's policy key (after RENAME, COPY, MOVE or RESTORE); they do nothing until renamed back, and DEL removes them",
            load.strays
        ));
    }
    if !load.into_temp_db {
        for (id, state, fault) in load.ids {
            log.note(id.db, &id.stream, &id.group, fault.as_ref());
            registry::register_held(id.db, &id.stream, &id.group, state, fault);
        }
        log.end();
        return;
    }
    let mut streams: Vec<Vec<u8>> = load.ids.into_iter().map(|(id, _, _)| id.stream).collect();
    streams.sort_unstable();
    streams.dedup();
    let before = crate::ffi::selected_db(ctx);
    let mut db = 0;
    while crate::ffi::select_db(ctx, db) {
        for stream in &streams {
            if let Found::Set(set) = read(ctx, stream) {
                for (g, p) in &set.groups {
                    let f = fault(stream, p);
                    log.note(db, stream, g, f.as_ref());
                    registry::register_held(db, stream, g, p.state, f);
                }
            }
        }
        db += 1;
    }
    crate::ffi::select_db(ctx, before);
    log.end();
}

/// Most invalid policies a load names one by one in the log (then only how many more).
const LOAD_LOG_LINES: u64 = 16;

/// The warnings of a load about the policies it found invalid where they are: one line each for
/// the first [`LOAD_LOG_LINES`], then how many more.
#[derive(Default)]
struct LoadLog {
    invalid: u64,
}

impl LoadLog {
    fn note(&mut self, db: i32, stream: &[u8], group: &[u8], fault: Option<&ReclaimError>) {
        let Some(f) = fault else {
            return;
        };
        self.invalid += 1;
        if self.invalid <= LOAD_LOG_LINES {
            crate::ffi::log_warning(&invalid_warning("the load", db, stream, group, f));
        }
    }

    fn end(self) {
        if self.invalid > LOAD_LOG_LINES {
            crate::ffi::log_warning(&format!(
                "reclaim: the load found {} invalid policies in all ({} more than named above)",
                self.invalid,
                self.invalid - LOAD_LOG_LINES
            ));
        }
    }
}

/// The log line for a policy found invalid where it is (by `what`: `the load`, `RENAME`, ...).
pub fn invalid_warning(
    what: &str,
    db: i32,
    stream: &[u8],
    group: &[u8],
    fault: &ReclaimError,
) -> String {
    use crate::model::text::printable;
    format!(
        "reclaim: {what} left the policy of stream '{}' group '{}' (db {db}) invalid where it is: {}; it is kept, and does nothing until RECLAIM.POLICY SET replaces it",
        printable(stream),
        printable(group),
        crate::model::error::reason(fault)
    )
}

/// Why the policy `p` of `stream` cannot run where it is (`RECLAIM.POLICY SET` would refuse its
/// options for `stream`, or in Redis Cluster its DLQ hashes to another slot: [`Policy::fault_at`]);
/// `None` when it can. Such a policy is kept as it is, never sweeps, serves no redeliveries and
/// dead-letters nothing until a `SET` replaces it.
pub fn fault(stream: &[u8], p: &Policy) -> Option<ReclaimError> {
    p.fault_at(stream, crate::ffi::cluster_mode())
}

/// The argument vector of `RECLAIM.POLICY SET stream group <every option>`, minus the command name.
pub fn set_command_args(stream: &[u8], group: &[u8], p: &Policy) -> Vec<Vec<u8>> {
    let mut a = vec![b"SET".to_vec(), stream.to_vec(), group.to_vec()];
    a.extend(p.to_args());
    a
}
