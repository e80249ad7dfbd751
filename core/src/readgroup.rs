//! `RECLAIM.READGROUP`'s request and its parser (pure): XREADGROUP's syntax, options in any
//! order before `STREAMS`, accepting only the ID `>`, plus the pure token `DELIVERY-METADATA`
//! (each entry of the reply then carries its idle time and delivery count, as Redis 8.4's
//! `XREADGROUP ... CLAIM` replies them).

use crate::error::{self, ReclaimError};
use crate::text::parse_i64;

/// A parsed `RECLAIM.READGROUP`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Consumer group.
    pub group: Vec<u8>,
    /// The reading consumer.
    pub consumer: Vec<u8>,
    /// `COUNT` (0: no limit on new entries, as XREADGROUP; redeliveries then stop at the
    /// policy's `COUNT`).
    pub count: i64,
    /// `BLOCK` ms (`None`: do not block; 0: wait forever).
    pub block_ms: Option<i64>,
    /// `DELIVERY-METADATA`: each entry replied as `[id, fields, idle-ms, delivery-count]`.
    pub delivery_metadata: bool,
    /// The stream keys, in order.
    pub keys: Vec<Vec<u8>>,
}

/// The option that adds each entry's delivery metadata to the reply.
pub const DELIVERY_METADATA: &[u8] = b"DELIVERY-METADATA";

/// Parses the arguments after the command name, as XREADGROUP does (options in any order before
/// `STREAMS`, then keys and as many IDs), accepting only the ID `>`.
/// The request borrows the arguments ([`Args::to_request`] makes an owned [`Request`]).
pub fn parse_args<'a>(args: &[&'a [u8]]) -> Result<Args<'a>, ReclaimError> {
    let mut req = Args {
        group: b"",
        consumer: b"",
        count: 0,
        block_ms: None,
        delivery_metadata: false,
        keys: smallvec::SmallVec::new(),
    };
    let mut group_given = false;
    let mut i = 0;
    while i < args.len() {
        let more = args.len() - i - 1;
        let o = args[i];
        if o.eq_ignore_ascii_case(b"BLOCK") && more > 0 {
            let ms = parse_i64(args[i + 1]).ok_or(error::TIMEOUT_NOT_INTEGER)?;
            if ms < 0 {
                return Err(error::TIMEOUT_NEGATIVE.into());
            }
            req.block_ms = Some(ms);
            i += 2;
        } else if o.eq_ignore_ascii_case(b"COUNT") && more > 0 {
            let n = parse_i64(args[i + 1]).ok_or(error::NOT_AN_INTEGER)?;
            req.count = n.max(0);
            i += 2;
        } else if o.eq_ignore_ascii_case(b"GROUP") && more >= 2 {
            req.group = args[i + 1];
            req.consumer = args[i + 2];
            group_given = true;
            i += 3;
        } else if o.eq_ignore_ascii_case(b"NOACK") {
            return Err(error::READGROUP_NOACK.into());
        } else if o.eq_ignore_ascii_case(DELIVERY_METADATA) {
            req.delivery_metadata = true;
            i += 1;
        } else if o.eq_ignore_ascii_case(b"STREAMS") && more > 0 {
            let rest = &args[i + 1..];
            if rest.len() % 2 != 0 {
                return Err(error::READGROUP_UNBALANCED.into());
            }
            let (keys, ids) = rest.split_at(rest.len() / 2);
            if ids.iter().any(|id| *id != b">") {
                return Err(error::READGROUP_ONLY_NEW.into());
            }
            req.keys = keys.iter().copied().collect();
            break;
        } else {
            return Err(error::SYNTAX.into());
        }
    }
    if req.keys.is_empty() {
        return Err(error::SYNTAX.into());
    }
    if !group_given {
        return Err(error::READGROUP_NO_GROUP.into());
    }
    Ok(req)
}

/// [`parse_args`], owned.
pub fn parse(args: &[&[u8]]) -> Result<Request, ReclaimError> {
    parse_args(args).map(|a| a.to_request())
}

/// A parsed `RECLAIM.READGROUP` borrowing the command's arguments ([`Request`]'s fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Args<'a> {
    pub group: &'a [u8],
    pub consumer: &'a [u8],
    pub count: i64,
    pub block_ms: Option<i64>,
    pub delivery_metadata: bool,
    pub keys: smallvec::SmallVec<[&'a [u8]; 4]>,
}

impl Args<'_> {
    /// The owned request.
    pub fn to_request(&self) -> Request {
        Request {
            group: self.group.to_vec(),
            consumer: self.consumer.to_vec(),
            count: self.count,
            block_ms: self.block_ms,
            delivery_metadata: self.delivery_metadata,
            keys: self.keys.iter().map(|k| k.to_vec()).collect(),
        }
    }
}

