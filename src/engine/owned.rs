//! A worker's own entries (`RECLAIM.EXTEND`, `NACK`, `TERM`) and the moves between consumers that
//! keep an entry's delivery count (theirs and those of parked entries, [`crate::engine::parked`]):
//! which of the IDs a client names are pending at its consumer ([`owned`]), the one
//! `XCLAIM ... JUSTID` that moves entries ([`claim`]), and a `NACK`'s give-back within the lease
//! ([`delay_within_lease`]). Writes go through `RM_Call` with `!`, so replicas and the AOF see
//! exactly the same, in the command's `MULTI`/`EXEC`.

use redis_module::{CallReply, CallResult, Context};

use crate::engine::pending::{self, Failed, Query};
use crate::ffi::write_opts;
use crate::model::error::ReclaimError;
use crate::model::planner::Pending;
use crate::model::policy::Policy;

/// The entries of `ids` pending at `consumer` of (`stream`, `group`), in the order given, each
/// once (each an `XPENDING key group id id 1 consumer`, O(log N)); the others are left out. A
/// stream key of another type, or a missing stream or group, gets `XPENDING`'s own error
/// (`WRONGTYPE ...`, `NOGROUP ...`).
pub fn owned(
    ctx: &Context,
    (stream, group, consumer): (&[u8], &[u8], &[u8]),
    ids: &[&[u8]],
) -> Result<Vec<Pending>, ReclaimError> {
    let mut out: Vec<Pending> = Vec::new();
    for id in ids {
        let q = Query::range(id, id, 1).of(Some(consumer));
        let found = match pending::read(ctx, stream, group, &q) {
            Ok(found) => found,
            Err(Failed::Reply(e)) => {
                let text = String::from_utf8_lossy(&e).replace(['\r', '\n'], " ");
                return Err(ReclaimError::Redis(text));
            }
            Err(Failed::Unexpected(_)) => continue,
        };
        if let Some(e) = found.into_iter().next() {
            if !out.iter().any(|p| p.id == e.id) {
                out.push(e);
            }
        }
    }
    Ok(out)
}

/// `XCLAIM stream group to 0 id... [IDLE idle] JUSTID` (replicated): owner `to`, delivery count
/// unchanged, idle 0 (or `idle`). Returns the IDs claimed.
pub fn claim(
    ctx: &Context,
    (stream, group): (&[u8], &[u8]),
    to: &[u8],
    ids: &[&[u8]],
    idle: Option<i64>,
) -> Vec<Vec<u8>> {
    let idle_s = idle.map(|i| i.to_string());
    let mut args: Vec<&[u8]> = vec![stream, group, to, b"0"];
    args.extend_from_slice(ids);
    if let Some(i) = &idle_s {
        args.extend_from_slice(&[b"IDLE", i.as_bytes()]);
    }
    args.push(b"JUSTID");
    let r: CallResult = ctx.call_ext("XCLAIM", &write_opts(), &args[..]);
    match r {
        Ok(CallReply::Array(a)) => a
            .iter()
            .filter_map(|x| match x {
                Ok(CallReply::String(s)) => Some(s.as_bytes().to_vec()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// `entries` of (`stream`, `group`) given back `delay` ms from now, within their due idle under
/// `p`: to `<claimant>:delayed`, idle `due - delay` (one `XCLAIM` per idle: entries with other
/// counts may need other idles). Returns the IDs moved.
pub fn delay_within_lease(
    ctx: &Context,
    at: (&[u8], &[u8]),
    p: &Policy,
    entries: &[&Pending],
    delay: i64,
) -> Vec<Vec<u8>> {
    let delayed = p.delayed();
    let mut by_idle: Vec<(i64, Vec<&[u8]>)> = Vec::new();
    for e in entries {
        let idle = p.due_idle(e.deliveries) - delay;
        match by_idle.iter_mut().find(|(i, _)| *i == idle) {
            Some((_, ids)) => ids.push(&e.id),
            None => by_idle.push((idle, vec![&e.id])),
        }
    }
    let mut out = Vec::new();
    for (idle, ids) in by_idle {
        out.extend(claim(ctx, at, &delayed, &ids, Some(idle)));
    }
    out
}
