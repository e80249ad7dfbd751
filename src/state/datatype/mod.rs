//! The `reclaimpl` module data type: every `unsafe extern "C"` callback the server calls on a
//! policy value lives in this folder, each under [`crate::ffi::guard`]. What the bytes of a value
//! mean is the core's ([`crate::model::encoding`]); these callbacks only move them in and out of
//! `RedisModuleIO` ([`rdb`]: `rdb_load`, `rdb_save`; [`aof`]: `aof_rewrite`) and hand the value
//! to the server (`mem_usage`, `digest`, `free`, `copy`, here).
//!
//! Layers: the callbacks call `state/` (the registry, for what a load read; [`crate::state::store`]
//! for `fault` and the `SET` arguments) and `ffi/`, never `engine/` or above.

mod aof;
mod rdb;

use std::os::raw::{c_char, c_void};

use redis_module::native_types::RedisType;
use redis_module::raw;

use crate::ffi::guard;
use crate::model::encoding::{PolicySet, ENCODING_VERSION};

/// The module data type (`reclaimpl`, encoding version [`ENCODING_VERSION`]).
pub static POLICY_TYPE: RedisType = RedisType::new(
    "reclaimpl",
    ENCODING_VERSION,
    raw::RedisModuleTypeMethods {
        version: raw::REDISMODULE_TYPE_METHOD_VERSION as u64,
        rdb_load: Some(rdb::rdb_load),
        rdb_save: Some(rdb::rdb_save),
        aof_rewrite: Some(aof::aof_rewrite),
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
    use std::collections::BTreeMap;

    use crate::model::encoding::PolicySet;
    use crate::model::policy::Policy;

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
