//! Reclaim policies: `RECLAIM.POLICY SET/GET/DEL/LIST/EXPORT/IMPORT` and `RECLAIM.STATS`.

use redis::{cmd, Connection, Value};

use crate::replies::{bs, bytes_of, error_of, is_ok, pairs, reply_of};
use crate::words::bin_cmd;

/// A reclaim policy as `RECLAIM.POLICY GET` reports it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct PolicyView {
    pub min_idle: i64,
    pub max_deliveries: i64,
    pub dlq: Option<Vec<u8>>,
    pub claimant: Vec<u8>,
    pub count: i64,
    pub interval: i64,
    /// The words after `BACKOFF`, joined by spaces, as GET shows them (`FIXED`, `EXPONENTIAL
    /// 60000`, `LIST 1000 5000`).
    pub backoff: Vec<u8>,
    pub liveness: i64,
    /// `STORM n window-ms`: (n, window-ms), `None` = off.
    pub storm: Option<(i64, i64)>,
    /// `DLQ-MAXLEN n` (0 = off).
    pub dlq_maxlen: i64,
    /// `DLQ-MAXAGE ms` (0 = off).
    pub dlq_maxage: i64,
    /// `TOMBSTONES yes|no`.
    pub tombstones: bool,
    /// `FORGET-IDLE ms` (0 = off).
    pub forget_idle: i64,
    /// `active`, `paused` or `storm` (not an option of SET).
    pub state: Vec<u8>,
    /// The `status` GET and LIST show first (checked live, not part of the policy): `None` for
    /// the usual one of a policy set before its stream exists, `waiting: no stream <key>`
    /// ([`PolicyView::status_on`]).
    pub status: Option<Vec<u8>>,
}

impl PolicyView {
    /// A policy with the given MIN-IDLE and INTERVAL and the module defaults otherwise.
    pub fn new(min_idle: i64, interval: i64) -> PolicyView {
        PolicyView {
            min_idle,
            max_deliveries: 0,
            dlq: None,
            claimant: b"reclaim".to_vec(),
            count: 100,
            interval,
            backoff: b"FIXED".to_vec(),
            liveness: 0,
            storm: None,
            dlq_maxlen: 0,
            dlq_maxage: 0,
            tombstones: false,
            forget_idle: 0,
            state: b"active".to_vec(),
            status: None,
        }
    }

    /// The documented defaults (`RECLAIM.POLICY SET s g` with no option).
    pub fn defaults() -> PolicyView {
        PolicyView::new(60_000, 10_000)
    }

    /// The `status` of this policy on stream `key`: the one set ([`PolicyView::with_status`]),
    /// or `waiting: no stream <key>`.
    pub fn status_on(&self, key: &[u8]) -> Vec<u8> {
        self.status
            .clone()
            .unwrap_or_else(|| [b"waiting: no stream ".as_slice(), key].concat())
    }

    /// The same policy with its `status` (`active`, `waiting: no group g`...).
    pub fn with_status(mut self, status: &str) -> PolicyView {
        self.status = Some(status.as_bytes().to_vec());
        self
    }

    /// (field, value) of the GET reply after `status`, exactly as the module writes them, in
    /// the documented order.
    pub fn reply_fields(&self) -> Vec<(Value, Value)> {
        let text = |b: Option<&[u8]>| b.map(bs).unwrap_or(Value::Nil);
        let storm = self.storm.map(|(n, w)| format!("{n} {w}").into_bytes());
        let tombstones: &[u8] = if self.tombstones { b"yes" } else { b"no" };
        vec![
            (bs(b"min-idle"), Value::Int(self.min_idle)),
            (bs(b"max-deliveries"), Value::Int(self.max_deliveries)),
            (bs(b"dlq"), text(self.dlq.as_deref())),
            (bs(b"claimant"), bs(&self.claimant)),
            (bs(b"count"), Value::Int(self.count)),
            (bs(b"interval"), Value::Int(self.interval)),
            (bs(b"backoff"), bs(&self.backoff)),
            (bs(b"liveness"), Value::Int(self.liveness)),
            (bs(b"storm"), text(storm.as_deref())),
            (bs(b"dlq-maxlen"), Value::Int(self.dlq_maxlen)),
            (bs(b"dlq-maxage"), Value::Int(self.dlq_maxage)),
            (bs(b"tombstones"), bs(tombstones)),
            (bs(b"forget-idle"), Value::Int(self.forget_idle)),
            (bs(b"state"), bs(&self.state)),
        ]
    }

    /// The exact GET reply of this policy on stream `key`: `status`
    /// ([`PolicyView::status_on`]), then the policy, then `eviction-risk` (`no`: the test
    /// servers have no `maxmemory`); a flat field/value array in RESP2, a map in RESP3.
    pub fn reply_on(&self, key: &[u8], resp3: bool) -> Value {
        let mut f = vec![(bs(b"status"), bs(&self.status_on(key)))];
        f.extend(self.reply_fields());
        f.push((bs(b"eviction-risk"), bs(b"no")));
        field_value_reply(f, resp3)
    }

