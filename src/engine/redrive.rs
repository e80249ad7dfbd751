//! The steps of `RECLAIM.REDRIVE`'s tasks: moving dead-lettered entries back to the consumer group they failed in, for
//! another full set of `MAX-DELIVERIES` attempts, as a task that runs in small steps from the
//! sweep timer.
//!
//! A task lives in the keyspace, in the DLQ's hash slot ([`crate::model::keys::redrive_key`]): a hash
//! holding its options, its cursor in the DLQ and its counters ([`Task`]). Every write of a step
//! goes through `RM_Call` with `!`, in one timer callback, so Redis (7.0+, PR #9890) propagates
//! the step as one `MULTI`/`EXEC` to the AOF and replicas. For each entry moved back, that is:
//! - `XCLAIM stream group <CLAIMANT> 0 <reclaim-id> FORCE RETRYCOUNT 0 JUSTID`: FORCE creates the
//!   PEL entry (the entry was acknowledged when it was dead-lettered), owned by the policy's
//!   CLAIMANT (the inbox) with delivery count 0, so `RECLAIM.READGROUP` hands it to a worker as
//!   its first delivery (count 1). Redis propagates it as `XCLAIM ... RETRYCOUNT 0 FORCE JUSTID`
//!   (tested on 7.0.15). Only the entry's own group gets it: the stream's other groups are not
//!   touched;
//! - `XDEL dlq <dlq-id>`;
//! - `SADD reclaim:redrive-moved:{TAG}:DLQ <stream, group, id>`, which lets the task see the entry
//!   come back to the DLQ (`failed-again`, and the `CANARY` check);
//! - once per step, `HSET` of the task's fields.
//!
//! So an entry is in the DLQ or back in its group, never both and never neither, on the primary,
//! in the AOF and on replicas, and a promoted replica or a restart continues the task from its
//! cursor. The timer never steps on a replica, while loading, while writes are paused, or out of
//! memory (the scheduler's guards), nor while `reclaim.enabled` is `no`.
//!
//! An entry is left in the DLQ (counted as `skipped`, the cursor moves past it) when it was
//! trimmed or deleted from its stream (appending a copy would hand it to the stream's other groups
//! as a new entry), when its stream, group or policy is gone, when it is pending in its group
//! already (a worker holds it), when its ID is above the group's last-delivered ID (a record
//! written by hand of an entry the group never read: moving it would hand it out as new), or when
//! it has no `reclaim-*` fields (not written by the module).
//!
//! The task never deletes or writes its task key or moved set when it holds a value of another
//! type (written by hand): `RECLAIM.REDRIVE` refuses to start, and a running task waits (its
//! `CANCEL` still works) until that key is gone.
//!
//! In memory there is only an index of running tasks ([`crate::state::redrive`]), filled by
//! `RECLAIM.REDRIVE` itself and by a discovery after loads, syncs, `SWAPDB` and promotions
//! ([`discover`]), which checks the DLQ of every known policy for a task key (one key lookup per
//! policy, once per such event).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use redis_module::{CallReply, CallResult, Context, KeyType, RedisString};

use crate::engine::pending::{self, Query};
use crate::ffi::{self, call_bytes, read_opts, write_opts};
use crate::model::access;
use crate::model::clock::{epoch_ms, now_ms};
use crate::model::keys;
use crate::model::redrive::{
    id_text, origin, Bucket, Origin, Phase, Task, STEP_CHECKS, STEP_READS,
};
use crate::model::text::printable;
use crate::state::redrive::{
    self as tasks, del_moved, key_type, moved_key_usable, read_task, write_task,
};
use crate::state::{registry, store};

/// Rounds of [`run`] so far (where the next round starts).
static ROUND: AtomicUsize = AtomicUsize::new(0);

