//! `RECLAIM.READGROUP`'s grammar, request and parser (pure): XREADGROUP's syntax, options in any
//! order before `STREAMS`, accepting only the ID `>`, plus the pure token `DELIVERY-METADATA`
//! (each entry of the reply then carries its idle time and delivery count, as Redis 8.4's
//! `XREADGROUP ... CLAIM` replies them). The grammar is one table, [`OPTIONS`]: the parser, the
//! keys' positions (the getkeys callback), the arguments passed on to XREADGROUP and the
//! arguments `COMMAND DOCS` shows are read from it.

use crate::args::{block, int, key, string, word, Arg, V030};
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

/// What follows an option's word in [`OPTIONS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value {
    /// Nothing: a pure token.
    None,
    /// One integer.
    Int,
    /// Two names (`GROUP group consumer`).
    Pair,
    /// Every argument after it: the stream keys, then as many IDs (`STREAMS`, the last option).
    Streams,
}

impl Value {
    /// How many arguments follow the word (all of them for [`Value::Streams`]: 0 here).
    pub const fn width(self) -> usize {
        match self {
            Value::None | Value::Streams => 0,
            Value::Int => 1,
            Value::Pair => 2,
        }
    }
}

/// Which option a row of [`OPTIONS`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opt {
    Group,
    Count,
    Block,
    NoAck,
    DeliveryMetadata,
    Streams,
}

/// One option of `RECLAIM.READGROUP` (XREADGROUP's syntax, plus the module's own): a row of
/// [`OPTIONS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOption {
    pub opt: Opt,
    /// Its word, in any case.
    pub token: &'static str,
    /// What follows the word.
    pub value: Value,
    /// Passed on, as the client wrote it, to the `XREADGROUP` of a read that hands nothing over
    /// ([`forwarded`]); `BLOCK` is the module's own wait and `DELIVERY-METADATA` its own reply.
    pub forwarded: bool,
    /// As `COMMAND DOCS` shows it, without the token ([`ARGS`] adds it) and with the module
    /// version it appeared in; `None`: not documented (`NOACK`, refused).
    pub doc: Option<Arg>,
}

/// The word before the stream keys (the last option; also the keyword of the command's key spec).
pub const STREAMS: &str = "STREAMS";

/// XREADGROUP's grammar as `RECLAIM.READGROUP` takes it, in the order `COMMAND DOCS` shows it:
/// the options, in any order, then `STREAMS` (the last). The parser ([`parse_args`]), the keys'
/// positions ([`key_positions`]), the arguments forwarded to XREADGROUP ([`forwarded`]) and the
/// arguments of `COMMAND DOCS` ([`ARGS`]) are all read from it: a new option is a row here (and
/// its arm in [`parse_args`]).
pub const OPTIONS: &[ReadOption] = &[
    ReadOption {
        opt: Opt::Group,
        token: "GROUP",
        value: Value::Pair,
        forwarded: true,
        doc: Some(block(
            "group-consumer",
            &[string("group"), string("consumer")],
        )),
    },
    ReadOption {
        opt: Opt::Count,
        token: "COUNT",
        value: Value::Int,
        forwarded: true,
        doc: Some(int("count").optional()),
    },
    ReadOption {
        opt: Opt::Block,
        token: "BLOCK",
        value: Value::Int,
        forwarded: false,
        doc: Some(int("milliseconds").optional()),
    },
    ReadOption {
        // Refused: an entry read without a PEL entry could never be redelivered.
        opt: Opt::NoAck,
        token: "NOACK",
        value: Value::None,
        forwarded: true,
        doc: None,
    },
    ReadOption {
        opt: Opt::DeliveryMetadata,
        token: "DELIVERY-METADATA",
        value: Value::None,
        forwarded: false,
        doc: Some(word("DELIVERY-METADATA").optional().since(V030)),
    },
    ReadOption {
        opt: Opt::Streams,
        token: STREAMS,
        value: Value::Streams,
        forwarded: true,
        doc: Some(block(
            "streams",
            &[key("key", 0).multiple(), word(">").multiple_token()],
        )),
    },
];

