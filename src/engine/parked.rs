//! Entries parked by `RECLAIM.NACK ... DELAY d` with `d` longer than their due idle (an idle time
//! cannot say "due in d ms" then): they move to the consumer `<claimant>:parked`, which the
//! planner never treats as stale, and their due time (wall-clock ms, so it survives restarts and
//! failovers) goes into the stream's delay key (`keys::delay_key`, a sorted set under the
//! stream's hash tag: member `group \0 id`, score the due ms). Both writes go through `RM_Call`
//! with `!`, so the AOF and replicas get them, in the command's `MULTI`/`EXEC`.
//!
//! [`release`] (the timer's visit, and `RECLAIM.READGROUP` when the policy's run-time state says
//! one may be due) looks at the first [`LOOK`] members by due time: a due entry still parked is
//! moved to `<claimant>:delayed` with the idle time that makes it stale at once
//! (`XCLAIM ... IDLE <due idle> JUSTID`, count unchanged), so from there it is handed over by a
//! read, moved into the inbox by the sweep, or dead-lettered at its limit, as any stale entry.
//! Records of entries no longer parked, of a group that is gone or has no policy, of a stream
//! that is gone, and members of another shape are removed (`ZREM`, or `ZPOPMIN` of at most
//! [`DROP_MAX`] when the stream is gone): Redis deletes the key with its last member.
//!
//! Every `RECLAIM.NACK` also records the consumer that gave its entries back (and its `REASON`,
//! if any) in the stream's NACK record key ([`record`]), so a dead-letter by `MAX-DELIVERIES` of
//! that attempt names the worker, not the module's consumer the entry waited at; the record goes
//! with the dead-letter, with the next hand-over ([`forget_records`]), or when a look finds it
//! stands for nothing pending. `RECLAIM.POLICY DEL` hands the group's parked entries back
//! ([`hand_back`]): nothing else would release them.

use redis_module::{CallReply, CallResult, Context, KeyType, RedisString};

use crate::engine::guards;
use crate::engine::owned::claim;
use crate::engine::pending::{self, Query};
use crate::ffi::{read_opts, write_opts};
use crate::model::access;
use crate::model::keys;
use crate::model::outcome::Stop;
use crate::model::planner::Pending;
use crate::model::policy::Policy;
use crate::model::text;
use crate::state::store;

/// Most members of the delay key one look examines.
pub const LOOK: usize = 64;

/// Most records one look drops when the stream is gone.
pub const DROP_MAX: usize = 256;

/// What a look at the parked entries did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Released {
    /// Entries released (now stale at `<claimant>:delayed`).
    pub moved: usize,
    /// Wall-clock ms at which the next of this group's parked entries may be due (`i64::MAX`:
    /// none).
    pub next_ms: i64,
    /// The delay key holds something other than a sorted set: kept, nothing released.
    pub wrong_type: bool,
}

impl Released {
    fn nothing(next_ms: i64) -> Released {
        Released {
            moved: 0,
            next_ms,
            wrong_type: false,
        }
    }
}

/// What the stream's delay key holds: `Some(true)` a sorted set, `Some(false)` another type,
/// `None` nothing.
pub fn delay_key_type(ctx: &Context, stream: &[u8]) -> Option<bool> {
    let name = RedisString::create_from_slice(ctx.ctx, &keys::delay_key(stream));
    match ctx.open_key(&name).key_type() {
        KeyType::Empty => None,
        KeyType::ZSet => Some(true),
        _ => Some(false),
    }
}

/// What the stream's NACK record key holds: `Some(true)` a hash, `Some(false)` another type,
/// `None` nothing.
pub fn nack_key_type(ctx: &Context, stream: &[u8]) -> Option<bool> {
    let name = RedisString::create_from_slice(ctx.ctx, &keys::nack_key(stream));
    match ctx.open_key(&name).key_type() {
        KeyType::Empty => None,
        KeyType::Hash => Some(true),
        _ => Some(false),
    }
}

