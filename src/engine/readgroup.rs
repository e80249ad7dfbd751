//! Claim-on-read under a stream's policy, for `RECLAIM.READGROUP`: which pending entries a reader
//! gets again and the writes that hand them over. For one stream whose group has a policy, up to
//! the entries wanted, oldest (lowest ID) first: the CLAIMANT's inbox (always due) and other
//! consumers' stale entries, found in pages of the PEL read from a cursor (as XAUTOCLAIM's), only
//! while what the policy learnt says some may be due. Each is claimed for the reader with
//! `XCLAIM ... RETRYCOUNT <count + 1> JUSTID` (one delivery added, idle reset: what a plain
//! `XCLAIM` does, propagated the same way), and its fields are read from the stream in one walk
//! of the module stream API; one whose next delivery would pass `MAX-DELIVERIES` is dead-lettered
//! instead ([`Dlq::dead_letter`]); entries deleted from the stream are purged by that `XCLAIM`
//! (or, with `TOMBSTONES yes`, buried first) and counted. Every write goes through `RM_Call`
//! with `!`.
//!
//! The new entries of a read: [`read_new`] (one stream, parsed), [`read_new_raw`] (unparsed, to
//! forward), [`read_as_asked`] (the client's own arguments passed on to `XREADGROUP`).
//!
//! A read that can find nothing costs no call into Redis: the policy's run-time state says when
//! an entry of another consumer can be due at the earliest (what passes and earlier reads
//! learnt) and whether the inbox may hold anything.

use std::collections::BTreeMap;

use smallvec::SmallVec;

use redis_module::{raw, CallReply, CallResult, Context, RedisString};

use crate::engine::deadletter::{Dlq, REASON_LIMIT};
use crate::engine::pending::{self, Query};
use crate::engine::settle;
use crate::ffi::streams::{Fields, Key, StreamId};
use crate::ffi::{self, events, write_opts, RawReply};
use crate::model::access::ReadWrites;
use crate::model::clock::epoch_ms;
use crate::model::outcome::Outcome;
use crate::model::planner::{self, Pending};
use crate::model::policy::Policy;
use crate::model::readgroup;
use crate::state::config;
use crate::state::registry::{self, PolicyId};
use crate::state::runtime::{ReadFacts, ReadView};

/// Most pending entries one page of the search reads.
const PAGE_MAX: i64 = 1000;

/// Most pending entries one read examines looking for other consumers' stale entries: bounds the
/// time of a read over a PEL whose entries are not due (about 1 ms). The next read goes on from
/// where it stopped ([`Redelivery::more`]).
const SEARCH_MAX: i64 = 4000;

/// One entry handed over again, with what the PEL said of it just before: its idle time (ms
/// since its last delivery or move) and its delivery count, this delivery not counted (what
/// Redis 8.4's `XREADGROUP ... CLAIM` replies for an entry it claims).
pub struct Handed {
    pub id: StreamId,
    pub fields: Fields,
    pub idle_ms: i64,
    pub deliveries: i64,
}

/// What a read was handed again from the PEL.
#[derive(Default)]
pub struct Redelivery {
    /// The entries handed over, oldest first, with their fields.
    pub entries: Vec<Handed>,
    /// The search stopped at its bound ([`SEARCH_MAX`]) before the end of the PEL: entries after
    /// it may be due.
    pub more: bool,
}

/// Whether a read of `key` by a consumer of `group` (the database selected in `ctx`) can be
/// answered by new entries alone without reading the policy: what earlier reads kept of it, the
/// inbox known empty, and no entry of another consumer due before the horizon
/// ([`registry::quick_read`]). `Some(facts)`: so, and what that read kept of the policy (what
/// the reader must be allowed to write, `LIVENESS`: [`note_reader`] once it is allowed). No call
/// into Redis.
pub fn nothing_due(ctx: &Context, key: &[u8], group: &[u8]) -> Option<ReadFacts> {
    registry::quick_read(ffi::selected_db(ctx), key, group, epoch_ms())
}

