//! Where policies live: one key of the module data type `reclaimpl` per stream (named by
//! [`crate::model::keys::policy_key`]), holding that stream's policies by group.
//!
//! Being keys, policies are saved in RDB, rewritten into the AOF (as `RECLAIM.POLICY SET` with
//! every option explicit, or, for a value under another name or not valid where it is, as
//! `RESTORE` of its serialized value: see `aof_rewrite`), sent to replicas on full sync, migrate with their stream in a cluster
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
use crate::model::error::ReclaimError;
use crate::model::keys;
use crate::model::policy::{Policy, State, Storm};
use crate::state::registry;

/// RDB encoding version of a policy value.
/// 1: 0.1.0 (MIN-IDLE, MAX-DELIVERIES, DLQ, CLAIMANT, COUNT, INTERVAL); 2: also BACKOFF and
/// LIVENESS; 3: also STORM and the state (active, paused, storm); 4: also DLQ-MAXLEN, DLQ-MAXAGE
/// and TOMBSTONES; 5: also FORGET-IDLE. Older values load with BACKOFF FIXED, LIVENESS 0, no
/// STORM, active, DLQ-MAXLEN 0, DLQ-MAXAGE 0, TOMBSTONES no, FORGET-IDLE 0.
const ENCODING_VERSION: i32 = 5;

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
            // More than SET takes is kept (and marked invalid); each value is read from the
            // payload, so a count larger than the payload fails at its end, allocating no more
            // than the payload holds.
            let n = raw::load_unsigned(rdb).ok()?;
            let mut v = Vec::with_capacity((n as usize).min(MAX_BACKOFF_STEPS));
            for _ in 0..n {
                v.push(load_i64(rdb)?);
            }
            Backoff::List(v)
        }
        _ => return None,
    })
}

/// Where a policy value is written, in the order `rdb_load` reads it: the RDB (`rdb_save`,
/// through the module API) or a `DUMP` payload built by the module itself ([`dump_payload`], for
/// `aof_rewrite`).
trait Sink {
    fn unsigned(&mut self, v: u64);
    fn signed(&mut self, v: i64);
    fn bytes(&mut self, b: &[u8]);
}

/// The RDB being saved (`RM_SaveUnsigned`, `RM_SaveSigned`, `RM_SaveStringBuffer`).
struct Rdb(*mut raw::RedisModuleIO);

impl Sink for Rdb {
    fn unsigned(&mut self, v: u64) {
        raw::save_unsigned(self.0, v);
    }
    fn signed(&mut self, v: i64) {
        raw::save_signed(self.0, v);
    }
    fn bytes(&mut self, b: &[u8]) {
        raw::save_slice(self.0, b);
    }
}

fn save_backoff(out: &mut impl Sink, b: &crate::model::policy::Backoff) {
    use crate::model::policy::Backoff;
    match b {
        Backoff::Fixed => out.unsigned(0),
        Backoff::Exponential(max) => {
            out.unsigned(1);
            out.signed(*max);
        }
        Backoff::List(v) => {
            out.unsigned(2);
            out.unsigned(v.len() as u64);
            for x in v {
                out.signed(*x);
            }
        }
    }
}

/// Writes a policy value, encoding version [`ENCODING_VERSION`].
fn save_set(out: &mut impl Sink, set: &PolicySet) {
    out.bytes(&set.stream);
    out.unsigned(set.groups.len() as u64);
    for (g, p) in &set.groups {
        out.bytes(g);
        out.signed(p.min_idle_ms);
        out.signed(p.max_deliveries);
        match &p.dlq {
            Some(d) => {
                out.unsigned(1);
                out.bytes(d);
            }
            None => out.unsigned(0),
        }
        out.bytes(&p.claimant);
        out.signed(p.count);
        out.signed(p.interval_ms);
        save_backoff(out, &p.backoff);
        out.signed(p.liveness_ms);
        match p.storm {
            Some(st) => {
                out.unsigned(1);
                out.signed(st.max);
                out.signed(st.window_ms);
            }
            None => out.unsigned(0),
        }
        out.unsigned(p.state.code());
        out.signed(p.dlq_maxlen);
        out.signed(p.dlq_maxage_ms);
        out.unsigned(u64::from(p.tombstones));
        out.signed(p.forget_idle_ms);
    }
}

/// Whether `p` is a policy `RECLAIM.POLICY SET` would accept for `stream` (its options read
/// back the same: [`Policy::fault`]).
fn valid_policy(stream: &[u8], p: &Policy) -> bool {
    p.fault(stream).is_none()
}

