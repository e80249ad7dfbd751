//! The one reader of the PEL, through `RM_Call` (reads only, never propagated): the extended form
//! of `XPENDING` ([`read`]: the sweep's pages and scans, `RECLAIM.READGROUP`'s inbox and stale
//! entries, the worker verbs' own entries, a redrive's "pending already" test), its summary form
//! ([`summary`]: the end of a pass, `RECLAIM.STATS`, `RECLAIM.HEALTH`), and the owners' liveness
//! (`XINFO CONSUMERS`, [`owners`]).

use std::collections::HashMap;

use redis_module::{CallReply, CallResult, Context};

use crate::ffi::{call_bytes, call_int, read_opts, RawReply};
use crate::model::outcome::Summary;
use crate::model::planner::{self, Pending};
use crate::model::policy::Policy;
use crate::model::resp::{Item, Reader};

/// One `XPENDING key group [IDLE min-idle] start end count [consumer]` query (Redis 6.2+
/// extended form). With a consumer, only its own PEL is read (Redis keeps one per consumer), at
/// a cost that depends on its size only.
#[derive(Debug, Clone, Copy)]
pub struct Query<'a> {
    /// Only entries idle for at least this many ms.
    pub idle: Option<i64>,
    /// First ID (`-`, an ID, or `(` and an ID: exclusive).
    pub start: &'a [u8],
    /// Last ID (`+`, an ID, or `(` and an ID).
    pub end: &'a [u8],
    /// At most this many entries.
    pub count: i64,
    /// Only this consumer's entries.
    pub consumer: Option<&'a [u8]>,
}

impl<'a> Query<'a> {
    /// At most `count` entries from `start` to `end`, of any consumer and idle time.
    pub fn range(start: &'a [u8], end: &'a [u8], count: i64) -> Self {
        Query {
            idle: None,
            start,
            end,
            count,
            consumer: None,
        }
    }

    /// The same query, of `consumer`'s entries only.
    pub fn of(self, consumer: Option<&'a [u8]>) -> Self {
        Query { consumer, ..self }
    }
}

/// Why an `XPENDING` read gave no entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failed {
    /// Redis answered with this error (`NOGROUP ...`, `WRONGTYPE ...`).
    Reply(Vec<u8>),
    /// The reply (or one of its entries) is not shaped as `XPENDING`'s.
    Unexpected(&'static str),
}

/// Runs `q` on (`stream`, `group`) in the database selected in `ctx`, parsed (from the reply's
/// bytes: no reply object per element).
pub fn read(ctx: &Context, stream: &[u8], group: &[u8], q: &Query) -> Result<Vec<Pending>, Failed> {
    let count = q.count.to_string();
    let idle = q.idle.map(|i| i.to_string());
    let mut args: Vec<&[u8]> = vec![stream, group];
    if let Some(i) = &idle {
        args.push(b"IDLE");
        args.push(i.as_bytes());
    }
    args.extend_from_slice(&[q.start, q.end, count.as_bytes()]);
    if let Some(c) = q.consumer {
        args.push(c);
    }
    let reply = RawReply::read(ctx, c"XPENDING", &args);
    parse_extended(reply.proto())
}

/// The entries of an extended-form `XPENDING` reply, `*n` of `*4 $id $consumer :idle :count`.
fn parse_extended(proto: &[u8]) -> Result<Vec<Pending>, Failed> {
    let mut r = Reader::new(proto);
    let n = match r.next_item() {
        Some(Item::Array(n)) => n.max(0) as usize,
        Some(Item::Error(e)) => return Err(Failed::Reply(e.to_vec())),
        _ => return Err(Failed::Unexpected("unexpected XPENDING reply")),
    };
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let entry = (|| {
            if r.next_item()? != Item::Array(4) {
                return None;
            }
            let id = r.bulk()?.to_vec();
            let consumer = r.bulk()?.to_vec();
            let idle_ms = r.int()?;
            let deliveries = r.int()?;
            Some(Pending {
                id,
                consumer,
                idle_ms,
                deliveries,
            })
        })();
        out.push(entry.ok_or(Failed::Unexpected("unexpected XPENDING entry"))?);
    }
    Ok(out)
}

/// Whether `read` finds nothing for `q`: `false` on an error reply too.
pub fn none(ctx: &Context, stream: &[u8], group: &[u8], q: &Query) -> bool {
    read(ctx, stream, group, q).is_ok_and(|v| v.is_empty())
}

/// The group's PEL as the summary form `XPENDING key group` reports it (O(consumers) in Redis),
/// read now; each consumer with entries pending is passed to `each` with its count (those of
/// `claimant` make the inbox). `None` when it cannot be read (no stream, no group).
pub fn summary(
    ctx: &Context,
    stream: &[u8],
    group: &[u8],
    claimant: &[u8],
    mut each: impl FnMut(&[u8], u64),
) -> Option<Summary> {
    let reply = RawReply::read(ctx, c"XPENDING", &[stream, group]);
    // *4 :count $lowest $highest *consumers of *2 $name $count (nil IDs and list when empty).
    let mut r = Reader::new(reply.proto());
    if r.next_item()? != Item::Array(4) {
        return None;
    }
    let pending = r.int()?.max(0) as u64;
    let lowest_id = match r.next_item()? {
        Item::Bulk(b) => b.and_then(planner::parse_id),
        _ => return None,
    };
    r.next_item()?;
    let mut s = Summary {
        at_ms: crate::model::clock::epoch_ms(),
        pending,
        oldest_id_ms: lowest_id.map(|(ms, _)| ms),
        lowest_id,
        ..Summary::default()
    };
    let consumers = match r.next_item()? {
        Item::Array(n) => n.max(0),
        _ => 0,
    };
    for _ in 0..consumers {
        if r.next_item()? != Item::Array(2) {
            return None;
        }
        let name = r.bulk()?;
        // The count comes as a bulk string.
        let n = crate::model::text::parse_i64(r.bulk()?).unwrap_or(0).max(0) as u64;
        if name == claimant {
            s.inbox = n;
        } else {
            s.consumers += 1;
            s.max_consumer_pending = s.max_consumer_pending.max(n);
        }
        each(name, n);
    }
    Some(s)
}

