//! What the module's work on a key is checked as, for the client it works for: the Redis command
//! that would do the same ([`As`]: its arguments, and the key named when it is refused). ACL then
//! checks it as it checks that command (`RM_ACLCheckCommandPermissions`: the command and its keys
//! together, selector by selector, with `%R~`/`%W~` as the command's key specs ask), so the module
//! never lets a user do to a key what the user could not do with Redis's own stream commands.
//!
//! Pure: the argument lists only (IDs, fields and counts are placeholders: ACL looks at the
//! command, its subcommand and its keys). Nothing is allocated: a check is on the hot path of
//! `RECLAIM.READGROUP`. docs/security.md has the table of every command.

use smallvec::{smallvec, SmallVec};

use crate::error::{self, ReclaimError};
use crate::policy::Policy;

/// The words of the checks' commands (their names, keywords and placeholders): the same in every
/// check, so the ACL layer keeps their strings, one per word ([`Word::COUNT`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Word {
    Xreadgroup,
    Xclaim,
    Xack,
    Xadd,
    Xtrim,
    Xrange,
    Xpending,
    Xinfo,
    Xlen,
    Xdel,
    Group,
    Streams,
    New,
    Zero,
    Id,
    Justid,
    Auto,
    Field,
    Value,
    Maxlen,
    About,
    Min,
    Max,
    Count,
    One,
    Groups,
    Force,
    Retrycount,
    Xgroup,
    Delconsumer,
    Zadd,
    Hset,
}

impl Word {
    /// How many words there are (their indexes are `0..COUNT`).
    pub const COUNT: usize = 32;

    /// The word's text.
    pub fn text(self) -> &'static str {
        match self {
            Word::Xreadgroup => "XREADGROUP",
            Word::Xclaim => "XCLAIM",
            Word::Xack => "XACK",
            Word::Xadd => "XADD",
            Word::Xtrim => "XTRIM",
            Word::Xrange => "XRANGE",
            Word::Xpending => "XPENDING",
            Word::Xinfo => "XINFO",
            Word::Xlen => "XLEN",
            Word::Xdel => "XDEL",
            Word::Group => "GROUP",
            Word::Streams => "STREAMS",
            Word::New => ">",
            Word::Zero => "0",
            Word::Id => "0-0",
            Word::Justid => "JUSTID",
            Word::Auto => "*",
            Word::Field => "f",
            Word::Value => "v",
            Word::Maxlen => "MAXLEN",
            Word::About => "~",
            Word::Min => "-",
            Word::Max => "+",
            Word::Count => "COUNT",
            Word::One => "1",
            Word::Groups => "GROUPS",
            Word::Force => "FORCE",
            Word::Retrycount => "RETRYCOUNT",
            Word::Xgroup => "XGROUP",
            Word::Delconsumer => "DELCONSUMER",
            Word::Zadd => "ZADD",
            Word::Hset => "HSET",
        }
    }
}

/// A placeholder entry ID (ACL never looks at it).
const ID: Arg<'static> = Arg::Word(Word::Id);

/// One argument of an [`As`]: a word of the command itself, or a name from the work (a key, a
/// group, a consumer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arg<'a> {
    Word(Word),
    Name(&'a [u8]),
}

impl<'a> Arg<'a> {
    /// The argument's bytes.
    #[cfg(test)]
    fn bytes(&self) -> &'a [u8] {
        match self {
            Arg::Word(w) => w.text().as_bytes(),
            Arg::Name(n) => n,
        }
    }
}

/// A name from the work.
fn n(name: &[u8]) -> Arg<'_> {
    Arg::Name(name)
}

/// A word of the command.
fn w(word: Word) -> Arg<'static> {
    Arg::Word(word)
}

/// Most arguments of an [`As`] (its name included).
pub const MAX_ARGS: usize = 10;

/// The commands one action is checked as: a handful (a read under a policy with a trimmed DLQ
/// is the most, five), kept on the stack.
pub type AsList<'a> = SmallVec<[As<'a>; 6]>;

