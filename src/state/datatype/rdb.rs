//! `rdb_load` and `rdb_save`: a policy value's fields in and out of `RedisModuleIO`
//! (`RM_Save*`/`RM_Load*`), in the order [`crate::model::encoding`] writes and reads them.
//!
//! Each value loaded during a load (restart, full sync, `DEBUG RELOAD`) notes its policies with
//! [`crate::state::registry::loaded`] (Redis `RM_GetDbIdFromIO`, 7.0); they are registered when
//! the load ends well ([`crate::state::store::register_loaded`]), so finding policies costs
//! nothing per unrelated key, and a load that fails or is thrown away leaves nothing behind.
//!
//! `rdb_load` handles read errors (the module declares `REDISMODULE_OPTIONS_HANDLE_IO_ERRORS`,
//! which lets a replica load a sync straight from the socket): every read is checked
//! (`RM_IsIOError`), and on the first error, or a value that is not a valid policy, it returns
//! NULL with everything it read dropped.

use std::os::raw::{c_int, c_void};

use redis_module::raw;

use crate::ffi::guard;
use crate::model::encoding::{self, PolicySet, Sink, Source, ENCODING_VERSION};
use crate::model::keys;
use crate::state::{registry, store};

/// The RDB being saved or loaded.
struct Io(*mut raw::RedisModuleIO);

impl Sink for Io {
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

impl Source for Io {
    fn unsigned(&mut self) -> Option<u64> {
        raw::load_unsigned(self.0).ok()
    }
    fn signed(&mut self) -> Option<i64> {
        raw::load_signed(self.0).ok()
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        raw::load_string_buffer(self.0)
            .ok()
            .map(|b| b.as_ref().to_vec())
    }
}

pub(super) unsafe extern "C" fn rdb_load(
    rdb: *mut raw::RedisModuleIO,
    encver: c_int,
) -> *mut c_void {
    guard("rdb_load", || {
        if !(1..=ENCODING_VERSION).contains(&encver) {
            crate::ffi::log_warning(&format!(
                "reclaim: unknown policy encoding version {encver}"
            ));
            return std::ptr::null_mut();
        }
        let name = unsafe { key_name_of(rdb) };
        let Some(set) = encoding::load_set(&mut Io(rdb), encver) else {
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
        Box::into_raw(Box::new(note_loaded(db, name, set))).cast::<c_void>()
    })
    .unwrap_or(std::ptr::null_mut())
}

/// A value just read under key `name` in database `db`: made its stream's when its key names
/// another stream's policy key, and noted for the end of the load when it is at a policy key.
fn note_loaded(db: i32, name: Option<Vec<u8>>, mut set: PolicySet) -> PolicySet {
    match name.as_deref().map(keys::stream_of_policy_key) {
        // Under another name (`RENAME`, `COPY`, `MOVE` or `RESTORE` put it there): kept as
        // it is, and inert (the module only reads a stream's own policy key).
        Some(None) => {
            registry::stray_loaded();
            return set;
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
            .map(|(g, p)| (g, p.state, store::fault(&set.stream, p))),
    );
    set
}

/// The name of the key being loaded (`RM_GetKeyNameFromIO`), when the server gives it.
unsafe fn key_name_of(rdb: *mut raw::RedisModuleIO) -> Option<Vec<u8>> {
    let f = raw::RedisModule_GetKeyNameFromIO?;
    let k = f(rdb);
    (!k.is_null()).then(|| crate::ffi::bytes_of(k as *mut raw::RedisModuleString).to_vec())
}

pub(super) unsafe extern "C" fn rdb_save(rdb: *mut raw::RedisModuleIO, value: *mut c_void) {
    guard("rdb_save", || {
        let set = unsafe { &*(value as *const PolicySet) };
        encoding::save_set(&mut Io(rdb), set);
    });
}
