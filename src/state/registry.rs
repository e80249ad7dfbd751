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

use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard};

use lazy_static::lazy_static;

use crate::model::clock::now_ms;
use crate::model::error::ReclaimError;
use crate::state::runtime::{ReadFacts, ReadView, Runtime};

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

    /// Appends the policy's label as its `INFO reclaim` line starts, `db=0,stream=...,group=...`,
    /// the names escaped by [`crate::model::metrics::info_escape_into`].
    pub fn write_label(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"db=");
        crate::model::metrics::push_u64(out, self.db.max(0) as u64);
        out.extend_from_slice(b",stream=");
        crate::model::metrics::info_escape_into(out, &self.stream);
        out.extend_from_slice(b",group=");
        crate::model::metrics::info_escape_into(out, &self.group);
    }
}

/// The known policies in key order, with their labels, for `INFO reclaim`'s lines: built when
/// asked after policies came or went, emptied when they do. Bounded by the policies that exist
/// (about 50 bytes each with short names).
#[derive(Default)]
struct Sorted {
    /// Positions in the iteration order of `runtimes` (which stays the same while no policy comes
    /// or goes), ordered by database, stream, group.
    order: Vec<u32>,
    /// Their labels ([`PolicyId::write_label`]), one after another in that order: a walk over
    /// them reads memory in order, not thousands of names wherever they were allocated.
    labels: Vec<u8>,
    /// Where each label ends in `labels`.
    ends: Vec<usize>,
}

/// The policies `rdb_load` read during the load in progress, waiting for it to end well.
#[derive(Debug, Default)]
pub struct Load {
    /// (db, stream, group) as `rdb_load` saw them, with the state each policy was saved in and
    /// why it cannot run where it is (`crate::model::policy::Policy::fault_at`), if it cannot.
    pub ids: Vec<(PolicyId, crate::model::policy::State, Option<ReclaimError>)>,
    /// Policy values read under a key name that is not their stream's policy key (kept, inert).
    pub strays: u64,
    /// The load goes into temporary databases (a diskless `swapdb` sync). Redis before 7.4 gives
    /// `rdb_load` database 0 for every value loaded into them (redis#12947), so the databases
    /// in `ids` cannot be trusted.
    pub into_temp_db: bool,
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
    sorted: Sorted,
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
            self.sorted = Sorted::default();
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
        self.sorted = Sorted::default();
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
    r.sorted = Sorted::default();
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

/// `f(all, sorted)` with the registry locked: `all` is every known policy in the table's own
/// order, `sorted` each one's position in `all` and label ([`PolicyId::write_label`]), ordered
/// by database, stream, group. O(P) with P policies, plus O(P log P) to sort them again the
/// first time after policies came or went. A walk over `all` goes through memory in order; one
/// in key order would jump around it.
pub fn with_sorted<R>(f: impl FnOnce(&[(&PolicyId, &Runtime)], &[(u32, &[u8])]) -> R) -> R {
    let mut r = lock();
    if r.sorted.order.len() != r.runtimes.len() {
        let keys: Vec<&PolicyId> = r.runtimes.keys().collect();
        let mut order: Vec<u32> = (0..keys.len() as u32).collect();
        order.sort_unstable_by_key(|i| keys.get(*i as usize).copied());
        let mut labels = Vec::new();
        let mut ends = Vec::with_capacity(order.len());
        for id in order.iter().filter_map(|i| keys.get(*i as usize)) {
            id.write_label(&mut labels);
            ends.push(labels.len());
        }
        r.sorted = Sorted {
            order,
            labels,
            ends,
        };
    }
    let all: Vec<(&PolicyId, &Runtime)> = r.runtimes.iter().collect();
    let s = &r.sorted;
    let mut start = 0;
    let sorted: Vec<(u32, &[u8])> = s
        .order
        .iter()
        .zip(&s.ends)
        .map(|(i, end)| {
            let label = s.labels.get(start..*end).unwrap_or_default();
            start = *end;
            (*i, label)
        })
        .collect();
    f(&all, &sorted)
}

/// Number of known policies (all databases).
pub fn len() -> usize {
    lock().runtimes.len()
}

/// The server-wide figures of `INFO reclaim`, from one walk over the policies (O(policies)).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    /// Known policies (all databases).
    pub policies: u64,
    /// Entries waiting in the inboxes of all policies, as their last passes saw them.
    pub inbox: u64,
    /// Consumers tracked by all policies now (unchecked ones and recent touches; see
    /// [`Runtime::tracked_consumers`]).
    pub tracked_consumers: u64,
}