/// One Redis command the module's work is checked as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct As<'a> {
    /// The command's name, as a refusal names it.
    command: &'static str,
    /// The command's arguments, its name first: the first `len`.
    args: [Arg<'a>; MAX_ARGS],
    len: usize,
    /// The key it acts on, as a refusal names it ([`error::KEY_STREAM`], ...).
    pub key: &'static str,
}

impl<'a> As<'a> {
    fn new(command: Word, key: &'static str, rest: &[Arg<'a>]) -> As<'a> {
        let mut args = [Arg::Word(command); MAX_ARGS];
        args[1..=rest.len()].copy_from_slice(rest);
        As {
            command: command.text(),
            args,
            len: rest.len() + 1,
            key,
        }
    }

    /// The command's arguments, its name first.
    pub fn argv(&self) -> &[Arg<'a>] {
        &self.args[..self.len]
    }

    /// The error of a client refused this.
    pub fn refused(&self) -> ReclaimError {
        ReclaimError::NoPerm(self.command, self.key)
    }

    /// The same command on a key of another role (as the error names it).
    pub fn on(mut self, key: &'static str) -> As<'a> {
        self.key = key;
        self
    }
}

/// What a `RECLAIM.READGROUP` under a policy may write besides its `XREADGROUP` and `XCLAIM`
/// ([`read_group`] checks them), as far as the policy's value says: the one place that decides
/// it. Kept by the policy's run-time state, so a read answered without reading the policy checks
/// exactly what a read that reads it checks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadWrites {
    /// The DLQ a read may append to (`None`: none): it dead-letters entries at their limit
    /// (`MAX-DELIVERIES` above 0) or records deleted ones (`TOMBSTONES yes`), into a `DLQ`.
    pub(crate) dlq: Option<Vec<u8>>,
    /// Whether those appends trim the DLQ (`DLQ-MAXLEN`, `DLQ-MAXAGE`).
    pub(crate) trims: bool,
}

impl ReadWrites {
    /// What a read under `p` may write.
    pub fn of(p: &Policy) -> ReadWrites {
        let dlq = p
            .dlq
            .clone()
            .filter(|_| p.max_deliveries > 0 || p.tombstones);
        ReadWrites {
            trims: dlq.is_some() && p.trims_dlq(),
            dlq,
        }
    }
}

/// The writes of `p` into its DLQ ([`dlq_writes_to`]), added to `out`. Nothing without a DLQ.
fn dlq_writes<'a>(p: &'a Policy, out: &mut AsList<'a>) {
    if let Some(dlq) = p.dlq.as_deref() {
        dlq_writes_to(dlq, p.trims_dlq(), out);
    }
}

/// The writes into DLQ `dlq`: `XADD dlq * ...` (dead-letters, tombstones) and, with `trims`
/// (`DLQ-MAXLEN` or `DLQ-MAXAGE`), `XTRIM dlq ...` (retention), added to `out`.
fn dlq_writes_to<'a>(dlq: &'a [u8], trims: bool, out: &mut AsList<'a>) {
    out.push(As::new(
        Word::Xadd,
        error::KEY_DLQ,
        &[n(dlq), w(Word::Auto), w(Word::Field), w(Word::Value)],
    ));
    if trims {
        out.push(As::new(
            Word::Xtrim,
            error::KEY_DLQ,
            &[n(dlq), w(Word::Maxlen), w(Word::About), w(Word::Zero)],
        ));
    }
}