/// Notes that `consumer` read `key` under its group's policy with `LIVENESS` `liveness_ms` (a
/// read answered by [`nothing_due`]; [`redeliver`] notes its own).
pub fn note_reader(ctx: &Context, key: &[u8], group: &[u8], consumer: &[u8], liveness_ms: i64) {
    if liveness_ms > 0 {
        let id = PolicyId::new(ffi::selected_db(ctx), key, group);
        registry::saw(&id, consumer, liveness_ms);
    }
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
    let id = PolicyId::new(ffi::selected_db(ctx), key, group);
    // A client's `XCLAIM ... IDLE` may have made entries stale sooner than the last round
    // learnt: its touch counts from now on, if it ran (nothing to do, no call, when none waits).
    crate::engine::touches::confirm(ctx, &id);
    let facts = ReadFacts {
        liveness_ms: p.liveness_ms,
        writes: ReadWrites::of(p),
    };
    let mut view = registry::begin_read(&id, consumer, facts).unwrap_or(ReadView {
        inbox: true,
        ..ReadView::default()
    });
    if p.halted(config::enabled()).is_some() {
        return Redelivery::default();
    }
    let now = epoch_ms();
    if now >= view.parked_due_ms {
        // Parked entries due now turn stale entries of `<claimant>:delayed`: look from the head.
        let r = crate::engine::parked::release(ctx, key, group, p, now);
        registry::update(&id, |rt| {
            rt.parked_released(r.moved, r.next_ms, r.wrong_type)
        });
        if r.moved > 0 {
            view.horizon_ms = 0;
            view.cursor = None;
        }
    }
    if !view.inbox && now < view.horizon_ms {
        // Nothing can be due: no call into Redis.
        return Redelivery::default();
    }
    let limit = if want > 0 { want } else { p.count };
    let seen = if p.liveness_ms > 0 {
        registry::seen(&id)
    } else {
        Vec::new()
    };
    let found = due_entries(ctx, &id, p, &seen, limit, &view, now);
    let mut r = Redelivery {
        entries: Vec::new(),
        more: found.more,
    };
    let mut out = Outcome::default();
    if !found.due.is_empty() {
        r.entries = hand_over(ctx, &id, consumer, p, found.due, &mut out);
    }
    let handed = r.entries.len() as u64;
    let left_some = out.problem.is_some() || out.oom_skips > 0;
    settle::settle(ctx, &id, p, &out, |rt| {
        rt.count_outcome(&out);
        rt.count_redelivered(handed);
        if left_some {
            rt.read_left_some();
        } else if found.inbox_drained {
            rt.note_inbox_empty();
        }
    });
    r
}

/// Hands `due` (oldest first) to `consumer`, or dead-letters those at their limit; returns the
/// entries handed over, with their fields.
fn hand_over(
    ctx: &Context,
    id: &PolicyId,
    consumer: &[u8],
    p: &Policy,
    due: Vec<Pending>,
    out: &mut Outcome,
) -> Vec<Handed> {
    let (key, group) = (id.stream.as_slice(), id.group.as_slice());
    let (dead, give): (Vec<Pending>, Vec<Pending>) = due
        .into_iter()
        .partition(|e| planner::delivery_would_pass_limit(e, p));
    let dlq = Dlq::new(ctx, key, group, p, registry::dead_letter_allowance(id, p));
    if !dead.is_empty() {
        if let Err(s) = dlq.dead_letter(&dead, out, REASON_LIMIT) {
            out.problem = Some(s);
        }
    }
    if give.is_empty() {
        return Vec::new();
    }
    // The fields, read in one walk of the stream before the hand-over changes anything.
    let mut give: Vec<(StreamId, Pending)> = give
        .into_iter()
        .filter_map(|e| planner::parse_id(&e.id).map(|i| (i, e)))
        .collect();
    give.sort_by_key(|(i, _)| *i);
    let ids: Vec<StreamId> = give.iter().map(|(i, _)| *i).collect();
    let name = RedisString::create_from_slice(ctx.ctx, key);
    let bodies = Key::open(ctx, &name, false).read_entries(&ids);
    let mut present: Vec<(StreamId, Pending, Fields)> = Vec::with_capacity(give.len());
    let mut gone: Vec<Pending> = Vec::new();
    for ((i, e), b) in give.into_iter().zip(bodies) {
        match b {
            Some(f) => present.push((i, e, f)),
            None => gone.push(e),
        }
    }
    // With TOMBSTONES, entries deleted from the stream get their tombstones; without, the
    // hand-over's XCLAIM drops them from the PEL.
    if dlq.tombstones().is_some() && !gone.is_empty() {
        let refs: Vec<&Pending> = gone.iter().collect();
        let (buried, res) = dlq.bury(&refs, out);
        dlq.trim_dlq(buried, out);
        if let (Err(s), None) = (res, &out.problem) {
            out.problem = Some(s);
        }
        gone.clear();
    }
    let asked: Vec<&Pending> = present
        .iter()
        .map(|(_, e, _)| e)
        .chain(gone.iter())
        .collect();
    let claimed = deliver(ctx, key, group, consumer, &asked);
    // One more delivery: the NACK records of the last one no longer apply.
    let asked_ids: Vec<&[u8]> = asked.iter().map(|e| e.id.as_slice()).collect();
    crate::engine::parked::forget_records(ctx, key, group, &asked_ids);
    out.deleted += (asked.len() - claimed.len().min(asked.len())) as u64;
    present
        .into_iter()
        .filter(|(i, _, _)| claimed.binary_search(i).is_ok())
        .map(|(i, e, f)| Handed {
            id: i,
            fields: f,
            idle_ms: e.idle_ms,
            deliveries: e.deliveries,
        })
        .collect()
}

