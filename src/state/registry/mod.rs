//! The in-memory index of policies: which (db, stream, group) to visit and when, and each one's
//! run-time state ([`Runtime`]).
//!
//! The authoritative policy is always the key in the keyspace ([`crate::state::store`]); this index only
//! schedules work and keeps what passes learnt and counted. Entries are added by
//! `RECLAIM.POLICY SET` (also when it arrives from the primary or the AOF), by a load that ended
//! well ([`take_load`]), and by keyspace events for RENAME/MOVE/COPY/RESTORE of policy keys. They
//! go with their policy key (DEL, expiry, eviction, FLUSHDB/FLUSHALL, the flush before a full
//! sync), or the next time the sweeper finds their policy gone.
//!
//! Bounds: one [`Runtime`] per policy that exists, each with bounded sets
//! ([`crate::state::runtime::MAX_TRACKED`]); the indexes here hold one small entry per policy; touches
//! expire after [`crate::state::runtime::EXEC_REMARK_MS`] ([`prune_touches`], run by the timer); a load's
//! staging list lives only while the load does. Maps give memory back when they empty.
//!
//! Everything runs on the Redis main thread; the mutex only satisfies Rust's rules for statics and
//! is never held while calling into Redis.
//!
//! Files: this one holds the index itself (the table of `Runtime`s, the visiting queue, the
//! by-stream index, the ordered set of `LIST`'s pages) and its changes; [`tracking`] what the
//! policies learn of consumers and readers (touches, sightings, reads); [`labels`] the ordered
//! walk and labels of `INFO reclaim`; [`load`] the staging list of a load in progress. Callers
//! name every item as `crate::state::registry::X`.

mod labels;
mod load;
mod tracking;

use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard};

use lazy_static::lazy_static;

use crate::model::clock::now_ms;
use crate::state::runtime::Runtime;

pub use labels::{totals, walk, with_sorted, Totals};
pub use load::{load_started, loaded, register_held, stray_loaded, take_load, Load};
pub use tracking::{
    begin_read, confirm, dead_letter_allowance, forget_idle_consumers, forget_learnt,
    forget_read_facts, forget_tracking, groups_of, prune_touches, quick_read, readers_may_find,
    saw, seen, touch, touch_on_exec, tracked, wants_confirmation,
};

/// A policy's identity: database, stream, consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PolicyId {
    /// Database number (SELECT).
    pub db: i32,
    /// Stream key.
    pub stream: Vec<u8>,
    /// Consumer group.
    pub group: Vec<u8>,
}

impl PolicyId {
    /// The policy of (`stream`, `group`) in database `db`.
    pub fn new(db: i32, stream: &[u8], group: &[u8]) -> PolicyId {
        PolicyId {
            db,
            stream: stream.to_vec(),
            group: group.to_vec(),
        }
    }
}

#[derive(Default)]
struct Registry {
    runtimes: HashMap<PolicyId, Runtime>,
    /// Stream name -> its policies (in any database), for touches and keyspace events.
    by_stream: HashMap<Vec<u8>, Vec<PolicyId>>,
    /// Every known policy, ordered by database, stream, group: `LIST`'s pages.
    ordered: BTreeSet<PolicyId>,
    /// (due_ms, id): the visiting order. Stale pairs (due not equal to the runtime's) are skipped.
    queue: BTreeSet<(u64, PolicyId)>,
    /// Policies that remember recent touches ([`Runtime::recent`]), for `EXEC` and the pruning.
    remembering: BTreeSet<PolicyId>,
    /// Policies read by `rdb_load` during the load in progress (`None`: no load): registered only
    /// when the load ends well (see [`take_load`]), so a load that fails or is thrown away (a
    /// diskless `swapdb` sync into temporary databases) leaves nothing behind.
    loading: Option<Load>,
    /// The order of `runtimes` by key, and their labels: for `INFO reclaim`'s lines. Emptied when
    /// policies come or go, rebuilt by [`with_sorted`] when asked.
    sorted: labels::Sorted,
}

lazy_static! {
    static ref REGISTRY: Mutex<Registry> = Mutex::new(Registry::default());
}

fn lock() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Gives a map's memory back once it holds less than a quarter of what it has room for.
fn shrink<K: Eq + Hash, V>(m: &mut HashMap<K, V>) {
    if m.len() * 4 < m.capacity() {
        m.shrink_to(m.len() * 2);
    }
}

impl Registry {
    fn remove(&mut self, id: &PolicyId) {
        if let Some(rt) = self.runtimes.remove(id) {
            self.sorted = labels::Sorted::default();
            self.queue.remove(&(rt.due_ms(), id.clone()));
            self.remembering.remove(id);
            self.ordered.remove(id);
            if let Some(ids) = self.by_stream.get_mut(&id.stream) {
                ids.retain(|i| i != id);
                if ids.is_empty() {
                    self.by_stream.remove(&id.stream);
                }
            }
            shrink(&mut self.runtimes);
            shrink(&mut self.by_stream);
        }
    }

