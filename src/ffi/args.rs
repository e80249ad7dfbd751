//! The arguments of a command as `COMMAND DOCS` shows them (Redis 7.0 `RedisModuleCommandArg`,
//! given to `RM_SetCommandInfo`): [`Arg`], a tree of plain data the command table declares
//! (commands/docs.rs), and its C layout ([`CArgs`]). redis-cli reads them at start and shows the
//! syntax as a hint while a command is typed; [`syntax`] renders it the same way.

use std::ffi::CString;
use std::os::raw::c_int;
use std::ptr;

use redis_module::raw;

/// What an argument is (`COMMAND DOCS` `type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A key name, found by the command's key spec at this index (`key`).
    Key(i32),
    /// Any string (`string`).
    Str,
    /// An integer (`integer`).
    Int,
    /// Only its token, no value (`pure-token`).
    Token,
    /// One of the sub-arguments (`oneof`).
    OneOf(&'static [Arg]),
    /// The sub-arguments in a row (`block`).
    Block(&'static [Arg]),
}

/// One argument of a command: built with the `const` constructors and modifiers below, so the
/// command table declares its arguments as data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arg {
    /// Its name, which redis-cli 7.0 shows as the placeholder (`ms`, `dlq-key`); a pure token's
    /// name is its token, lower case.
    pub name: &'static str,
    pub kind: Kind,
    /// The word before it (`MIN-IDLE`), if any.
    pub token: Option<&'static str>,
    pub optional: bool,
    pub multiple: bool,
    /// With `multiple`: the token repeats too (`> [> ...]`).
    pub multiple_token: bool,
    /// The version of the module the argument appeared in (shown only where it differs from
    /// its command's: [`CArgs::new`]).
    pub since: Option<&'static str>,
}

const fn arg(name: &'static str, kind: Kind) -> Arg {
    Arg {
        name,
        kind,
        token: None,
        optional: false,
        multiple: false,
        multiple_token: false,
        since: None,
    }
}

/// A key named by the command's key spec `spec`.
pub const fn key(name: &'static str, spec: i32) -> Arg {
    arg(name, Kind::Key(spec))
}

/// A string.
pub const fn string(name: &'static str) -> Arg {
    arg(name, Kind::Str)
}

/// An integer.
pub const fn int(name: &'static str) -> Arg {
    arg(name, Kind::Int)
}

/// A word on its own (`STORM`, `REPLACE`): `name` is the word as the docs write it.
pub const fn word(name: &'static str) -> Arg {
    Arg {
        token: Some(name),
        ..arg(name, Kind::Token)
    }
}

/// One of `subs`.
pub const fn one_of(name: &'static str, subs: &'static [Arg]) -> Arg {
    arg(name, Kind::OneOf(subs))
}

/// `subs` in a row.
pub const fn block(name: &'static str, subs: &'static [Arg]) -> Arg {
    arg(name, Kind::Block(subs))
}

impl Arg {
    /// Preceded by `token`.
    pub const fn token(self, token: &'static str) -> Arg {
        Arg {
            token: Some(token),
            ..self
        }
    }

    /// May be left out.
    pub const fn optional(self) -> Arg {
        Arg {
            optional: true,
            ..self
        }
    }

    /// May repeat.
    pub const fn multiple(self) -> Arg {
        Arg {
            multiple: true,
            ..self
        }
    }

    /// May repeat, its token too.
    pub const fn multiple_token(self) -> Arg {
        Arg {
            multiple: true,
            multiple_token: true,
            ..self
        }
    }

    /// Appeared in module version `v`.
    pub const fn since(self, v: &'static str) -> Arg {
        Arg {
            since: Some(v),
            ..self
        }
    }

    fn type_code(&self) -> raw::RedisModuleCommandArgType {
        match self.kind {
            Kind::Key(_) => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
            Kind::Str => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
            Kind::Int => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
            Kind::Token => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
            Kind::OneOf(_) => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
            Kind::Block(_) => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
        }
    }