/// One round over the running tasks, from the timer (the scheduler calls it only on a primary,
/// not loading, not paused, not out of memory): a step of each until `deadline`. Looks for tasks
/// the index does not know first, when asked to ([`rediscover`]). Returns whether it stepped a
/// task (the scheduler then counts its time as a tick's, in `INFO reclaim`).
pub fn run(ctx: &Context, deadline: Instant) -> bool {
    if tasks::take_discover() {
        discover(ctx);
    }
    let mut list = tasks::running();
    if list.is_empty() {
        return false;
    }
    // Each round starts one task further, so that a budget used up by the first tasks does not
    // starve the last ones.
    let first = ROUND.fetch_add(1, Ordering::Relaxed) % list.len();
    list.rotate_left(first);
    let db_before = ffi::selected_db(ctx);
    for (db, dlq) in list {
        if Instant::now() >= deadline {
            break;
        }
        let mut bucket = tasks::bucket(db, &dlq);
        let keep = ffi::select_db(ctx, db) && step(ctx, db, &dlq, &mut bucket, deadline);
        if keep {
            tasks::keep(db, dlq, bucket);
        } else {
            tasks::forget(db, &dlq);
        }
    }
    ffi::select_db(ctx, db_before);
    true
}

/// Registers the running tasks of the DLQs that known policies name (one key lookup per policy).
fn discover(ctx: &Context) {
    let db_before = ffi::selected_db(ctx);
    let mut found = Vec::new();
    for id in registry::all_ids() {
        if !ffi::select_db(ctx, id.db) {
            continue;
        }
        let Some(dlq) = store::get(ctx, &id.stream, &id.group).and_then(|p| p.dlq) else {
            continue;
        };
        if let Ok(Some(t)) = read_task(ctx, &keys::redrive_key(&dlq)) {
            if t.phase.is_live() {
                found.push((id.db, dlq));
            }
        }
    }
    ffi::select_db(ctx, db_before);
    for (db, dlq) in found {
        tasks::note(db, &dlq);
    }
}

/// What one step of a task works on: the DLQ `dlq` of database `db` (selected in `ctx`), its
/// moved set, the step's deadline and its wall-clock time.
struct Stepping<'a> {
    ctx: &'a Context,
    db: i32,
    dlq: &'a [u8],
    moved_key: Vec<u8>,
    deadline: Instant,
    now: u64,
}

/// One step of the task of `dlq` in database `db` (selected in `ctx`), with its `RATE` bucket.
/// Returns whether the task still runs.
fn step(ctx: &Context, db: i32, dlq: &[u8], bucket: &mut Bucket, deadline: Instant) -> bool {
    let key = keys::redrive_key(dlq);
    let s = Stepping {
        ctx,
        db,
        dlq,
        moved_key: keys::redrive_moved_key(dlq),
        deadline,
        now: epoch_ms() as u64,
    };
    let Ok(Some(mut t)) = read_task(ctx, &key) else {
        return false;
    };
    if !t.phase.is_live() {
        return false;
    }
    if !moved_key_usable(ctx, &s.moved_key) {
        // A value of another type under the moved set's name (written by hand): never delete or
        // write it; wait (RECLAIM.REDRIVE CANCEL ends the task).
        return true;
    }
    let before = t.clone();
    match key_type(ctx, dlq) {
        KeyType::Stream => {}
        // The DLQ is gone: nothing is left to move back.
        KeyType::Empty => {
            t.examined = t.total;
            t.finish(Phase::Done, s.now);
        }
        // Another value under the DLQ's name: wait for it to be a stream again.
        _ => return true,
    }
    if t.phase.is_live() {
        check_failed_again(ctx, dlq, &s.moved_key, &mut t);
        t.check_canary(s.now);
    }
    let quota = match t.phase {
        Phase::Running => t.quota(bucket.available(t.opts.rate, now_ms())),
        _ => 0,
    };
    let user = s.user(&mut t, bucket, quota);
    if t.phase == Phase::Running {
        if quota > 0 {
            if s.move_entries(&mut t, user.as_ref(), bucket, quota)
                .is_none()
            {
                return true;
            }
        } else if t.opts.count > 0 && t.moved >= t.opts.count {
            t.settle(s.now, false);
        }
    }
    if t != before {
        write_task(ctx, &key, &t);
        if !t.phase.is_live() {
            del_moved(ctx, &s.moved_key);
        }
    }
    t.phase.is_live()
}