/// Whether a `RECLAIM.NACK` without `REASON` records its consumer (with an empty reason) for a
/// later dead-letter to name: the NACK record key is a hash or absent, and the caller may write
/// it (`HSET`, [`access::record`]). Otherwise nothing is recorded, and the call is not refused
/// for it (it asked for no record).
pub fn may_record(ctx: &Context, stream: &[u8]) -> bool {
    if nack_key_type(ctx, stream) == Some(false) {
        return false;
    }
    let key = keys::nack_key(stream);
    let what = access::record(&key);
    let caller = crate::ffi::acl::Caller::of(ctx);
    what.iter().all(|w| caller.may(ctx, w))
}

/// Drops the NACK records of `ids` of `group` (entries handed over again, so their count moved
/// on and the record no longer applies): one `HDEL` (replicated) when the key is a hash.
pub fn forget_records(ctx: &Context, stream: &[u8], group: &[u8], ids: &[&[u8]]) {
    if ids.is_empty() || nack_key_type(ctx, stream) != Some(true) {
        return;
    }
    let fields: Vec<Vec<u8>> = ids.iter().map(|id| keys::delay_member(group, id)).collect();
    drop_fields(ctx, &keys::nack_key(stream), "HDEL", &fields);
}

/// Records `consumer`'s `reason` (empty: none given) for the `released` IDs among `mine` (with
/// their delivery counts): one `HSET` into the stream's NACK record key (replicated). The caller
/// checked the key's type and the caller's right to write it.
pub fn record(
    ctx: &Context,
    stream: &[u8],
    group: &[u8],
    consumer: &[u8],
    reason: &[u8],
    mine: &[Pending],
    released: &[Vec<u8>],
) {
    let released: std::collections::HashSet<&[u8]> = released.iter().map(Vec::as_slice).collect();
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = mine
        .iter()
        .filter(|e| released.contains(e.id.as_slice()))
        .map(|e| {
            let field = keys::delay_member(group, &e.id);
            (field, keys::nack_record(e.deliveries, consumer, reason))
        })
        .collect();
    if pairs.is_empty() {
        return;
    }
    let key = keys::nack_key(stream);
    let mut args: Vec<&[u8]> = vec![&key];
    for (f, v) in &pairs {
        args.extend_from_slice(&[f, v]);
    }
    let _: CallResult = ctx.call_ext("HSET", &write_opts(), &args[..]);
}

/// Parks `ids` (pending at the caller's consumer, checked) of (`stream`, `group`) under `p` until
/// wall-clock `due_ms`: `XCLAIM ... <claimant>:parked 0 id... JUSTID`, then one `ZADD` of the
/// claimed ones into the delay key. Returns the IDs parked. The caller checked the key's type.
pub fn park(
    ctx: &Context,
    stream: &[u8],
    group: &[u8],
    p: &Policy,
    ids: &[&[u8]],
    due_ms: i64,
) -> Vec<Vec<u8>> {
    let parked = claim(ctx, (stream, group), &p.parked(), ids, None);
    if parked.is_empty() {
        return parked;
    }
    let key = keys::delay_key(stream);
    let score = due_ms.to_string();
    let members: Vec<Vec<u8>> = parked
        .iter()
        .map(|id| keys::delay_member(group, id))
        .collect();
    let mut args: Vec<&[u8]> = vec![&key];
    for m in &members {
        args.extend_from_slice(&[score.as_bytes(), m]);
    }
    let _: CallResult = ctx.call_ext("ZADD", &write_opts(), &args[..]);
    parked
}

/// The first [`LOOK`] members of the delay key with their due ms (a score that is not an
/// integer reads as 0: due, and dropped if it is not a parked entry's).
fn window(ctx: &Context, key: &[u8]) -> Vec<(Vec<u8>, i64)> {
    let last = (LOOK - 1).to_string();
    let args: [&[u8]; 4] = [key, b"0", last.as_bytes(), b"WITHSCORES"];
    let r: CallResult = ctx.call_ext("ZRANGE", &read_opts(), &args[..]);
    let Ok(CallReply::Array(a)) = r else {
        return Vec::new();
    };
    let flat: Vec<Vec<u8>> = a
        .iter()
        .map(|x| match x {
            Ok(CallReply::String(s)) => s.as_bytes().to_vec(),
            Ok(CallReply::Double(d)) => format!("{}", d.to_double()).into_bytes(),
            _ => Vec::new(),
        })
        .collect();
    flat.chunks_exact(2)
        .map(|c| (c[0].clone(), text::parse_i64(&c[1]).unwrap_or(0)))
        .collect()
}

