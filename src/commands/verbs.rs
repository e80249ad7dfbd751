//! What a worker says about the entries it holds: `RECLAIM.EXTEND` ("still working"),
//! `RECLAIM.NACK` ("give it back", optionally after a delay) and `RECLAIM.TERM` ("never retry
//! this"). Each acts only on the entries pending **at the consumer that asks**: an entry owned by
//! another consumer, or no longer pending, is left alone (the worker lost it and should stop).
//!
//! None of them adds a delivery. Their writes go through `RM_Call` with `!` (`XCLAIM ... JUSTID`,
//! `XADD`/`XACK`), so replicas and the AOF see exactly the same, in one `MULTI`/`EXEC`.

use redis_module::{Context, RedisString};

use crate::commands::common::{KEY_RW, UPDATE};
use crate::engine::deadletter::Dlq;
use crate::engine::owned;
use crate::engine::parked;
use crate::engine::settle;
use crate::ffi;
use crate::ffi::command::{CmdResult, CommandSpec, Reply, Spec};
use crate::model::access;
use crate::model::args::{int, key, string, Arg, V020, V030};
use crate::model::error::{self, ReclaimError};
use crate::model::outcome::Outcome;
use crate::model::planner::{self, Pending};
use crate::model::policy::{Policy, State, MAX_DELAY_MS, MAX_REASON_BYTES};
use crate::state::registry::{self, PolicyId};
use crate::state::store;

const EXTEND_ARGS: &[Arg] = &[
    key("key", 0),
    string("group"),
    string("consumer"),
    string("id").multiple(),
];
const NACK_ARGS: &[Arg] = &[
    key("key", 0),
    string("group"),
    string("consumer"),
    string("id").multiple(),
    int("ms").token("DELAY").optional(),
    string("text").token("REASON").optional().since(V030),
];
const TERM_ARGS: &[Arg] = &[
    key("key", 0),
    string("group"),
    string("consumer"),
    string("id").multiple(),
    string("text").token("REASON").optional(),
];

/// `RECLAIM.EXTEND`, `RECLAIM.NACK`, `RECLAIM.TERM`.
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        parent: None,
        name: "reclaim.extend",
        func: entry!("RECLAIM.EXTEND", extend_cmd),
        flags: "write fast",
        acl: "write stream fast",
        first_key: 1,
        arity: -5,
        summary: "Renew the lease of a consumer's own pending entries (idle reset, count unchanged)",
        complexity: "O(M log N) for M IDs",
        since: V020,
        args: EXTEND_ARGS,
        keys: &[Spec::Index(1, KEY_RW | UPDATE)],
    },
    CommandSpec {
        parent: None,
        name: "reclaim.nack",
        func: entry!("RECLAIM.NACK", nack_cmd),
        flags: "write fast",
        acl: "write stream fast",
        first_key: 1,
        arity: -5,
        summary: "Give a consumer's own pending entries back for redelivery, now or after a delay (up to 30 days), with a reason",
        complexity: "O(M log N) for M IDs",
        since: V020,
        args: NACK_ARGS,
        keys: &[Spec::Index(1, KEY_RW | UPDATE)],
    },
    CommandSpec {
        parent: None,
        name: "reclaim.term",
        func: entry!("RECLAIM.TERM", term_cmd),
        flags: "write deny-oom",
        acl: "write stream slow",
        first_key: 1,
        arity: -5,
        summary: "Dead-letter a consumer's own pending entries at once (never retried)",
        complexity: "O(M log N) for M IDs",
        since: V020,
        args: TERM_ARGS,
        keys: &[Spec::Index(1, KEY_RW | UPDATE)],
    },
];

/// `reclaim-reason` of an entry dead-lettered by `RECLAIM.TERM` without `REASON`.
pub const REASON_TERM: &[u8] = b"term";

/// The common head of the three commands: `key group consumer id [id ...]` and an optional
/// trailing `<word> <value>` (`DELAY ms`, `REASON text`).
struct Verb<'a> {
    stream: &'a [u8],
    group: &'a [u8],
    consumer: &'a [u8],
    ids: Vec<&'a [u8]>,
    option: Option<&'a [u8]>,
}