/// How many rows of [`OPTIONS`] `COMMAND DOCS` shows.
const DOCUMENTED: usize = {
    let mut n = 0;
    let mut i = 0;
    while i < OPTIONS.len() {
        if OPTIONS[i].doc.is_some() {
            n += 1;
        }
        i += 1;
    }
    n
};

/// The documented rows of [`OPTIONS`], each with its token.
const fn documented() -> [Arg; DOCUMENTED] {
    let mut out = [word("STREAMS"); DOCUMENTED];
    let (mut i, mut n) = (0, 0);
    while i < OPTIONS.len() {
        if let Some(d) = OPTIONS[i].doc {
            out[n] = d.token(OPTIONS[i].token);
            n += 1;
        }
        i += 1;
    }
    out
}

/// `RECLAIM.READGROUP`'s arguments as `COMMAND DOCS` shows them, from [`OPTIONS`].
pub const ARGS: &[Arg] = &documented();

/// The row of [`OPTIONS`] whose word `w` is (any case).
pub fn option(w: &[u8]) -> Option<&'static ReadOption> {
    OPTIONS
        .iter()
        .find(|o| w.eq_ignore_ascii_case(o.token.as_bytes()))
}

/// The token of `opt` (its row of [`OPTIONS`]).
fn token(opt: Opt) -> &'static [u8] {
    OPTIONS
        .iter()
        .find(|o| o.opt == opt)
        .map_or(&b""[..], |o| o.token.as_bytes())
}

/// Parses the arguments after the command name, as XREADGROUP does (options in any order before
/// `STREAMS`, then keys and as many IDs), accepting only the ID `>`: each word looked up in
/// [`OPTIONS`], its values checked here.
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
        let Some(o) = option(args[i]).filter(|o| more >= o.value.width()) else {
            return Err(error::SYNTAX.into());
        };
        let v = &args[i + 1..i + 1 + o.value.width()];
        match o.opt {
            Opt::Block => {
                let ms = parse_i64(v[0]).ok_or(error::TIMEOUT_NOT_INTEGER)?;
                if ms < 0 {
                    return Err(error::TIMEOUT_NEGATIVE.into());
                }
                req.block_ms = Some(ms);
            }
            Opt::Count => {
                let n = parse_i64(v[0]).ok_or(error::NOT_AN_INTEGER)?;
                req.count = n.max(0);
            }
            Opt::Group => {
                (req.group, req.consumer) = (v[0], v[1]);
                group_given = true;
            }
            Opt::NoAck => return Err(error::READGROUP_NOACK.into()),
            Opt::DeliveryMetadata => req.delivery_metadata = true,
            Opt::Streams => {
                req.keys = stream_keys(&args[i + 1..])?;
                break;
            }
        }
        i += 1 + o.value.width();
    }
    if req.keys.is_empty() {
        return Err(error::SYNTAX.into());
    }
    if !group_given {
        return Err(error::READGROUP_NO_GROUP.into());
    }
    Ok(req)
}

/// The keys of `STREAMS key [key ...] > [> ...]` (`rest`: the arguments after `STREAMS`).
fn stream_keys<'a>(rest: &[&'a [u8]]) -> Result<smallvec::SmallVec<[&'a [u8]; 4]>, ReclaimError> {
    if rest.is_empty() {
        return Err(error::SYNTAX.into());
    }
    if rest.len() % 2 != 0 {
        return Err(error::READGROUP_UNBALANCED.into());
    }
    let (keys, ids) = rest.split_at(rest.len() / 2);
    if ids.iter().any(|id| *id != b">") {
        return Err(error::READGROUP_ONLY_NEW.into());
    }
    Ok(keys.iter().copied().collect())
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
        match option(argv[i]) {
            Some(o) if o.value == Value::Streams => {
                let rest = argv.len() - i - 1;
                if rest == 0 || rest % 2 != 0 {
                    return Vec::new();
                }
                return (i + 1..i + 1 + rest / 2).collect();
            }
            Some(o) => i += 1 + o.value.width(),
            None => return Vec::new(),
        }
    }
    Vec::new()
}

