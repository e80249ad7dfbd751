//! What the policies learn of their consumers and readers: the touches the command filter notes
//! and their confirmation, `EXEC`'s remark and the pruning, the consumers they track, sightings
//! for `LIVENESS`, what a read begins with, and the `STORM` allowance.

use std::collections::HashMap;

use super::{lock, update, PolicyId, Registry};
use crate::model::clock::now_ms;
use crate::state::runtime::{ReadFacts, ReadView, Runtime};

/// Notes that the command filter saw a command that may raise the delivery counts of
/// `consumer`'s entries in (`stream`, `group`), and with `sets_idle` set older idle times (see
/// [`crate::model::watch`]), at `at` (server clock, ms), in any database (the filter does not
/// know which). Nothing changes until [`confirm`] finds that it ran ([`Runtime::note_touch`]).
/// O(policies of that stream name).
pub fn touch(stream: &[u8], group: &[u8], consumer: &[u8], sets_idle: bool, at: u64) {
    let mut r = lock();
    for id in r.ids_of(None, stream, Some(group)) {
        if let Some(rt) = r.runtimes.get_mut(&id) {
            rt.note_touch(consumer, sets_idle, at);
            r.remembering.insert(id);
        }
    }
}

/// Called for every `EXEC` (at `now`, server clock, ms): every policy confirms its touches of
/// the last few seconds again ([`Runtime::remark`]), whichever client's transaction this is.
/// Nothing when none remembers any.
pub fn touch_on_exec(now: u64) {
    let mut r = lock();
    if r.remembering.is_empty() {
        return;
    }
    let Registry {
        runtimes,
        remembering,
        ..
    } = &mut *r;
    remembering.retain(|id| {
        runtimes.get_mut(id).is_some_and(|rt| {
            rt.remark(now);
            rt.remembers()
        })
    });
}

/// Whether policy `id` has touches waiting for [`confirm`].
pub fn wants_confirmation(id: &PolicyId) -> bool {
    lock()
        .runtimes
        .get(id)
        .is_some_and(Runtime::wants_confirmation)
}

/// Confirms the touches of policy `id` that ran, by when each consumer was last seen (`seen`,
/// server clock ms; [`Runtime::confirm`]).
pub fn confirm(id: &PolicyId, seen: &HashMap<Vec<u8>, u64>) {
    update(id, |rt| rt.confirm(seen));
}

/// Forgets expired touches (called by the timer, about once a second; `server_now`: the server
/// clock, ms).
pub fn prune_touches(server_now: u64) {
    let mut r = lock();
    if r.remembering.is_empty() {
        return;
    }
    let now = now_ms();
    let Registry {
        runtimes,
        remembering,
        ..
    } = &mut *r;
    remembering.retain(|id| {
        runtimes
            .get_mut(id)
            .is_some_and(|rt| rt.prune(now, server_now))
    });
}

/// The stream (db, `stream`) went away (DEL, RENAME), or with `group` that group of it (XGROUP
/// DESTROY): the policies of the stream, or of that group, forget what they tracked
/// ([`Runtime::forget_tracking`]).
pub fn forget_tracking(db: i32, stream: &[u8], group: Option<&[u8]>) {
    let mut r = lock();
    for id in r.ids_of(Some(db), stream, group) {
        if let Some(rt) = r.runtimes.get_mut(&id) {
            rt.forget_tracking();
        }
        r.remembering.remove(&id);
    }
}

/// The groups of (db, `stream`) that have a policy.
pub fn groups_of(db: i32, stream: &[u8]) -> Vec<Vec<u8>> {
    let r = lock();
    r.ids_of(Some(db), stream, None)
        .into_iter()
        .map(|id| id.group)
        .collect()
}

/// The consumers of (db, `stream`)'s policies that they track, as (group, consumer) pairs, for
/// [`forget_idle_consumers`].
pub fn tracked(db: i32, stream: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    let r = lock();
    let mut out = Vec::new();
    for id in r.ids_of(Some(db), stream, None) {
        if let Some(rt) = r.runtimes.get(&id) {
            out.extend(
                rt.unchecked_consumers()
                    .map(|c| (id.group.clone(), c.clone())),
            );
        }
    }
    out
}

/// Consumers were deleted from (db, `stream`): its policies stop tracking the consumers in
/// `idle` (group, consumer), which have no pending entry left to check.
pub fn forget_idle_consumers(db: i32, stream: &[u8], idle: &[(Vec<u8>, Vec<u8>)]) {
    let mut r = lock();
    for id in r.ids_of(Some(db), stream, None) {
        if let Some(rt) = r.runtimes.get_mut(&id) {
            rt.forget_idle_consumers(|c| !idle.iter().any(|(g, n)| *g == id.group && n == c));
        }
    }
}