/// [`Totals`] now.
pub fn totals() -> Totals {
    let r = lock();
    let mut t = Totals {
        policies: r.runtimes.len() as u64,
        ..Totals::default()
    };
    let all: Vec<(&PolicyId, &Runtime)> = r.runtimes.iter().collect();
    walk(&all, |_, rt| {
        t.inbox += rt.summary().inbox;
        t.tracked_consumers += rt.tracked_consumers() as u64;
    });
    t
}

/// `f` of each policy of `all` in turn, asking for the memory of the runtimes a few policies
/// ahead ([`crate::ffi::alloc::prefetch`]): a walk over thousands of runtimes otherwise spends most
/// of its time waiting for memory.
pub fn walk<'a>(all: &[(&'a PolicyId, &'a Runtime)], mut f: impl FnMut(&'a PolicyId, &'a Runtime)) {
    use crate::ffi::alloc::{prefetch, PREFETCH_AHEAD};
    for (i, (id, rt)) in all.iter().enumerate() {
        if let Some((_, ahead)) = all.get(i + PREFETCH_AHEAD) {
            prefetch(std::ptr::from_ref(*ahead).cast());
        }
        f(id, rt);
    }
}

/// A load begins (server events `Loading` ..._START, and `ReplAsyncLoad` STARTED with
/// `into_temp_db`, Redis 7.0+): from now until [`take_load`], policies read by `rdb_load` are
/// only noted ([`loaded`]). A `swapdb` sync fires both events: the first one counts.
pub fn load_started(into_temp_db: bool) {
    let mut r = lock();
    if r.loading.is_none() {
        r.loading = Some(Load {
            ids: Vec::new(),
            strays: 0,
            into_temp_db,
        });
    }
}

/// `rdb_load` read the policies of `stream` for these groups, in these states (each with its
/// fault, if it cannot run where it is), in database `db`. During a load they wait for its end;
/// otherwise (a `RESTORE`, whose keyspace event registers them) nothing is kept.
pub fn loaded<'a>(
    db: i32,
    stream: &[u8],
    groups: impl Iterator<
        Item = (
            &'a Vec<u8>,
            crate::model::policy::State,
            Option<ReclaimError>,
        ),
    >,
) {
    let mut r = lock();
    if let Some(l) = r.loading.as_mut() {
        l.ids
            .extend(groups.map(|(g, s, f)| (PolicyId::new(db, stream, g), s, f)));
    }
}

/// `rdb_load` read a policy value under a key name that is not its stream's policy key: counted
/// for the load's summary in the log (outside a load, a `RESTORE`, nothing).
pub fn stray_loaded() {
    if let Some(l) = lock().loading.as_mut() {
        l.strays += 1;
    }
}

/// Registers policy (db, stream, group) ([`register`]) and notes the state it is stored in
/// ([`Runtime::held`]) and its fault ([`Runtime::fault`]), so `INFO reclaim` shows `paused`,
/// `storm` or `invalid` before its first step (and on a replica, which runs none).
pub fn register_held(
    db: i32,
    stream: &[u8],
    group: &[u8],
    state: crate::model::policy::State,
    fault: Option<ReclaimError>,
) {
    register(db, stream, group);
    update(&PolicyId::new(db, stream, group), |rt| {
        rt.hold(state);
        rt.set_fault(fault);
    });
}

/// Ends the load in progress and returns what it read (`None`: no load was in progress). The
/// caller registers them when the load ended well, and drops them otherwise (the server empties
/// half-loaded databases, or keeps the old ones of a `swapdb` sync).
pub fn take_load() -> Option<Load> {
    lock().loading.take()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_escape_names_and_show_the_database() {
        let mut out = Vec::new();
        PolicyId::new(3, b"orders:{eu}", b"a,b=c\xff").write_label(&mut out);
        assert_eq!(out, b"db=3,stream=orders%3A{eu},group=a%2Cb%3Dc%FF");
        out.clear();
        PolicyId::new(-1, b"", b"g").write_label(&mut out);
        assert_eq!(out, b"db=0,stream=,group=g");
    }

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