/// The positions in `args` (the arguments after the command name, parsed by [`parse_args`]) of
/// those XREADGROUP takes as they are: the rows of [`OPTIONS`] that are `forwarded`, with their
/// values, and everything from `STREAMS` on. A word no row has is passed on alone (XREADGROUP
/// then refuses it as it would).
pub fn forwarded(args: &[&[u8]]) -> smallvec::SmallVec<[usize; 12]> {
    let mut out = smallvec::SmallVec::new();
    let mut i = 0;
    while i < args.len() {
        let (width, forward) = match option(args[i]) {
            Some(o) if o.value == Value::Streams => {
                out.extend(i..args.len());
                break;
            }
            Some(o) => (1 + o.value.width(), o.forwarded),
            None => (1, true),
        };
        if forward {
            out.extend(i..(i + width).min(args.len()));
        }
        i += width;
    }
    out
}

/// XREADGROUP's arguments for the new entries of one stream `key`: `GROUP group consumer [COUNT
/// n] STREAMS key >`, `count` holding `n`'s digits (`"0"`: no `COUNT`).
pub fn new_entries_args<'a>(
    group: &'a [u8],
    consumer: &'a [u8],
    count: &'a str,
    key: &'a [u8],
) -> smallvec::SmallVec<[&'a [u8]; 8]> {
    let mut args = smallvec::SmallVec::new();
    args.extend_from_slice(&[token(Opt::Group), group, consumer]);
    if count != "0" {
        args.extend_from_slice(&[token(Opt::Count), count.as_bytes()]);
    }
    args.extend_from_slice(&[token(Opt::Streams), key, b">"]);
    args
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

    #[test]
    fn forwarded_are_xreadgroups_own() {
        let f = |s: &str| {
            let a: Vec<&[u8]> = s.split(' ').map(str::as_bytes).collect();
            forwarded(&a)
                .iter()
                .map(|&i| a[i])
                .collect::<Vec<_>>()
                .join(&b' ')
        };
        assert_eq!(f("GROUP g c STREAMS a >"), b"GROUP g c STREAMS a >");
        // BLOCK and DELIVERY-METADATA are the module's; the names after STREAMS are passed on,
        // whatever they read like.
        assert_eq!(
            f("block 5 GROUP g c delivery-metadata COUNT 2 STREAMS BLOCK >"),
            b"GROUP g c COUNT 2 STREAMS BLOCK >"
        );
        assert_eq!(
            f("GROUP BLOCK COUNT BLOCK 0 STREAMS a >"),
            b"GROUP BLOCK COUNT STREAMS a >"
        );
    }

    #[test]
    fn new_entries_args_name_the_one_stream() {
        let a = new_entries_args(b"g", b"c", "0", b"k");
        assert_eq!(a.join(&b' '), b"GROUP g c STREAMS k >");
        let a = new_entries_args(b"g", b"c", "7", b"k");
        assert_eq!(a.join(&b' '), b"GROUP g c COUNT 7 STREAMS k >");
    }

    #[test]
    fn docs_follow_the_table() {
        assert_eq!(
            crate::args::syntax(ARGS),
            "GROUP group consumer [COUNT count] [BLOCK milliseconds] [DELIVERY-METADATA] \
             STREAMS key [key ...] > [> ...]"
        );
        // Every documented row, in order, with its token; NOACK (refused) is not shown.
        let tokens: Vec<_> = ARGS.iter().map(|a| a.token.unwrap()).collect();
        assert_eq!(
            tokens,
            ["GROUP", "COUNT", "BLOCK", "DELIVERY-METADATA", "STREAMS"]
        );
        assert_eq!(ARGS[3].since, Some(crate::args::V030));
        assert!(option(b"noack").is_some_and(|o| o.doc.is_none()));
    }

    proptest::proptest! {
        #[test]
        fn parser_never_panics(args in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..8), 0..10)) {
            let a: Vec<&[u8]> = args.iter().map(|x| x.as_slice()).collect();
            let _ = parse(&a);
        }
    }
}