/// Parses `key group consumer id [id ...] [<word> value]` (after the command name; `word` is
/// `DELAY` or `REASON`, in upper case). IDs must be stream IDs (Redis's own error otherwise).
fn parse<'a>(a: &[&'a [u8]], word: &'static str) -> Result<Verb<'a>, ReclaimError> {
    let (stream, group, consumer) = (a[0], a[1], a[2]);
    let is_word = |x: &[u8]| x.eq_ignore_ascii_case(word.as_bytes());
    let mut ids = &a[3..];
    let mut option = None;
    if ids.last().is_some_and(|x| is_word(x)) {
        return Err(ReclaimError::MissingValue(word));
    }
    if ids.len() >= 2 && is_word(ids[ids.len() - 2]) {
        option = Some(ids[ids.len() - 1]);
        ids = &ids[..ids.len() - 2];
    }
    if ids.iter().any(|x| is_word(x)) {
        return Err(ReclaimError::RepeatedOption(word));
    }
    if ids.is_empty() {
        return Err(error::SYNTAX.into());
    }
    if ids.iter().any(|id| planner::parse_id(id).is_none()) {
        return Err(error::INVALID_ID.into());
    }
    Ok(Verb {
        stream,
        group,
        consumer,
        ids: ids.to_vec(),
        option,
    })
}

/// What a verb does to its keys, checked as the Redis commands that would do the same.
type Access = for<'x> fn(&'x Verb<'x>, &'x Policy) -> access::AsList<'x>;

/// `RECLAIM.EXTEND` and `RECLAIM.NACK`: an `XCLAIM` of the consumer's own entries.
fn claims<'x>(v: &'x Verb<'x>, _: &'x Policy) -> access::AsList<'x> {
    access::own_entries(v.stream, v.group, v.consumer)
}

/// `RECLAIM.TERM`: the entries read, acknowledged, and appended to the DLQ.
fn terminates<'x>(v: &'x Verb<'x>, p: &'x Policy) -> access::AsList<'x> {
    access::terminate(v.stream, v.group, p)
}

/// The policy of the verb's (key, group) in the selected database ([`error::NO_POLICY`] when
/// none, as `RECLAIM.STATS` answers), once the caller is checked for what the verb does
/// (`access`: NOPERM otherwise, nothing noted). With `LIVENESS`, notes that the consumer talked
/// to the module.
fn policy_of(ctx: &Context, v: &Verb, access: Access) -> Result<Policy, ReclaimError> {
    let p = store::get(ctx, v.stream, v.group).ok_or(ReclaimError::Static(error::NO_POLICY))?;
    ffi::acl::check_caller(ctx, &access(v, &p))?;
    if p.liveness_ms > 0 {
        let id = PolicyId::new(ffi::selected_db(ctx), v.stream, v.group);
        registry::register(id.db, v.stream, v.group);
        registry::saw(&id, v.consumer, p.liveness_ms);
    }
    Ok(p)
}

/// The verb's entries pending at its consumer ([`owned::owned`]).
fn own_entries(ctx: &Context, v: &Verb) -> Result<Vec<Pending>, ReclaimError> {
    owned::owned(ctx, (v.stream, v.group, v.consumer), &v.ids)
}

fn slices(args: &[RedisString]) -> Vec<&[u8]> {
    args.iter().skip(1).map(|a| a.as_slice()).collect()
}

/// `RECLAIM.EXTEND key group consumer id [id ...]` -> the IDs whose lease was renewed: those
/// pending at `consumer` get idle 0 (`XCLAIM ... JUSTID` to the same consumer), count unchanged.
pub fn extend_cmd(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a = slices(args);
    let v = parse(&a, "\0")?;
    policy_of(ctx, &v, claims)?;
    let mine: Vec<Pending> = own_entries(ctx, &v)?;
    let ids: Vec<&[u8]> = mine.iter().map(|e| e.id.as_slice()).collect();
    let renewed = if ids.is_empty() {
        Vec::new()
    } else {
        owned::claim(ctx, (v.stream, v.group), v.consumer, &ids, None)
    };
    Ok(Reply::Array(
        renewed.into_iter().map(Reply::Bytes).collect(),
    ))
}

