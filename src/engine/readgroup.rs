//! Claim-on-read under a stream's policy, for `RECLAIM.READGROUP`: which pending entries a reader
//! gets again and the writes that hand them over. For one stream whose group has a policy, up to
//! the entries wanted, oldest (lowest ID) first: the CLAIMANT's inbox (always due) and other
//! consumers' stale entries (a page of the PEL per read from a cursor, as XAUTOCLAIM's, only
//! while what the policy learnt says some may be stale). Each is claimed for the reader with a
//! plain `XCLAIM` (one delivery added, idle reset, fields returned); one whose next delivery
//! would pass `MAX-DELIVERIES` is dead-lettered instead ([`Dlq::dead_letter`]); entries deleted
//! from the stream are purged by that `XCLAIM` (or, with `TOMBSTONES yes`, buried first) and
//! counted. Every write goes through `RM_Call` with `!`.

use redis_module::{CallReply, CallResult, Context};

use crate::engine::deadletter::{Dlq, REASON_LIMIT};
use crate::engine::pending::{self, Query};
use crate::engine::settle;
use crate::ffi::{self, events, write_opts};
use crate::model::clock::epoch_ms;
use crate::model::outcome::Outcome;
use crate::model::planner::{self, Pending};
use crate::model::policy::Policy;
use crate::state::config;
use crate::state::registry::{self, PolicyId};

/// Most entries a read looks at among the oldest pending ones to find other consumers' stale
/// entries (bounds the cost of a read without COUNT that finds none).
const STALE_LOOKUP_MAX: i64 = 1000;

/// What a read was handed again from the PEL.
pub struct Redelivery {
    /// The `XCLAIM` that handed the entries over: `[entry, ...]` (`None`: nothing handed over).
    pub reply: Option<CallResult<'static>>,
    /// How many entries it handed over.
    pub handed: u64,
}

/// The redeliveries of a read of `key` by `consumer` of `group`, under the stream's policy `p`
/// (the database selected in `ctx`), `want` entries at most (0: the policy's `COUNT`): hands the
/// due entries to the reader, dead-letters those at their limit, and settles what it did
/// ([`settle::settle`]: counted, the `STORM` breaker). Notes the sighting for `LIVENESS`. Nothing
/// while the policy is halted (paused, `storm`, `reclaim.enabled no`): new entries only.
pub fn redeliver(
    ctx: &Context,
    key: &[u8],
    group: &[u8],
    consumer: &[u8],
    p: &Policy,
    want: i64,
) -> Redelivery {
    let mut r = Redelivery {
        reply: None,
        handed: 0,
    };
    let id = PolicyId::new(ffi::selected_db(ctx), key, group);
    let seen = if p.liveness_ms > 0 {
        registry::saw(&id, consumer, p.liveness_ms);
        registry::seen(&id)
    } else {
        Vec::new()
    };
    if p.halted(config::enabled()).is_some() {
        return r;
    }
    // A client's `XCLAIM ... IDLE` may have made entries stale sooner than the last round
    // learnt: its touch counts from now on, if it ran.
    crate::engine::touches::confirm(ctx, &id);
    let limit = if want > 0 { want } else { p.count };
    let due = due_entries(ctx, &id, p, &seen, limit);
    if due.is_empty() {
        return r;
    }
    let (dead, give): (Vec<Pending>, Vec<Pending>) = due
        .into_iter()
        .partition(|e| planner::delivery_would_pass_limit(e, p));
    let dlq = Dlq::new(ctx, key, group, p, registry::dead_letter_allowance(&id, p));
    let mut out = Outcome::default();
    if !dead.is_empty() {
        if let Err(s) = dlq.dead_letter(&dead, &mut out, REASON_LIMIT) {
            out.problem = Some(s);
        }
    }
    // With TOMBSTONES, entries deleted from the stream get their tombstones instead of being
    // dropped from the PEL by the hand-over's XCLAIM.
    let give = dlq.bury_deleted(give, &mut out);
    if !give.is_empty() {
        let ids: Vec<Vec<u8>> = give.into_iter().map(|e| e.id).collect();
        let (reply, n) = deliver(ctx, key, group, consumer, &ids);
        out.deleted += ids.len() as u64 - n;
        r = Redelivery {
            reply: Some(reply),
            handed: n,
        };
    }
    let handed = r.handed;
    settle::settle(ctx, &id, p, &out, |rt| {
        rt.count_outcome(&out);
        rt.count_redelivered(handed);
    });
    r
}