/// Why the policy `p` of `stream` cannot run where it is (`RECLAIM.POLICY SET` would refuse its
/// options for `stream`, or in Redis Cluster its DLQ hashes to another slot: [`Policy::fault_at`]);
/// `None` when it can. Such a policy is kept as it is, never sweeps, serves no redeliveries and
/// dead-letters nothing until a `SET` replaces it.
pub fn fault(stream: &[u8], p: &Policy) -> Option<ReclaimError> {
    p.fault_at(stream, crate::ffi::cluster_mode())
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
        let forget_idle_ms = if encver >= 5 { load_i64(rdb)? } else { 0 };
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
            forget_idle_ms,
            state,
        };
        // Kept as it is, whatever its options: one `SET` would refuse is marked invalid where
        // it is used ([`fault`]), never refused here (a load must not fail for it).
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
        let name = unsafe { key_name_of(rdb) };
        let Some(mut set) = load_set(rdb, encver) else {
            // What the server does with NULL is its own: `RESTORE` answers `ERR Bad data
            // format`, as for any corrupt payload. A saved value always decodes (this module
            // wrote it), so at start-up only a damaged file gets here.
            crate::ffi::log_warning(&format!(
                "reclaim: the policy value of key '{}' cannot be decoded (truncated or damaged)",
                crate::model::text::printable(name.as_deref().unwrap_or(b"?"))
            ));
            return std::ptr::null_mut();
        };
        let db = unsafe { raw::RedisModule_GetDbIdFromIO.map(|f| f(rdb)).unwrap_or(0) };
        match name.as_deref().map(keys::stream_of_policy_key) {
            // Under another name (`RENAME`, `COPY`, `MOVE` or `RESTORE` put it there): kept as
            // it is, and inert (the module only reads a stream's own policy key).
            Some(None) => {
                registry::stray_loaded();
                return Box::into_raw(Box::new(set)).cast::<c_void>();
            }
            // The value belongs to the stream its key names, as when it arrives by `RENAME` or
            // `RESTORE` (`server::events`).
            Some(Some(stream)) => set.stream = stream,
            None => {}
        }
        // Registered when the load ends well, not now: the value may belong to a temporary
        // database that the server throws away (a diskless `swapdb` sync that fails).
        registry::loaded(
            db,
            &set.stream,
            set.groups
                .iter()
                .map(|(g, p)| (g, p.state, fault(&set.stream, p))),
        );
        Box::into_raw(Box::new(set)).cast::<c_void>()
    })
    .unwrap_or(std::ptr::null_mut())
}

/// The name of the key being loaded (`RM_GetKeyNameFromIO`), when the server gives it.
unsafe fn key_name_of(rdb: *mut raw::RedisModuleIO) -> Option<Vec<u8>> {
    let f = raw::RedisModule_GetKeyNameFromIO?;
    let k = f(rdb);
    (!k.is_null()).then(|| crate::ffi::bytes_of(k as *mut raw::RedisModuleString).to_vec())
}

unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    guard("rdb_save", || {
        let set = unsafe { &*(value as *const PolicySet) };
        save_set(&mut Rdb(rdb), set);
    });
}

/// The argument vector of `RECLAIM.POLICY SET stream group <every option>`, minus the command name.
pub fn set_command_args(stream: &[u8], group: &[u8], p: &Policy) -> Vec<Vec<u8>> {
    let mut a = vec![b"SET".to_vec(), stream.to_vec(), group.to_vec()];
    a.extend(p.to_args());
    a
}

