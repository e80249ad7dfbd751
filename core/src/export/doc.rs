//! The document's types: one [`PolicyDoc`] per policy, binary-safe [`Name`]s, `BACKOFF` and
//! `STORM` as JSON, and the document `RECLAIM.POLICY EXPORT` writes ([`to_json`]).

use std::fmt;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use crate::error::ReclaimError;
use crate::policy::{self, Backoff, Policy};

use super::errors::message;
use super::VERSION;

/// A binary-safe name (stream key, group, DLQ, claimant). In JSON: a string when the bytes are
/// valid UTF-8 (JSON escapes NUL, CR, LF, quotes and backslashes itself), otherwise an object
/// `{"hex": "<two lower-case hex digits per byte>"}`. Import takes either form for any name (hex
/// digits in either case).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Name(pub(crate) Vec<u8>);

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
pub(crate) enum BackoffDoc {
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
pub(crate) struct StormDoc {
    /// Most dead-letters within one window (`STORM`'s `n`).
    pub(crate) max: i64,
    /// The window, ms (`STORM`'s `window-ms`).
    pub(crate) window: i64,
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
pub(crate) struct PolicyDoc {
    /// The stream key.
    pub(crate) key: Name,
    /// The consumer group.
    pub(crate) group: Name,
    pub(crate) min_idle: Option<i64>,
    pub(crate) max_deliveries: Option<i64>,
    pub(crate) dlq: Option<Name>,
    pub(crate) claimant: Option<Name>,
    pub(crate) count: Option<i64>,
    pub(crate) interval: Option<i64>,
    pub(crate) backoff: Option<BackoffDoc>,
    pub(crate) liveness: Option<i64>,
    pub(crate) storm: Option<StormDoc>,
    /// `DLQ-MAXLEN n` (0: no length limit).
    pub(crate) dlq_maxlen: Option<i64>,
    /// `DLQ-MAXAGE ms` (0: no age limit).
    pub(crate) dlq_maxage: Option<i64>,
    /// `TOMBSTONES yes|no` as a JSON boolean.
    pub(crate) tombstones: Option<bool>,
    /// `FORGET-IDLE ms` (0: consumers are never deleted).
    pub(crate) forget_idle: Option<i64>,
}

impl PolicyDoc {
    /// The policy of (`stream`, `group`), every option explicit (`dlq` is `null` when unset).
    pub(crate) fn from_policy(stream: &[u8], group: &[u8], p: &Policy) -> PolicyDoc {
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
    pub(crate) fn set_words(&self) -> Vec<Vec<u8>> {
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
    pub(crate) fn to_policy(&self) -> Result<Policy, (Option<String>, ReclaimError)> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::tests::{doc, pol};
    use crate::export::*;
    use crate::policy;

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
}
