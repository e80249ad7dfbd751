//! Policies as code: the JSON document of `RECLAIM.POLICY EXPORT` and `RECLAIM.POLICY IMPORT`
//! (pure: no Redis calls, unit-tested without a server).
//!
//! ```json
//! {
//!   "version": 1,
//!   "policies": [
//!     {
//!       "key": "orders",
//!       "group": "workers",
//!       "min-idle": 1000,
//!       "max-deliveries": 2,
//!       "dlq": "orders:dlq",
//!       "claimant": "reclaim",
//!       "count": 100,
//!       "interval": 10000,
//!       "backoff": { "exponential": 60000 },
//!       "liveness": 0,
//!       "storm": { "max": 50, "window": 60000 },
//!       "dlq-maxlen": 10000,
//!       "dlq-maxage": 604800000,
//!       "tombstones": true
//!     }
//!   ]
//! }
//! ```
//!
//! One [`PolicyDoc`] per policy: its key and group, then one field per option of
//! `RECLAIM.POLICY SET`, named after the option in lower case. A field left out (or `null`) takes
//! the option's default, as an option left out of SET. Names (key, group, `dlq`, `claimant`) are
//! [`Name`]s: a JSON string when the bytes are UTF-8, else `{"hex": "..."}`.
//!
//! The policy's state (`active`, `paused`, `storm`: `RECLAIM.POLICY PAUSE`/`RESUME` and the
//! `STORM` breaker) is operational, not configuration: it is not exported, and a policy that
//! IMPORT replaces keeps its state (as `RECLAIM.POLICY SET` keeps it); a new one starts active.
//!
//! Import checks everything before anything is applied: the document's size, its JSON, its
//! version and its number of policies ([`parse_document`]), then each policy in order through
//! `RECLAIM.POLICY SET`'s own parser ([`PolicyDoc::to_policy`] builds SET's words and calls
//! [`policy::parse_set_options`]), then that no (key, group) comes twice. Errors of one policy
//! name it: its index, key and group, and the field ([`ReclaimError::InPolicy`]). What needs the
//! keyspace (types, ACL, cluster slots, existing policies) is checked by the command handler.
//!
//! **A new option** is one `Option<...>` field of [`PolicyDoc`] (named after the option), a line
//! in [`PolicyDoc::from_policy`] and one in [`PolicyDoc::set_words`] (an option of several values
//! is a small object, as `storm`). Operational state is not configuration and gets no field. New optional
//! fields keep [`VERSION`]: old documents still import, and an older module refuses a document
//! that uses them (`unknown field`), which is right, since it could not honour them.
//!
//! Memory: a document is at most [`MAX_BYTES`] long and holds at most [`MAX_POLICIES`]
//! policies; each policy stays raw JSON text (borrowed from the argument) until it is checked,
//! and every value is read into its own type, so nothing grows beyond a small factor of the text.

use std::collections::HashMap;
use std::fmt;

use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::error::{self, InPolicy, ReclaimError};
use crate::policy::{self, Backoff, Policy};

/// The version of the document this module writes and reads.
pub const VERSION: u64 = 1;
/// Most policies one `RECLAIM.POLICY IMPORT` takes.
pub const MAX_POLICIES: usize = 10_000;
/// Longest document `RECLAIM.POLICY IMPORT` takes, in bytes (16 MiB).
pub const MAX_BYTES: usize = 16 << 20;
/// Longest parser message quoted in an error (characters).
const MAX_MESSAGE: usize = 240;

/// A binary-safe name (stream key, group, DLQ, claimant). In JSON: a string when the bytes are
/// valid UTF-8 (JSON escapes NUL, CR, LF, quotes and backslashes itself), otherwise an object
/// `{"hex": "<two lower-case hex digits per byte>"}`. Import takes either form for any name (hex
/// digits in either case).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Name(pub Vec<u8>);

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match std::str::from_utf8(&self.0) {
            Ok(text) => s.serialize_str(text),
            Err(_) => {
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("hex", &hex(&self.0))?;
                m.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Name, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Name;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string or {\"hex\": \"...\"}")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Name, E> {
                Ok(Name(v.as_bytes().to_vec()))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Name, A::Error> {
                let mut out = None;
                while let Some(k) = m.next_key::<String>()? {
                    if k != "hex" {
                        return Err(de::Error::unknown_field(&k, &["hex"]));
                    }
                    if out.is_some() {
                        return Err(de::Error::duplicate_field("hex"));
                    }
                    let digits: String = m.next_value()?;
                    out = Some(unhex(&digits).ok_or_else(|| {
                        de::Error::custom("\"hex\" must hold two hexadecimal digits per byte")
                    })?);
                }
                out.map(Name).ok_or_else(|| de::Error::missing_field("hex"))
            }
        }
        d.deserialize_any(V)
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    s.as_bytes()
        .chunks(2)
        .map(|p| match *p {
            [hi, lo] => Some(digit(hi)? << 4 | digit(lo)?),
            _ => None,
        })
        .collect()
}

/// `BACKOFF` in JSON: `"fixed"`, `{"exponential": max-ms}` or `{"list": [ms, ...]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    rename_all = "lowercase",
    expecting = "\"fixed\", {\"exponential\": max-ms} or {\"list\": [ms, ...]}"
)]
pub enum BackoffDoc {
    /// `BACKOFF FIXED`.
    Fixed,
    /// `BACKOFF EXPONENTIAL max-ms`.
    Exponential(i64),
    /// `BACKOFF LIST ms [ms ...]`.
    List(Vec<i64>),
}