/// The entries due for redelivery to a reader of policy `id` (value `p`, sightings `seen`), at
/// most `limit`, oldest first: the CLAIMANT's inbox, then other consumers' stale entries in one
/// page of the PEL (twice as many entries as are still wanted) from the policy's read cursor,
/// looked for only when neither the policy's last pass nor the last round of reads says none can
/// be stale yet. Errors read as nothing.
fn due_entries(
    ctx: &Context,
    id: &PolicyId,
    p: &Policy,
    seen: &[(Vec<u8>, u64)],
    limit: i64,
) -> Vec<Pending> {
    let (stream, group) = (id.stream.as_slice(), id.group.as_slice());
    let inbox = Query::range(b"-", b"+", limit).of(Some(&p.claimant));
    let mut due = pending::read(ctx, stream, group, &inbox).unwrap_or_default();
    let wanted = limit - due.len() as i64;
    let now = epoch_ms();
    let (horizon, cursor) =
        registry::read(id, |rt| (rt.read_horizon(), rt.read_cursor())).unwrap_or((0, None));
    if wanted <= 0 || now < horizon {
        return due;
    }
    // One page of the PEL after the read cursor, as XAUTOCLAIM's cursor goes.
    let size = wanted.saturating_mul(2).min(STALE_LOOKUP_MAX);
    let start = match cursor {
        Some(c) => [b"(", c.as_slice()].concat(),
        None => b"-".to_vec(),
    };
    let q = Query::range(&start, b"+", size);
    let page = pending::read(ctx, stream, group, &q).unwrap_or_default();
    let owners = pending::owners(ctx, stream, group, p, seen, &page);
    let others = || page.iter().filter(|e| !planner::in_inbox(e, p));
    let (stale, later): (Vec<&Pending>, Vec<&Pending>) = others()
        .partition(|e| planner::is_stale(e, p) && !planner::held(e, p, owners.quiet(&e.consumer)));
    // The least time one of the others needs: until due, or 0 when held by a live owner.
    let remaining = later
        .iter()
        .map(|e| (p.due_idle(e.deliveries) - e.idle_ms).max(0))
        .min();
    let last = (page.len() as i64 == size)
        .then(|| page.last().map(|e| e.id.clone()))
        .flatten();
    // A round over the whole PEL that found nothing due: none can be before the least time it
    // saw (idle times only grow; a client's XCLAIM IDLE/TIME, which can set an older one, clears
    // this, as it clears the passes' horizon).
    let found = !stale.is_empty();
    registry::update(id, |rt| {
        rt.note_read_page(last, found, remaining, now, p.min_idle_ms)
    });
    due.extend(stale.into_iter().cloned());
    due.sort_by_key(|e| planner::parse_id(&e.id));
    due.dedup_by(|a, b| a.id == b.id);
    due.truncate(limit.max(0) as usize);
    due
}

/// Claims `ids` for `consumer` with a plain `XCLAIM key group consumer 0 id...`: one delivery
/// added, idle reset, the entries returned with their fields; entries gone from the stream are
/// dropped from the PEL and left out. Returns the reply and how many came back.
fn deliver(
    ctx: &Context,
    key: &[u8],
    group: &[u8],
    consumer: &[u8],
    ids: &[Vec<u8>],
) -> (CallResult<'static>, u64) {
    let mut args: Vec<&[u8]> = vec![key, group, consumer, b"0"];
    args.extend(ids.iter().map(Vec::as_slice));
    let r: CallResult = ctx.call_ext("XCLAIM", &write_opts(), &args[..]);
    let n = match &r {
        Ok(CallReply::Array(a)) => a.len() as u64,
        _ => 0,
    };
    if n > 0 {
        events::notify(ctx, key, events::DELIVER);
    }
    if (ids.len() as u64) > n && r.is_ok() {
        events::notify(ctx, key, events::PURGE);
    }
    (r, n)
}
