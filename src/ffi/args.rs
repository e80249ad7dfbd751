//! The arguments of a command as `COMMAND DOCS` shows them, in the C layout `RM_SetCommandInfo`
//! reads (Redis 7.0 `RedisModuleCommandArg`): [`CArgs`], from the pure [`Arg`] tree each command
//! module declares (`model::args`).

use std::ffi::CString;
use std::os::raw::c_int;
use std::ptr;

use redis_module::raw;

use crate::model::args::{shown_since, Arg, Kind};

/// The `COMMAND DOCS` type of `a`.
fn type_code(a: &Arg) -> raw::RedisModuleCommandArgType {
    match a.kind {
        Kind::Key(_) => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
        Kind::Str => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
        Kind::Int => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
        Kind::Token => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
        Kind::OneOf(_) => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
        Kind::Block(_) => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
    }
}

/// The arguments in the layout `RM_SetCommandInfo` reads, with the strings they point to: keep
/// it alive until the call returns (Redis copies what it keeps). `None` if a name holds a NUL.
pub struct CArgs {
    /// One zero-terminated array per level of the tree; `arrays[0]` is the top level.
    arrays: Vec<Vec<raw::RedisModuleCommandArg>>,
    _strings: Vec<CString>,
}

impl CArgs {
    /// `args` of a command that appeared in `since`, whose key specs number `key_specs` (a key
    /// argument without one of them is declared a string). `None` for no arguments.
    pub fn new(args: &[Arg], since: &str, key_specs: usize) -> Option<CArgs> {
        if args.is_empty() {
            return None;
        }
        let mut out = CArgs {
            arrays: Vec::new(),
            _strings: Vec::new(),
        };
        out.level(args, since, key_specs)?;
        Some(out)
    }

    /// Lays out one level (its sub-levels first, so their arrays exist); returns its index.
    fn level(&mut self, args: &[Arg], since: &str, key_specs: usize) -> Option<usize> {
        let mut level = Vec::with_capacity(args.len() + 1);
        for a in args {
            let subargs = if a.subs().is_empty() {
                ptr::null_mut()
            } else {
                let i = self.level(a.subs(), since, key_specs)?;
                // A Vec's heap buffer does not move when the outer Vec grows.
                self.arrays[i].as_mut_ptr()
            };
            let mut c: raw::RedisModuleCommandArg = unsafe { std::mem::zeroed() };
            c.name = self.cstr(a.name)?;
            c.type_ = type_code(a);
            c.key_spec_index = -1;
            if let Kind::Key(spec) = a.kind {
                if (spec as usize) < key_specs {
                    c.key_spec_index = spec;
                } else {
                    c.type_ = raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING;
                }
            }
            c.token = match a.token {
                Some(t) => self.cstr(t)?,
                None => ptr::null(),
            };
            c.since = match shown_since(a, since) {
                Some(v) => self.cstr(v)?,
                None => ptr::null(),
            };
            let mut flags = 0;
            if a.optional {
                flags |= raw::REDISMODULE_CMD_ARG_OPTIONAL;
            }
            if a.multiple {
                flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE;
            }
            if a.multiple_token {
                flags |= raw::REDISMODULE_CMD_ARG_MULTIPLE_TOKEN;
            }
            c.flags = flags as c_int;
            c.subargs = subargs;
            // Redis 7.2+ shows it instead of the name; 7.0 reads no further than `subargs`.
            c.display_text = c.name;
            level.push(c);
        }
        level.push(unsafe { std::mem::zeroed() }); // terminator: name NULL
        self.arrays.push(level);
        Some(self.arrays.len() - 1)
    }

    fn cstr(&mut self, s: &str) -> Option<*const std::os::raw::c_char> {
        let c = CString::new(s).ok()?;
        let p = c.as_ptr();
        self._strings.push(c);
        Some(p)
    }

    /// The top level, for `RedisModuleCommandInfo.args`.
    pub fn as_mut_ptr(&mut self) -> *mut raw::RedisModuleCommandArg {
        match self.arrays.last_mut() {
            Some(top) => top.as_mut_ptr(),
            None => ptr::null_mut(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::model::args::{block, int, key, string};

    const SUBS: &[Arg] = &[int("n"), int("window-ms"), string("id").multiple()];

    #[test]
    fn c_layout_terminates_every_level_and_links_subargs() {
        let args = [
            key("key", 0),
            key("dlq-key", 1).token("DLQ").optional(),
            block("storm", SUBS).token("STORM").optional(),
        ];
        let mut c = CArgs::new(&args, "0.1.0", 1).unwrap();
        let top = c.as_mut_ptr();
        unsafe {
            let names: Vec<String> = (0..3)
                .map(|i| {
                    std::ffi::CStr::from_ptr((*top.add(i)).name)
                        .to_string_lossy()
                        .into_owned()
                })
                .collect();
            assert_eq!(names, ["key", "dlq-key", "storm"]);
            assert!((*top.add(3)).name.is_null());
            // A key without a key spec of its command is a string.
            assert_eq!(
                (*top.add(1)).type_,
                raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING
            );
            assert_eq!((*top.add(1)).key_spec_index, -1);
            assert_eq!((*top).key_spec_index, 0);
            let subs = (*top.add(2)).subargs;
            assert!(!subs.is_null());
            assert!((*subs.add(3)).name.is_null());
            assert_eq!(
                (*subs.add(2)).flags,
                raw::REDISMODULE_CMD_ARG_MULTIPLE as c_int
            );
        }
        assert!(CArgs::new(&[], "0.1.0", 0).is_none());
    }
}