/// The earliest due time (wall-clock ms) of a parked entry of `group` among the first [`LOOK`]
/// records of the stream's delay key (`None`: none there, or the key is not a sorted set). A read.
pub fn next_due(ctx: &Context, stream: &[u8], group: &[u8]) -> Option<i64> {
    if delay_key_type(ctx, stream) != Some(true) {
        return None;
    }
    window(ctx, &keys::delay_key(stream))
        .into_iter()
        .filter(|(m, _)| keys::split_delay_member(m).is_some_and(|(g, _)| g == group))
        .map(|(_, due)| due)
        .min()
}

/// Looks at the parked entries of (`stream`, `group`) under `p` at wall-clock `wall`: releases
/// the due ones, drops the records that no longer stand for a parked entry (see the module's
/// text), and says when to look again. At most [`LOOK`] records and one `XPENDING` per due one.
pub fn release(ctx: &Context, stream: &[u8], group: &[u8], p: &Policy, wall: i64) -> Released {
    drop_stale_records(ctx, stream, group);
    match delay_key_type(ctx, stream) {
        None => return Released::nothing(i64::MAX),
        Some(false) => {
            return Released {
                wrong_type: true,
                ..Released::nothing(i64::MAX)
            }
        }
        Some(true) => {}
    }
    let key = keys::delay_key(stream);
    if guards::check_stream(ctx, stream) == Some(Stop::NoStream) {
        // Nothing stays parked for a stream that is gone: the records go, a bounded bite each visit.
        let n = DROP_MAX.to_string();
        let _: CallResult = ctx.call_ext(
            "ZPOPMIN",
            &write_opts(),
            &[key.as_slice(), n.as_bytes()][..],
        );
        let left = delay_key_type(ctx, stream).is_some();
        return Released::nothing(if left { wall } else { i64::MAX });
    }
    let look = window(ctx, &key);
    let group_gone = guards::no_group(ctx, stream, group);
    let mut drop: Vec<Vec<u8>> = Vec::new();
    let mut due: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut next = i64::MAX;
    let mut others: Vec<(Vec<u8>, bool)> = Vec::new();
    for (member, score) in &look {
        match keys::split_delay_member(member) {
            None => drop.push(member.clone()),
            Some((g, id)) if g == group => {
                if group_gone {
                    drop.push(member.clone());
                } else if *score <= wall {
                    due.push((member.clone(), id.to_vec()));
                } else {
                    next = next.min(*score);
                }
            }
            Some((g, _)) => {
                let has = match others.iter().find(|(n, _)| n == g) {
                    Some((_, has)) => *has,
                    None => {
                        let has = store::get(ctx, stream, g).is_some();
                        others.push((g.to_vec(), has));
                        has
                    }
                };
                if !has {
                    drop.push(member.clone());
                }
            }
        }
    }
    if look.len() == LOOK {
        // Records past the window come after its last; due ones left behind: look again soon.
        let last = look.last().map_or(i64::MAX, |(_, s)| *s);
        next = next.min(if due.len() == LOOK { wall } else { last });
    }
    let moved = release_due(ctx, stream, group, p, &due);
    drop.extend(due.into_iter().map(|(m, _)| m));
    drop_fields(ctx, &key, "ZREM", &drop);
    Released {
        moved,
        next_ms: next,
        wrong_type: false,
    }
}

/// Moves the `due` entries still parked to `<claimant>:delayed`, stale at once (idle their due
/// idle; one `XCLAIM` per distinct idle). Returns how many moved.
fn release_due(
    ctx: &Context,
    stream: &[u8],
    group: &[u8],
    p: &Policy,
    due: &[(Vec<u8>, Vec<u8>)],
) -> usize {
    let parked = p.parked();
    let mut by_idle: Vec<(i64, Vec<Vec<u8>>)> = Vec::new();
    for (_, id) in due {
        let q = Query::range(id, id, 1).of(Some(&parked));
        let Ok(found) = pending::read(ctx, stream, group, &q) else {
            continue;
        };
        let Some(e) = found.into_iter().next() else {
            continue;
        };
        let idle = p.due_idle(e.deliveries);
        match by_idle.iter_mut().find(|(i, _)| *i == idle) {
            Some((_, ids)) => ids.push(e.id),
            None => by_idle.push((idle, vec![e.id])),
        }
    }
    let delayed = p.delayed();
    let mut moved = 0;
    for (idle, ids) in &by_idle {
        let ids: Vec<&[u8]> = ids.iter().map(Vec::as_slice).collect();
        moved += claim(ctx, (stream, group), &delayed, &ids, Some(*idle)).len();
    }
    moved
}

