//! The arguments of a command as `COMMAND DOCS` shows them, as plain data (pure): [`Arg`], a tree
//! each command module declares beside its handler (`commands/<command>.rs`), or derives from its
//! grammar table (`RECLAIM.READGROUP`: [`crate::readgroup::OPTIONS`]). The module crate lays it
//! out for `RM_SetCommandInfo` (`ffi::args::CArgs`). redis-cli reads them at start and shows the
//! syntax as a hint while a command is typed; [`syntax`] renders it the same way.

/// The module's versions commands and options appeared in: the first (the delivery model,
/// steering and the DLQ tools), the next, and delivery metadata on read with `FORGET-IDLE`.
pub const V010: &str = "0.1.0";
pub const V020: &str = "0.2.0";
pub const V030: &str = "0.3.0";

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

/// One argument of a command: built with the `const` constructors and modifiers below, so a
/// command module declares its arguments as data.
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
    /// its command's: [`shown_since`]).
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

/// `head` followed by `tail`, as one list of `N` arguments (`N` their lengths' sum, checked at
/// compile time): a command that shares another's options (`SIMULATE` takes `SET`'s).
pub const fn concat<const N: usize>(head: &[Arg], tail: &[Arg]) -> [Arg; N] {
    assert!(head.len() + tail.len() == N, "concat: N is not the sum");
    let mut out = [arg("", Kind::Str); N];
    let mut i = 0;
    while i < N {
        out[i] = if i < head.len() {
            head[i]
        } else {
            tail[i - head.len()]
        };
        i += 1;
    }
    out
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

    /// Its sub-arguments (a `oneof` or a `block`'s), none for the others.
    pub fn subs(&self) -> &'static [Arg] {
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
    fn concat_keeps_both_in_order() {
        const HEAD: &[Arg] = &[key("key", 0), string("group")];
        const BOTH: [Arg; 5] = concat(HEAD, BACKOFF);
        assert_eq!(
            syntax(&BOTH),
            "key group FIXED EXPONENTIAL max-ms LIST ms [ms ...]"
        );
        const NONE: [Arg; 2] = concat(HEAD, &[]);
        assert_eq!(NONE, [HEAD[0], HEAD[1]]);
    }
}