/// What [`due_entries`] found.
struct Found {
    /// The entries due for redelivery, oldest first.
    due: Vec<Pending>,
    /// The inbox was read and held fewer entries than asked for: once these are handled, it is
    /// empty.
    inbox_drained: bool,
    /// The search stopped at its bound before the end of the PEL.
    more: bool,
}

/// The entries due for redelivery to a reader of policy `id` (value `p`, sightings `seen`), at
/// most `limit`, oldest first: the CLAIMANT's inbox (unless the policy knows it empty), then
/// other consumers' stale entries, searched for in pages of the PEL from the policy's read
/// cursor (only when what passes and reads learnt says one may be due at `now`), until `limit`
/// are found, the end of the PEL, or [`SEARCH_MAX`] entries examined. The cursor stops at the
/// last entry examined, so no due entry is ever passed over. Errors read as nothing.
fn due_entries(
    ctx: &Context,
    id: &PolicyId,
    p: &Policy,
    seen: &[(Vec<u8>, u64)],
    limit: i64,
    view: &ReadView,
    now: i64,
) -> Found {
    let (stream, group) = (id.stream.as_slice(), id.group.as_slice());
    let mut found = Found {
        due: Vec::new(),
        inbox_drained: false,
        more: false,
    };
    if view.inbox {
        let inbox = Query::range(b"-", b"+", limit).of(Some(&p.claimant));
        if let Ok(v) = pending::read(ctx, stream, group, &inbox) {
            found.inbox_drained = (v.len() as i64) < limit;
            found.due = v;
        }
    }
    let wanted = limit - found.due.len() as i64;
    if wanted <= 0 || now < view.horizon_ms {
        return found;
    }
    let (stale, more) = search(ctx, id, p, seen, wanted, view.cursor.clone(), now);
    found.more = more;
    found.due.extend(stale);
    found.due.sort_by_cached_key(|e| planner::parse_id(&e.id));
    found.due.dedup_by(|a, b| a.id == b.id);
    found.due.truncate(limit.max(0) as usize);
    found
}

/// Looks for `wanted` stale entries of other consumers in pages of the PEL from `cursor` (the
/// policy's read cursor), until found, the end of the PEL, or [`SEARCH_MAX`] entries examined,
/// and notes in the policy's run-time state where it stopped and what it learnt (at the end of
/// a round over the PEL: when the next entry can be due at the earliest). Returns the entries
/// found, oldest first, and whether it stopped at its bound (more may be due).
fn search(
    ctx: &Context,
    id: &PolicyId,
    p: &Policy,
    seen: &[(Vec<u8>, u64)],
    mut wanted: i64,
    mut cursor: Option<Vec<u8>>,
    now: i64,
) -> (Vec<Pending>, bool) {
    let (stream, group) = (id.stream.as_slice(), id.group.as_slice());
    let mut examined = 0i64;
    let mut min_due: Option<i64> = None;
    let mut stale = Vec::new();
    let mut more = false;
    // The first page holds as many entries as are wanted (a backlog of due entries is read once),
    // each next one 4 times more (a PEL where few are due is read in fewer calls).
    let mut page_size = 0i64;
    let end_of_pel = loop {
        page_size = wanted.max(page_size.saturating_mul(4));
        let size = page_size.clamp(1, PAGE_MAX).min(SEARCH_MAX - examined);
        let start = match &cursor {
            Some(c) => [b"(", c.as_slice()].concat(),
            None => b"-".to_vec(),
        };
        let Ok(page) = pending::read(ctx, stream, group, &Query::range(&start, b"+", size)) else {
            // An error (no group...): nothing learnt.
            return (stale, false);
        };
        let owners = pending::owners(ctx, stream, group, p, seen, &page);
        let mut full = false;
        // The stale entries' places in `page`, moved out after the walk (no copy of each), and
        // the last one examined, the cursor's next value.
        let mut taken: Vec<usize> = Vec::new();
        let mut last: Option<usize> = None;
        for (i, e) in page.iter().enumerate() {
            if planner::in_inbox(e, p) {
                // Taken by the inbox read (or, when that was skipped, by the next one).
            } else if planner::is_stale(e, p) && !planner::held(e, p, owners.quiet(&e.consumer)) {
                if wanted == 0 {
                    full = true;
                    break;
                }
                taken.push(i);
                wanted -= 1;
            } else {
                // Not due yet: when it can be at the earliest (when its owner goes quiet, while
                // it holds it).
                let left = if planner::is_stale(e, p) {
                    owners.quiet_in(&e.consumer)
                } else {
                    (p.due_idle(e.deliveries) - e.idle_ms).max(0)
                };
                let at = now.saturating_add(left);
                min_due = Some(min_due.map_or(at, |m| m.min(at)));
            }
            last = Some(i);
            examined += 1;
        }
        if let Some(i) = last {
            cursor = Some(page[i].id.clone());
        }
        let n = page.len() as i64;
        let mut next = taken.iter().copied().peekable();
        stale.extend(
            page.into_iter()
                .enumerate()
                .filter_map(|(i, e)| next.next_if_eq(&i).map(|_| e)),
        );
        if full {
            break false;
        }
        if n < size {
            break true;
        }
        if wanted == 0 || examined >= SEARCH_MAX {
            more = wanted > 0;
            break false;
        }
    };
    let last = if end_of_pel { None } else { cursor };
    registry::update(id, |rt| {
        rt.note_read_page(last, min_due, now, p.min_idle_ms)
    });
    (stale, more)
}