/// Most NACK records one look samples (`HRANDFIELD`) for records of entries no longer pending.
pub const RECORD_SAMPLE: usize = 8;

/// Drops NACK records that stand for nothing pending, a bounded sample per look: all the
/// sampled ones (up to [`DROP_MAX`]) when the stream is gone; otherwise a 16th of the records
/// (at least [`RECORD_SAMPLE`], at most [`DROP_MAX`]: a key that grows is sampled faster) random
/// ones, each dropped when its entry is no longer pending in this group, its group is gone or
/// has no policy, or it is of another shape. Records of entries pending stay (their
/// dead-letter reads and drops them).
fn drop_stale_records(ctx: &Context, stream: &[u8], group: &[u8]) {
    if nack_key_type(ctx, stream) != Some(true) {
        return;
    }
    let key = keys::nack_key(stream);
    let stream_gone = guards::check_stream(ctx, stream) == Some(Stop::NoStream);
    let n = if stream_gone {
        DROP_MAX
    } else {
        let len: i64 = match ctx.call_ext("HLEN", &read_opts(), &[key.as_slice()][..]) {
            Ok(CallReply::I64(n)) => n.to_i64(),
            _ => 0,
        };
        (len.max(0) as usize / 16).clamp(RECORD_SAMPLE, DROP_MAX)
    }
    .to_string();
    let r: CallResult = ctx.call_ext(
        "HRANDFIELD",
        &read_opts(),
        &[key.as_slice(), n.as_bytes()][..],
    );
    let Ok(CallReply::Array(a)) = r else {
        return;
    };
    let fields: Vec<Vec<u8>> = a
        .iter()
        .filter_map(|x| match x {
            Ok(CallReply::String(s)) => Some(s.as_bytes().to_vec()),
            _ => None,
        })
        .collect();
    let drop: Vec<Vec<u8>> = fields
        .into_iter()
        .filter(|f| stream_gone || record_is_stale(ctx, stream, group, f))
        .collect();
    drop_fields(ctx, &key, "HDEL", &drop);
}

/// Whether the NACK record `field` stands for nothing pending (see [`drop_stale_records`]).
fn record_is_stale(ctx: &Context, stream: &[u8], group: &[u8], field: &[u8]) -> bool {
    let Some((g, id)) = keys::split_delay_member(field) else {
        return true;
    };
    if g != group && store::get(ctx, stream, g).is_none() {
        return true;
    }
    let q = Query::range(id, id, 1);
    match pending::read(ctx, stream, g, &q) {
        Ok(found) => found.is_empty(),
        Err(pending::Failed::Reply(e)) => e.starts_with(b"NOGROUP"),
        Err(_) => false,
    }
}

/// `<cmd> key member...` (replicated: `ZREM`, `HDEL`), when there are any.
fn drop_fields(ctx: &Context, key: &[u8], cmd: &str, members: &[Vec<u8>]) {
    if members.is_empty() {
        return;
    }
    let mut args: Vec<&[u8]> = vec![key];
    args.extend(members.iter().map(Vec::as_slice));
    let _: CallResult = ctx.call_ext(cmd, &write_opts(), &args[..]);
}

/// Most parked entries one `RECLAIM.POLICY DEL` hands back ([`hand_back`]), in pages of
/// [`HAND_BACK_PAGE`].
pub const HAND_BACK_MAX: usize = 4096;

/// Entries one page of [`hand_back`] reads (`XPENDING`) and moves (`XCLAIM`).
pub const HAND_BACK_PAGE: usize = 512;