impl Stepping<'_> {
    /// The task's user, as this server knows it now, before a step that may move something
    /// (`quota` above 0): gone, off, or no longer allowed to run the command on this DLQ (checked
    /// in full at most every `USER_RECHECK_MS`), the task stops (`denied`, logged). `None` when
    /// the task has no user or the step moves nothing.
    fn user(&self, t: &mut Task, bucket: &mut Bucket, quota: u64) -> Option<ffi::acl::AclUser> {
        let name = t.user.as_deref().filter(|_| quota > 0)?;
        let full = bucket.user_check_due(now_ms());
        match user_for_step(self.ctx, name, self.dlq, full) {
            Ok(u) => Some(u),
            Err(why) => {
                log_denied(self.dlq, name, why);
                t.finish(Phase::Denied, self.now);
                None
            }
        }
    }

    /// Moves at most `quota` entries of the task back (and reads at most `STEP_READS` of the DLQ),
    /// while the step's budget allows ([`Bucket::may_start`]), from the task's cursor; then
    /// settles the task ([`Task::settle`]). `None` when the DLQ could not be read (the step
    /// changes nothing then).
    fn move_entries(
        &self,
        t: &mut Task,
        user: Option<&ffi::acl::AclUser>,
        bucket: &mut Bucket,
        quota: u64,
    ) -> Option<()> {
        let reads = STEP_READS.min(quota.saturating_add(8));
        let entries = self.next_entries(t, reads)?;
        let mut moves = 0;
        let mut stopped = false;
        let mut delivered = Delivered::new();
        for (handled, (did, fields)) in (0u64..).zip(&entries) {
            let at = Instant::now();
            if moves >= quota
                || !bucket.may_start(self.deadline.saturating_duration_since(at), handled)
            {
                stopped = true;
                break;
            }
            let m = self.move_back(t, user, did, fields, &mut delivered);
            bucket.note_entry(at.elapsed().as_micros() as u64);
            match m {
                Moved::Back => {
                    moves += 1;
                    t.moved += 1;
                }
                Moved::Skipped => t.skipped += 1,
                Moved::Other => {}
                Moved::Denied => {
                    let stream = origin(fields).map(|o| o.stream).unwrap_or_default();
                    let why = format!(
                        "may not run XCLAIM on the stream '{}' an entry goes back to",
                        printable(&stream)
                    );
                    log_denied(self.dlq, t.user.as_deref().unwrap_or_default(), &why);
                    t.finish(Phase::Denied, self.now);
                    stopped = true;
                    break;
                }
            }
            t.examined += 1;
            t.cursor = did.clone();
            if t.quota(u64::MAX) == 0 {
                // COUNT reached, or the canary's entries are back.
                stopped = true;
                break;
            }
        }
        bucket.spend(moves);
        let exhausted = !stopped && (entries.len() as u64) < reads;
        t.settle(self.now, exhausted);
        Some(())
    }

    /// The next (at most `reads`) DLQ entries of the task after its cursor: up to its end, or with
    /// `IDS` its next IDs, each read alone (`XRANGE dlq id id`, O(log N)); an ID no longer in the
    /// DLQ comes without fields, so it is left as `skipped`. `None` when the DLQ could not be read.
    fn next_entries(&self, t: &Task, reads: u64) -> Option<Vec<(Vec<u8>, Vec<Vec<u8>>)>> {
        if t.opts.ids.is_empty() {
            let start = [b"(", t.cursor.as_slice()].concat();
            return xrange(self.ctx, self.dlq, &start, &t.end_id, reads);
        }
        let mut out = Vec::new();
        for &id in t.ids_left(reads as usize) {
            let id = id_text(id);
            let mut one = xrange(self.ctx, self.dlq, &id, &id, 1)?;
            out.push(one.pop().unwrap_or((id, Vec::new())));
        }
        Some(out)
    }

    /// Moves DLQ entry (`did`, `fields`) of the DLQ back to its group, or leaves it (see the module
    /// docs). The XCLAIM, the XDEL and the SADD are propagated in the caller's callback.
    /// `delivered` caches the groups' last-delivered IDs for the step (one `XINFO GROUPS` per
    /// (stream, group) per step, at most).
    fn move_back(
        &self,
        t: &Task,
        user: Option<&ffi::acl::AclUser>,
        did: &[u8],
        fields: &[Vec<u8>],
        delivered: &mut Delivered,
    ) -> Moved {
        let (ctx, dlq, moved_key) = (self.ctx, self.dlq, self.moved_key.as_slice());
        let Some(o) = origin(fields) else {
            return Moved::Skipped;
        };
        if let Some((sk, sg)) = &t.opts.source {
            if (sk, sg) != (&o.stream, &o.group) {
                return Moved::Other;
            }
        }
        let Some(policy) = store::get(ctx, &o.stream, &o.group) else {
            return Moved::Skipped;
        };
        // Without SOURCE, the caller's ACL was checked against the streams of the policies whose
        // DLQ is this one (`commands::redrive`'s `dlq_policies`): an entry naming a policy with
        // another DLQ (its DLQ changed since, or the entry was written by hand) is left alone.
        if t.opts.source.is_none() && policy.dlq.as_deref() != Some(dlq) {
            return Moved::Skipped;
        }
        if !stream_has(ctx, &o.stream, &o.id) {
            return Moved::Skipped;
        }
        // An entry above the group's last-delivered ID was never delivered to the group, so it is
        // no dead letter of it (a record written by hand): XCLAIM FORCE would make it pending with
        // delivery count 0, and RECLAIM.READGROUP would hand it out as new, even while paused.
        let last = *delivered
            .entry((o.stream.clone(), o.group.clone()))
            .or_insert_with(|| last_delivered(ctx, &o.stream, &o.group));
        match (last, crate::model::planner::parse_id(&o.id)) {
            (Some(last), Some(id)) if id <= last => {}
            _ => return Moved::Skipped,
        }
        if is_pending(ctx, &o) {
            return Moved::Skipped;
        }
        // The start checked the user's permissions; a stream of a policy given this DLQ since, or
        // an ACL changed since, is checked here, as the XCLAIM that moves the entry back.
        let back = access::redrive_back(&o.stream, &o.group, &policy.claimant, Some(&o.id));
        if user.is_some_and(|u| !u.may(ctx, &back)) {
            return Moved::Denied;
        }
        if !claim_back(ctx, &o, &policy.claimant) {
            return Moved::Skipped;
        }
        // The XCLAIM succeeded: the DLQ entry goes in the same MULTI/EXEC (XDEL of an existing
        // stream entry does not fail), so the entry is never in both places.
        let _: CallResult = ctx.call_ext("XDEL", &write_opts(), &[dlq, did][..]);
        let member = o.member();
        let r: CallResult = ctx.call_ext("SADD", &write_opts(), &[moved_key, &member][..]);
        if r.is_err() {
            // The step checked the moved set's type first, so this is not expected; the entry is
            // back in its group all the same, only its `failed-again` check is lost.
            crate::ffi::warn(
                ctx,
                "reclaim: RECLAIM.REDRIVE could not add a moved entry to its moved set",
            );
        }
        // Back in the inbox: the next read looks there.
        let id = registry::PolicyId::new(self.db, &o.stream, &o.group);
        registry::update(&id, |rt| rt.inbox_filled());
        crate::ffi::blocked::signal_if_waiting(ctx, self.db, &o.stream);
        Moved::Back
    }
}

