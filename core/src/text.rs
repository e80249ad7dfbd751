//! Text helpers every layer uses on user bytes: Redis's integer syntax, the bounded printable form
//! of names in error replies and logs, and the `yes`/`no` words. Pure: no Redis calls; a leaf of
//! the crate (it calls nothing else in it).

/// `yes` or `no`, as `TOMBSTONES` takes and `RECLAIM.POLICY GET` shows it.
pub fn yes_no(b: bool) -> &'static [u8] {
    if b {
        b"yes"
    } else {
        b"no"
    }
}

/// Parses an integer exactly as Redis does (`string2ll`, Redis 7.0 util.c): optional `-`, digits,
/// no `+`, no spaces, no leading zeros, within i64. Returns `None` for anything else.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    let digits = s.strip_prefix(b"-").unwrap_or(s);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    if digits.len() > 1 && digits[0] == b'0' {
        return None;
    }
    if s[0] == b'-' && digits == b"0" {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse::<i64>().ok()
}

/// A printable, bounded rendering of user bytes for error messages (no CR/LF, no NUL, at most 64
/// characters), so an error reply can never break the protocol.
pub fn printable(s: &[u8]) -> String {
    let mut out: String = s
        .iter()
        .take(64)
        .map(|&b| {
            if (0x20..0x7f).contains(&b) {
                b as char
            } else {
                '?'
            }
        })
        .collect();
    if s.len() > 64 {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_as_redis_reads_them() {
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"007"), None);
        assert_eq!(parse_i64(b"-0"), None);
        assert_eq!(parse_i64(b"+1"), None);
        assert_eq!(parse_i64(b""), None);
        assert_eq!(parse_i64(b"-"), None);
        assert_eq!(parse_i64(b"0"), Some(0));
    }

    #[test]
    fn printable_is_safe() {
        assert_eq!(printable(b"a\r\nb\0"), "a??b?");
        assert_eq!(printable(&[b'x'; 100]).len(), 67);
    }

    proptest::proptest! {
        #[test]
        fn parse_i64_matches_decimal(n in proptest::num::i64::ANY) {
            proptest::prop_assert_eq!(parse_i64(n.to_string().as_bytes()), Some(n));
        }
    }

    proptest::proptest! {
        /// Redis reads an integer only in its canonical decimal form (`string2ll`): whatever
        /// Rust's parser also takes (`+1`, `007`, `-0`, spaces refused by both) is refused here.
        #[test]
        fn parse_i64_takes_exactly_the_canonical_form(s in "[-+0-9 a]{0,22}") {
            let canonical = s.parse::<i64>().ok().filter(|n| n.to_string() == s);
            proptest::prop_assert_eq!(parse_i64(s.as_bytes()), canonical);
        }

        /// Any bytes: what Rust's parser reads back from the result, and nothing that is not
        /// ASCII digits with an optional `-`.
        #[test]
        fn parse_i64_of_any_bytes(b in proptest::collection::vec(proptest::num::u8::ANY, 0..24)) {
            if let Some(n) = parse_i64(&b) {
                proptest::prop_assert_eq!(n.to_string().into_bytes(), b.clone());
            }
        }

        /// The printable form is one short line of printable ASCII, whatever the bytes.
        #[test]
        fn printable_is_one_bounded_line(b in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let p = printable(&b);
            proptest::prop_assert!(p.len() <= 67);
            proptest::prop_assert!(p.bytes().all(|c| (0x20..0x7f).contains(&c)));
            proptest::prop_assert_eq!(p.ends_with("..."), b.len() > 64);
        }
    }
}