/// `STORM n window-ms` in JSON: `{"max": n, "window": ms}` (`null`: no breaker).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, expecting = "{\"max\": n, \"window\": ms}")]
pub struct StormDoc {
    /// Most dead-letters within one window (`STORM`'s `n`).
    pub max: i64,
    /// The window, ms (`STORM`'s `window-ms`).
    pub window: i64,
}

/// One policy of a document: its key and group, then the options of `RECLAIM.POLICY SET`, each
/// named after its option in lower case (as `RECLAIM.POLICY GET` names them). `None` (left out,
/// or `null`): the option's default; for `dlq`, no DLQ; for `storm`, no breaker. Export fills every
/// field (`dlq` and `storm` are `null` when unset). The policy's state is not a field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    deny_unknown_fields,
    rename_all = "kebab-case",
    expecting = "a policy object"
)]
pub struct PolicyDoc {
    /// The stream key.
    pub key: Name,
    /// The consumer group.
    pub group: Name,
    pub min_idle: Option<i64>,
    pub max_deliveries: Option<i64>,
    pub dlq: Option<Name>,
    pub claimant: Option<Name>,
    pub count: Option<i64>,
    pub interval: Option<i64>,
    pub backoff: Option<BackoffDoc>,
    pub liveness: Option<i64>,
    pub storm: Option<StormDoc>,
    /// `DLQ-MAXLEN n` (0: no length limit).
    pub dlq_maxlen: Option<i64>,
    /// `DLQ-MAXAGE ms` (0: no age limit).
    pub dlq_maxage: Option<i64>,
    /// `TOMBSTONES yes|no` as a JSON boolean.
    pub tombstones: Option<bool>,
    /// `FORGET-IDLE ms` (0: consumers are never deleted).
    pub forget_idle: Option<i64>,
}

impl PolicyDoc {
    /// The policy of (`stream`, `group`), every option explicit (`dlq` is `null` when unset).
    pub fn from_policy(stream: &[u8], group: &[u8], p: &Policy) -> PolicyDoc {
        PolicyDoc {
            key: Name(stream.to_vec()),
            group: Name(group.to_vec()),
            min_idle: Some(p.min_idle_ms),
            max_deliveries: Some(p.max_deliveries),
            dlq: p.dlq.clone().map(Name),
            claimant: Some(Name(p.claimant.clone())),
            count: Some(p.count),
            interval: Some(p.interval_ms),
            backoff: Some(match &p.backoff {
                Backoff::Fixed => BackoffDoc::Fixed,
                Backoff::Exponential(max) => BackoffDoc::Exponential(*max),
                Backoff::List(v) => BackoffDoc::List(v.clone()),
            }),
            liveness: Some(p.liveness_ms),
            storm: p.storm.map(|s| StormDoc {
                max: s.max,
                window: s.window_ms,
            }),
            dlq_maxlen: Some(p.dlq_maxlen),
            dlq_maxage: Some(p.dlq_maxage_ms),
            tombstones: Some(p.tombstones),
            forget_idle: Some(p.forget_idle_ms),
        }
    }

    /// The options of `RECLAIM.POLICY SET` that the fields given stand for, in SET's order, as
    /// SET's words. Each value is typed, so every option gets exactly its own words: an option
    /// name is never an integer, and no value can read as the next option.
    pub fn set_words(&self) -> Vec<Vec<u8>> {
        let mut w: Vec<Vec<u8>> = Vec::new();
        let num = |v: i64| v.to_string().into_bytes();
        let mut opt = |name: &str, values: Vec<Vec<u8>>| {
            w.push(name.as_bytes().to_vec());
            w.extend(values);
        };
        if let Some(v) = self.min_idle {
            opt("MIN-IDLE", vec![num(v)]);
        }
        if let Some(v) = self.max_deliveries {
            opt("MAX-DELIVERIES", vec![num(v)]);
        }
        if let Some(v) = &self.dlq {
            opt("DLQ", vec![v.0.clone()]);
        }
        if let Some(v) = &self.claimant {
            opt("CLAIMANT", vec![v.0.clone()]);
        }
        if let Some(v) = self.count {
            opt("COUNT", vec![num(v)]);
        }
        if let Some(v) = self.interval {
            opt("INTERVAL", vec![num(v)]);
        }
        if let Some(b) = &self.backoff {
            opt(
                "BACKOFF",
                match b {
                    BackoffDoc::Fixed => vec![b"FIXED".to_vec()],
                    BackoffDoc::Exponential(max) => vec![b"EXPONENTIAL".to_vec(), num(*max)],
                    BackoffDoc::List(v) => std::iter::once(b"LIST".to_vec())
                        .chain(v.iter().map(|x| num(*x)))
                        .collect(),
                },
            );
        }
        if let Some(v) = self.liveness {
            opt("LIVENESS", vec![num(v)]);
        }
        if let Some(s) = &self.storm {
            opt("STORM", vec![num(s.max), num(s.window)]);
        }
        if let Some(v) = self.dlq_maxlen {
            opt("DLQ-MAXLEN", vec![num(v)]);
        }
        if let Some(v) = self.dlq_maxage {
            opt("DLQ-MAXAGE", vec![num(v)]);
        }
        if let Some(v) = self.tombstones {
            opt("TOMBSTONES", vec![crate::text::yes_no(v).to_vec()]);
        }
        if let Some(v) = self.forget_idle {
            opt("FORGET-IDLE", vec![num(v)]);
        }
        w
    }