    fn subs(&self) -> &'static [Arg] {
        match self.kind {
            Kind::OneOf(s) | Kind::Block(s) => s,
            _ => &[],
        }
    }
}

/// The later of two versions `major.minor.patch` (numerically).
fn later<'a>(a: &'a str, b: &'a str) -> &'a str {
    let n = |v: &str| -> Vec<u64> { v.split('.').map(|p| p.parse().unwrap_or(0)).collect() };
    if n(a) >= n(b) {
        a
    } else {
        b
    }
}

/// The version `COMMAND DOCS` shows for an argument of a command that appeared in
/// `command_since`: the later of the two (an option older than the command came with it), or
/// none when that is the command's own.
pub fn shown_since(arg: &Arg, command_since: &str) -> Option<&'static str> {
    let v = arg.since?;
    (later(v, command_since) == v && v != command_since).then_some(v)
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
            c.type_ = a.type_code();
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

/// The syntax of `args` as redis-cli 7.0 shows it in its hints (`cliAddArgument`): `[MIN-IDLE
/// ms]`, `FIXED|EXPONENTIAL max-ms`, `id [id ...]`.
pub fn syntax(args: &[Arg]) -> String {
    args.iter().map(one).collect::<Vec<_>>().join(" ")
}

fn one(a: &Arg) -> String {
    let token = match (a.token, a.kind) {
        (Some(t), Kind::Token) => t.to_string(),
        (Some(t), _) => format!("{t} "),
        (None, _) => String::new(),
    };
    let repeat = match a.kind {
        Kind::Token => String::new(),
        Kind::OneOf(s) => s.iter().map(one).collect::<Vec<_>>().join("|"),
        Kind::Block(s) => syntax(s),
        _ => a.name.to_string(),
    };
    let mut out = format!("{token}{repeat}");
    if a.multiple {
        let again = if a.multiple_token {
            format!("{token}{repeat}")
        } else {
            repeat
        };
        out = format!("{out} [{again} ...]");
    }
    if a.optional {
        out = format!("[{out}]");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BACKOFF: &[Arg] = &[
        word("FIXED"),
        int("max-ms").token("EXPONENTIAL"),
        int("ms").token("LIST").multiple(),
    ];

    #[test]
    fn syntax_as_redis_cli_shows_it() {
        const STORM: &[Arg] = &[int("n"), int("window-ms")];
        const YES_NO: &[Arg] = &[word("yes"), word("no")];
        let args = [
            key("key", 0),
            string("group"),
            int("ms").token("MIN-IDLE").optional(),
            one_of("backoff", BACKOFF).token("BACKOFF").optional(),
            block("storm", STORM).token("STORM").optional(),
            one_of("tombstones", YES_NO).token("TOMBSTONES").optional(),
            word("STORM").optional(),
            word(">").multiple_token(),
            string("id").multiple(),
        ];
        assert_eq!(
            syntax(&args),
            "key group [MIN-IDLE ms] [BACKOFF FIXED|EXPONENTIAL max-ms|LIST ms [ms ...]] \
             [STORM n window-ms] [TOMBSTONES yes|no] [STORM] > [> ...] id [id ...]"
        );
    }

    #[test]
    fn since_shown_only_when_later_than_the_command() {
        let a = int("ms").token("LIVENESS").since("0.2.0");
        assert_eq!(shown_since(&a, "0.1.0"), Some("0.2.0"));
        assert_eq!(shown_since(&a, "0.2.0"), None);
        let old = int("ms").token("MIN-IDLE").since("0.1.0");
        assert_eq!(shown_since(&old, "0.2.0"), None);
        assert_eq!(shown_since(&old, "0.1.0"), None);
        assert_eq!(later("0.10.0", "0.9.0"), "0.10.0");
    }

    #[test]
    fn c_layout_terminates_every_level_and_links_subargs() {
        let args = [
            key("key", 0),
            key("dlq-key", 1).token("DLQ").optional(),
            one_of("backoff", BACKOFF).token("BACKOFF").optional(),
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
            assert_eq!(names, ["key", "dlq-key", "backoff"]);
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