    /// The policies of `stream` in database `db` (`None`: any database) and `group` (`None`:
    /// any group).
    fn ids_of(&self, db: Option<i32>, stream: &[u8], group: Option<&[u8]>) -> Vec<PolicyId> {
        self.by_stream
            .get(stream)
            .into_iter()
            .flatten()
            .filter(|id| db.map_or(true, |d| d == id.db) && group.map_or(true, |g| g == id.group))
            .cloned()
            .collect()
    }

    /// Rebuilds the indexes after databases changed wholesale.
    fn reindex(&mut self) {
        self.sorted = labels::Sorted::default();
        self.by_stream.clear();
        self.ordered = self.runtimes.keys().cloned().collect();
        for id in self.runtimes.keys() {
            self.by_stream
                .entry(id.stream.clone())
                .or_default()
                .push(id.clone());
        }
        let runtimes = &self.runtimes;
        self.remembering.retain(|id| runtimes.contains_key(id));
        shrink(&mut self.runtimes);
        shrink(&mut self.by_stream);
    }

    fn reschedule(&mut self, id: &PolicyId, due: u64) {
        if let Some(rt) = self.runtimes.get_mut(id) {
            self.queue.remove(&(rt.due_ms(), id.clone()));
            rt.set_due(due);
            self.queue.insert((due, id.clone()));
        }
    }
}

/// Adds (db, stream, group) if it is not known yet, due at once. Keeps the state of a known one.
pub fn register(db: i32, stream: &[u8], group: &[u8]) {
    let id = PolicyId::new(db, stream, group);
    let mut r = lock();
    if r.runtimes.contains_key(&id) {
        return;
    }
    let due = now_ms();
    r.queue.insert((due, id.clone()));
    r.by_stream
        .entry(id.stream.clone())
        .or_default()
        .push(id.clone());
    r.ordered.insert(id.clone());
    r.runtimes.insert(id, Runtime::new(due));
    r.sorted = labels::Sorted::default();
}

/// A policy was (re)set: its pass restarts from the head of the PEL on the next tick; counters
/// stay ([`Runtime::reset`]).
pub fn reset(db: i32, stream: &[u8], group: &[u8]) {
    register(db, stream, group);
    let id = PolicyId::new(db, stream, group);
    let due = now_ms();
    let mut r = lock();
    if let Some(rt) = r.runtimes.get_mut(&id) {
        let old = rt.due_ms();
        rt.reset(due);
        r.queue.remove(&(old, id.clone()));
        r.queue.insert((due, id));
    }
}

/// Forgets a policy (its key or group entry is gone), and everything kept for it.
pub fn remove(id: &PolicyId) {
    lock().remove(id);
}

/// Forgets every policy of (db, stream): its policy key is gone. O(policies of that stream name).
pub fn forget_stream(db: i32, stream: &[u8]) {
    let mut r = lock();
    for id in r.ids_of(Some(db), stream, None) {
        r.remove(&id);
    }
}

/// A copy of the run-time state of a policy, if known, to read (changes go through [`update`]).
pub fn get(id: &PolicyId) -> Option<Runtime> {
    lock().runtimes.get(id).cloned()
}

/// Changes the run-time state of policy `id` in place, through its methods (the one way it
/// changes): `f`'s result, `None` when the policy is not known. The visiting order follows a
/// change of when it is due. `f` runs with the registry locked: it must not call into Redis.
pub fn update<R>(id: &PolicyId, f: impl FnOnce(&mut Runtime) -> R) -> Option<R> {
    let mut r = lock();
    let Registry {
        runtimes, queue, ..
    } = &mut *r;
    let rt = runtimes.get_mut(id)?;
    let due = rt.due_ms();
    let out = f(rt);
    if rt.due_ms() != due {
        queue.remove(&(due, id.clone()));
        queue.insert((rt.due_ms(), id.clone()));
    }
    Some(out)
}

/// `f` of the run-time state of policy `id`, read in place (`None`: not known). `f` runs with the
/// registry locked: it must not call into Redis.
pub fn read<R>(id: &PolicyId, f: impl FnOnce(&Runtime) -> R) -> Option<R> {
    lock().runtimes.get(id).map(f)
}

/// Makes policy `id` due now (after `RECLAIM.POLICY RESUME`).
pub fn due_now(id: &PolicyId) {
    let now = now_ms();
    lock().reschedule(id, now);
}

/// The policy due first, if it is due at `now` (monotonic ms).
pub fn next_due(now: u64) -> Option<PolicyId> {
    let r = lock();
    let (due, id) = r.queue.iter().next()?;
    (*due <= now).then(|| id.clone())
}

/// Exchanges two databases (SWAPDB, Redis 4.0+; the `SwapDB` server event).
pub fn swap_db(a: i32, b: i32) {
    let mut r = lock();
    let old: Vec<(PolicyId, Runtime)> = r.runtimes.drain().collect();
    r.queue.clear();
    r.remembering.clear();
    for (mut id, rt) in old {
        if id.db == a {
            id.db = b;
        } else if id.db == b {
            id.db = a;
        }
        r.queue.insert((rt.due_ms(), id.clone()));
        if rt.has_recent_touches() {
            r.remembering.insert(id.clone());
        }
        r.runtimes.insert(id, rt);
    }
    r.reindex();
}

