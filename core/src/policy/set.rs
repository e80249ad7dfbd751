//! `RECLAIM.POLICY SET`'s options: how the words split into options (`spans`, which
//! `RECLAIM.SIMULATE` shares), each option read into [`Changes`] and applied over a base policy,
//! the option an error is about (`option_of`, for `IMPORT`), and where the DLQ key sits
//! (`dlq_position`, for getkeys).

use super::args::number;
use super::{Backoff, Policy, Storm, MAX_BACKOFF_STEPS, MAX_COUNT};
use crate::error::{self, ReclaimError};
use crate::text::{parse_i64, printable};

/// The options of `RECLAIM.POLICY SET`, each with how many values it takes (`None`: one or more,
/// the numbers that follow: `BACKOFF LIST ms ...`).
const SET_OPTIONS: &[&str] = &[
    "MIN-IDLE",
    "MAX-DELIVERIES",
    "DLQ",
    "CLAIMANT",
    "COUNT",
    "INTERVAL",
    "BACKOFF",
    "LIVENESS",
    "STORM",
    "DLQ-MAXLEN",
    "DLQ-MAXAGE",
    "TOMBSTONES",
    "FORGET-IDLE",
];

/// One option of `RECLAIM.POLICY SET`: (canonical name, index of the name, its values).
pub(super) type Span<'a> = (&'static str, usize, &'a [&'a [u8]]);

/// Splits `RECLAIM.POLICY SET` options into (canonical name, index of the name, its values):
/// every option takes one value, but `BACKOFF`, which takes `FIXED`, `EXPONENTIAL max-ms` or
/// `LIST ms [ms ...]` (the numbers that follow). Errors: unknown option, missing value.
fn set_spans<'a>(opts: &'a [&'a [u8]]) -> Result<Vec<Span<'a>>, ReclaimError> {
    spans(opts, &[])
}

/// [`set_spans`] with the options of `extra` besides `SET`'s (each takes one value, but `BACKOFF`
/// and `STORM`).
pub(super) fn spans<'a>(
    opts: &'a [&'a [u8]],
    extra: &[&'static str],
) -> Result<Vec<Span<'a>>, ReclaimError> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < opts.len() {
        let raw = opts[i];
        let up = raw.to_ascii_uppercase();
        let known = |o: &&&'static str| o.as_bytes() == up.as_slice();
        let Some(name) = SET_OPTIONS.iter().chain(extra).find(known) else {
            return Err(ReclaimError::UnknownOption(printable(raw)));
        };
        let first = *opts.get(i + 1).ok_or(ReclaimError::MissingValue(name))?;
        let len = if *name == "STORM" {
            2
        } else if *name != "BACKOFF" {
            1
        } else if first.eq_ignore_ascii_case(b"EXPONENTIAL") {
            2
        } else if first.eq_ignore_ascii_case(b"LIST") {
            1 + opts[i + 2..]
                .iter()
                .take_while(|v| parse_i64(v).is_some())
                .count()
        } else {
            1
        };
        let end = (i + 1 + len).min(opts.len());
        out.push((*name, i, &opts[i + 1..end]));
        i = end;
    }
    Ok(out)
}

/// Parses the words after `STORM`: `n window-ms`, both positive.
fn parse_storm(v: &[&[u8]]) -> Result<Storm, ReclaimError> {
    let range = "two positive integers: the most dead-letters, then the window (ms)";
    let (Some(n), Some(w)) = (v.first(), v.get(1)) else {
        return Err(ReclaimError::BadNumber("STORM", range));
    };
    Ok(Storm {
        max: number("STORM", range, n, 1, i64::MAX)?,
        window_ms: number("STORM", range, w, 1, i64::MAX)?,
    })
}

/// Parses the words after `BACKOFF`.
fn parse_backoff(v: &[&[u8]]) -> Result<Backoff, ReclaimError> {
    let bad = ReclaimError::Static(error::BACKOFF_SYNTAX);
    let kind = v.first().ok_or(bad.clone())?;
    if kind.eq_ignore_ascii_case(b"FIXED") {
        return Ok(Backoff::Fixed);
    }
    if kind.eq_ignore_ascii_case(b"EXPONENTIAL") {
        let max = v.get(1).ok_or(bad)?;
        let range = "a positive integer (ms) after EXPONENTIAL";
        return Ok(Backoff::Exponential(number(
            "BACKOFF",
            range,
            max,
            1,
            i64::MAX,
        )?));
    }
    if kind.eq_ignore_ascii_case(b"LIST") {
        let steps = &v[1..];
        if steps.is_empty() || steps.len() > MAX_BACKOFF_STEPS {
            return Err(ReclaimError::Static(error::BACKOFF_LIST_LENGTH));
        }
        let range = "a list of positive integers (ms) after LIST";
        let list = steps
            .iter()
            .map(|x| number("BACKOFF", range, x, 1, i64::MAX))
            .collect::<Result<Vec<_>, _>>()?;
        return Ok(Backoff::List(list));
    }
    Err(bad)
}