/// Which consumers went quiet for `LIVENESS` ms, from one `XINFO CONSUMERS` (empty without
/// `LIVENESS`: everyone counts as quiet).
#[derive(Debug, Default)]
pub struct Owners {
    liveness_ms: i64,
    /// Consumer -> ms since it was last seen (`XINFO CONSUMERS` `idle`).
    idle_ms: HashMap<Vec<u8>, i64>,
}

impl Owners {
    /// Whether `consumer` has not been seen for `LIVENESS` ms (a consumer that is gone, too).
    pub fn quiet(&self, consumer: &[u8]) -> bool {
        self.liveness_ms == 0
            || self
                .idle_ms
                .get(consumer)
                .map_or(true, |idle| *idle >= self.liveness_ms)
    }

    /// In how many ms `consumer` goes quiet at the earliest (0: it is quiet now).
    pub fn quiet_in(&self, consumer: &[u8]) -> i64 {
        match self.idle_ms.get(consumer) {
            Some(idle) if self.liveness_ms > 0 => (self.liveness_ms - idle).max(0),
            _ => 0,
        }
    }
}

/// The consumers of (`stream`, `group`) and how long ago (ms) the server last saw each
/// (`XINFO CONSUMERS key group`'s `idle`, O(consumers)); empty when the stream or group does not
/// exist.
pub fn consumers_idle(ctx: &Context, stream: &[u8], group: &[u8]) -> HashMap<Vec<u8>, i64> {
    consumers(ctx, stream, group)
        .into_iter()
        .map(|c| (c.name, c.idle_ms))
        .collect()
}

/// One consumer as `XINFO CONSUMERS` lists it.
pub struct ConsumerInfo {
    pub name: Vec<u8>,
    /// Its pending entries.
    pub pending: i64,
    /// ms since the server last saw it (`idle`).
    pub idle_ms: i64,
}

/// The consumers of (`stream`, `group`) (`XINFO CONSUMERS key group`, O(consumers)); empty when
/// the stream or group does not exist.
pub fn consumers(ctx: &Context, stream: &[u8], group: &[u8]) -> Vec<ConsumerInfo> {
    let args: [&[u8]; 3] = [b"CONSUMERS", stream, group];
    let r: CallResult = ctx.call_ext("XINFO", &read_opts(), &args[..]);
    let mut out = Vec::new();
    if let Ok(CallReply::Array(consumers)) = r {
        for c in consumers.iter() {
            let Ok(CallReply::Array(c)) = c else {
                continue;
            };
            // name <name> pending <n> idle <ms> [inactive <ms>] (RESP2: flat pairs).
            let (mut name, mut pending, mut idle) = (None, None, None);
            for i in (0..c.len()).step_by(2) {
                let key = c.get(i).as_ref().and_then(call_bytes);
                let value = c.get(i + 1);
                match key.as_deref() {
                    Some(b"name") => name = value.as_ref().and_then(call_bytes),
                    Some(b"pending") => pending = value.as_ref().and_then(call_int),
                    Some(b"idle") => idle = value.as_ref().and_then(call_int),
                    _ => {}
                }
            }
            if let (Some(name), Some(pending), Some(idle_ms)) = (name, pending, idle) {
                out.push(ConsumerInfo {
                    name,
                    pending,
                    idle_ms,
                });
            }
        }
    }
    out
}

/// The owners' liveness for `page` of (`stream`, `group`) under `p`: read (`XINFO CONSUMERS key
/// group`, O(consumers)) only with `LIVENESS` and a stale entry of a consumer other than the
/// claimant on the page. `seen`: how long ago (ms) consumers last talked to the module, which
/// counts as seen then (Redis 7.0 refreshes `idle` only when a read returns entries).
pub fn owners(
    ctx: &Context,
    stream: &[u8],
    group: &[u8],
    p: &Policy,
    seen: &[(Vec<u8>, u64)],
    page: &[Pending],
) -> Owners {
    let needed = p.liveness_ms > 0
        && page
            .iter()
            .any(|e| !planner::in_inbox(e, p) && planner::is_stale(e, p));
    if !needed {
        return Owners::default();
    }
    let mut idle_ms = consumers_idle(ctx, stream, group);
    for (c, age) in seen {
        let idle = idle_ms.entry(c.clone()).or_insert(i64::MAX);
        *idle = (*idle).min(i64::try_from(*age).unwrap_or(i64::MAX));
    }
    Owners {
        liveness_ms: p.liveness_ms,
        idle_ms,
    }
}