/// Claims `entries` for `consumer` as deliveries: `XCLAIM key group consumer 0 id... RETRYCOUNT
/// <count + 1> JUSTID`, one per distinct delivery count (what a plain `XCLAIM` does: one
/// delivery added, idle reset, propagated with its count; the fields are read apart). Entries
/// gone from the stream are dropped from the PEL and left out. Returns the IDs claimed.
fn deliver(
    ctx: &Context,
    key: &[u8],
    group: &[u8],
    consumer: &[u8],
    entries: &[&Pending],
) -> Vec<StreamId> {
    let mut by_count: BTreeMap<i64, Vec<&[u8]>> = BTreeMap::new();
    for e in entries {
        by_count.entry(e.deliveries).or_default().push(&e.id);
    }
    let mut claimed = Vec::with_capacity(entries.len());
    for (count, ids) in by_count {
        // A count that reads negative (above 2^63 - 1) stays at the largest one RETRYCOUNT takes.
        let next = if count < 0 {
            i64::MAX
        } else {
            count.saturating_add(1)
        }
        .to_string();
        let mut args: Vec<&[u8]> = Vec::with_capacity(ids.len() + 7);
        args.extend_from_slice(&[key, group, consumer, b"0"]);
        args.extend(ids.iter().copied());
        args.extend_from_slice(&[b"RETRYCOUNT", next.as_bytes(), b"JUSTID"]);
        let r: CallResult = ctx.call_ext("XCLAIM", &write_opts(), &args[..]);
        if let Ok(CallReply::Array(a)) = &r {
            for x in a.iter() {
                if let Ok(CallReply::String(b)) = &x {
                    claimed.extend(planner::parse_id(b.as_bytes()));
                }
            }
        }
    }
    claimed.sort_unstable();
    claimed.dedup();
    if !claimed.is_empty() {
        events::notify(ctx, key, events::DELIVER);
    }
    if entries.len() > claimed.len() {
        events::notify(ctx, key, events::PURGE);
    }
    claimed
}

/// A command's argument vector for `RM_Call`, on the stack while it is short.
type Argv = SmallVec<[*mut raw::RedisModuleString; 12]>;

/// The new entries of one stream for `consumer`: `XREADGROUP GROUP group consumer [COUNT n]
/// STREAMS key >` (`count` 0: no `COUNT`; [`readgroup::new_entries_args`]), propagated with each
/// delivery; its reply parsed (nil, `[[key, [entry, ...]]]`, or XREADGROUP's error).
pub fn read_new(
    ctx: &Context,
    (group, consumer): (&[u8], &[u8]),
    count: i64,
    key: &[u8],
) -> CallResult<'static> {
    let count = count.to_string();
    let args = readgroup::new_entries_args(group, consumer, &count, key);
    ctx.call_ext("XREADGROUP", &write_opts(), &args[..])
}

/// [`read_new`], its reply unparsed, in the client's protocol (to forward as Redis wrote it).
pub fn read_new_raw(
    ctx: &Context,
    (group, consumer): (&[u8], &[u8]),
    count: i64,
    key: &[u8],
) -> RawReply {
    let count = count.to_string();
    let args = readgroup::new_entries_args(group, consumer, &count, key);
    RawReply::call(ctx, c"XREADGROUP", &args)
}

/// `XREADGROUP` with the client's own arguments (`args`, the command name first; `bytes`, the
/// bytes of those after it, which [`readgroup::parse_args`] accepted): those XREADGROUP takes
/// ([`readgroup::forwarded`]: all but `BLOCK ms` and `DELIVERY-METADATA`), passed on as they are,
/// nothing copied; the reply unparsed, in the client's protocol.
pub fn read_as_asked(ctx: &Context, args: &[RedisString], bytes: &[&[u8]]) -> RawReply {
    let mut argv: Argv = readgroup::forwarded(bytes)
        .iter()
        .map(|&i| args[i + 1].inner)
        .collect();
    RawReply::call_argv(ctx, c"XREADGROUP", &mut argv)
}