/// `RECLAIM.NACK`'s options after the IDs: `DELAY ms` and `REASON text`, each once, any order.
#[derive(Debug, Default, PartialEq, Eq)]
struct NackOptions<'a> {
    delay: i64,
    reason: Option<&'a [u8]>,
}

/// Parses `key group consumer id [id ...] [DELAY ms] [REASON text]`: the IDs end at the first
/// argument that is not a stream ID (an option's name, or Redis's own error for a bad ID).
fn parse_nack<'a>(a: &[&'a [u8]]) -> Result<(Verb<'a>, NackOptions<'a>), ReclaimError> {
    let is = |x: &[u8], w: &str| x.eq_ignore_ascii_case(w.as_bytes());
    let is_option = |x: &[u8]| is(x, "DELAY") || is(x, "REASON");
    let end = (3..a.len())
        .find(|&i| planner::parse_id(a[i]).is_none())
        .unwrap_or(a.len());
    if end < a.len() && !is_option(a[end]) {
        return Err(error::INVALID_ID.into());
    }
    if end == 3 {
        return Err(error::SYNTAX.into());
    }
    let mut o = NackOptions::default();
    let (mut delay_seen, mut i) = (false, end);
    while i < a.len() {
        let word = if is(a[i], "DELAY") {
            "DELAY"
        } else if is(a[i], "REASON") {
            "REASON"
        } else {
            return Err(error::SYNTAX.into());
        };
        let Some(value) = a.get(i + 1) else {
            return Err(ReclaimError::MissingValue(word));
        };
        if word == "DELAY" {
            if delay_seen {
                return Err(ReclaimError::RepeatedOption(word));
            }
            delay_seen = true;
            // Above MAX_DELAY_MS: refused once the caller's entries are known (nack_cmd).
            o.delay = crate::model::text::parse_i64(value)
                .filter(|d| *d >= 0)
                .ok_or(error::DELAY_RANGE)?;
        } else {
            if o.reason.is_some() {
                return Err(ReclaimError::RepeatedOption(word));
            }
            if value.len() > MAX_REASON_BYTES {
                return Err(error::REASON_TOO_LONG.into());
            }
            o.reason = Some(value);
        }
        i += 2;
    }
    let v = Verb {
        stream: a[0],
        group: a[1],
        consumer: a[2],
        ids: a[3..end].to_vec(),
        option: None,
    };
    Ok((v, o))
}

