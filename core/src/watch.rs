//! Which client commands can invalidate what a pass learnt about a PEL (pure).
//!
//! A pass may conclude that no delivery count is over `MAX-DELIVERIES` and that no pending entry
//! can be stale before some time (see [`crate::planner::Horizon`]). Only three commands can
//! break that without the module doing it itself, and each names the consumer that owns the
//! entries it touched:
//! - `XREADGROUP` with an ID other than `>` re-delivers a consumer's own pending entries (history):
//!   delivery count + 1, idle time 0;
//! - `XCLAIM` adds a delivery (or sets `RETRYCOUNT`), and can set any idle time (`IDLE`, `TIME`);
//! - `XAUTOCLAIM` adds a delivery, idle time 0.
//!
//! The module's command filter (`server::filter::on_client_command`) passes every client command
//! here (also those run by Lua scripts, functions, and other modules' `RM_Call`), and touches the
//! consumers named (`state::registry::touch`). A command queued in `MULTI` passes the filter
//! when it is queued, not when `EXEC` runs it: every `EXEC` makes the recent touches again
//! ([`is_exec`], `state::registry::touch_on_exec`).

/// Whether a command named `name` (any case) is `EXEC`: the commands it runs were seen when they
/// were queued, so the recent touches are made again (`registry::touch_on_exec`).
pub fn is_exec(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"exec")
}

/// Whether a command named `name` (any case) may need [`touches`]: a cheap test for the
/// hot path, where every command of every client passes.
pub fn may_touch(name: &[u8]) -> bool {
    matches!(name.len(), 6 | 10)
        && (name.eq_ignore_ascii_case(b"xclaim")
            || name.eq_ignore_ascii_case(b"xautoclaim")
            || name.eq_ignore_ascii_case(b"xreadgroup"))
}

/// What one command may change in one consumer group: the delivery counts of `consumer`'s
/// pending entries (each of the three commands leaves the entries it delivers or claims owned by
/// the consumer it names), and with `sets_idle`, their idle times too.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Touch<'a> {
    /// Stream key.
    pub stream: &'a [u8],
    /// Consumer group.
    pub group: &'a [u8],
    /// The consumer that owns the touched entries afterwards.
    pub consumer: &'a [u8],
    /// `XCLAIM ... IDLE ms` or `TIME ms`: idle times may now be anything. Otherwise a delivery only
    /// resets them to 0, which cannot make an entry stale sooner.
    pub sets_idle: bool,
}