/// The last-delivered ID of each (stream, group) a step looked up (`None`: could not be read).
type Delivered = BTreeMap<(Vec<u8>, Vec<u8>), Option<(u64, u64)>>;

/// The group's last-delivered ID (`XINFO GROUPS stream`, O(groups of the stream)), `None` when
/// the stream or group is gone or the reply cannot be read.
fn last_delivered(ctx: &Context, stream: &[u8], group: &[u8]) -> Option<(u64, u64)> {
    let args: [&[u8]; 2] = [b"GROUPS", stream];
    let r: CallResult = ctx.call_ext("XINFO", &read_opts(), &args[..]);
    let Ok(CallReply::Array(groups)) = r else {
        return None;
    };
    for g in groups.iter() {
        let Ok(CallReply::Array(g)) = g else {
            continue;
        };
        // name <name> consumers <n> pending <n> last-delivered-id <id> ... (RESP2: flat pairs).
        let (mut name, mut last) = (None, None);
        for i in (0..g.len()).step_by(2) {
            let key = g.get(i).as_ref().and_then(call_bytes);
            let value = g.get(i + 1);
            match key.as_deref() {
                Some(b"name") => name = value.as_ref().and_then(call_bytes),
                Some(b"last-delivered-id") => last = value.as_ref().and_then(call_bytes),
                _ => {}
            }
        }
        if name.as_deref() == Some(group) {
            return last.and_then(|l| crate::model::planner::parse_id(&l));
        }
    }
    None
}