/// `RECLAIM.NACK key group consumer id [id ...] [DELAY ms] [REASON text]` -> how many entries
/// were released. The consumer's own entries are due again after `DELAY` ms, their count
/// unchanged: with `DELAY 0` (the default) they move to the claimant's inbox at once; with a delay
/// no longer than an entry's due idle, to the consumer `<claimant>:delayed`, idle set so that it
/// turns stale after `DELAY` ms; with a longer one (up to [`MAX_DELAY_MS`]) it is parked
/// (`engine::parked`): `<claimant>:parked`, its due time in the stream's delay key.
pub fn nack_cmd(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a = slices(args);
    let (v, o) = parse_nack(&a)?;
    let p = policy_of(ctx, &v, claims)?;
    let mine = own_entries(ctx, &v)?;
    if o.delay > MAX_DELAY_MS {
        // Names the due idle of the first entry, which a client can give back instead (the
        // error of a delay over the lease before delays could be parked: clients parse it).
        return Err(match mine.first() {
            Some(e) => error::delay_too_long(o.delay, p.due_idle(e.deliveries)),
            None => error::DELAY_RANGE.into(),
        });
    }
    let (long, short): (Vec<&Pending>, Vec<&Pending>) = mine
        .iter()
        .partition(|e| o.delay > 0 && o.delay > p.due_idle(e.deliveries));
    check_nack_keys(
        ctx,
        &v,
        !long.is_empty(),
        o.reason.is_some() && !mine.is_empty(),
    )?;
    let mut released: Vec<Vec<u8>> = Vec::new();
    let id = PolicyId::new(ffi::selected_db(ctx), v.stream, v.group);
    if o.delay == 0 {
        let ids: Vec<&[u8]> = short.iter().map(|e| e.id.as_slice()).collect();
        if !ids.is_empty() {
            released = owned::claim(ctx, (v.stream, v.group), &p.claimant, &ids, None);
        }
    } else {
        released = owned::delay_within_lease(ctx, (v.stream, v.group), &p, &short, o.delay);
    }
    if !released.is_empty() {
        // Older idle times than the passes saw (or the inbox filled): what they learnt no
        // longer holds.
        registry::update(&id, |rt| rt.idle_set_older());
    }
    if !long.is_empty() {
        let due = crate::model::clock::epoch_ms().saturating_add(o.delay);
        let ids: Vec<&[u8]> = long.iter().map(|e| e.id.as_slice()).collect();
        let parked = parked::park(ctx, v.stream, v.group, &p, &ids, due);
        if !parked.is_empty() {
            registry::update(&id, |rt| rt.note_parked(due));
        }
        released.extend(parked);
    }
    // Every NACK records its consumer (and reason), so a later dead-letter by MAX-DELIVERIES
    // names the worker that held it last, not the module's consumer it waited at.
    if o.reason.is_some() || (!released.is_empty() && parked::may_record(ctx, v.stream)) {
        let reason = o.reason.unwrap_or_default();
        parked::record(ctx, v.stream, v.group, v.consumer, reason, &mine, &released);
    }
    if !released.is_empty() && o.delay == 0 {
        crate::ffi::blocked::signal_if_waiting(ctx, id.db, v.stream);
    }
    Ok(Reply::Int(released.len() as i64))
}

/// What a `NACK` writes besides the stream, checked before anything is written: the delay key
/// when it parks (`park`: as `ZADD`), the NACK record key with `REASON` (`record`: as `HSET`);
/// each refused when it holds another type.
fn check_nack_keys(ctx: &Context, v: &Verb, park: bool, record: bool) -> Result<(), ReclaimError> {
    if park {
        let key = crate::model::keys::delay_key(v.stream);
        ffi::acl::check_caller(ctx, &access::park(v.stream, v.group, v.consumer, &key))?;
        if parked::delay_key_type(ctx, v.stream) == Some(false) {
            return Err(error::WRONGTYPE_DELAY_KEY.into());
        }
    }
    if record {
        let key = crate::model::keys::nack_key(v.stream);
        ffi::acl::check_caller(ctx, &access::record(&key))?;
        if parked::nack_key_type(ctx, v.stream) == Some(false) {
            return Err(error::WRONGTYPE_NACK_KEY.into());
        }
    }
    Ok(())
}