    /// The exact LIST element of this policy on (`key`, `group`): `key`, `group` and `status`
    /// first, then the policy.
    pub fn list_item(&self, key: &[u8], group: &[u8], resp3: bool) -> Value {
        let mut f = vec![
            (bs(b"key"), bs(key)),
            (bs(b"group"), bs(group)),
            (bs(b"status"), bs(&self.status_on(key))),
        ];
        f.extend(self.reply_fields());
        field_value_reply(f, resp3)
    }

    /// The same policy with DLQ retention (`DLQ-MAXLEN`, `DLQ-MAXAGE`; 0 = off).
    pub fn with_retention(mut self, maxlen: i64, maxage_ms: i64) -> PolicyView {
        self.dlq_maxlen = maxlen;
        self.dlq_maxage = maxage_ms;
        self
    }

    /// The same policy with `TOMBSTONES yes|no`.
    pub fn with_tombstones(mut self, on: bool) -> PolicyView {
        self.tombstones = on;
        self
    }

    /// The same policy with a STORM breaker.
    pub fn with_storm(mut self, max: i64, window_ms: i64) -> PolicyView {
        self.storm = Some((max, window_ms));
        self
    }

    /// The same policy in another state (`paused`, `storm`).
    pub fn with_state(mut self, state: &str) -> PolicyView {
        self.state = state.as_bytes().to_vec();
        self
    }

    /// The same policy with a BACKOFF (its words, space-separated: `EXPONENTIAL 60000`).
    pub fn with_backoff(mut self, words: &str) -> PolicyView {
        self.backoff = words.as_bytes().to_vec();
        self
    }

    /// The same policy with `FORGET-IDLE ms`.
    pub fn with_forget_idle(mut self, ms: i64) -> PolicyView {
        self.forget_idle = ms;
        self
    }

    /// The same policy with `LIVENESS ms`.
    pub fn with_liveness(mut self, ms: i64) -> PolicyView {
        self.liveness = ms;
        self
    }

    /// The same policy with a DLQ and MAX-DELIVERIES.
    pub fn with_dlq(mut self, dlq: &[u8], max_deliveries: i64) -> PolicyView {
        self.dlq = Some(dlq.to_vec());
        self.max_deliveries = max_deliveries;
        self
    }

    /// The same policy with another CLAIMANT.
    pub fn with_claimant(mut self, claimant: &[u8]) -> PolicyView {
        self.claimant = claimant.to_vec();
        self
    }

    /// The same policy with another COUNT.
    pub fn with_count(mut self, count: i64) -> PolicyView {
        self.count = count;
        self
    }

    /// The arguments of `RECLAIM.POLICY SET stream group ...` after `group`, every option given,
    /// in the order the module itself uses when it rewrites or propagates a policy.
    pub fn set_args(&self) -> Vec<Vec<u8>> {
        let mut a: Vec<Vec<u8>> = vec![
            b"MIN-IDLE".to_vec(),
            self.min_idle.to_string().into_bytes(),
            b"MAX-DELIVERIES".to_vec(),
            self.max_deliveries.to_string().into_bytes(),
        ];
        if let Some(d) = &self.dlq {
            a.push(b"DLQ".to_vec());
            a.push(d.clone());
        }
        a.extend([
            b"CLAIMANT".to_vec(),
            self.claimant.clone(),
            b"COUNT".to_vec(),
            self.count.to_string().into_bytes(),
            b"INTERVAL".to_vec(),
            self.interval.to_string().into_bytes(),
            b"BACKOFF".to_vec(),
        ]);
        a.extend(self.backoff.split(|b| *b == b' ').map(<[u8]>::to_vec));
        a.extend([b"LIVENESS".to_vec(), self.liveness.to_string().into_bytes()]);
        if let Some((n, w)) = self.storm {
            a.extend([
                b"STORM".to_vec(),
                n.to_string().into_bytes(),
                w.to_string().into_bytes(),
            ]);
        }
        a.extend([
            b"DLQ-MAXLEN".to_vec(),
            self.dlq_maxlen.to_string().into_bytes(),
            b"DLQ-MAXAGE".to_vec(),
            self.dlq_maxage.to_string().into_bytes(),
            b"TOMBSTONES".to_vec(),
            if self.tombstones {
                b"yes".to_vec()
            } else {
                b"no".to_vec()
            },
            b"FORGET-IDLE".to_vec(),
            self.forget_idle.to_string().into_bytes(),
        ]);
        a
    }