/// The options of one `RECLAIM.POLICY SET`, each as given (`None`: not given), checked one by
/// one but not yet against each other (see [`Changes::apply`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    min_idle_ms: Option<i64>,
    max_deliveries: Option<i64>,
    dlq: Option<Vec<u8>>,
    claimant: Option<Vec<u8>>,
    count: Option<i64>,
    interval_ms: Option<i64>,
    backoff: Option<Backoff>,
    liveness_ms: Option<i64>,
    storm: Option<Storm>,
    dlq_maxlen: Option<i64>,
    dlq_maxage_ms: Option<i64>,
    tombstones: Option<bool>,
    forget_idle_ms: Option<i64>,
}

impl Changes {
    /// Whether no option was given.
    pub fn is_empty(&self) -> bool {
        *self == Changes::default()
    }

    /// The `STORM` option given, if any.
    pub fn storm(&self) -> Option<Storm> {
        self.storm
    }

    /// Reads one option (its canonical name and values, from [`spans`]). Errors: a number out
    /// of range, a malformed `BACKOFF`.
    fn read(&mut self, name: &'static str, v: &[&[u8]]) -> Result<(), ReclaimError> {
        let first = v[0];
        let pos = "a positive integer (ms)";
        match name {
            "MIN-IDLE" => self.min_idle_ms = Some(number(name, pos, first, 1, i64::MAX)?),
            "MAX-DELIVERIES" => {
                self.max_deliveries =
                    Some(number(name, "a non-negative integer", first, 0, i64::MAX)?)
            }
            "DLQ" => self.dlq = Some(first.to_vec()),
            "CLAIMANT" => self.claimant = Some(first.to_vec()),
            "COUNT" => {
                self.count = Some(number(
                    name,
                    "an integer from 1 to 10000",
                    first,
                    1,
                    MAX_COUNT,
                )?)
            }
            "INTERVAL" => self.interval_ms = Some(number(name, pos, first, 1, i64::MAX)?),
            "BACKOFF" => self.backoff = Some(parse_backoff(v)?),
            "STORM" => self.storm = Some(parse_storm(v)?),
            "DLQ-MAXLEN" => {
                self.dlq_maxlen = Some(number(name, "a non-negative integer", first, 0, i64::MAX)?)
            }
            "DLQ-MAXAGE" => {
                self.dlq_maxage_ms = Some(number(
                    name,
                    "a non-negative integer (ms)",
                    first,
                    0,
                    i64::MAX,
                )?)
            }
            "TOMBSTONES" => {
                self.tombstones = Some(if first.eq_ignore_ascii_case(b"yes") {
                    true
                } else if first.eq_ignore_ascii_case(b"no") {
                    false
                } else {
                    return Err(ReclaimError::Static(error::TOMBSTONES_SYNTAX));
                })
            }
            "FORGET-IDLE" => {
                self.forget_idle_ms = Some(number(
                    name,
                    "a non-negative integer (ms)",
                    first,
                    0,
                    i64::MAX,
                )?)
            }
            _ => {
                self.liveness_ms = Some(number(
                    name,
                    "a non-negative integer (ms)",
                    first,
                    0,
                    i64::MAX,
                )?)
            }
        }
        Ok(())
    }