    /// The policy, checked by `RECLAIM.POLICY SET`'s parser ([`policy::parse_set_options`]): the
    /// same rules, defaults and messages. An error comes with the field it is about (the option
    /// it names, in lower case).
    pub fn to_policy(&self) -> Result<Policy, (Option<String>, ReclaimError)> {
        let words = self.set_words();
        let w: Vec<&[u8]> = words.iter().map(Vec::as_slice).collect();
        policy::parse_set_options(&self.key.0, &w)
            .map_err(|e| (policy::option_of(&e).map(str::to_ascii_lowercase), e))
    }
}

/// The document `RECLAIM.POLICY EXPORT` writes.
#[derive(Serialize)]
struct DocumentOut<'a> {
    version: u64,
    /// The policies of the database the exporting user may not see (left out of `policies`);
    /// absent when there are none.
    #[serde(rename = "left-out", skip_serializing_if = "is_zero")]
    left_out: u64,
    policies: &'a [PolicyDoc],
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The document of these policies, in the order given (the caller sorts them), pretty-printed
/// (two-space indent, one field per line, no newline at the end), with `left_out` as the
/// document's `left-out` field when above 0 (policies the exporting user may not see).
pub fn to_json<'a>(
    policies: impl IntoIterator<Item = (&'a [u8], &'a [u8], &'a Policy)>,
    left_out: u64,
) -> Result<String, ReclaimError> {
    let docs: Vec<PolicyDoc> = policies
        .into_iter()
        .map(|(s, g, p)| PolicyDoc::from_policy(s, g, p))
        .collect();
    serde_json::to_string_pretty(&DocumentOut {
        version: VERSION,
        left_out,
        policies: &docs,
    })
    .map_err(|e| ReclaimError::Json(message(&e.to_string())))
}

/// One policy of an imported document, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Imported {
    pub stream: Vec<u8>,
    pub group: Vec<u8>,
    pub policy: Policy,
}

/// The `policies` array as read: the first [`MAX_POLICIES`] + 1 entries as raw JSON text, the
/// rest skipped (only counted).
struct Entries<'a> {
    raw: Vec<&'a RawValue>,
    more: bool,
}

impl<'de: 'a, 'a> Deserialize<'de> for Entries<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Entries<'a>, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = Entries<'a>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array of policies")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Entries<'a>, A::Error> {
                let mut out = Entries {
                    raw: Vec::new(),
                    more: false,
                };
                loop {
                    if out.raw.len() < MAX_POLICIES {
                        match s.next_element::<&'de RawValue>()? {
                            Some(r) => out.raw.push(r),
                            None => break,
                        }
                    } else {
                        match s.next_element::<IgnoredAny>()? {
                            Some(_) => out.more = true,
                            None => break,
                        }
                    }
                }
                Ok(out)
            }
        }
        d.deserialize_seq(V(std::marker::PhantomData))
    }
}

/// The document `RECLAIM.POLICY IMPORT` reads.
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "an object with \"version\" and \"policies\""
)]
struct DocumentIn<'a> {
    version: u64,
    /// What EXPORT says it left out: read and ignored (IMPORT sets what the document holds).
    #[serde(rename = "left-out", default)]
    #[allow(dead_code)]
    left_out: u64,
    #[serde(borrow)]
    policies: Entries<'a>,
}

/// The key and group of an entry, each when it reads as a [`Name`]: for naming the entry in an
/// error about another field.
#[derive(Deserialize, Default)]
struct Names<'a> {
    #[serde(borrow, default)]
    key: Option<&'a RawValue>,
    #[serde(borrow, default)]
    group: Option<&'a RawValue>,
}

impl Names<'_> {
    fn read(entry: &RawValue) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
        let n: Names = serde_json::from_str(entry.get()).unwrap_or_default();
        let name = |r: Option<&RawValue>| {
            r.and_then(|r| serde_json::from_str::<Name>(r.get()).ok())
                .map(|n| n.0)
        };
        (name(n.key), name(n.group))
    }
}