/// What policy `p` of (`stream`, `group`) does to its keys, checked for whoever sets it
/// (`RECLAIM.POLICY SET`, `IMPORT`: the timer then acts with these rights) and for
/// `RECLAIM.SWEEP`: `XCLAIM` (moves to the claimant) and `XACK` (dead-letters, purges) on the
/// stream; with a DLQ, `XRANGE` on the stream (a dead-letter copies the entry) and the DLQ's
/// writes ([`dlq_writes`]); with `FORGET-IDLE`, `XGROUP DELCONSUMER` on the stream.
pub fn policy_work<'a>(stream: &'a [u8], group: &'a [u8], p: &'a Policy) -> AsList<'a> {
    let mut out = smallvec![
        As::new(
            Word::Xclaim,
            error::KEY_STREAM,
            &[
                n(stream),
                n(group),
                n(&p.claimant),
                w(Word::Zero),
                ID,
                w(Word::Justid),
            ],
        ),
        As::new(Word::Xack, error::KEY_STREAM, &[n(stream), n(group), ID]),
    ];
    if p.dlq.is_some() {
        out.push(As::new(
            Word::Xrange,
            error::KEY_STREAM,
            &[
                n(stream),
                w(Word::Min),
                w(Word::Max),
                w(Word::Count),
                w(Word::One),
            ],
        ));
    }
    if p.forget_idle_ms > 0 {
        out.push(As::new(
            Word::Xgroup,
            error::KEY_STREAM,
            &[w(Word::Delconsumer), n(stream), n(group), w(Word::Field)],
        ));
    }
    dlq_writes(p, &mut out);
    out
}

/// What `RECLAIM.READGROUP` does to one stream for `consumer` of `group`: `XREADGROUP GROUP g c
/// STREAMS key >` (new entries); under a policy (`p`: what a read under it may write,
/// [`ReadWrites::of`] its value), `XCLAIM` (redeliveries) and, when it may write a DLQ, `XACK` on
/// the stream and the DLQ's writes. Whatever the policy's state (a paused policy may resume at
/// any time).
pub fn read_group<'a>(
    stream: &'a [u8],
    group: &'a [u8],
    consumer: &'a [u8],
    p: Option<&'a ReadWrites>,
    out: &mut AsList<'a>,
) {
    out.push(As::new(
        Word::Xreadgroup,
        error::KEY_STREAM,
        &[
            w(Word::Group),
            n(group),
            n(consumer),
            w(Word::Streams),
            n(stream),
            w(Word::New),
        ],
    ));
    let Some(p) = p else {
        return;
    };
    out.push(As::new(
        Word::Xclaim,
        error::KEY_STREAM,
        &[n(stream), n(group), n(consumer), w(Word::Zero), ID],
    ));
    if let Some(dlq) = p.dlq.as_deref() {
        out.push(As::new(
            Word::Xack,
            error::KEY_STREAM,
            &[n(stream), n(group), ID],
        ));
        dlq_writes_to(dlq, p.trims, out);
    }
}

/// What `RECLAIM.EXTEND` and `RECLAIM.NACK` do: `XCLAIM key group consumer 0 id JUSTID` (to the
/// consumer itself, the claimant or `<claimant>:delayed`).
pub fn own_entries<'a>(stream: &'a [u8], group: &'a [u8], consumer: &'a [u8]) -> AsList<'a> {
    smallvec![As::new(
        Word::Xclaim,
        error::KEY_STREAM,
        &[
            n(stream),
            n(group),
            n(consumer),
            w(Word::Zero),
            ID,
            w(Word::Justid),
        ],
    )]
}

/// What `RECLAIM.NACK ... DELAY` longer than an entry's due idle does besides [`own_entries`]:
/// `ZADD delay-key 0 member` (the due time into the stream's delay key, `keys::delay_key`).
pub fn park<'a>(
    stream: &'a [u8],
    group: &'a [u8],
    consumer: &'a [u8],
    delay_key: &'a [u8],
) -> AsList<'a> {
    let mut out = own_entries(stream, group, consumer);
    out.push(As::new(
        Word::Zadd,
        error::KEY_DELAY,
        &[n(delay_key), w(Word::Zero), w(Word::Field)],
    ));
    out
}

/// What `RECLAIM.NACK ... REASON` does besides [`own_entries`]: `HSET nack-key field value` (the
/// record of the consumer and its reason, `keys::nack_key`).
pub fn record<'a>(nack_key: &'a [u8]) -> AsList<'a> {
    smallvec![As::new(
        Word::Hset,
        error::KEY_NACK,
        &[n(nack_key), w(Word::Field), w(Word::Value)],
    )]
}