    /// `base` with these options changed: the policy `RECLAIM.POLICY SET` would make of them
    /// over `base` (its defaults for SET itself), checked as a whole for `stream`. Errors:
    /// `BACKOFF EXPONENTIAL` below `MIN-IDLE`, `MAX-DELIVERIES`, `DLQ-MAXLEN` or `DLQ-MAXAGE` > 0
    /// or `TOMBSTONES yes` without `DLQ` (checked in that order), `DLQ` equal
    /// to `stream` or a policy key.
    pub fn apply(self, base: Policy, stream: &[u8]) -> Result<Policy, ReclaimError> {
        let mut p = base;
        p.min_idle_ms = self.min_idle_ms.unwrap_or(p.min_idle_ms);
        p.max_deliveries = self.max_deliveries.unwrap_or(p.max_deliveries);
        p.dlq = self.dlq.or(p.dlq);
        p.claimant = self.claimant.unwrap_or(p.claimant);
        p.count = self.count.unwrap_or(p.count);
        p.interval_ms = self.interval_ms.unwrap_or(p.interval_ms);
        p.backoff = self.backoff.unwrap_or(p.backoff);
        p.liveness_ms = self.liveness_ms.unwrap_or(p.liveness_ms);
        p.storm = self.storm.or(p.storm);
        p.dlq_maxlen = self.dlq_maxlen.unwrap_or(p.dlq_maxlen);
        p.dlq_maxage_ms = self.dlq_maxage_ms.unwrap_or(p.dlq_maxage_ms);
        p.tombstones = self.tombstones.unwrap_or(p.tombstones);
        p.forget_idle_ms = self.forget_idle_ms.unwrap_or(p.forget_idle_ms);
        if matches!(p.backoff, Backoff::Exponential(max) if max < p.min_idle_ms) {
            return Err(ReclaimError::Static(error::BACKOFF_BELOW_MIN_IDLE));
        }
        if p.max_deliveries > 0 && p.dlq.is_none() {
            return Err(ReclaimError::Static(error::MAX_DELIVERIES_NEEDS_DLQ));
        }
        if p.dlq.is_none() {
            if p.dlq_maxlen > 0 {
                return Err(ReclaimError::Static(error::DLQ_MAXLEN_NEEDS_DLQ));
            }
            if p.dlq_maxage_ms > 0 {
                return Err(ReclaimError::Static(error::DLQ_MAXAGE_NEEDS_DLQ));
            }
            if p.tombstones {
                return Err(ReclaimError::Static(error::TOMBSTONES_NEEDS_DLQ));
            }
        }
        if p.dlq.as_deref() == Some(stream) {
            return Err(ReclaimError::Static(error::DLQ_IS_STREAM));
        }
        if p.dlq.as_deref().is_some_and(crate::keys::is_module_key) {
            return Err(ReclaimError::Static(error::DLQ_IS_MODULE_KEY));
        }
        Ok(p)
    }
}

/// Reads the spans of `RECLAIM.POLICY SET` options into [`Changes`], in the order given;
/// `other` reads those that are not SET's own. Errors: repeated option, and those of
/// [`Changes::read`] and `other`.
pub(super) fn read_changes(
    spans: &[Span],
    mut other: impl FnMut(&'static str, &[&[u8]]) -> Result<(), ReclaimError>,
) -> Result<Changes, ReclaimError> {
    let mut c = Changes::default();
    let mut seen: Vec<&'static str> = Vec::new();
    for (name, _, v) in spans {
        if seen.contains(name) {
            return Err(ReclaimError::RepeatedOption(name));
        }
        seen.push(name);
        if SET_OPTIONS.contains(name) {
            c.read(name, v)?;
        } else {
            other(name, v)?;
        }
    }
    Ok(c)
}

/// Parses the options of `RECLAIM.POLICY SET key group [MIN-IDLE ms] [MAX-DELIVERIES n]
/// [DLQ dlq-key] [CLAIMANT consumer] [COUNT n] [INTERVAL ms] [BACKOFF FIXED | EXPONENTIAL max-ms |
/// LIST ms [ms ...]] [LIVENESS ms] [STORM n window-ms] [DLQ-MAXLEN n] [DLQ-MAXAGE ms]
/// [TOMBSTONES yes|no] [FORGET-IDLE ms]` (everything after `group`). Option names are
/// case-insensitive; values are binary-safe.
///
/// Errors: unknown option, repeated option, option without value, number out of range
/// (`MIN-IDLE`, `COUNT`, `INTERVAL` >= 1, `COUNT` <= [`MAX_COUNT`], `MAX-DELIVERIES` and
/// `LIVENESS`, `FORGET-IDLE` >= 0), a malformed `BACKOFF`, `BACKOFF EXPONENTIAL` below `MIN-IDLE`,
/// `TOMBSTONES` neither `yes` nor `no` (any case), `MAX-DELIVERIES`, `DLQ-MAXLEN`, `DLQ-MAXAGE`
/// > 0 or `TOMBSTONES yes` without `DLQ`, `DLQ` equal to `stream`.
pub fn parse_set_options(stream: &[u8], opts: &[&[u8]]) -> Result<Policy, ReclaimError> {
    read_changes(&set_spans(opts)?, |_, _| Ok(()))?.apply(Policy::default(), stream)
}

/// The option of `RECLAIM.POLICY SET` that an error of [`parse_set_options`] is about (upper
/// case, as typed in SET), or `None` for an unknown option name. `RECLAIM.POLICY IMPORT` names
/// the document's field from it (the option's name in lower case). A new check in the parser adds
/// its error here.
pub(crate) fn option_of(e: &ReclaimError) -> Option<&'static str> {
    match e {
        ReclaimError::RepeatedOption(o)
        | ReclaimError::MissingValue(o)
        | ReclaimError::BadNumber(o, _) => Some(o),
        ReclaimError::Static(s) => match *s {
            error::BACKOFF_SYNTAX | error::BACKOFF_LIST_LENGTH | error::BACKOFF_BELOW_MIN_IDLE => {
                Some("BACKOFF")
            }
            error::MAX_DELIVERIES_NEEDS_DLQ => Some("MAX-DELIVERIES"),
            error::DLQ_MAXLEN_NEEDS_DLQ => Some("DLQ-MAXLEN"),
            error::DLQ_MAXAGE_NEEDS_DLQ => Some("DLQ-MAXAGE"),
            error::TOMBSTONES_NEEDS_DLQ | error::TOMBSTONES_SYNTAX => Some("TOMBSTONES"),
            error::DLQ_IS_STREAM | error::DLQ_IS_MODULE_KEY => Some("DLQ"),
            _ => None,
        },
        _ => None,
    }
}

