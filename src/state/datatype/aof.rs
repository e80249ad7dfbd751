//! `aof_rewrite`: the commands that bring back a policy key, written into the AOF being rewritten
//! (in the rewrite's child, where no command can run).

use std::ffi::CString;
use std::os::raw::{c_char, c_void};

use redis_module::raw;

use crate::ffi::guard;
use crate::model::encoding::dump::{self, DUMP_RDB_VERSION};
use crate::model::encoding::PolicySet;
use crate::model::keys;
use crate::model::policy::Policy;
use crate::state::store;

/// A value at its stream's own policy key whose policies `RECLAIM.POLICY SET` accepts is written
/// as `RECLAIM.POLICY SET` of each policy with every option explicit (and `PAUSE` for a paused
/// one). Any other value (under another name after a `RENAME`, `COPY`, `MOVE` or `RESTORE`, or
/// not a valid policy where it is) is written as `RESTORE key 0 <payload>` of its serialized
/// value ([`dump::payload`]), so it comes back under its own name, as it is, exactly as from an
/// RDB: `SET` would recreate it at its stream's policy key instead, or refuse it.
pub(super) unsafe extern "C" fn aof_rewrite(
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
                let payload = dump::payload(set, DUMP_RDB_VERSION);
                emit_aof(aof, &cmd, &fmt, &[name.to_vec(), b"0".to_vec(), payload]);
            }
            return;
        }
        let Ok(cmd) = CString::new("RECLAIM.POLICY") else {
            return;
        };
        for (g, p) in &set.groups {
            let state = store::state_command_args(&set.stream, g, p.state);
            for args in std::iter::once(store::set_command_args(&set.stream, g, p)).chain(state) {
                emit_aof(aof, &cmd, &fmt, &args);
            }
        }
    });
}

/// Whether `p` is a policy `RECLAIM.POLICY SET` would accept for `stream` (its options read
/// back the same: [`Policy::fault`]).
fn valid_policy(stream: &[u8], p: &Policy) -> bool {
    p.fault(stream).is_none()
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