/// A parser message made safe for an error reply: control characters as `?`, at most
/// [`MAX_MESSAGE`] characters (then `...`).
fn message(s: &str) -> String {
    let mut out: String = s
        .chars()
        .take(MAX_MESSAGE)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if s.chars().count() > MAX_MESSAGE {
        out.push_str("...");
    }
    out
}

/// What JSON value `text` starts with, as serde names it, when it is not an object (serde's derive
/// would read an array as the fields in order, which a document must not rely on); `None` for an
/// object, or for text that is no JSON value (the parser's error then says where).
fn not_an_object(text: &[u8]) -> Option<&'static str> {
    let first = text.iter().find(|b| !b.is_ascii_whitespace())?;
    Some(match first {
        b'{' => return None,
        b'[' => "sequence",
        b'"' => "string",
        b't' | b'f' => "boolean",
        b'n' => "null",
        b'-' | b'0'..=b'9' => "number",
        // Not JSON at all: the parser says where.
        _ => return None,
    })
}

/// A serde_json error without its position (which would count from the entry, not the document).
fn without_position(e: &serde_json::Error) -> String {
    let s = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    s.strip_suffix(&suffix).unwrap_or(&s).to_string()
}

/// The error `error` of policy `index` of a document, naming it.
pub fn in_policy(
    index: usize,
    key: Option<&[u8]>,
    group: Option<&[u8]>,
    field: Option<&str>,
    error: ReclaimError,
) -> ReclaimError {
    ReclaimError::InPolicy(Box::new(InPolicy {
        index,
        key: key.map(<[u8]>::to_vec),
        group: group.map(<[u8]>::to_vec),
        field: field.map(str::to_string),
        error,
    }))
}

/// Reads entry `index` into a policy, checked by SET's parser.
fn read_entry(index: usize, entry: &RawValue) -> Result<Imported, ReclaimError> {
    if let Some(kind) = not_an_object(entry.get().as_bytes()) {
        let msg = format!("invalid type: {kind}, expected a policy object");
        return Err(in_policy(index, None, None, None, ReclaimError::Json(msg)));
    }
    let mut de = serde_json::Deserializer::from_str(entry.get());
    let doc: PolicyDoc = match serde_path_to_error::deserialize(&mut de) {
        Ok(d) => d,
        Err(e) => {
            let field = e.path().iter().next().and_then(|s| match s {
                serde_path_to_error::Segment::Map { key } => Some(key.clone()),
                _ => None,
            });
            let (key, group) = Names::read(entry);
            let msg = message(&without_position(e.inner()));
            let field = field.map(|f| message(&f));
            return Err(in_policy(
                index,
                key.as_deref(),
                group.as_deref(),
                field.as_deref(),
                ReclaimError::Json(msg),
            ));
        }
    };
    let policy = doc.to_policy().map_err(|(field, e)| {
        in_policy(
            index,
            Some(&doc.key.0),
            Some(&doc.group.0),
            field.as_deref(),
            e,
        )
    })?;
    Ok(Imported {
        stream: doc.key.0,
        group: doc.group.0,
        policy,
    })
}

/// Reads and checks a whole document, in this order: its length ([`MAX_BYTES`]), its JSON and
/// shape, its version, its number of policies ([`MAX_POLICIES`]), then each policy in order (its
/// fields' types, then SET's rules), and that no (key, group) comes twice. The first error is
/// returned; nothing is kept of a document with one.
pub fn parse_document(doc: &[u8]) -> Result<Vec<Imported>, ReclaimError> {
    if doc.len() > MAX_BYTES {
        return Err(error::IMPORT_TOO_LARGE.into());
    }
    if let Some(kind) = not_an_object(doc) {
        return Err(ReclaimError::Document(format!(
            "invalid type: {kind}, expected an object with \"version\" and \"policies\""
        )));
    }
    let d: DocumentIn =
        serde_json::from_slice(doc).map_err(|e| ReclaimError::Document(message(&e.to_string())))?;
    if d.version != VERSION {
        return Err(ReclaimError::DocumentVersion(d.version, VERSION));
    }
    if d.policies.more {
        return Err(error::IMPORT_TOO_MANY.into());
    }
    let mut out = Vec::with_capacity(d.policies.raw.len());
    let mut seen: HashMap<(Vec<u8>, Vec<u8>), usize> = HashMap::new();
    for (i, entry) in d.policies.raw.iter().enumerate() {
        let p = read_entry(i, entry)?;
        if let Some(first) = seen.insert((p.stream.clone(), p.group.clone()), i) {
            return Err(in_policy(
                i,
                Some(&p.stream),
                Some(&p.group),
                None,
                ReclaimError::Duplicate(first),
            ));
        }
        out.push(p);
    }
    Ok(out)
}

/// The arguments of `RECLAIM.POLICY IMPORT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImportArgs<'a> {
    /// The JSON document.
    pub doc: &'a [u8],
    /// `REPLACE`: existing policies of the document's (key, group) are replaced.
    pub replace: bool,
    /// `LOCAL`: only the policies whose stream's slot this node serves are imported; the others
    /// are reported, not refused (Redis Cluster: the same document on every primary).
    pub local: bool,
}