/// The argv positions of the stream keys of `argv` (the command name first), found as
/// XREADGROUP's own key extraction finds them (`xreadGetKeys`): options skipped up to the first
/// `STREAMS` in an option's place, then the first half of the arguments after it. Empty on a
/// syntax error (no `STREAMS`, nothing or an odd count after it): the command itself then
/// replies the error, wherever it runs.
pub fn key_positions(argv: &[&[u8]]) -> Vec<usize> {
    let mut i = 1;
    while i < argv.len() {
        let o = argv[i];
        if o.eq_ignore_ascii_case(b"BLOCK") || o.eq_ignore_ascii_case(b"COUNT") {
            i += 2;
        } else if o.eq_ignore_ascii_case(b"GROUP") {
            i += 3;
        } else if o.eq_ignore_ascii_case(b"NOACK") || o.eq_ignore_ascii_case(DELIVERY_METADATA) {
            i += 1;
        } else if o.eq_ignore_ascii_case(b"STREAMS") {
            let rest = argv.len() - i - 1;
            if rest == 0 || rest % 2 != 0 {
                return Vec::new();
            }
            return (i + 1..i + 1 + rest / 2).collect();
        } else {
            return Vec::new();
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Request, String> {
        let a: Vec<&[u8]> = s.split(' ').map(str::as_bytes).collect();
        parse(&a).map_err(|e| e.to_string())
    }

    #[test]
    fn parses_like_xreadgroup() {
        let r = p("GROUP g c COUNT 10 BLOCK 0 STREAMS a b > >").unwrap();
        assert_eq!(r.group, b"g");
        assert_eq!(r.consumer, b"c");
        assert_eq!((r.count, r.block_ms), (10, Some(0)));
        assert_eq!(r.keys, vec![b"a".to_vec(), b"b".to_vec()]);
        // Options in any order, COUNT below 0 is no limit, names that read like options.
        let r = p("count -5 group STREAMS COUNT streams s >").unwrap();
        assert_eq!(
            (r.count, r.group.as_slice(), r.consumer.as_slice()),
            (0, &b"STREAMS"[..], &b"COUNT"[..])
        );
        assert_eq!(r.block_ms, None);
        assert!(!r.delivery_metadata);
        // DELIVERY-METADATA: a pure token, in any place before STREAMS, any case.
        for args in [
            "GROUP g c DELIVERY-METADATA STREAMS a >",
            "delivery-metadata GROUP g c COUNT 1 STREAMS a >",
            "GROUP g c COUNT 1 Delivery-Metadata BLOCK 5 STREAMS a >",
        ] {
            let r = p(args).unwrap();
            assert!(r.delivery_metadata, "{args}");
            assert_eq!(r.keys, vec![b"a".to_vec()], "{args}");
        }
        // A group or consumer of that name is a name.
        let r = p("GROUP DELIVERY-METADATA DELIVERY-METADATA STREAMS a >").unwrap();
        assert_eq!(r.group, b"DELIVERY-METADATA");
        assert!(!r.delivery_metadata);
    }

    #[test]
    fn key_positions_are_xreadgroups() {
        let k = |s: &str| {
            let a: Vec<&[u8]> = s.split(' ').map(str::as_bytes).collect();
            key_positions(&a)
        };
        assert_eq!(k("R GROUP g c STREAMS a >"), [5]);
        assert_eq!(k("R GROUP g c COUNT 10 BLOCK 0 STREAMS a b > >"), [9, 10]);
        // Names that read like options: the group, the consumer, a stream.
        assert_eq!(k("R GROUP STREAMS COUNT NOACK STREAMS STREAMS >"), [6]);
        assert_eq!(k("R COUNT 1 GROUP g c STREAMS a b c > > >"), [7, 8, 9]);
        assert_eq!(k("R GROUP g c DELIVERY-METADATA STREAMS a >"), [6]);
        assert_eq!(
            k("R delivery-metadata GROUP g c COUNT 2 STREAMS a b > >"),
            [8, 9]
        );
        // Syntax errors: no keys (the command replies the error where it runs).
        for bad in [
            "R GROUP g c STREAMS a b >",
            "R GROUP g c STREAMS",
            "R GROUP g c",
            "R BOGUS STREAMS a >",
            "R",
        ] {
            assert!(k(bad).is_empty(), "{bad}");
        }
    }

    #[test]
    fn errors_as_xreadgroup_gives_them() {
        let cases = [
            ("GROUP g c STREAMS a b >", error::READGROUP_UNBALANCED),
            ("GROUP g c STREAMS a 0", error::READGROUP_ONLY_NEW),
            ("GROUP g c STREAMS a $", error::READGROUP_ONLY_NEW),
            ("GROUP g c NOACK STREAMS a >", error::READGROUP_NOACK),
            (
                "GROUP g c DELIVERY-METADATA NOACK STREAMS a >",
                error::READGROUP_NOACK,
            ),
            ("GROUP g c DELIVERY-METADATA STREAMS", error::SYNTAX),
            ("GROUP g c DELIVERY-METADATA=1 STREAMS a >", error::SYNTAX),
            ("DELIVERY-METADATA STREAMS a >", error::READGROUP_NO_GROUP),
            ("GROUP g c BOGUS STREAMS a >", error::SYNTAX),
            ("GROUP g c COUNT", error::SYNTAX),
            ("GROUP g c", error::SYNTAX),
            ("STREAMS a >", error::READGROUP_NO_GROUP),
            ("GROUP g c COUNT x STREAMS a >", error::NOT_AN_INTEGER),
            ("GROUP g c BLOCK x STREAMS a >", error::TIMEOUT_NOT_INTEGER),
            ("GROUP g c BLOCK -1 STREAMS a >", error::TIMEOUT_NEGATIVE),
        ];
        for (args, want) in cases {
            assert_eq!(p(args).unwrap_err(), want, "{args}");
        }
    }

    proptest::proptest! {
        #[test]
        fn parser_never_panics(args in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..8), 0..10)) {
            let a: Vec<&[u8]> = args.iter().map(|x| x.as_slice()).collect();
            let _ = parse(&a);
        }
    }
}
