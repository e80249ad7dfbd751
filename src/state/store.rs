//! Where policies live: one key of the module data type `reclaimpl` per stream (named by
//! [`crate::model::keys::policy_key`]), holding that stream's policies by group.
//!
//! Being keys, policies are saved in RDB, rewritten into the AOF (as `RECLAIM.POLICY SET` with
//! every option explicit), sent to replicas on full sync, migrate with their stream in a cluster
//! (same hash slot), belong to their database, and are removed by FLUSHDB/FLUSHALL. DEL of the
//! stream leaves them in place: they wait for the stream to come back. An RDB that holds policy
//! keys needs the module loaded to be read (as for any module data type).
//!
//! Each value loaded during a load (restart, full sync, `DEBUG RELOAD`) notes its policies with
//! [`crate::state::registry::loaded`] (`rdb_load`, Redis `RM_GetDbIdFromIO`, 7.0); they are registered when
//! the load ends well, so finding policies costs nothing per unrelated key, and a load that fails
//! or is thrown away leaves nothing behind. A `RESTORE` registers through its keyspace event.
//!
//! `rdb_load` handles read errors (the module declares `REDISMODULE_OPTIONS_HANDLE_IO_ERRORS`, which
//! lets a replica load a sync straight from the socket): every read is checked
//! (`RM_IsIOError`), and on the first error, or a value that is not a valid policy, it returns NULL
//! with everything it read dropped.

use std::collections::BTreeMap;
use std::ffi::CString;
use std::os::raw::{c_char, c_int, c_void};

use redis_module::native_types::RedisType;
use redis_module::{raw, Context, KeyType, RedisString};

use crate::ffi::guard;
use crate::model::keys;
use crate::model::policy::{Policy, State, Storm};
use crate::state::registry;

/// RDB encoding version of a policy value.
/// 1: 0.1.0 (MIN-IDLE, MAX-DELIVERIES, DLQ, CLAIMANT, COUNT, INTERVAL); 2: also BACKOFF and
/// LIVENESS; 3: also STORM and the state (active, paused, storm); 4: also DLQ-MAXLEN, DLQ-MAXAGE
/// and TOMBSTONES. Older values load with BACKOFF FIXED, LIVENESS 0, no STORM, active, DLQ-MAXLEN
/// 0, DLQ-MAXAGE 0, TOMBSTONES no.
const ENCODING_VERSION: i32 = 4;

/// All policies of one stream, by consumer group (binary-safe names).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicySet {
    /// The stream these policies watch.
    pub stream: Vec<u8>,
    /// Group name -> policy.
    pub groups: BTreeMap<Vec<u8>, Policy>,
}

/// The module data type (`reclaimpl`, encoding version 1).
pub static POLICY_TYPE: RedisType = RedisType::new(
    "reclaimpl",
    ENCODING_VERSION,
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb_load),
        rdb_save: Some(rdb_save),
        aof_rewrite: Some(aof_rewrite),
        mem_usage: Some(mem_usage),
        digest: Some(digest),
        free: Some(free),
        aux_load: None,
        aux_save: None,
        aux_save_triggers: 0,
        free_effort: None,
        unlink: None,
        copy: Some(copy),
        defrag: None,
        mem_usage2: None,
        free_effort2: None,
        unlink2: None,
        copy2: None,
        aux_save2: None,
    },
);

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
    if !load.into_temp_db {
        for (id, state) in load.ids {
            registry::register_held(id.db, &id.stream, &id.group, state);
        }
        return;
    }
    let mut streams: Vec<Vec<u8>> = load.ids.into_iter().map(|(id, _)| id.stream).collect();
    streams.sort_unstable();
    streams.dedup();
    let before = crate::ffi::selected_db(ctx);
    let mut db = 0;
    while crate::ffi::select_db(ctx, db) {
        for stream in &streams {
            if let Found::Set(set) = read(ctx, stream) {
                for (g, p) in &set.groups {
                    registry::register_held(db, stream, g, p.state);
                }
            }
        }
        db += 1;
    }
    crate::ffi::select_db(ctx, before);
}

fn load_bytes(rdb: *mut raw::RedisModuleIO) -> Option<Vec<u8>> {
    raw::load_string_buffer(rdb)
        .ok()
        .map(|b| b.as_ref().to_vec())
}