/// Called when the stream or one of its groups appears (keyspace events `xgroup-create`,
/// `rename_to`, `restore`...): the PEL may be a new one, so nothing learnt about it holds, and
/// every waiting policy of (db, stream) is due now. O(policies of that stream name).
pub fn wake(db: i32, stream: &[u8]) {
    let now = now_ms();
    let mut r = lock();
    for id in r.ids_of(Some(db), stream, None) {
        let Some(rt) = r.runtimes.get_mut(&id) else {
            continue;
        };
        rt.forget_learnt();
        if rt.has_problem() && rt.due_ms() > now {
            r.reschedule(&id, now);
        }
    }
}

/// The known policies of database `db` (unsorted; may include ones whose key is gone).
pub fn ids_in_db(db: i32) -> Vec<PolicyId> {
    lock()
        .runtimes
        .keys()
        .filter(|id| id.db == db)
        .cloned()
        .collect()
}

/// The first `n` known policies of database `db` after (`stream`, `group`) (`None`: from the
/// first), in the order of key then group; may include ones whose key is gone. O(log P + n).
pub fn page_in_db(db: i32, after: Option<(&[u8], &[u8])>, n: usize) -> Vec<PolicyId> {
    use std::ops::Bound;
    let r = lock();
    let start = match after {
        Some((stream, group)) => Bound::Excluded(PolicyId::new(db, stream, group)),
        None => Bound::Included(PolicyId::new(db, b"", b"")),
    };
    r.ordered
        .range((start, Bound::Unbounded))
        .take_while(|id| id.db == db)
        .take(n)
        .cloned()
        .collect()
}

/// Every known policy of every database (unsorted; may include ones whose key is gone).
pub fn all_ids() -> Vec<PolicyId> {
    lock().runtimes.keys().cloned().collect()
}

/// Forgets every policy of database `db` (-1: all databases), as FLUSHDB / FLUSHALL remove them.
pub fn forget_db(db: i32) {
    let mut r = lock();
    let Registry {
        runtimes, queue, ..
    } = &mut *r;
    runtimes.retain(|id, _| db != -1 && id.db != db);
    queue.retain(|(_, id)| db != -1 && id.db != db);
    r.reindex();
}

/// Number of known policies (all databases).
pub fn len() -> usize {
    lock().runtimes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_and_swap() {
        register(0, b"s-reg", b"g");
        register(0, b"s-reg", b"g"); // idempotent
        let id = PolicyId::new(0, b"s-reg", b"g");
        update(&id, |rt| {
            rt.set_due(u64::MAX - 1);
            rt.note_read_page(Some(b"5-0".to_vec()), None, 0, 1000);
        });
        assert_eq!(
            get(&id).unwrap().read_cursor().as_deref(),
            Some(&b"5-0"[..])
        );
        swap_db(0, 7);
        let moved = PolicyId {
            db: 7,
            ..id.clone()
        };
        assert!(get(&id).is_none());
        assert_eq!(get(&moved).unwrap().due_ms(), u64::MAX - 1);
        reset(7, b"s-reg", b"g");
        assert_eq!(get(&moved).unwrap().read_cursor(), None);
        remove(&moved);
        assert!(get(&moved).is_none());
    }

    #[test]
    fn pages_follow_key_then_group_through_changes() {
        let names = |v: Vec<PolicyId>| -> Vec<(Vec<u8>, Vec<u8>)> {
            v.into_iter().map(|id| (id.stream, id.group)).collect()
        };
        let pair = |s: &[u8], g: &[u8]| (s.to_vec(), g.to_vec());
        for (s, g) in [
            (&b"b"[..], &b"g"[..]),
            (b"a", b"z"),
            (b"a", b"b"),
            (b"b\xff", b""),
        ] {
            register(21, s, g);
        }
        register(22, b"a", b"a");
        let all = [
            pair(b"a", b"b"),
            pair(b"a", b"z"),
            pair(b"b", b"g"),
            pair(b"b\xff", b""),
        ];
        assert_eq!(names(page_in_db(21, None, 10)), all);
        assert_eq!(names(page_in_db(21, None, 2)), all[..2]);
        assert_eq!(names(page_in_db(21, Some((b"a", b"z")), 1)), all[2..3]);
        assert_eq!(names(page_in_db(21, Some((b"a", b"y")), 1)), all[1..2]);
        assert!(page_in_db(21, Some((b"b\xff", b"")), 5).is_empty());
        assert!(page_in_db(21, None, 0).is_empty());
        assert_eq!(names(page_in_db(22, None, 10)), [pair(b"a", b"a")]);
        remove(&PolicyId::new(21, b"a", b"z"));
        assert_eq!(names(page_in_db(21, Some((b"a", b"b")), 1)), all[2..3]);
        swap_db(21, 22);
        assert_eq!(names(page_in_db(21, None, 10)), [pair(b"a", b"a")]);
        assert_eq!(names(page_in_db(22, None, 10)).len(), 3);
        forget_db(22);
        assert!(page_in_db(22, None, 10).is_empty());
        forget_db(21);
    }
}