/// The arguments of `RECLAIM.POLICY IMPORT` after `IMPORT`: the document and the options
/// `REPLACE` and `LOCAL`, each at most once, before or after it (`redis-cli -x RECLAIM.POLICY
/// IMPORT REPLACE < file` sends the document last). Options are case-insensitive; a document is
/// never one of their words (it is not JSON). Errors: two arguments that are not options (`ERR
/// unknown option` of the second), anything else (`ERR syntax error`).
pub fn import_args<'a>(args: &[&'a [u8]]) -> Result<ImportArgs<'a>, ReclaimError> {
    let mut out = ImportArgs {
        doc: b"",
        replace: false,
        local: false,
    };
    let mut others: Vec<&[u8]> = Vec::new();
    for &a in args {
        let flag = if a.eq_ignore_ascii_case(b"REPLACE") {
            &mut out.replace
        } else if a.eq_ignore_ascii_case(b"LOCAL") {
            &mut out.local
        } else {
            others.push(a);
            continue;
        };
        if *flag {
            return Err(error::SYNTAX.into());
        }
        *flag = true;
    }
    match *others {
        [doc] => {
            out.doc = doc;
            Ok(out)
        }
        [_, other] if args.len() == 2 => {
            Err(ReclaimError::UnknownOption(crate::text::printable(other)))
        }
        _ => Err(error::SYNTAX.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pol(opts: &[&str]) -> Policy {
        let o: Vec<&[u8]> = opts.iter().map(|s| s.as_bytes()).collect();
        policy::parse_set_options(b"s", &o).unwrap()
    }

    fn err(doc: &str) -> String {
        parse_document(doc.as_bytes()).unwrap_err().to_string()
    }

    /// A document of the given policy objects (JSON text each).
    fn doc(entries: &[&str]) -> String {
        format!(r#"{{"version": 1, "policies": [{}]}}"#, entries.join(","))
    }

    #[test]
    fn import_limits_in_the_texts() {
        let e = MAX_BYTES.to_string();
        assert!(error::IMPORT_TOO_LARGE.contains(&format!(" {e} bytes")));
        let n = MAX_POLICIES.to_string();
        assert!(error::IMPORT_TOO_MANY.contains(&format!(" {n} policies")));
    }

    #[test]
    fn names_are_strings_or_hex() {
        let cases: &[(&[u8], &str)] = &[
            (b"orders", r#""orders""#),
            (b"a\x00b\r\n\"q\"\\", r#""a\u0000b\r\n\"q\"\\""#),
            ("é€".as_bytes(), "\"é€\""),
            (b"", r#""""#),
            (
                b"bin\x00\xff\r\nstream",
                r#"{"hex":"62696e00ff0d0a73747265616d"}"#,
            ),
            (b"\xfe", r#"{"hex":"fe"}"#),
        ];
        for (bytes, json) in cases {
            let n = Name(bytes.to_vec());
            assert_eq!(serde_json::to_string(&n).unwrap(), *json, "{bytes:?}");
            assert_eq!(serde_json::from_str::<Name>(json).unwrap(), n, "{json}");
        }
        // Hex in upper case, and hex for UTF-8 names, are read too.
        assert_eq!(
            serde_json::from_str::<Name>(r#"{"hex": "4F6b"}"#).unwrap(),
            Name(b"Ok".to_vec())
        );
        for bad in [
            r#"{"hex": "abc"}"#,
            r#"{"hex": "zz"}"#,
            r#"{"hex": "+1"}"#,
            r#"{"base64": "AA=="}"#,
            r#"{}"#,
            r#"{"hex": "00", "hex": "01"}"#,
            "5",
            "null",
            r#""\ud800""#,
        ] {
            assert!(serde_json::from_str::<Name>(bad).is_err(), "{bad}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_round_trip(b in proptest::collection::vec(proptest::num::u8::ANY, 0..40)) {
            let json = serde_json::to_string(&Name(b.clone())).unwrap();
            proptest::prop_assert_eq!(serde_json::from_str::<Name>(&json).unwrap().0, b);
        }

        #[test]
        fn documents_never_panic(s in ".{0,200}") {
            let _ = parse_document(s.as_bytes());
        }
    }

    #[test]
    fn export_then_import_gives_the_same_policies() {
        let p1 = pol(&[
            "MIN-IDLE",
            "1000",
            "MAX-DELIVERIES",
            "2",
            "DLQ",
            "d",
            "BACKOFF",
            "EXPONENTIAL",
            "60000",
            "LIVENESS",
            "30000",
            "STORM",
            "50",
            "60000",
            "DLQ-MAXLEN",
            "1000",
            "DLQ-MAXAGE",
            "86400000",
            "TOMBSTONES",
            "yes",
        ]);
        let p2 = pol(&[
            "BACKOFF", "LIST", "5", "70000", "CLAIMANT", "c", "COUNT", "7",
        ]);
        let mut p3 = pol(&["INTERVAL", "9"]);
        p3.dlq = Some(b"\xff\x00dlq".to_vec());
        p3.claimant = b"c\"\\\r\n\x00".to_vec();
        let all: Vec<(&[u8], &[u8], &Policy)> = vec![
            (b"orders", b"workers", &p1),
            (b"orders", b"audit", &p2),
            (b"bin\x00\xff\r\nstream", b"g\x00\xfe", &p3),
        ];
        let json = to_json(all.clone(), 0).unwrap();
        let back = parse_document(json.as_bytes()).unwrap();
        let got: Vec<(&[u8], &[u8], &Policy)> = back
            .iter()
            .map(|i| (i.stream.as_slice(), i.group.as_slice(), &i.policy))
            .collect();
        assert_eq!(got, all);
        // Exported again, the same text.
        assert_eq!(to_json(got, 0).unwrap(), json);
    }

    #[test]
    fn export_writes_every_field() {
        let p = pol(&["BACKOFF", "LIST", "5", "70000"]);
        let json = to_json([(&b"orders"[..], &b"workers"[..], &p)], 0).unwrap();
        let want = r#"{
  "version": 1,
  "policies": [
    {
      "key": "orders",
      "group": "workers",
      "min-idle": 60000,
      "max-deliveries": 0,
      "dlq": null,
      "claimant": "reclaim",
      "count": 100,
      "interval": 10000,
      "backoff": {
        "list": [
          5,
          70000
        ]
      },
      "liveness": 0,
      "storm": null,
      "dlq-maxlen": 0,
      "dlq-maxage": 0,
      "tombstones": false,
      "forget-idle": 0
    }
  ]
}"#;
        assert_eq!(json, want);
        let none: [(&[u8], &[u8], &Policy); 0] = [];
        assert_eq!(
            to_json(none, 0).unwrap(),
            "{\n  \"version\": 1,\n  \"policies\": []\n}"
        );
        // Policies the exporting user may not see are counted; IMPORT reads the count and
        // ignores it.
        let json = to_json(none, 2).unwrap();
        assert_eq!(
            json,
            "{\n  \"version\": 1,\n  \"left-out\": 2,\n  \"policies\": []\n}"
        );
        assert_eq!(parse_document(json.as_bytes()).unwrap(), vec![]);
    }

    #[test]
    fn storm_is_an_object_and_the_state_is_not_exported() {
        let mut p = pol(&["STORM", "3", "1000"]);
        p.state = policy::State::Paused;
        let json = to_json([(&b"s"[..], &b"g"[..], &p)], 0).unwrap();
        assert!(
            json.contains(
                "\"storm\": {\n        \"max\": 3,\n        \"window\": 1000\n      },\n"
            ),
            "{json}"
        );
        assert!(
            !json.contains("paused") && !json.contains("state"),
            "{json}"
        );
        // Imported, the same options, state active (the store keeps an existing policy's).
        let back = parse_document(json.as_bytes()).unwrap();
        assert_eq!(back[0].policy, p.with_state(policy::State::Active));
        let got = parse_document(
            doc(&[r#"{"key": "a", "group": "g", "storm": {"window": 5, "max": 2}}"#]).as_bytes(),
        )
        .unwrap();
        assert_eq!(got[0].policy, pol(&["STORM", "2", "5"]));
    }

    #[test]
    fn fields_left_out_take_the_defaults_of_set() {
        let got = parse_document(
            doc(&[
                r#"{"key": "a", "group": "g"}"#,
                r#"{"key": "b", "group": "g", "dlq": null, "min-idle": null, "backoff": "fixed"}"#,
                r#"{"key": "c", "group": "g", "backoff": {"exponential": 60000}, "max-deliveries": 1, "dlq": {"hex": "64"}}"#,
            ])
            .as_bytes(),
        )
        .unwrap();
        assert_eq!(got[0].policy, Policy::default());
        assert_eq!(got[1].policy, Policy::default());
        assert_eq!(
            got[2].policy,
            pol(&[
                "BACKOFF",
                "EXPONENTIAL",
                "60000",
                "MAX-DELIVERIES",
                "1",
                "DLQ",
                "d"
            ])
        );
        // A trailing newline (redis-cli -x) and an empty list are fine.
        assert_eq!(
            parse_document(b"{\"policies\": [], \"version\": 1}\n").unwrap(),
            vec![]
        );
    }

    #[test]
    fn document_errors() {
        let cases: &[(&str, &str)] = &[
            ("", "ERR the policy document is not valid: EOF while parsing a value at line 1 column 0"),
            ("[]", "ERR the policy document is not valid: invalid type: sequence, expected an object with \"version\" and \"policies\""),
            (" \"x\"", "ERR the policy document is not valid: invalid type: string, expected an object with \"version\" and \"policies\""),
            (r#"{"version": 1}"#, "ERR the policy document is not valid: missing field `policies` at line 1 column 14"),
            (r#"{"policies": []}"#, "ERR the policy document is not valid: missing field `version` at line 1 column 16"),
            (r#"{"version": 1, "policies": {}}"#, "ERR the policy document is not valid: invalid type: map, expected an array of policies at line 1 column 27"),
            (r#"{"version": 1, "policies": [], "db": 0}"#, "ERR the policy document is not valid: unknown field `db`, expected one of `version`, `left-out`, `policies` at line 1 column 35"),
            (r#"{"version": 1, "policies": [] "#, "ERR the policy document is not valid: EOF while parsing an object at line 1 column 30"),
            (r#"{"version": 1, "policies": []} x"#, "ERR the policy document is not valid: trailing characters at line 1 column 32"),
            ("REPLACE", "ERR the policy document is not valid: expected value at line 1 column 1"),
            ("-1", "ERR the policy document is not valid: invalid type: number, expected an object with \"version\" and \"policies\""),
            (r#"{"version": 2, "policies": []}"#, "ERR the policy document has version 2: this module reads version 1"),
            (r#"{"version": "1", "policies": []}"#, "ERR the policy document is not valid: invalid type: string \"1\", expected u64 at line 1 column 15"),
        ];
        for (d, want) in cases {
            assert_eq!(err(d), *want, "{d}");
        }
    }

    #[test]
    fn limits() {
        let many = format!(
            r#"{{"version": 1, "policies": [{}]}}"#,
            vec!["{}"; MAX_POLICIES + 1].join(",")
        );
        assert_eq!(err(&many), error::IMPORT_TOO_MANY);
        // Exactly MAX_POLICIES is read (and then the first entry is checked).
        let enough = format!(
            r#"{{"version": 1, "policies": [{}]}}"#,
            vec!["{}"; MAX_POLICIES].join(",")
        );
        assert!(err(&enough).starts_with("ERR policies[0] "));
        let mut big = doc(&[]).into_bytes();
        big.resize(MAX_BYTES + 1, b' ');
        assert_eq!(
            parse_document(&big).unwrap_err().to_string(),
            error::IMPORT_TOO_LARGE
        );
        big.truncate(MAX_BYTES);
        assert_eq!(parse_document(&big).unwrap(), vec![]);
    }

    #[test]
    fn policy_errors_name_the_policy_and_the_field() {
        let ok = r#"{"key": "a", "group": "g"}"#;
        let cases: &[(&str, &str)] = &[
            (
                r#"{"key": "orders", "group": "workers", "min-idle": 0}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'min-idle': MIN-IDLE must be a positive integer (ms)",
            ),
            (
                r#"{"key": "orders", "group": "workers", "count": 10001}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'count': COUNT must be an integer from 1 to 10000",
            ),
            (
                r#"{"key": "orders", "group": "workers", "max-deliveries": 3}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'max-deliveries': MAX-DELIVERIES above 0 needs a DLQ key",
            ),
            (
                r#"{"key": "orders", "group": "workers", "dlq-maxlen": 10}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'dlq-maxlen': DLQ-MAXLEN above 0 needs a DLQ key",
            ),
            (
                r#"{"key": "orders", "group": "workers", "dlq": "d", "dlq-maxage": -1}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'dlq-maxage': DLQ-MAXAGE must be a non-negative integer (ms)",
            ),
            (
                r#"{"key": "orders", "group": "workers", "tombstones": true}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'tombstones': TOMBSTONES yes needs a DLQ key",
            ),
            (
                r#"{"key": "orders", "group": "workers", "dlq": "orders"}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'dlq': the DLQ key must differ from the stream key",
            ),
            (
                r#"{"key": "orders", "group": "workers", "dlq": "reclaim:policy:{x}:x"}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'dlq': the DLQ key is a key the module keeps for itself (reclaim:policy:..., reclaim:redrive:..., reclaim:redrive-moved:...)",
            ),
            (
                r#"{"key": "orders", "group": "workers", "min-idle": 1000, "backoff": {"exponential": 999}}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'backoff': BACKOFF EXPONENTIAL max-ms must be at least MIN-IDLE",
            ),
            (
                r#"{"key": "orders", "group": "workers", "backoff": {"list": []}}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'backoff': BACKOFF LIST takes 1 to 64 values (ms)",
            ),
            (
                r#"{"key": "orders", "group": "workers", "backoff": {"list": [1, 0]}}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'backoff': BACKOFF must be a list of positive integers (ms) after LIST",
            ),
            (
                r#"{"key": "orders", "group": "workers", "liveness": -1}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'liveness': LIVENESS must be a non-negative integer (ms)",
            ),
            (
                r#"{"key": "orders", "group": "workers", "storm": {"max": 0, "window": 1000}}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'storm': STORM must be two positive integers: the most dead-letters, then the window (ms)",
            ),
            (
                r#"{"key": "orders", "group": "workers", "storm": {"max": 5}}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'storm': missing field `window`",
            ),
            (
                r#"{"key": "orders", "group": "workers", "storm": {"max": 5, "window": 1, "state": "paused"}}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'storm': unknown field `state`, expected `max` or `window`",
            ),
            (
                r#"{"key": "orders", "group": "workers", "state": "paused"}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'state': unknown field `state`, expected one of `key`, `group`, `min-idle`, `max-deliveries`, `dlq`, `claimant`, `count`, `interval`, `backoff`, `liveness`, `storm`, `dlq-maxlen`, `dlq-maxage`, `tombstones`, `forget-idle`",
            ),
            // Types: the JSON parser's message, with the field.
            (
                r#"{"key": "orders", "group": "workers", "min-idle": 1.5}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'min-idle': invalid type: floating point `1.5`, expected i64",
            ),
            (
                r#"{"min-idle": "1000", "key": "orders", "group": "workers"}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'min-idle': invalid type: string \"1000\", expected i64",
            ),
            (
                r#"{"key": "orders", "group": "workers", "interval": 9223372036854775808}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'interval': invalid value: integer `9223372036854775808`, expected i64",
            ),
            (
                r#"{"key": "orders", "group": "workers", "backoff": "slow"}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'backoff': unknown variant `slow`, expected one of `fixed`, `exponential`, `list`",
            ),
            (
                r#"{"key": "orders", "group": "workers", "dlq": {"hex": "6"}}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'dlq': \"hex\" must hold two hexadecimal digits per byte",
            ),
            (
                r#"{"key": 5, "group": "workers"}"#,
                "ERR policies[1] (key ?, group 'workers'), field 'key': invalid type: integer `5`, expected a string or {\"hex\": \"...\"}",
            ),
            (
                r#"{"key": "orders"}"#,
                "ERR policies[1] (key 'orders', group ?): missing field `group`",
            ),
            (
                r#"{"key": "orders", "group": "workers", "min_idle": 5}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'min_idle': unknown field `min_idle`, expected one of `key`, `group`, `min-idle`, `max-deliveries`, `dlq`, `claimant`, `count`, `interval`, `backoff`, `liveness`, `storm`, `dlq-maxlen`, `dlq-maxage`, `tombstones`, `forget-idle`",
            ),
            (
                r#"{"key": "orders", "group": "workers", "count": 1, "count": 2}"#,
                "ERR policies[1] (key 'orders', group 'workers'): duplicate field `count`",
            ),
            (
                r#"["a", "g"]"#,
                "ERR policies[1] (key ?, group ?): invalid type: sequence, expected a policy object",
            ),
            (
                "null",
                "ERR policies[1] (key ?, group ?): invalid type: null, expected a policy object",
            ),
            // Names are shown printable and bounded.
            (
                r#"{"key": {"hex": "ff0d0a"}, "group": "g", "count": 0}"#,
                "ERR policies[1] (key '???', group 'g'), field 'count': COUNT must be an integer from 1 to 10000",
            ),
            // Twice the same key and group.
            (
                r#"{"key": "a", "group": "g", "count": 5}"#,
                "ERR policies[1] (key 'a', group 'g'): the document has a policy for this key and group already, at policies[0]",
            ),
        ];
        for (entry, want) in cases {
            assert_eq!(err(&doc(&[ok, entry])), *want, "{entry}");
        }
        // A bad field's text never breaks the reply.
        let e = err(&doc(&[r#"{"key": "a", "group": "g", "a\r\nb": 1}"#]));
        assert!(!e.contains(['\r', '\n']), "{e}");
    }

    #[test]
    fn import_arguments() {
        let a = |v: &[&str]| -> Result<(String, bool, bool), String> {
            let w: Vec<&[u8]> = v.iter().map(|s| s.as_bytes()).collect();
            import_args(&w)
                .map(|x| {
                    (
                        String::from_utf8_lossy(x.doc).into_owned(),
                        x.replace,
                        x.local,
                    )
                })
                .map_err(|e| e.to_string())
        };
        assert_eq!(a(&["{}"]), Ok(("{}".into(), false, false)));
        assert_eq!(a(&["{}", "replace"]), Ok(("{}".into(), true, false)));
        assert_eq!(a(&["REPLACE", "{}\n"]), Ok(("{}\n".into(), true, false)));
        assert_eq!(a(&["{}", "local"]), Ok(("{}".into(), false, true)));
        assert_eq!(
            a(&["LOCAL", "REPLACE", "{}"]),
            Ok(("{}".into(), true, true))
        );
        assert_eq!(
            a(&["{}", "REPLACE", "LOCAL"]),
            Ok(("{}".into(), true, true))
        );
        assert_eq!(
            a(&["{}", "FORCE"]),
            Err("ERR unknown option 'FORCE'".into())
        );
        assert_eq!(a(&["{}", "REPLACE", "x"]), Err("ERR syntax error".into()));
        assert_eq!(a(&["{}", "LOCAL", "LOCAL"]), Err("ERR syntax error".into()));
        assert_eq!(a(&["REPLACE"]), Err("ERR syntax error".into()));
    }
}