fn load_i64(rdb: *mut raw::RedisModuleIO) -> Option<i64> {
    raw::load_signed(rdb).ok()
}

/// Reads a `BACKOFF` (encoding version 2): a kind (0 fixed, 1 exponential, 2 list), then its
/// values.
fn load_backoff(rdb: *mut raw::RedisModuleIO) -> Option<crate::model::policy::Backoff> {
    use crate::model::policy::{Backoff, MAX_BACKOFF_STEPS};
    Some(match raw::load_unsigned(rdb).ok()? {
        0 => Backoff::Fixed,
        1 => Backoff::Exponential(load_i64(rdb)?),
        2 => {
            let n = raw::load_unsigned(rdb).ok()? as usize;
            if n > MAX_BACKOFF_STEPS {
                return None;
            }
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                v.push(load_i64(rdb)?);
            }
            Backoff::List(v)
        }
        _ => return None,
    })
}

fn save_backoff(rdb: *mut raw::RedisModuleIO, b: &crate::model::policy::Backoff) {
    use crate::model::policy::Backoff;
    match b {
        Backoff::Fixed => raw::save_unsigned(rdb, 0),
        Backoff::Exponential(max) => {
            raw::save_unsigned(rdb, 1);
            raw::save_signed(rdb, *max);
        }
        Backoff::List(v) => {
            raw::save_unsigned(rdb, 2);
            raw::save_unsigned(rdb, v.len() as u64);
            for x in v {
                raw::save_signed(rdb, *x);
            }
        }
    }
}

fn load_set(rdb: *mut raw::RedisModuleIO, encver: i32) -> Option<PolicySet> {
    let stream = load_bytes(rdb)?;
    let n = raw::load_unsigned(rdb).ok()?;
    let mut groups = BTreeMap::new();
    for _ in 0..n {
        let group = load_bytes(rdb)?;
        let min_idle_ms = load_i64(rdb)?;
        let max_deliveries = load_i64(rdb)?;
        let has_dlq = raw::load_unsigned(rdb).ok()?;
        let dlq = if has_dlq == 1 {
            Some(load_bytes(rdb)?)
        } else {
            None
        };
        let claimant = load_bytes(rdb)?;
        let count = load_i64(rdb)?;
        let interval_ms = load_i64(rdb)?;
        let (backoff, liveness_ms) = if encver >= 2 {
            (load_backoff(rdb)?, load_i64(rdb)?)
        } else {
            (Default::default(), 0)
        };
        let (storm, state) = if encver >= 3 {
            let storm = match raw::load_unsigned(rdb).ok()? {
                0 => None,
                _ => Some(Storm {
                    max: load_i64(rdb)?,
                    window_ms: load_i64(rdb)?,
                }),
            };
            (storm, State::from_code(raw::load_unsigned(rdb).ok()?)?)
        } else {
            (None, State::Active)
        };
        let (dlq_maxlen, dlq_maxage_ms, tombstones) = if encver >= 4 {
            (
                load_i64(rdb)?,
                load_i64(rdb)?,
                raw::load_unsigned(rdb).ok()? == 1,
            )
        } else {
            (0, 0, false)
        };
        let p = Policy {
            min_idle_ms,
            max_deliveries,
            dlq,
            claimant,
            count,
            interval_ms,
            backoff,
            liveness_ms,
            storm,
            dlq_maxlen,
            dlq_maxage_ms,
            tombstones,
            state,
        };
        // Only a policy that `RECLAIM.POLICY SET` would accept is good.
        let args = p.to_args();
        let a: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let parsed =
            crate::model::policy::parse_set_options(&stream, &a).map(|q| q.with_state(state));
        if parsed.as_ref() != Ok(&p) {
            crate::ffi::log_warning("reclaim: a policy value in the RDB is not a valid policy");
            return None;
        }
        groups.insert(group, p);
    }
    Some(PolicySet { stream, groups })
}