/// One DLQ entry: its ID and flat field/value list.
type DlqEntry = (Vec<u8>, Vec<Vec<u8>>);

/// `XRANGE dlq start end COUNT n`, parsed; `None` on an error reply.
fn xrange(ctx: &Context, dlq: &[u8], start: &[u8], end: &[u8], n: u64) -> Option<Vec<DlqEntry>> {
    let count = n.to_string();
    let args: [&[u8]; 5] = [dlq, start, end, b"COUNT", count.as_bytes()];
    let r: CallResult = ctx.call_ext("XRANGE", &read_opts(), &args[..]);
    let Ok(CallReply::Array(a)) = r else {
        return None;
    };
    let mut out = Vec::with_capacity(a.len());
    for e in a.iter() {
        let Ok(CallReply::Array(e)) = e else {
            return None;
        };
        let id = e.get(0).as_ref().and_then(call_bytes)?;
        let fields = match e.get(1) {
            Some(Ok(CallReply::Array(f))) => f.iter().filter_map(|v| call_bytes(&v)).collect(),
            _ => Vec::new(),
        };
        out.push((id, fields));
    }
    Some(out)
}

/// The ID of the last entry of `dlq` (`XREVRANGE dlq + - COUNT 1`) and its length (`XLEN`).
pub fn dlq_end(ctx: &Context, dlq: &[u8]) -> (Vec<u8>, u64) {
    let args: [&[u8]; 5] = [dlq, b"+", b"-", b"COUNT", b"1"];
    let r: CallResult = ctx.call_ext("XREVRANGE", &read_opts(), &args[..]);
    let end = match r {
        Ok(CallReply::Array(a)) => match a.get(0) {
            Some(Ok(CallReply::Array(e))) => e.get(0).as_ref().and_then(call_bytes),
            _ => None,
        },
        _ => None,
    };
    let r: CallResult = ctx.call_ext("XLEN", &read_opts(), &[dlq][..]);
    let len = match r {
        Ok(CallReply::I64(i)) => i.to_i64().max(0) as u64,
        _ => 0,
    };
    (end.unwrap_or_else(|| b"0-0".to_vec()), len)
}

/// Whether `stream` still holds entry `id` (the module stream API over `[id, id]`).
fn stream_has(ctx: &Context, stream: &[u8], id: &[u8]) -> bool {
    let Some((ms, seq)) = crate::model::planner::parse_id(id) else {
        return false;
    };
    let name = RedisString::create_from_slice(ctx.ctx, stream);
    let key = ctx.open_key(&name);
    if key.key_type() != KeyType::Stream {
        return false;
    }
    let sid = redis_module::raw::RedisModuleStreamID { ms, seq };
    let found = match key.get_stream_range_iterator(Some(sid), Some(sid), false, false) {
        Ok(mut it) => it.next().is_some(),
        Err(_) => false,
    };
    found
}