/// What command `argv` (name first) may change: `XCLAIM key group consumer ...` and
/// `XAUTOCLAIM key group consumer ...` touch `consumer`'s entries; `XREADGROUP GROUP group
/// consumer ... STREAMS key... id...` touches `consumer`'s entries in each stream read with an ID
/// other than `>`. Arguments are parsed as Redis 7.0 `xreadCommand` does; a malformed command
/// (which Redis will reject) touches nothing.
pub fn touches<'a>(argv: &[&'a [u8]]) -> Vec<Touch<'a>> {
    let Some(name) = argv.first() else {
        return Vec::new();
    };
    let claim = name.eq_ignore_ascii_case(b"xclaim");
    if claim || name.eq_ignore_ascii_case(b"xautoclaim") {
        if argv.len() < 4 {
            return Vec::new();
        }
        // XCLAIM's IDs come first and never read IDLE or TIME; XAUTOCLAIM has no such options.
        let sets_idle = claim
            && argv[4..]
                .iter()
                .any(|a| a.eq_ignore_ascii_case(b"IDLE") || a.eq_ignore_ascii_case(b"TIME"));
        return vec![Touch {
            stream: argv[1],
            group: argv[2],
            consumer: argv[3],
            sets_idle,
        }];
    }
    if !name.eq_ignore_ascii_case(b"xreadgroup") {
        return Vec::new();
    }
    let mut who: Option<(&[u8], &[u8])> = None;
    let mut i = 1;
    while i < argv.len() {
        let more = argv.len() - i - 1;
        let o = argv[i];
        if (o.eq_ignore_ascii_case(b"BLOCK") || o.eq_ignore_ascii_case(b"COUNT")) && more > 0 {
            i += 2;
        } else if o.eq_ignore_ascii_case(b"GROUP") && more >= 2 {
            who = Some((argv[i + 1], argv[i + 2]));
            i += 3;
        } else if o.eq_ignore_ascii_case(b"NOACK") {
            i += 1;
        } else if o.eq_ignore_ascii_case(b"STREAMS") && more > 0 {
            let rest = &argv[i + 1..];
            let Some((group, consumer)) = who else {
                return Vec::new();
            };
            if rest.len() % 2 != 0 {
                return Vec::new();
            }
            let (keys, ids) = rest.split_at(rest.len() / 2);
            return keys
                .iter()
                .zip(ids)
                .filter(|(_, id)| **id != b">")
                .map(|(k, _)| Touch {
                    stream: k,
                    group,
                    consumer,
                    sets_idle: false,
                })
                .collect();
        } else {
            return Vec::new();
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The touches of a command given as words, as `stream/group/consumer[/idle]`.
    fn t(cmd: &str) -> Vec<String> {
        let argv: Vec<&[u8]> = cmd.split(' ').map(str::as_bytes).collect();
        touches(&argv)
            .into_iter()
            .map(|t| {
                let s = |b: &[u8]| String::from_utf8(b.to_vec()).unwrap();
                let idle = if t.sets_idle { "/idle" } else { "" };
                format!("{}/{}/{}{idle}", s(t.stream), s(t.group), s(t.consumer))
            })
            .collect()
    }

    #[test]
    fn names() {
        for n in ["XCLAIM", "xautoclaim", "XReadGroup"] {
            assert!(may_touch(n.as_bytes()), "{n}");
        }
        for n in ["XREAD", "XACK", "XADD", "GET", "XCLAIMS", "", "EXEC"] {
            assert!(!may_touch(n.as_bytes()), "{n}");
        }
        assert!(is_exec(b"exec") && is_exec(b"EXEC") && !is_exec(b"EXECS"));
    }

    #[test]
    fn claims_touch_their_consumer() {
        assert_eq!(t("XCLAIM s g c 0 1-0 JUSTID"), ["s/g/c"]);
        assert_eq!(t("XCLAIM s g c 0 1-0 2-0 idle 5000"), ["s/g/c/idle"]);
        assert_eq!(t("XCLAIM s g c 0 1-0 TIME 17 RETRYCOUNT 3"), ["s/g/c/idle"]);
        assert_eq!(t("xautoclaim s g c 0 0 COUNT 10"), ["s/g/c"]);
        assert_eq!(t("XCLAIM s g"), Vec::<String>::new());
    }

    #[test]
    fn xreadgroup_touches_history_reads_only() {
        assert_eq!(
            t("XREADGROUP GROUP g c STREAMS a b > >"),
            Vec::<String>::new()
        );
        assert_eq!(
            t("XREADGROUP GROUP g c COUNT 10 STREAMS a b 0 >"),
            ["a/g/c"]
        );
        assert_eq!(
            t("xreadgroup group g c block 0 noack streams a b 0-0 5-1"),
            ["a/g/c", "b/g/c"]
        );
        // Group and consumer names that read like options are taken as names.
        assert_eq!(
            t("XREADGROUP GROUP STREAMS COUNT STREAMS s 0"),
            ["s/STREAMS/COUNT"]
        );
        // Malformed: Redis rejects these, nothing is touched.
        assert_eq!(
            t("XREADGROUP GROUP g c STREAMS a b 0"),
            Vec::<String>::new()
        );
        assert_eq!(
            t("XREADGROUP GROUP g c BOGUS STREAMS a 0"),
            Vec::<String>::new()
        );
        assert_eq!(t("XREADGROUP STREAMS s 0"), Vec::<String>::new());
    }
}