/// `RECLAIM.TERM key group consumer id [id ...] [REASON text]` -> how many entries were
/// dead-lettered: the consumer's own entries go to the policy's DLQ at once, whatever their
/// count, with `reclaim-reason` `term` (or `text`), appended and acknowledged together.
pub fn term_cmd(ctx: &Context, args: &[RedisString]) -> CmdResult {
    let a = slices(args);
    let v = parse(&a, "REASON")?;
    let p = policy_of(ctx, &v, terminates)?;
    if let Some(why) = store::fault(v.stream, &p) {
        return Err(ReclaimError::Invalid(Box::new(why)));
    }
    if let Some(e) = p.halted(crate::state::config::enabled()) {
        return Err(e.into());
    }
    if p.state == State::Storm {
        return Err(error::STORM_OPEN.into());
    }
    let Some(dlq) = p.dlq.as_deref() else {
        return Err(error::TERM_NEEDS_DLQ.into());
    };
    if crate::engine::guards::is_non_stream(ctx, dlq) {
        return Err(error::WRONGTYPE_DLQ.into());
    }
    let mine = own_entries(ctx, &v)?;
    let mut out = Outcome::default();
    if !mine.is_empty() {
        let id = PolicyId::new(ffi::selected_db(ctx), v.stream, v.group);
        let allowance = registry::dead_letter_allowance(&id, &p);
        let dlq = Dlq::new(ctx, v.stream, v.group, &p, allowance);
        let reason = v.option.unwrap_or(REASON_TERM);
        if let Err(s) = dlq.dead_letter(&mine, &mut out, reason) {
            out.problem = Some(s);
        }
        settle::settle(ctx, &id, &p, &out, |rt| rt.count_outcome(&out));
    }
    Ok(Reply::Int(out.dead_lettered as i64))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str, word: &'static str) -> Result<(usize, Option<String>), String> {
        let a: Vec<&[u8]> = s.split(' ').map(str::as_bytes).collect();
        parse(&a, word)
            .map(|v| {
                (
                    v.ids.len(),
                    v.option.map(|o| String::from_utf8_lossy(o).into_owned()),
                )
            })
            .map_err(|e| e.to_string())
    }

    fn n(s: &str) -> Result<(usize, i64, Option<String>), String> {
        let a: Vec<&[u8]> = s.split(' ').map(str::as_bytes).collect();
        parse_nack(&a)
            .map(|(v, o)| {
                let reason = o.reason.map(|r| String::from_utf8_lossy(r).into_owned());
                (v.ids.len(), o.delay, reason)
            })
            .map_err(|e| e.to_string())
    }

    #[test]
    fn nack_options_in_any_order_each_once() {
        assert_eq!(n("s g c 1-0 2"), Ok((2, 0, None)));
        assert_eq!(
            n("s g c 1-0 DELAY 5 REASON DELAY"),
            Ok((1, 5, Some("DELAY".into())))
        );
        assert_eq!(
            n("s g c 1-0 reason x delay 2592000000"),
            Ok((1, MAX_DELAY_MS, Some("x".into())))
        );
        assert_eq!(n("s g c DELAY 5"), Err(error::SYNTAX.to_string()));
        assert_eq!(n("s g c 1-0 x-1"), Err(error::INVALID_ID.to_string()));
        assert_eq!(n("s g c 1-0 DELAY 1 2-0"), Err(error::SYNTAX.to_string()));
        assert_eq!(
            n("s g c 1-0 DELAY 2592000001"),
            Ok((1, MAX_DELAY_MS + 1, None))
        );
        assert_eq!(n("s g c 1-0 DELAY -1"), Err(error::DELAY_RANGE.to_string()));
        assert_eq!(
            n("s g c 1-0 REASON"),
            Err("ERR option REASON needs a value".into())
        );
        assert_eq!(
            n("s g c 1-0 REASON a REASON b"),
            Err("ERR option REASON given more than once".into())
        );
        let long = format!("s g c 1-0 REASON {}", "x".repeat(MAX_REASON_BYTES + 1));
        assert_eq!(n(&long), Err(error::REASON_TOO_LONG.to_string()));
        let max = format!("s g c 1-0 REASON {}", "x".repeat(MAX_REASON_BYTES));
        assert!(n(&max).is_ok());
    }

    #[test]
    fn ids_and_a_trailing_option() {
        assert_eq!(p("s g c 1-0 2-0", "DELAY"), Ok((2, None)));
        assert_eq!(
            p("s g c 1-0 delay 500", "DELAY"),
            Ok((1, Some("500".into())))
        );
        assert_eq!(
            p("s g c 1 REASON bad", "REASON"),
            Ok((1, Some("bad".into())))
        );
        assert_eq!(p("s g c DELAY 5", "DELAY"), Err(error::SYNTAX.to_string()));
        assert_eq!(
            p("s g c 1-0 x-1", "DELAY"),
            Err(error::INVALID_ID.to_string())
        );
        assert_eq!(
            p("s g c 1-0 DELAY", "DELAY"),
            Err("ERR option DELAY needs a value".into())
        );
        assert_eq!(
            p("s g c 1-0 REASON a REASON b", "REASON"),
            Err("ERR option REASON given more than once".into())
        );
    }
}