/// What `RECLAIM.TERM` does: reads the entries (`XRANGE`: their fields are copied), `XACK`s
/// them, and the DLQ's writes of `p` ([`dlq_writes`]).
pub fn terminate<'a>(stream: &'a [u8], group: &'a [u8], p: &'a Policy) -> AsList<'a> {
    let mut out = smallvec![
        As::new(
            Word::Xrange,
            error::KEY_STREAM,
            &[
                n(stream),
                w(Word::Min),
                w(Word::Max),
                w(Word::Count),
                w(Word::One),
            ],
        ),
        As::new(Word::Xack, error::KEY_STREAM, &[n(stream), n(group), ID]),
    ];
    dlq_writes(p, &mut out);
    out
}

/// A read of the group's PEL that the reply shows (`RECLAIM.STATS`, `HEALTH`, `SIMULATE`):
/// `XPENDING key group`.
pub fn read_pel<'a>(stream: &'a [u8], group: &'a [u8]) -> As<'a> {
    As::new(Word::Xpending, error::KEY_STREAM, &[n(stream), n(group)])
}

/// Showing a policy (`RECLAIM.POLICY GET`, `LIST`, `EXPORT`): its group, DLQ and options are
/// what a stream's groups are, `XINFO GROUPS key`.
pub fn see_policy(stream: &[u8]) -> As<'_> {
    As::new(
        Word::Xinfo,
        error::KEY_STREAM,
        &[w(Word::Groups), n(stream)],
    )
}

/// Showing a DLQ's length or type (`RECLAIM.HEALTH`, `RECLAIM.SIMULATE`): `XLEN dlq`.
pub fn dlq_length(dlq: &[u8]) -> As<'_> {
    As::new(Word::Xlen, error::KEY_DLQ, &[n(dlq)])
}

/// What a `RECLAIM.REDRIVE` task does to its DLQ, checked when it starts and at its steps: reads
/// it (`XRANGE`) and deletes what it moved back (`XDEL`).
pub fn redrive_dlq(dlq: &[u8]) -> AsList<'_> {
    smallvec![
        As::new(
            Word::Xrange,
            error::KEY_DLQ,
            &[
                n(dlq),
                w(Word::Min),
                w(Word::Max),
                w(Word::Count),
                w(Word::One),
            ],
        ),
        As::new(Word::Xdel, error::KEY_DLQ, &[n(dlq), ID]),
    ]
}