/// Where the DLQ key sits in a `RECLAIM.POLICY SET` argument vector (`argv[0]` is
/// `RECLAIM.POLICY`, `argv[1]` is `SET`), or `None` when there is no `DLQ` option. Splits the
/// options as [`parse_set_options`] does, so `CLAIMANT DLQ` is a value, never a key.
/// Used by the getkeys callback (`COMMAND GETKEYS`, ACL, cluster routing).
pub fn dlq_position(argv: &[&[u8]]) -> Option<usize> {
    let opts = argv.get(4..)?;
    let spans = set_spans(opts).ok()?;
    spans
        .into_iter()
        .find(|(name, _, _)| *name == "DLQ")
        .map(|(_, at, _)| 4 + at + 1)
}

/// [`parse_set_options`] of words given as text, for `orders`, its error as its wire text.
#[cfg(test)]
pub(super) fn parse_words(opts: &[&str]) -> Result<Policy, String> {
    let o: Vec<&[u8]> = opts.iter().map(|s| s.as_bytes()).collect();
    parse_set_options(b"orders", &o).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::parse_simulate_options;
    use crate::policy::set::parse_words as set;

    #[test]
    fn retention_and_tombstones() {
        let p = set(&["DLQ", "d"]).unwrap();
        assert_eq!((p.dlq_maxlen, p.dlq_maxage_ms, p.tombstones), (0, 0, false));
        assert!(!p.trims_dlq());
        let p = set(&[
            "dlq-maxlen",
            "100",
            "DLQ-MAXAGE",
            "3600000",
            "tombstones",
            "YES",
            "DLQ",
            "d",
        ])
        .unwrap();
        assert_eq!(
            (p.dlq_maxlen, p.dlq_maxage_ms, p.tombstones),
            (100, 3_600_000, true)
        );
        assert!(p.trims_dlq());
        let args = p.to_args();
        let a: Vec<&[u8]> = args.iter().map(|v| v.as_slice()).collect();
        assert_eq!(parse_set_options(b"orders", &a).unwrap(), p);
        assert_eq!(
            &args[args.len() - 8..args.len() - 2],
            [
                &b"DLQ-MAXLEN"[..],
                b"100",
                b"DLQ-MAXAGE",
                b"3600000",
                b"TOMBSTONES",
                b"yes"
            ]
        );
        // 0 and no are the defaults, allowed without a DLQ.
        let p = set(&["DLQ-MAXLEN", "0", "DLQ-MAXAGE", "0", "TOMBSTONES", "no"]).unwrap();
        assert_eq!(p, Policy::default());
        let cases: &[(&[&str], &str)] = &[
            (
                &["DLQ-MAXLEN", "-1", "DLQ", "d"],
                "ERR DLQ-MAXLEN must be a non-negative integer",
            ),
            (
                &["DLQ-MAXLEN", "1.5", "DLQ", "d"],
                "ERR DLQ-MAXLEN must be a non-negative integer",
            ),
            (
                &["DLQ-MAXAGE", "-5", "DLQ", "d"],
                "ERR DLQ-MAXAGE must be a non-negative integer (ms)",
            ),
            (
                &["DLQ-MAXAGE", "x", "DLQ", "d"],
                "ERR DLQ-MAXAGE must be a non-negative integer (ms)",
            ),
            (
                &["TOMBSTONES", "1", "DLQ", "d"],
                "ERR TOMBSTONES must be yes or no",
            ),
            (
                &["DLQ-MAXLEN", "10"],
                "ERR DLQ-MAXLEN above 0 needs a DLQ key",
            ),
            (
                &["DLQ-MAXAGE", "10"],
                "ERR DLQ-MAXAGE above 0 needs a DLQ key",
            ),
            (&["TOMBSTONES", "yes"], "ERR TOMBSTONES yes needs a DLQ key"),
            (&["TOMBSTONES"], "ERR option TOMBSTONES needs a value"),
            (
                &["DLQ-MAXLEN", "1", "DLQ-MAXLEN", "2", "DLQ", "d"],
                "ERR option DLQ-MAXLEN given more than once",
            ),
        ];
        for (opts, want) in cases {
            assert_eq!(set(opts).unwrap_err(), *want, "{opts:?}");
        }
        // SIMULATE's what-ifs take them too.
        let o: Vec<&[u8]> = ["TOMBSTONES", "yes", "DLQ-MAXLEN", "5"]
            .iter()
            .map(|s| s.as_bytes())
            .collect();
        let (_, c) = parse_simulate_options(&o).unwrap();
        let base = set(&["DLQ", "d"]).unwrap();
        let q = c.apply(base, b"orders").unwrap();
        assert_eq!((q.tombstones, q.dlq_maxlen), (true, 5));
    }

    #[test]
    fn all_options_any_case() {
        let p = set(&[
            "min-idle",
            "5",
            "Max-Deliveries",
            "3",
            "dlq",
            "orders:dlq",
            "claimant",
            "c",
            "count",
            "7",
            "interval",
            "9",
        ])
        .unwrap();
        assert_eq!(
            p,
            Policy {
                min_idle_ms: 5,
                max_deliveries: 3,
                dlq: Some(b"orders:dlq".to_vec()),
                claimant: b"c".to_vec(),
                count: 7,
                interval_ms: 9,
                ..Policy::default()
            }
        );
        // to_args round-trips.
        let args = p.to_args();
        let a: Vec<&[u8]> = args.iter().map(|v| v.as_slice()).collect();
        assert_eq!(parse_set_options(b"orders", &a).unwrap(), p);
    }

    #[test]
    fn rejections() {
        let cases: &[(&[&str], &str)] = &[
            (
                &["MIN-IDLE", "0"],
                "ERR MIN-IDLE must be a positive integer (ms)",
            ),
            (
                &["MIN-IDLE", "-1"],
                "ERR MIN-IDLE must be a positive integer (ms)",
            ),
            (
                &["MIN-IDLE", "1.5"],
                "ERR MIN-IDLE must be a positive integer (ms)",
            ),
            (
                &["MIN-IDLE", " 1"],
                "ERR MIN-IDLE must be a positive integer (ms)",
            ),
            (
                &["MIN-IDLE", "+1"],
                "ERR MIN-IDLE must be a positive integer (ms)",
            ),
            (
                &["MIN-IDLE", "9223372036854775808"],
                "ERR MIN-IDLE must be a positive integer (ms)",
            ),
            (
                &["COUNT", "0"],
                "ERR COUNT must be an integer from 1 to 10000",
            ),
            (
                &["COUNT", "10001"],
                "ERR COUNT must be an integer from 1 to 10000",
            ),
            (
                &["INTERVAL", "0"],
                "ERR INTERVAL must be a positive integer (ms)",
            ),
            (
                &["MAX-DELIVERIES", "-1"],
                "ERR MAX-DELIVERIES must be a non-negative integer",
            ),
            (
                &["MAX-DELIVERIES", "3"],
                "ERR MAX-DELIVERIES above 0 needs a DLQ key",
            ),
            (
                &["DLQ", "orders"],
                "ERR the DLQ key must differ from the stream key",
            ),
            (
                &["DLQ", "reclaim:policy:{orders}:orders"],
                "ERR the DLQ key is a key the module keeps for itself (reclaim:policy:..., reclaim:redrive:..., reclaim:redrive-moved:...)",
            ),
            (
                &["DLQ", "reclaim:redrive:{x}:x"],
                "ERR the DLQ key is a key the module keeps for itself (reclaim:policy:..., reclaim:redrive:..., reclaim:redrive-moved:...)",
            ),
            (
                &["DLQ", "reclaim:redrive-moved:{x}:x"],
                "ERR the DLQ key is a key the module keeps for itself (reclaim:policy:..., reclaim:redrive:..., reclaim:redrive-moved:...)",
            ),
            (&["FOO", "1"], "ERR unknown option 'FOO'"),
            (
                &["COUNT", "1", "count", "2"],
                "ERR option COUNT given more than once",
            ),
            (&["COUNT"], "ERR option COUNT needs a value"),
            (&["BACKOFF"], "ERR option BACKOFF needs a value"),
            (
                &["BACKOFF", "SLOW"],
                "ERR BACKOFF takes FIXED, EXPONENTIAL max-ms or LIST ms [ms ...]",
            ),
            (
                &["BACKOFF", "EXPONENTIAL"],
                "ERR BACKOFF takes FIXED, EXPONENTIAL max-ms or LIST ms [ms ...]",
            ),
            (
                &["BACKOFF", "EXPONENTIAL", "0"],
                "ERR BACKOFF must be a positive integer (ms) after EXPONENTIAL",
            ),
            (
                &["MIN-IDLE", "1000", "BACKOFF", "EXPONENTIAL", "999"],
                "ERR BACKOFF EXPONENTIAL max-ms must be at least MIN-IDLE",
            ),
            (
                &["BACKOFF", "LIST"],
                "ERR BACKOFF LIST takes 1 to 64 values (ms)",
            ),
            (
                &["BACKOFF", "LIST", "0"],
                "ERR BACKOFF must be a list of positive integers (ms) after LIST",
            ),
            (
                &["BACKOFF", "FIXED", "BACKOFF", "FIXED"],
                "ERR option BACKOFF given more than once",
            ),
            (
                &["LIVENESS", "-1"],
                "ERR LIVENESS must be a non-negative integer (ms)",
            ),
        ];
        for (opts, want) in cases {
            assert_eq!(set(opts).unwrap_err(), *want, "options {opts:?}");
            // Each error is about one option of those given (but an unknown name).
            let o: Vec<&[u8]> = opts.iter().map(|s| s.as_bytes()).collect();
            let e = parse_set_options(b"orders", &o).unwrap_err();
            match option_of(&e) {
                Some(name) => assert!(
                    opts.iter().any(|w| w.eq_ignore_ascii_case(name)),
                    "{want} is about {name}, not in {opts:?}"
                ),
                None => assert!(matches!(e, ReclaimError::UnknownOption(_)), "{want}"),
            }
        }
    }

    #[test]
    fn limits_of_i64() {
        assert_eq!(
            set(&["MIN-IDLE", "9223372036854775807"])
                .unwrap()
                .min_idle_ms,
            i64::MAX
        );
    }

    #[test]
    fn dlq_position_skips_values() {
        let v = |s: &[&str]| -> Vec<Vec<u8>> { s.iter().map(|x| x.as_bytes().to_vec()).collect() };
        let pos = |a: &[Vec<u8>]| {
            let r: Vec<&[u8]> = a.iter().map(|x| x.as_slice()).collect();
            dlq_position(&r)
        };
        assert_eq!(
            pos(&v(&["RECLAIM.POLICY", "SET", "s", "g", "DLQ", "d"])),
            Some(5)
        );
        assert_eq!(
            pos(&v(&[
                "RECLAIM.POLICY",
                "SET",
                "s",
                "g",
                "CLAIMANT",
                "DLQ",
                "COUNT",
                "5"
            ])),
            None
        );
        assert_eq!(
            pos(&v(&[
                "RECLAIM.POLICY",
                "SET",
                "s",
                "g",
                "CLAIMANT",
                "DLQ",
                "dlq",
                "x"
            ])),
            Some(7)
        );
        assert_eq!(pos(&v(&["RECLAIM.POLICY", "SET", "s", "g", "DLQ"])), None);
    }
}