    /// Parses a GET reply (or the policy fields of a LIST item).
    pub fn from_reply(v: &Value) -> PolicyView {
        let p = pairs(v);
        let get = |name: &str| -> Value {
            p.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| panic!("no field {name} in {v:?}"))
        };
        let int = |name: &str| -> i64 {
            match get(name) {
                Value::Int(i) => i,
                other => panic!("field {name} is not an integer: {other:?}"),
            }
        };
        PolicyView {
            min_idle: int("min-idle"),
            max_deliveries: int("max-deliveries"),
            dlq: match get("dlq") {
                Value::Nil => None,
                other => Some(bytes_of(&other)),
            },
            claimant: bytes_of(&get("claimant")),
            count: int("count"),
            interval: int("interval"),
            backoff: bytes_of(&get("backoff")),
            liveness: int("liveness"),
            storm: match get("storm") {
                Value::Nil => None,
                other => {
                    let text = String::from_utf8(bytes_of(&other)).expect("storm is text");
                    let (n, w) = text.split_once(' ').expect("storm is `n window-ms`");
                    Some((n.parse().expect("n"), w.parse().expect("window-ms")))
                }
            },
            dlq_maxlen: int("dlq-maxlen"),
            dlq_maxage: int("dlq-maxage"),
            tombstones: match bytes_of(&get("tombstones")).as_slice() {
                b"yes" => true,
                b"no" => false,
                other => panic!("tombstones is yes or no: {other:?}"),
            },
            forget_idle: int("forget-idle"),
            state: bytes_of(&get("state")),
            // The policy only: its live status is not part of it.
            status: None,
        }
    }
}

/// A field/value reply: a flat array in RESP2, a map in RESP3.
fn field_value_reply(fields: Vec<(Value, Value)>, resp3: bool) -> Value {
    if resp3 {
        Value::Map(fields)
    } else {
        Value::Array(fields.into_iter().flat_map(|(k, v)| [k, v]).collect())
    }
}

/// `RECLAIM.POLICY <args>`, binary-safe.
pub fn policy_cmd(args: &[&[u8]]) -> redis::Cmd {
    bin_cmd("RECLAIM.POLICY", args)
}

/// `RECLAIM.POLICY <words...>`, which must answer `+OK` (SET, PAUSE, RESUME).
pub fn policy_ok(con: &mut Connection, words: &[&str]) {
    let r: Value = cmd("RECLAIM.POLICY")
        .arg(words)
        .query(con)
        .unwrap_or_else(|e| panic!("RECLAIM.POLICY {words:?}: {e}"));
    assert!(is_ok(&r), "RECLAIM.POLICY {words:?}: {r:?}");
}

/// `RECLAIM.POLICY SET key group <opts>`, binary-safe, which must answer `+OK`.
pub fn set_policy_args(con: &mut Connection, key: &[u8], group: &[u8], opts: &[&[u8]]) {
    let r = reply_of(
        con,
        &policy_cmd(&[&[b"SET", key, group][..], opts].concat()),
    );
    assert!(is_ok(&r), "SET answered {r:?}");
}

/// The error of `RECLAIM.POLICY SET key group <opts>`, binary-safe.
pub fn set_policy_err(con: &mut Connection, key: &[u8], group: &[u8], opts: &[&[u8]]) -> String {
    error_of(
        con,
        &policy_cmd(&[&[b"SET", key, group][..], opts].concat()),
    )
}

/// The raw reply of `RECLAIM.POLICY GET key group` (nil, or the field/value reply).
pub fn policy_reply(con: &mut Connection, key: &[u8], group: &[u8]) -> Value {
    reply_of(con, &policy_cmd(&[b"GET", key, group]))
}

/// Asserts that `RECLAIM.POLICY GET key group` answers exactly `p`'s RESP2 reply.
pub fn assert_policy_reply(con: &mut Connection, key: &[u8], group: &[u8], p: &PolicyView) {
    assert_eq!(policy_reply(con, key, group), p.reply_on(key, false));
}

/// Asserts that `RECLAIM.POLICY LIST` answers exactly `want` (key, group, policy; in reply order)
/// in RESP2.
pub fn assert_policy_list(con: &mut Connection, want: &[(&[u8], &[u8], &PolicyView)]) {
    let items = want.iter().map(|(k, g, p)| p.list_item(k, g, false));
    assert_eq!(policy_list_reply(con), Value::Array(items.collect()));
}

/// The raw reply of `RECLAIM.POLICY DEL key group` (1 or 0).
pub fn policy_del_reply(con: &mut Connection, key: &[u8], group: &[u8]) -> Value {
    reply_of(con, &policy_cmd(&[b"DEL", key, group]))
}

/// The raw reply of `RECLAIM.POLICY LIST`.
pub fn policy_list_reply(con: &mut Connection) -> Value {
    reply_of(con, &policy_cmd(&[b"LIST"]))
}