/// `aof_rewrite`: the commands that bring back this exact key. A value at its stream's own
/// policy key whose policies `RECLAIM.POLICY SET` accepts is written as `RECLAIM.POLICY SET` of
/// each policy with every option explicit (and `PAUSE` for a paused one). Any other value (under
/// another name after a `RENAME`, `COPY`, `MOVE` or `RESTORE`, or not a valid policy where it
/// is) is written as `RESTORE key 0 <payload>` of its serialized value, so it comes back under
/// its own name, as it is, exactly as from an RDB: `SET` would recreate it at its stream's
/// policy key instead, or refuse it.
unsafe extern "C" fn aof_rewrite(
    aof: *mut raw::RedisModuleIO,
    key: *mut raw::RedisModuleString,
    value: *mut c_void,
) {
    guard("aof_rewrite", || {
        let set = unsafe { &*(value as *const PolicySet) };
        let name = unsafe { crate::ffi::bytes_of(key) };
        let canonical = name == keys::policy_key(&set.stream).as_slice()
            && set.groups.values().all(|p| valid_policy(&set.stream, p));
        let Ok(fmt) = CString::new("v") else {
            return;
        };
        if !canonical {
            if let Ok(cmd) = CString::new("RESTORE") {
                let payload = dump_payload(set, DUMP_RDB_VERSION);
                emit_aof(aof, &cmd, &fmt, &[name.to_vec(), b"0".to_vec(), payload]);
            }
            return;
        }
        let Ok(cmd) = CString::new("RECLAIM.POLICY") else {
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

/// The RDB version written in the payloads of [`dump_payload`]: Redis 7.0's (10), the oldest
/// server the module runs on; every later server (and Valkey) restores payloads of older
/// versions.
const DUMP_RDB_VERSION: u16 = 10;

/// A `DUMP` payload as the server would write it (`RM_Save*` into a module value, Redis
/// `rdb.c`/`cluster.c`), built without the server: it is written in the AOF rewrite's child,
/// where no command can run. The layout: the type byte `RDB_TYPE_MODULE_2` (7), the module
/// type's 64-bit id (the type name's nine characters, six bits each, then the encoding version in
/// ten bits) as an RDB length, the value (each field an opcode, `UINT` 2 or `STRING` 5, then an
/// RDB length, and a string's bytes), `EOF` (0); then the RDB version (2 bytes, little endian)
/// and the CRC-64 (Jones) of everything before it (8 bytes, little endian).
fn dump_payload(set: &PolicySet, rdb_version: u16) -> Vec<u8> {
    struct Dump(Vec<u8>);
    impl Sink for Dump {
        fn unsigned(&mut self, v: u64) {
            self.0.push(2);
            rdb_len(&mut self.0, v);
        }
        fn signed(&mut self, v: i64) {
            self.unsigned(v as u64);
        }
        fn bytes(&mut self, b: &[u8]) {
            self.0.push(5);
            rdb_len(&mut self.0, b.len() as u64);
            self.0.extend_from_slice(b);
        }
    }
    let mut d = Dump(vec![7]);
    rdb_len(&mut d.0, module_type_id(b"reclaimpl", ENCODING_VERSION));
    save_set(&mut d, set);
    d.0.push(0);
    d.0.extend_from_slice(&rdb_version.to_le_bytes());
    let crc = crc64(&d.0);
    d.0.extend_from_slice(&crc.to_le_bytes());
    d.0
}

/// An RDB length (Redis `rdbSaveLen`): 6 bits, 14 bits, or a marker byte and 32 or 64 bits big
/// endian.
fn rdb_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// The 64-bit id of a module data type (Redis `moduleTypeEncodeId`).
fn module_type_id(name: &[u8; 9], encver: i32) -> u64 {
    const CHARSET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut id = 0u64;
    for c in name {
        let pos = CHARSET.iter().position(|x| x == c).unwrap_or(0) as u64;
        id = (id << 6) | pos;
    }
    (id << 10) | (encver as u64 & 1023)
}

/// CRC-64 as Redis checks `DUMP` payloads with (Jones, the `crc` crate's `CRC_64_REDIS`).
fn crc64(data: &[u8]) -> u64 {
    const JONES: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);
    JONES.checksum(data)
}

/// Writes `<cmd> <args...>` (format `v`) into the AOF being rewritten.
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

    /// What Redis 7.0.15 replied (encoding version 5) to `DUMP reclaim:policy:{orders}:orders` after `RECLAIM.POLICY
    /// SET orders workers DLQ orders:dlq MAX-DELIVERIES 3 CLAIMANT fixer BACKOFF LIST 100 200
    /// STORM 5 60000` and `RECLAIM.POLICY PAUSE orders workers`.
    const SERVER_DUMP: &[u8] = &[
        7, 129, 173, 231, 37, 106, 41, 169, 148, 5, 5, 6, 111, 114, 100, 101, 114, 115, 2, 1, 5, 7,
        119, 111, 114, 107, 101, 114, 115, 2, 128, 0, 0, 234, 96, 2, 3, 2, 1, 5, 10, 111, 114, 100,
        101, 114, 115, 58, 100, 108, 113, 5, 5, 102, 105, 120, 101, 114, 2, 64, 100, 2, 103, 16, 2,
        2, 2, 2, 2, 64, 100, 2, 64, 200, 2, 0, 2, 1, 2, 5, 2, 128, 0, 0, 234, 96, 2, 1, 2, 0, 2, 0,
        2, 0, 2, 0, 0, 10, 0, 121, 144, 254, 114, 174, 82, 167, 232,
    ];

    #[test]
    fn dump_payload_is_the_servers() {
        let args: Vec<&[u8]> = vec![
            b"DLQ",
            b"orders:dlq",
            b"MAX-DELIVERIES",
            b"3",
            b"CLAIMANT",
            b"fixer",
            b"BACKOFF",
            b"LIST",
            b"100",
            b"200",
            b"STORM",
            b"5",
            b"60000",
        ];
        let p = crate::model::policy::parse_set_options(b"orders", &args)
            .unwrap()
            .with_state(State::Paused);
        let mut set = PolicySet {
            stream: b"orders".to_vec(),
            groups: BTreeMap::new(),
        };
        set.groups.insert(b"workers".to_vec(), p);
        assert_eq!(dump_payload(&set, 10), SERVER_DUMP);
    }

    #[test]
    fn crc64_is_redis_jones() {
        // Redis src/crc64.c's test vector.
        assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn rdb_lengths() {
        let enc = |n: u64| {
            let mut v = Vec::new();
            rdb_len(&mut v, n);
            v
        };
        assert_eq!(enc(0), [0]);
        assert_eq!(enc(63), [63]);
        assert_eq!(enc(64), [0x40, 64]);
        assert_eq!(enc(16383), [0x7f, 0xff]);
        assert_eq!(enc(16384), [0x80, 0, 0, 0x40, 0]);
        assert_eq!(enc(1 << 32), [0x81, 0, 0, 0, 1, 0, 0, 0, 0]);
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