/// What a `RECLAIM.REDRIVE` task does to the group an entry goes back to: `XCLAIM stream group
/// claimant 0 id FORCE RETRYCOUNT 0 JUSTID` (`id`: the entry's, or a placeholder when the start
/// checks a stream before any entry).
pub fn redrive_back<'a>(
    stream: &'a [u8],
    group: &'a [u8],
    claimant: &'a [u8],
    id: Option<&'a [u8]>,
) -> As<'a> {
    As::new(
        Word::Xclaim,
        error::KEY_STREAM,
        &[
            n(stream),
            n(group),
            n(claimant),
            w(Word::Zero),
            id.map_or(ID, Arg::Name),
            w(Word::Force),
            w(Word::Retrycount),
            w(Word::Zero),
            w(Word::Justid),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[As]) -> Vec<String> {
        v.iter()
            .map(|a| {
                let words: Vec<String> = a
                    .argv()
                    .iter()
                    .map(|w| String::from_utf8_lossy(w.bytes()).into_owned())
                    .collect();
                words.join(" ")
            })
            .collect()
    }

    fn policy(dlq: Option<&str>, max: i64, tombstones: bool, maxlen: i64) -> Policy {
        Policy {
            dlq: dlq.map(|d| d.as_bytes().to_vec()),
            max_deliveries: max,
            tombstones,
            dlq_maxlen: maxlen,
            ..Policy::default()
        }
    }

    #[test]
    fn a_read_without_policy_is_xreadgroup() {
        let mut v = AsList::new();
        read_group(b"s", b"g", b"c", None, &mut v);
        assert_eq!(names(&v), ["XREADGROUP GROUP g c STREAMS s >"]);
        assert_eq!(
            v[0].refused().to_string(),
            "NOPERM this user has no permissions to run XREADGROUP on the stream key"
        );
    }

    #[test]
    fn a_read_writes_the_dlq_when_it_may_dead_letter_or_bury() {
        let p = ReadWrites::of(&policy(Some("d"), 0, false, 5));
        let mut v = AsList::new();
        assert_eq!(p, ReadWrites::default());
        read_group(b"s", b"g", b"c", Some(&p), &mut v);
        assert_eq!(
            names(&v),
            ["XREADGROUP GROUP g c STREAMS s >", "XCLAIM s g c 0 0-0"]
        );
        // TOMBSTONES with MAX-DELIVERIES 0 appends to the DLQ all the same.
        for p in [
            policy(Some("d"), 0, true, 5),
            policy(Some("d"), 3, false, 5),
        ] {
            let p = ReadWrites::of(&p);
            let mut v = AsList::new();
            read_group(b"s", b"g", b"c", Some(&p), &mut v);
            assert_eq!(
                names(&v),
                [
                    "XREADGROUP GROUP g c STREAMS s >",
                    "XCLAIM s g c 0 0-0",
                    "XACK s g 0-0",
                    "XADD d * f v",
                    "XTRIM d MAXLEN ~ 0"
                ]
            );
            assert_eq!(
                v[3].refused().to_string(),
                "NOPERM this user has no permissions to run XADD on the DLQ key"
            );
        }
        // Without retention, no XTRIM.
        let p = ReadWrites::of(&policy(Some("d"), 3, false, 0));
        let mut v = AsList::new();
        read_group(b"s", b"g", b"c", Some(&p), &mut v);
        assert_eq!(names(&v)[2..], ["XACK s g 0-0", "XADD d * f v"]);
    }

    #[test]
    fn a_policy_is_checked_as_what_the_timer_does() {
        let p = Policy::default();
        assert_eq!(
            names(&policy_work(b"s", b"g", &p)),
            ["XCLAIM s g reclaim 0 0-0 JUSTID", "XACK s g 0-0"]
        );
        let p = policy(Some("d"), 3, false, 0);
        assert_eq!(
            names(&policy_work(b"s", b"g", &p)),
            [
                "XCLAIM s g reclaim 0 0-0 JUSTID",
                "XACK s g 0-0",
                "XRANGE s - + COUNT 1",
                "XADD d * f v"
            ]
        );
        let p = Policy {
            dlq_maxage_ms: 1000,
            ..policy(Some("d"), 0, false, 0)
        };
        assert_eq!(
            names(&terminate(b"s", b"g", &p)),
            [
                "XRANGE s - + COUNT 1",
                "XACK s g 0-0",
                "XADD d * f v",
                "XTRIM d MAXLEN ~ 0"
            ]
        );
    }

    #[test]
    fn reads_and_redrives() {
        assert_eq!(names(&[read_pel(b"s", b"g")]), ["XPENDING s g"]);
        assert_eq!(names(&[see_policy(b"s")]), ["XINFO GROUPS s"]);
        assert_eq!(names(&[dlq_length(b"d")]), ["XLEN d"]);
        assert_eq!(
            names(&redrive_dlq(b"d")),
            ["XRANGE d - + COUNT 1", "XDEL d 0-0"]
        );
        let back = redrive_back(b"s", b"g", b"c", Some(b"5-1")).on(error::KEY_SOURCE);
        assert_eq!(
            names(std::slice::from_ref(&back)),
            ["XCLAIM s g c 0 5-1 FORCE RETRYCOUNT 0 JUSTID"]
        );
        assert_eq!(
            back.refused().to_string(),
            "NOPERM this user has no permissions to run XCLAIM on the SOURCE key"
        );
        assert_eq!(
            names(&own_entries(b"s", b"g", b"c")),
            ["XCLAIM s g c 0 0-0 JUSTID"]
        );
    }
}