/// `RECLAIM.POLICY SET stream group <every option of p>`.
pub fn set_policy(con: &mut Connection, stream: &[u8], group: &[u8], p: &PolicyView) {
    let r: Value = cmd("RECLAIM.POLICY")
        .arg("SET")
        .arg(stream)
        .arg(group)
        .arg(p.set_args())
        .query(con)
        .expect("RECLAIM.POLICY SET");
    assert!(is_ok(&r), "{r:?}");
}

/// `RECLAIM.POLICY SET s g <opts>`, the options as one string of words separated by spaces
/// (`"MIN-IDLE 100 DLQ jobs:dlq INTERVAL 50"`: only those given, the module's defaults for the
/// others).
pub fn set_policy_opts(c: &mut Connection, s: &str, g: &str, opts: &str) {
    let mut a = vec!["RECLAIM.POLICY", "SET", s, g];
    a.extend(opts.split_whitespace());
    let _: () = crate::words::q(c, &a);
}

/// `RECLAIM.POLICY GET stream group`.
pub fn get_policy(con: &mut Connection, stream: &[u8], group: &[u8]) -> Option<PolicyView> {
    let v: Value = cmd("RECLAIM.POLICY")
        .arg("GET")
        .arg(stream)
        .arg(group)
        .query(con)
        .expect("RECLAIM.POLICY GET");
    match v {
        Value::Nil => None,
        v => Some(PolicyView::from_reply(&v)),
    }
}

/// `RECLAIM.POLICY DEL stream group`.
pub fn del_policy(con: &mut Connection, stream: &[u8], group: &[u8]) -> i64 {
    cmd("RECLAIM.POLICY")
        .arg("DEL")
        .arg(stream)
        .arg(group)
        .query(con)
        .expect("RECLAIM.POLICY DEL")
}

/// `RECLAIM.POLICY LIST` as (stream, group, policy), in reply order.
pub fn list_policies(con: &mut Connection) -> Vec<(Vec<u8>, Vec<u8>, PolicyView)> {
    list_policies_with(con, &[])
}

/// `RECLAIM.POLICY LIST <options>` (`AFTER key group`, `COUNT n`) as (stream, group, policy),
/// in reply order.
pub fn list_policies_with(
    con: &mut Connection,
    options: &[&[u8]],
) -> Vec<(Vec<u8>, Vec<u8>, PolicyView)> {
    let v: Value = cmd("RECLAIM.POLICY")
        .arg("LIST")
        .arg(options)
        .query(con)
        .expect("RECLAIM.POLICY LIST");
    let Value::Array(items) = v else {
        panic!("LIST is not an array: {v:?}");
    };
    items
        .iter()
        .map(|it| {
            let p = pairs(it);
            let f = |name: &str| {
                bytes_of(
                    &p.iter()
                        .find(|(k, _)| k == name)
                        .unwrap_or_else(|| panic!("no {name} in {it:?}"))
                        .1,
                )
            };
            (f("key"), f("group"), PolicyView::from_reply(it))
        })
        .collect()
}

/// The command `RECLAIM.POLICY SET stream group <every option of p>` (for pipelines).
pub fn set_policy_cmd(stream: &[u8], group: &[u8], p: &PolicyView) -> redis::Cmd {
    let mut c = cmd("RECLAIM.POLICY");
    c.arg("SET").arg(stream).arg(group).arg(p.set_args());
    c
}

/// `RECLAIM.STATS key group` as a reply value.
pub fn stats(con: &mut Connection, key: &str, group: &str) -> Value {
    cmd("RECLAIM.STATS")
        .arg(key)
        .arg(group)
        .query(con)
        .expect("RECLAIM.STATS")
}

/// `RECLAIM.POLICY EXPORT`: the JSON document of the selected database's policies.
pub fn export_policies(con: &mut Connection) -> String {
    cmd("RECLAIM.POLICY")
        .arg("EXPORT")
        .query(con)
        .expect("RECLAIM.POLICY EXPORT")
}

/// The command `RECLAIM.POLICY IMPORT doc [REPLACE]`.
pub fn import_cmd(doc: &[u8], replace: bool) -> redis::Cmd {
    let mut c = cmd("RECLAIM.POLICY");
    c.arg("IMPORT").arg(doc);
    if replace {
        c.arg("REPLACE");
    }
    c
}

/// `RECLAIM.POLICY IMPORT doc [REPLACE]`: the number of policies imported (`imported`; panics on
/// an error).
pub fn import_policies(con: &mut Connection, doc: &[u8], replace: bool) -> i64 {
    let v: Value = import_cmd(doc, replace)
        .query(con)
        .expect("RECLAIM.POLICY IMPORT");
    crate::replies::int_field(&v, "imported")
}
