//! Reading a document for `RECLAIM.POLICY IMPORT`: its size, JSON, version and number of
//! policies, then each policy through `RECLAIM.POLICY SET`'s parser ([`parse_document`]), and
//! the command's own arguments ([`import_args`]).

use std::collections::HashMap;
use std::fmt;

use serde::de::{Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::error::{self, ReclaimError};
use crate::policy::Policy;

use super::doc::{Name, PolicyDoc};
use super::errors::{in_policy, message, not_an_object, without_position};
use super::{MAX_BYTES, MAX_POLICIES, VERSION};

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
    use crate::error;
    use crate::export::tests::{doc, err};

    #[test]
    fn import_limits_in_the_texts() {
        let e = MAX_BYTES.to_string();
        assert!(error::IMPORT_TOO_LARGE.contains(&format!(" {e} bytes")));
        let n = MAX_POLICIES.to_string();
        assert!(error::IMPORT_TOO_MANY.contains(&format!(" {n} policies")));
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
