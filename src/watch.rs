//! Which client commands can invalidate what a pass learnt about a PEL (pure).
//!
//! A pass may conclude that no delivery count is over `MAX-DELIVERIES` and that no pending entry
//! can be stale before some time (see [`crate::planner::Horizon`]). Only three commands can
//! break that without the module doing it itself:
//! - `XREADGROUP` with an ID other than `>` re-delivers a consumer's own pending entries (history):
//!   delivery count + 1;
//! - `XCLAIM` adds a delivery (or sets `RETRYCOUNT`), and can set any idle time (`IDLE`, `TIME`);
//! - `XAUTOCLAIM` adds a delivery.
//!
//! The module's command filter ([`crate::timer::on_client_command`]) passes every client command
//! here (also those run by Lua scripts, functions, and other modules' `RM_Call`), and marks the
//! streams named ([`crate::registry::mark_stream`]). A command queued in `MULTI` passes the
//! filter when it is queued, not when `EXEC` runs it: every `EXEC` marks the recently marked
//! streams again ([`is_exec`]).

/// Whether a command named `name` (any case) is `EXEC`: the commands it runs were seen when they
/// were queued, so the streams marked recently are marked again (`registry::mark_on_exec`).
pub fn is_exec(name: &[u8]) -> bool {
    name.eq_ignore_ascii_case(b"exec")
}

/// Whether a command named `name` (any case) may need [`touched_streams`]: a cheap test for the
/// hot path, where every command of every client passes.
pub fn may_touch(name: &[u8]) -> bool {
    matches!(name.len(), 6 | 10)
        && (name.eq_ignore_ascii_case(b"xclaim")
            || name.eq_ignore_ascii_case(b"xautoclaim")
            || name.eq_ignore_ascii_case(b"xreadgroup"))
}

/// The streams whose delivery counts or idle times command `argv` (name first) may change:
/// the key of `XCLAIM` / `XAUTOCLAIM`; the keys of `XREADGROUP` read with an ID other than `>`.
/// Arguments are parsed as Redis 7.0 `xreadCommand` does; a malformed command (which Redis will
/// reject) touches nothing.
pub fn touched_streams<'a>(argv: &[&'a [u8]]) -> Vec<&'a [u8]> {
    let Some(name) = argv.first() else {
        return Vec::new();
    };
    if name.eq_ignore_ascii_case(b"xclaim") || name.eq_ignore_ascii_case(b"xautoclaim") {
        return argv.get(1).map(|k| vec![*k]).unwrap_or_default();
    }
    if !name.eq_ignore_ascii_case(b"xreadgroup") {
        return Vec::new();
    }
    let mut i = 1;
    while i < argv.len() {
        let more = argv.len() - i - 1;
        let o = argv[i];
        if (o.eq_ignore_ascii_case(b"BLOCK") || o.eq_ignore_ascii_case(b"COUNT")) && more > 0 {
            i += 2;
        } else if o.eq_ignore_ascii_case(b"GROUP") && more >= 2 {
            i += 3;
        } else if o.eq_ignore_ascii_case(b"NOACK") {
            i += 1;
        } else if o.eq_ignore_ascii_case(b"STREAMS") && more > 0 {
            let rest = &argv[i + 1..];
            if rest.len() % 2 != 0 {
                return Vec::new();
            }
            let (keys, ids) = rest.split_at(rest.len() / 2);
            return keys
                .iter()
                .zip(ids)
                .filter(|(_, id)| **id != b">")
                .map(|(k, _)| *k)
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

    fn t(cmd: &str) -> Vec<String> {
        let argv: Vec<&[u8]> = cmd.split(' ').map(str::as_bytes).collect();
        touched_streams(&argv)
            .into_iter()
            .map(|k| String::from_utf8(k.to_vec()).unwrap())
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
    fn claims_touch_their_key() {
        assert_eq!(t("XCLAIM s g c 0 1-0 JUSTID"), ["s"]);
        assert_eq!(t("xautoclaim s g c 0 0"), ["s"]);
        assert_eq!(t("XCLAIM"), Vec::<String>::new());
    }

    #[test]
    fn xreadgroup_touches_history_reads_only() {
        assert_eq!(
            t("XREADGROUP GROUP g c STREAMS a b > >"),
            Vec::<String>::new()
        );
        assert_eq!(t("XREADGROUP GROUP g c COUNT 10 STREAMS a b 0 >"), ["a"]);
        assert_eq!(
            t("xreadgroup group g c block 0 noack streams a b 0-0 5-1"),
            ["a", "b"]
        );
        // Group and consumer names that read like options are skipped as names.
        assert_eq!(t("XREADGROUP GROUP STREAMS COUNT STREAMS s 0"), ["s"]);
        // Malformed: Redis rejects these, nothing is touched.
        assert_eq!(
            t("XREADGROUP GROUP g c STREAMS a b 0"),
            Vec::<String>::new()
        );
        assert_eq!(
            t("XREADGROUP GROUP g c BOGUS STREAMS a 0"),
            Vec::<String>::new()
        );
        assert_eq!(t("XREADGROUP STREAMS"), Vec::<String>::new());
    }
}