/// What `RECLAIM.POLICY DEL` of `p` (`stream`, `group`) writes besides the policy key, checked
/// before anything is written: when the stream's delay key exists, the hand-back of the group's
/// parked entries (as `XCLAIM` on the stream and `ZADD` on the delay key, [`access::park`]); when
/// the NACK record key exists, as `HSET` on it ([`access::record`]).
pub fn check_hand_back(
    ctx: &Context,
    stream: &[u8],
    group: &[u8],
    p: &Policy,
) -> Result<(), crate::model::error::ReclaimError> {
    let delayed = p.delayed();
    if delay_key_type(ctx, stream).is_some() {
        let key = keys::delay_key(stream);
        crate::ffi::acl::check_caller(ctx, &access::park(stream, group, &delayed, &key))?;
    }
    if nack_key_type(ctx, stream).is_some() {
        let key = keys::nack_key(stream);
        crate::ffi::acl::check_caller(ctx, &access::record(&key))?;
    }
    Ok(())
}

/// After `RECLAIM.POLICY DEL` of `p` (`stream`, `group`): its parked entries become ordinary
/// pending entries, handed back at once as a release does (`<claimant>:delayed`, idle their due
/// idle, count unchanged: a new policy takes them at its next look, an application's
/// `XAUTOCLAIM` with that idle too), at most [`HAND_BACK_MAX`] in pages of [`HAND_BACK_PAGE`],
/// and their records leave the delay key. When no policy is left on the stream and nothing of
/// the group stays parked, the delay key and the NACK record key (whose records then stand for
/// nothing) are deleted (`UNLINK`). Returns the entries handed back. Nothing on a replica or
/// while loading: the primary's writes come through replication and the AOF.
pub fn hand_back(ctx: &Context, stream: &[u8], group: &[u8], p: &Policy) -> usize {
    let flags = ctx.get_flags();
    if !flags.contains(redis_module::ContextFlags::MASTER)
        || flags.contains(redis_module::ContextFlags::LOADING)
    {
        return 0;
    }
    let parked = p.parked();
    let key = keys::delay_key(stream);
    let zset = delay_key_type(ctx, stream) == Some(true);
    let (mut total, mut looked, mut all) = (0usize, 0usize, false);
    while looked < HAND_BACK_MAX {
        let size = HAND_BACK_PAGE.min(HAND_BACK_MAX - looked) as i64;
        let q = Query::range(b"-", b"+", size).of(Some(&parked));
        let page = match pending::read(ctx, stream, group, &q) {
            Ok(page) => page,
            Err(e) => {
                // No stream or no group: nothing is parked any more (a key of another type: the
                // records are left alone).
                all = guards::check_stream(ctx, stream) == Some(Stop::NoStream)
                    || matches!(e, pending::Failed::Reply(r) if r.starts_with(b"NOGROUP"));
                break;
            }
        };
        let moved = hand_back_page(ctx, stream, group, p, &page);
        if zset {
            let members: Vec<Vec<u8>> = page
                .iter()
                .map(|e| keys::delay_member(group, &e.id))
                .collect();
            drop_fields(ctx, &key, "ZREM", &members);
        }
        total += moved;
        looked += page.len();
        if (page.len() as i64) < size {
            all = true;
            break;
        }
    }
    if all && !store::has_policies(ctx, stream) {
        // Only the module's own: a key of another type is a client's, and stays.
        let nack = nack_key_type(ctx, stream) == Some(true);
        let delay = delay_key_type(ctx, stream) == Some(true);
        for (k, ours) in [(key, delay), (keys::nack_key(stream), nack)] {
            if ours {
                let _: CallResult = ctx.call_ext("UNLINK", &write_opts(), &[k.as_slice()][..]);
            }
        }
    }
    total
}

/// Moves `page` (entries parked at `<claimant>:parked`) to `<claimant>:delayed`, idle their due
/// idle (one `XCLAIM` per distinct idle). Returns how many moved.
fn hand_back_page(
    ctx: &Context,
    stream: &[u8],
    group: &[u8],
    p: &Policy,
    page: &[Pending],
) -> usize {
    let mut by_idle: Vec<(i64, Vec<&[u8]>)> = Vec::new();
    for e in page {
        let idle = p.due_idle(e.deliveries);
        match by_idle.iter_mut().find(|(i, _)| *i == idle) {
            Some((_, ids)) => ids.push(&e.id),
            None => by_idle.push((idle, vec![&e.id])),
        }
    }
    let delayed = p.delayed();
    by_idle
        .iter()
        .map(|(idle, ids)| claim(ctx, (stream, group), &delayed, ids, Some(*idle)).len())
        .sum()
}