/// Forgets what passes learnt about every PEL (checked delivery counts, when entries can be
/// stale): the next pass of each policy is a full one or a scan. Called when the server becomes a
/// primary again.
pub fn forget_learnt() {
    for rt in lock().runtimes.values_mut() {
        rt.forget_learnt();
    }
}

/// Consumer `consumer` of policy `id` talked to the module now (for `LIVENESS`, whose `ms` is
/// how long it counts).
pub fn saw(id: &PolicyId, consumer: &[u8], liveness_ms: i64) {
    let now = now_ms();
    let mut r = lock();
    if let Some(rt) = r.runtimes.get_mut(id) {
        rt.saw(consumer, now, liveness_ms.max(0) as u64);
        r.remembering.insert(id.clone());
    }
}

/// A read by `consumer` of policy `id` begins ([`Runtime::begin_read`]: the sighting noted with
/// `LIVENESS`): what the reader needs to know first, `None` when the policy is not known.
pub fn begin_read(id: &PolicyId, consumer: &[u8], facts: ReadFacts) -> Option<ReadView> {
    let now = now_ms();
    let liveness = facts.liveness_ms > 0;
    let mut r = lock();
    let view = r.runtimes.get_mut(id)?.begin_read(consumer, facts, now);
    if liveness && !r.remembering.contains(id) {
        r.remembering.insert(id.clone());
    }
    Some(view)
}

/// A read of policy (`db`, `stream`, `group`) at wall-clock `wall` that needs neither the
/// policy's value nor a look at the PEL ([`Runtime::quick_read`]): what an earlier read kept of
/// the value (what the reader must be allowed to write, `LIVENESS`). `None`: read the policy and
/// look. Changes nothing (the sighting is the caller's to note, once the read is allowed).
pub fn quick_read(db: i32, stream: &[u8], group: &[u8], wall: i64) -> Option<ReadFacts> {
    let r = lock();
    let id = r
        .by_stream
        .get(stream)?
        .iter()
        .find(|i| i.db == db && i.group == group)?;
    r.runtimes.get(id)?.quick_read(wall).cloned()
}

/// The policies of (db, `stream`) may have new values under the same names (their policy key
/// arrived by RENAME, RESTORE, COPY or MOVE): reads read them again.
pub fn forget_read_facts(db: i32, stream: &[u8]) {
    let mut r = lock();
    for id in r.ids_of(Some(db), stream, None) {
        if let Some(rt) = r.runtimes.get_mut(&id) {
            rt.forget_read_facts();
        }
    }
}

/// Whether a reader of (db, `stream`) may find an entry due at wall-clock ms `now` under one of
/// its policies ([`Runtime::readers_may_find`]).
pub fn readers_may_find(db: i32, stream: &[u8], now: i64) -> bool {
    let r = lock();
    r.by_stream.get(stream).into_iter().flatten().any(|id| {
        id.db == db
            && r.runtimes
                .get(id)
                .is_some_and(|rt| rt.readers_may_find(now))
    })
}

/// When the consumers of policy `id` last talked to the module, as ages (ms) by consumer.
pub fn seen(id: &PolicyId) -> Vec<(Vec<u8>, u64)> {
    let now = now_ms();
    lock()
        .runtimes
        .get(id)
        .map_or_else(Vec::new, |rt| rt.seen_ages(now))
}

/// How many entries policy `id` (whose value is `p`) may dead-letter now before its `STORM`
/// breaker opens ([`Runtime::dead_letter_allowance`]; unlimited for an unknown policy that is
/// active).
pub fn dead_letter_allowance(id: &PolicyId, p: &crate::model::policy::Policy) -> u64 {
    let now = now_ms();
    match lock().runtimes.get(id) {
        Some(rt) => rt.dead_letter_allowance(p, now),
        None => Runtime::default().dead_letter_allowance(p, now),
    }
}

#[cfg(test)]
mod tests {
    use super::super::{get, register, remove};
    use super::*;

    #[test]
    fn touches_are_owned_by_their_policy_and_expire() {
        register(2, b"s-touch", b"g");
        let id = PolicyId::new(2, b"s-touch", b"g");
        // A fresh policy checks everyone: touches are only remembered for EXEC.
        for i in 0..1000 {
            touch(b"s-touch", b"g", format!("c{i}").as_bytes(), false, 1);
        }
        let rt = get(&id).unwrap();
        assert!(rt.tracked_consumers() <= 2 * crate::state::runtime::MAX_TRACKED);
        remove(&id);
        assert!(!lock().remembering.contains(&id));
        // Touches of streams without a policy keep nothing.
        touch(b"no-policy", b"g", b"c", false, 1);
        assert!(!lock().by_stream.contains_key(&b"no-policy"[..]));
    }
}