unsafe extern "C" fn rdb_load(rdb: *mut raw::RedisModuleIO, encver: c_int) -> *mut c_void {
    guard("rdb_load", || {
        if !(1..=ENCODING_VERSION).contains(&encver) {
            crate::ffi::log_warning(&format!(
                "reclaim: unknown policy encoding version {encver}"
            ));
            return std::ptr::null_mut();
        }
        let Some(set) = load_set(rdb, encver) else {
            return std::ptr::null_mut();
        };
        let db = unsafe { raw::RedisModule_GetDbIdFromIO.map(|f| f(rdb)).unwrap_or(0) };
        // Registered when the load ends well, not now: the value may belong to a temporary
        // database that the server throws away (a diskless `swapdb` sync that fails).
        registry::loaded(
            db,
            &set.stream,
            set.groups.iter().map(|(g, p)| (g, p.state)),
        );
        Box::into_raw(Box::new(set)).cast::<c_void>()
    })
    .unwrap_or(std::ptr::null_mut())
}

unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    guard("rdb_save", || {
        let set = unsafe { &*(value as *const PolicySet) };
        raw::save_slice(rdb, &set.stream);
        raw::save_unsigned(rdb, set.groups.len() as u64);
        for (g, p) in &set.groups {
            raw::save_slice(rdb, g);
            raw::save_signed(rdb, p.min_idle_ms);
            raw::save_signed(rdb, p.max_deliveries);
            match &p.dlq {
                Some(d) => {
                    raw::save_unsigned(rdb, 1);
                    raw::save_slice(rdb, d);
                }
                None => raw::save_unsigned(rdb, 0),
            }
            raw::save_slice(rdb, &p.claimant);
            raw::save_signed(rdb, p.count);
            raw::save_signed(rdb, p.interval_ms);
            save_backoff(rdb, &p.backoff);
            raw::save_signed(rdb, p.liveness_ms);
            match p.storm {
                Some(s) => {
                    raw::save_unsigned(rdb, 1);
                    raw::save_signed(rdb, s.max);
                    raw::save_signed(rdb, s.window_ms);
                }
                None => raw::save_unsigned(rdb, 0),
            }
            raw::save_unsigned(rdb, p.state.code());
            raw::save_signed(rdb, p.dlq_maxlen);
            raw::save_signed(rdb, p.dlq_maxage_ms);
            raw::save_unsigned(rdb, u64::from(p.tombstones));
        }
    });
}

/// The argument vector of `RECLAIM.POLICY SET stream group <every option>`, minus the command name.
pub fn set_command_args(stream: &[u8], group: &[u8], p: &Policy) -> Vec<Vec<u8>> {
    let mut a = vec![b"SET".to_vec(), stream.to_vec(), group.to_vec()];
    a.extend(p.to_args());
    a
}

unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    _key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    guard("aof_rewrite", || {
        let set = unsafe { &*(value as *const PolicySet) };
        let (Ok(cmd), Ok(fmt)) = (CString::new("RECLAIM.POLICY"), CString::new("v")) else {
            return;
        };
        for (g, p) in &set.groups {
            let state = state_command_args(&set.stream, g, p.state);
            for args in std::iter::once(set_command_args(&set.stream, g, p)).chain(state) {
                emit_aof(aof, &cmd, &fmt, &args);
            }
        }
    });
}

/// Writes `RECLAIM.POLICY <args...>` (`cmd`, format `v`) into the AOF being rewritten.
fn emit_aof(aof: *mut raw::RedisModuleIO, cmd: &CString, fmt: &CString, args: &[Vec<u8>]) {
    let strs: Vec<*mut raw::RedisModuleString> = args
        .iter()
        .map(|a| unsafe {
            raw::RedisModule_CreateString.unwrap()(
                std::ptr::null_mut(),
                a.as_ptr().cast::<c_char>(),
                a.len(),
            )
        })
        .collect();
    unsafe {
        raw::RedisModule_EmitAOF.unwrap()(
            aof,
            cmd.as_ptr(),
            fmt.as_ptr(),
            strs.as_ptr(),
            strs.len(),
        );
        for s in strs {
            raw::RedisModule_FreeString.unwrap()(std::ptr::null_mut(), s);
        }
    }
}

/// Entries of one B-tree node in `std::collections::BTreeMap` (its `CAPACITY`).
const BTREE_NODE_ENTRIES: usize = 11;