/// Whether `id` is pending in `group` already (`XPENDING stream group id id 1`, O(log N)); an
/// error reply (no group) counts as pending, so the entry is left alone.
fn is_pending(ctx: &Context, o: &Origin) -> bool {
    !pending::none(ctx, &o.stream, &o.group, &Query::range(&o.id, &o.id, 1))
}

/// `XCLAIM stream group claimant 0 id FORCE RETRYCOUNT 0 JUSTID` through `!`: whether the entry
/// is now pending for the claimant.
fn claim_back(ctx: &Context, o: &Origin, claimant: &[u8]) -> bool {
    let args: [&[u8]; 9] = [
        &o.stream,
        &o.group,
        claimant,
        b"0",
        &o.id,
        b"FORCE",
        b"RETRYCOUNT",
        b"0",
        b"JUSTID",
    ];
    let r: CallResult = ctx.call_ext("XCLAIM", &write_opts(), &args[..]);
    matches!(r, Ok(CallReply::Array(a)) if a.len() == 1)
}

/// What one entry's move back did.
enum Moved {
    /// Back in its group.
    Back,
    /// Left in the DLQ.
    Skipped,
    /// Not of the task's `SOURCE`.
    Other,
    /// The task's user may not write the entry's stream: left in the DLQ, and the task stops.
    Denied,
}

/// Counts the entries dead-lettered after `t.checked` that this task moved back
/// (`failed-again`), at most [`STEP_CHECKS`] per step.
fn check_failed_again(ctx: &Context, dlq: &[u8], moved_key: &[u8], t: &mut Task) {
    if t.moved == 0 {
        return;
    }
    let start = [b"(", t.checked.as_slice()].concat();
    let Some(new) = xrange(ctx, dlq, &start, b"+", STEP_CHECKS) else {
        return;
    };
    for (id, fields) in new {
        if let Some(o) = origin(&fields) {
            let member = o.member();
            let r: CallResult = ctx.call_ext("SISMEMBER", &read_opts(), &[moved_key, &member][..]);
            if matches!(r, Ok(CallReply::I64(i)) if i.to_i64() == 1) {
                t.failed_again += 1;
            }
        }
        t.checked = id;
    }
}

/// The task's user `name` for a step, when it may still act: known to this server, allowed to
/// run `RECLAIM.REDRIVE` on `dlq` (its commands and its keys) and to do what the task does to the
/// DLQ ([`access::redrive_dlq`]: read it, delete what moved back), and, when `full`, `on`.
/// Otherwise why not, for the log.
fn user_for_step(
    ctx: &Context,
    name: &[u8],
    dlq: &[u8],
    full: bool,
) -> Result<ffi::acl::AclUser, &'static str> {
    let u = ffi::acl::AclUser::lookup(ctx, name).ok_or("is gone from this server")?;
    if !u.may_run(ctx, &[b"RECLAIM.REDRIVE", dlq]) {
        return Err("may no longer run RECLAIM.REDRIVE on the DLQ");
    }
    if u.check(ctx, &access::redrive_dlq(dlq)).is_err() {
        return Err("may no longer read the DLQ (XRANGE) or delete from it (XDEL)");
    }
    if full && !ffi::acl::AclUser::is_on(ctx, name) {
        return Err("is off");
    }
    Ok(u)
}

/// Logs why the task of `dlq` stopped in state `denied` (STATUS shows only the state).
fn log_denied(dlq: &[u8], user: &[u8], why: &str) {
    ffi::log_warning(&format!(
        "reclaim: RECLAIM.REDRIVE of '{}' stopped (denied): user '{}' {why}",
        printable(dlq),
        printable(user)
    ));
}