impl PolicySet {
    /// The bytes this value holds on the heap, box included: what `MEMORY USAGE` reports for a
    /// policy key (with the key name, which Redis adds). The groups' B-tree is counted as full
    /// nodes of `BTREE_NODE_ENTRIES` (11) entries, at least one, half full on average beyond.
    pub fn heap_bytes(&self) -> usize {
        let entry = std::mem::size_of::<Vec<u8>>() + std::mem::size_of::<Policy>();
        let node = BTREE_NODE_ENTRIES * entry + 16;
        let n = self.groups.len();
        let nodes = if n == 0 {
            0
        } else {
            1 + n.saturating_sub(BTREE_NODE_ENTRIES) * 2 / BTREE_NODE_ENTRIES
        };
        let names: usize = self
            .groups
            .iter()
            .map(|(g, p)| {
                let backoff = match &p.backoff {
                    crate::model::policy::Backoff::List(v) => v.capacity() * 8,
                    _ => 0,
                };
                g.capacity()
                    + p.claimant.capacity()
                    + p.dlq.as_ref().map_or(0, Vec::capacity)
                    + backoff
            })
            .sum();
        std::mem::size_of::<PolicySet>() + self.stream.capacity() + nodes * node + names
    }
}

unsafe extern "C" fn mem_usage(value: *const c_void) -> usize {
    guard("mem_usage", || {
        unsafe { &*(value as *const PolicySet) }.heap_bytes()
    })
    .unwrap_or(0)
}

unsafe extern "C" fn digest(md: *mut raw::RedisModuleDigest, value: *mut c_void) {
    guard("digest", || {
        let set = unsafe { &*(value as *const PolicySet) };
        unsafe {
            let add = raw::RedisModule_DigestAddStringBuffer.unwrap();
            let end = raw::RedisModule_DigestEndSequence.unwrap();
            add(md, set.stream.as_ptr().cast::<c_char>(), set.stream.len());
            end(md);
            for (g, p) in &set.groups {
                let state = p.state.name().as_bytes().to_vec();
                for a in [g.clone(), state].into_iter().chain(p.to_args()) {
                    add(md, a.as_ptr().cast::<c_char>(), a.len());
                }
                end(md);
            }
        }
    });
}

unsafe extern "C" fn free(value: *mut c_void) {
    guard("free", || {
        if !value.is_null() {
            drop(unsafe { Box::from_raw(value.cast::<PolicySet>()) });
        }
    });
}

unsafe extern "C" fn copy(
    _from: *mut raw::RedisModuleString,
    _to: *mut raw::RedisModuleString,
    value: *const c_void,
) -> *mut c_void {
    guard("copy", || {
        let set = unsafe { &*(value as *const PolicySet) };
        Box::into_raw(Box::new(set.clone())).cast::<c_void>()
    })
    .unwrap_or(std::ptr::null_mut())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The heap bytes the calling thread allocates while building a value ([`crate::ffi::alloc`]'s
    /// test allocator counts per thread), against what `MEMORY USAGE` would report.
    fn measured(groups: usize, name_len: usize) -> (usize, usize) {
        let before = crate::ffi::alloc::thread_bytes();
        let mut set = Box::new(PolicySet {
            stream: vec![b's'; name_len],
            groups: BTreeMap::new(),
        });
        for i in 0..groups {
            let mut g = format!("group-{i}").into_bytes();
            g.resize(name_len.max(g.len()), b'g');
            let p = Policy {
                claimant: vec![b'c'; name_len],
                dlq: Some(vec![b'd'; name_len]),
                ..Policy::default()
            };
            set.groups.insert(g, p);
        }
        let real = (crate::ffi::alloc::thread_bytes() - before) as usize;
        (real, set.heap_bytes())
    }

    #[test]
    fn memory_usage_follows_the_heap() {
        for (groups, len) in [(1, 8), (3, 8), (11, 8), (40, 16), (200, 8), (1, 10_000)] {
            let (real, est) = measured(groups, len);
            let ratio = est as f64 / real as f64;
            assert!(
                (0.75..=1.35).contains(&ratio),
                "{groups} groups, names of {len}: heap {real}, estimate {est}"
            );
        }
    }
}
