//! The in-memory index of policies and their run-time state (cursor, schedule, counters).
//!
//! The authoritative policy is always the key in the keyspace ([`crate::store`]); this index only
//! says which (db, stream, group) to visit and when, and keeps the counters `RECLAIM.STATS`
//! reports (since the module was loaded). Entries are added by `RECLAIM.POLICY SET` (also when it
//! arrives from the primary or the AOF), by `rdb_load` of a policy key (restart, full sync,
//! RESTORE), and by keyspace events for RENAME/MOVE/COPY of policy keys. FLUSHDB/FLUSHALL (also
//! the flush before a full sync) drop a database's entries ([`forget_db`]); any other entry whose
//! policy is gone is dropped the next time the sweeper visits it.
//!
//! Everything runs on the Redis main thread; the mutex only satisfies Rust's rules for statics and
//! is never held while calling into Redis.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use lazy_static::lazy_static;

use crate::planner::{Horizon, PassKind};

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

/// Counters of one policy since the module was loaded (reported by `RECLAIM.STATS`).
#[derive(Debug, Clone, Default)]
pub struct Counters {
    /// Complete passes over the PEL.
    pub passes: u64,
    /// Entries claimed for the claimant.
    pub claimed: u64,
    /// Entries moved to the DLQ (appended and acknowledged).
    pub dead_lettered: u64,
    /// Pending entries whose stream entry was gone, removed from the PEL.
    pub deleted: u64,
    /// Dead-letter moves skipped because the server was out of memory (retried later).
    pub oom_skips: u64,
    /// Steps that failed (wrong key type, unexpected replies).
    pub errors: u64,
    /// Wall-clock time (ms since the epoch) when the last complete pass ended; 0 = never.
    pub last_pass_ms: i64,
    /// Time spent in the steps of the last complete pass, in µs.
    pub last_pass_us: i64,
    /// Complete passes that paged every pending entry to check delivery counts
    /// ([`PassKind::Full`]).
    pub full_passes: u64,
    /// Complete passes that only purged trimmed entries, because no pending entry could be stale
    /// yet ([`PassKind::TrimOnly`]).
    pub scans_skipped: u64,
    /// Consumers' own PELs paged to check delivery counts after a client command that could
    /// raise them ([`touch`]).
    pub consumer_checks: u64,
}

/// Whose delivery counts may have risen since a pass last checked them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unchecked {
    /// Anyone's: the next pass pages the whole PEL ([`PassKind::Full`]).
    All,
    /// These consumers' (none: every count is known to be within the limit).
    Consumers(BTreeSet<Vec<u8>>),
}

impl Default for Unchecked {
    fn default() -> Self {
        Unchecked::All
    }
}

/// Most consumers tracked in [`Unchecked::Consumers`]; past it, [`Unchecked::All`].
pub const MAX_UNCHECKED: usize = 64;

/// The pass in progress of a policy.
#[derive(Debug, Clone)]
pub struct Pass {
    /// What the pass does, decided when it started.
    pub kind: PassKind,
    /// Consumers whose own PELs are paged first (delivery counts check), in order; the one being
    /// paged is the first.
    pub check: Vec<Vec<u8>>,
    /// [`Runtime::idle_mark`] when the pass started.
    pub idle_mark: u64,
    /// How far ahead of `MIN-IDLE` (ms) its scans look: their `IDLE` threshold is `MIN-IDLE`
    /// minus this.
    pub lookahead_ms: i64,
    /// What the pass has seen so far, for the next pass's schedule.
    pub horizon: Horizon,
    /// A stale or over-delivered entry was left pending (DLQ of the wrong type, out of memory).
    pub left_some: bool,
}

/// Run-time state of one policy.
#[derive(Debug, Clone, Default)]
pub struct Runtime {
    /// Last PEL entry handled in the current pass; `None` = the pass starts at the head of the PEL.
    pub cursor: Option<Vec<u8>>,
    /// ID-window width learned by windowed steps (0 = none yet).
    pub width: u128,
    /// Monotonic time (ms, see [`now_ms`]) at which the next step is due.
    pub due_ms: u64,
    /// µs spent in the steps of the pass in progress.
    pub pass_us: i64,
    /// Recent cost of handling one entry in a step, ns (0 = not measured yet); sizes steps to the
    /// time left ([`crate::planner::step_entries`]).
    pub entry_ns: u64,
    /// Counters since load.
    pub counters: Counters,
    /// What the last step found wrong, for `RECLAIM.STATS` (`None` = nothing).
    pub problem: Option<crate::sweep::Stop>,
    /// Bumped by every client command that may set an older idle time (`XCLAIM ... IDLE/TIME`)
    /// and whenever the PEL may be a new one ([`touch`], [`wake`]).
    pub idle_mark: u64,
    /// Whose delivery counts may have risen since a pass checked them ([`touch`]).
    pub unchecked: Unchecked,
    /// The pass in progress (`None` between passes).
    pub pass: Option<Pass>,
    /// How far ahead (ms) the next scan looks; `None` = [`crate::planner::first_lookahead`].
    pub lookahead_ms: Option<i64>,
    /// Wall-clock ms before which no pending entry can be stale (0 = unknown), from the last
    /// complete pass ([`Horizon::stale_not_before_ms`]).
    pub stale_not_before_ms: i64,
}

struct Registry {
    runtimes: HashMap<PolicyId, Runtime>,
    /// Stream name -> its policies (in any database), for [`touch`].
    by_stream: HashMap<Vec<u8>, Vec<PolicyId>>,
    /// Touches ([`touch`]) of the last [`EXEC_REMARK_MS`]: (stream, group, consumer) -> (monotonic
    /// ms of the last one, whether one set idle times). Made again at every `EXEC`
    /// ([`touch_on_exec`]).
    recent: HashMap<(Vec<u8>, Vec<u8>, Vec<u8>), (u64, bool)>,
    /// (due_ms, id): the visiting order. Stale pairs (due not equal to the runtime's) are skipped.
    queue: BTreeSet<(u64, PolicyId)>,
    /// Policies read by `rdb_load` during the load in progress (`None`: no load): registered only
    /// when the load ends well (see [`take_load`]), so a load that fails or is thrown away (a
    /// diskless `swapdb` sync into temporary databases) leaves nothing behind.
    loading: Option<Load>,
}

lazy_static! {
    static ref REGISTRY: Mutex<Registry> = Mutex::new(Registry {
        runtimes: HashMap::new(),
        by_stream: HashMap::new(),
        recent: HashMap::new(),
        queue: BTreeSet::new(),
        loading: None,
    });
    static ref EPOCH: Instant = Instant::now();
}

fn lock() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|e| e.into_inner())
}

/// Monotonic microseconds since the module was loaded.
pub fn now_us() -> u64 {
    EPOCH.elapsed().as_micros() as u64
}

/// Monotonic milliseconds since the module was loaded.
pub fn now_ms() -> u64 {
    EPOCH.elapsed().as_millis() as u64
}

/// Adds (db, stream, group) if it is not known yet, due at once. Keeps the state of a known one.
pub fn register(db: i32, stream: &[u8], group: &[u8]) {
    let id = PolicyId {
        db,
        stream: stream.to_vec(),
        group: group.to_vec(),
    };
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
    r.runtimes.insert(
        id,
        Runtime {
            due_ms: due,
            ..Runtime::default()
        },
    );
}

/// A policy was (re)set: its pass restarts from the head of the PEL on the next tick; counters stay.
pub fn reset(db: i32, stream: &[u8], group: &[u8]) {
    register(db, stream, group);
    let id = PolicyId {
        db,
        stream: stream.to_vec(),
        group: group.to_vec(),
    };
    let due = now_ms();
    let mut r = lock();
    let Registry {
        runtimes, queue, ..
    } = &mut *r;
    if let Some(rt) = runtimes.get_mut(&id) {
        queue.remove(&(rt.due_ms, id.clone()));
        rt.cursor = None;
        rt.pass_us = 0;
        rt.problem = None;
        // The policy may have changed: nothing learnt under the old one holds.
        rt.pass = None;
        rt.unchecked = Unchecked::All;
        rt.lookahead_ms = None;
        rt.stale_not_before_ms = 0;
        rt.due_ms = due;
        queue.insert((due, id));
    }
}

/// Forgets a policy (its key or group entry is gone).
pub fn remove(id: &PolicyId) {
    let mut r = lock();
    if let Some(rt) = r.runtimes.remove(id) {
        r.queue.remove(&(rt.due_ms, id.clone()));
        if let Some(ids) = r.by_stream.get_mut(&id.stream) {
            ids.retain(|i| i != id);
            if ids.is_empty() {
                r.by_stream.remove(&id.stream);
            }
        }
    }
}

/// Forgets every policy of (db, stream): its policy key is gone. O(policies of that stream name).
pub fn forget_stream(db: i32, stream: &[u8]) {
    let ids: Vec<PolicyId> = lock()
        .by_stream
        .get(stream)
        .map(|v| v.iter().filter(|id| id.db == db).cloned().collect())
        .unwrap_or_default();
    for id in &ids {
        remove(id);
    }
}

/// Rebuilds the stream-name index after databases changed wholesale.
fn reindex(r: &mut Registry) {
    r.by_stream.clear();
    for id in r.runtimes.keys() {
        r.by_stream
            .entry(id.stream.clone())
            .or_default()
            .push(id.clone());
    }
}

/// Notes that a client command may have raised the delivery counts of `consumer`'s entries in
/// (`stream`, `group`), and with `sets_idle` set older idle times (see [`crate::watch`]), in any
/// database (the command filter that calls this does not know which): the next pass of that
/// policy checks the consumer's entries first (with `MAX-DELIVERIES`), and with `sets_idle` scans
/// without skipping. O(policies of that stream name).
pub fn touch(stream: &[u8], group: &[u8], consumer: &[u8], sets_idle: bool) {
    let mut r = lock();
    if apply_touch(&mut r, stream, group, consumer, sets_idle) {
        let key = (stream.to_vec(), group.to_vec(), consumer.to_vec());
        let now = now_ms();
        let e = r.recent.entry(key).or_insert((now, false));
        *e = (now, e.1 || sets_idle);
    }
}

/// How long (ms) a touch is made again at every `EXEC`.
pub const EXEC_REMARK_MS: u64 = 10_000;

/// Called for every `EXEC`: a command queued in `MULTI` was seen (and its touch noted) when it
/// was queued, but it runs now, and a pass may have completed in between. So every touch of the
/// last [`EXEC_REMARK_MS`] is made again (whichever client's transaction this is). O(such
/// touches); nothing when there are none.
pub fn touch_on_exec() {
    let mut r = lock();
    if r.recent.is_empty() {
        return;
    }
    let now = now_ms();
    r.recent
        .retain(|_, (at, _)| now.saturating_sub(*at) < EXEC_REMARK_MS);
    let touches: Vec<((Vec<u8>, Vec<u8>, Vec<u8>), bool)> = r
        .recent
        .iter()
        .map(|(k, (_, idle))| (k.clone(), *idle))
        .collect();
    for ((stream, group, consumer), idle) in touches {
        apply_touch(&mut r, &stream, &group, &consumer, idle);
    }
}

/// Applies a touch to every policy of (stream, group); whether there is any.
fn apply_touch(r: &mut Registry, stream: &[u8], group: &[u8], consumer: &[u8], idle: bool) -> bool {
    let Registry {
        runtimes,
        by_stream,
        ..
    } = r;
    let mut any = false;
    for id in by_stream.get(stream).into_iter().flatten() {
        if id.group != group {
            continue;
        }
        let Some(rt) = runtimes.get_mut(id) else {
            continue;
        };
        any = true;
        if let Unchecked::Consumers(set) = &mut rt.unchecked {
            set.insert(consumer.to_vec());
            if set.len() > MAX_UNCHECKED {
                rt.unchecked = Unchecked::All;
            }
        }
        if idle {
            rt.idle_mark = rt.idle_mark.wrapping_add(1);
            rt.stale_not_before_ms = 0;
        }
    }
    any
}

/// Forgets what passes learnt about every PEL (checked delivery counts, when entries can be
/// stale): the next pass of each policy is a full one or a scan. Called when the server becomes a
/// primary again.
pub fn forget_learnt() {
    for rt in lock().runtimes.values_mut() {
        rt.unchecked = Unchecked::All;
        rt.idle_mark = rt.idle_mark.wrapping_add(1);
        rt.stale_not_before_ms = 0;
    }
}

/// The state of a policy, if known.
pub fn get(id: &PolicyId) -> Option<Runtime> {
    lock().runtimes.get(id).cloned()
}

/// Stores the state of a policy after a step and schedules its next visit at `rt.due_ms`.
/// Ignored when the policy was removed meanwhile.
pub fn put(id: &PolicyId, rt: Runtime) {
    let mut r = lock();
    let Registry {
        runtimes, queue, ..
    } = &mut *r;
    if let Some(old) = runtimes.get_mut(id) {
        queue.remove(&(old.due_ms, id.clone()));
        queue.insert((rt.due_ms, id.clone()));
        *old = rt;
    }
}

/// Adds to a policy's counters without touching its schedule (used by `RECLAIM.SWEEP`).
pub fn update(id: &PolicyId, f: impl FnOnce(&mut Runtime)) {
    if let Some(rt) = lock().runtimes.get_mut(id) {
        f(rt);
    }
}

/// The policy due first, if it is due at `now` (monotonic ms).
pub fn next_due(now: u64) -> Option<(PolicyId, Runtime)> {
    let r = lock();
    let (due, id) = r.queue.iter().next()?.clone();
    if due > now {
        return None;
    }
    let rt = r.runtimes.get(&id)?.clone();
    Some((id, rt))
}

/// Exchanges two databases (SWAPDB, Redis 4.0+; the `SwapDB` server event).
pub fn swap_db(a: i32, b: i32) {
    let mut r = lock();
    let old: Vec<(PolicyId, Runtime)> = r.runtimes.drain().collect();
    r.queue.clear();
    for (mut id, rt) in old {
        if id.db == a {
            id.db = b;
        } else if id.db == b {
            id.db = a;
        }
        r.queue.insert((rt.due_ms, id.clone()));
        r.runtimes.insert(id, rt);
    }
    reindex(&mut r);
}

/// Called when the stream or one of its groups appears (keyspace events `xgroup-create`,
/// `rename_to`, `restore`...): the PEL may be a new one, so nothing learnt about it holds, and
/// every waiting policy of (db, stream) is due now. O(policies).
pub fn wake(db: i32, stream: &[u8]) {
    let now = now_ms();
    let mut r = lock();
    let Registry {
        runtimes, queue, ..
    } = &mut *r;
    for (id, rt) in runtimes.iter_mut() {
        if id.db != db || id.stream != stream {
            continue;
        }
        rt.idle_mark = rt.idle_mark.wrapping_add(1);
        rt.unchecked = Unchecked::All;
        rt.stale_not_before_ms = 0;
        if rt.problem.is_some() && rt.due_ms > now {
            queue.remove(&(rt.due_ms, id.clone()));
            rt.due_ms = now;
            queue.insert((now, id.clone()));
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

/// Forgets every policy of database `db` (-1: all databases), as FLUSHDB / FLUSHALL remove them.
pub fn forget_db(db: i32) {
    let mut r = lock();
    let Registry {
        runtimes, queue, ..
    } = &mut *r;
    runtimes.retain(|id, _| db != -1 && id.db != db);
    queue.retain(|(_, id)| db != -1 && id.db != db);
    reindex(&mut r);
}

/// The policies `rdb_load` read during the load in progress, waiting for it to end well.
#[derive(Debug, Default)]
pub struct Load {
    /// (db, stream, group) as `rdb_load` saw them.
    pub ids: Vec<PolicyId>,
    /// The load goes into temporary databases (a diskless `swapdb` sync). Redis before 7.4 gives
    /// `rdb_load` database 0 for every value loaded into them (redis#12947), so the databases
    /// in `ids` cannot be trusted.
    pub into_temp_db: bool,
}

/// A load begins (server events `Loading` ..._START, and `ReplAsyncLoad` STARTED with
/// `into_temp_db`, Redis 7.0+): from now until [`take_load`], policies read by `rdb_load` are
/// only noted ([`loaded`]). A `swapdb` sync fires both events: the first one counts.
pub fn load_started(into_temp_db: bool) {
    let mut r = lock();
    if r.loading.is_none() {
        r.loading = Some(Load {
            ids: Vec::new(),
            into_temp_db,
        });
    }
}

/// `rdb_load` read the policies of `stream` for these groups in database `db`. During a load they
/// wait for its end; otherwise (a `RESTORE`, whose keyspace event registers them) nothing is kept.
pub fn loaded<'a>(db: i32, stream: &[u8], groups: impl Iterator<Item = &'a Vec<u8>>) {
    let mut r = lock();
    if let Some(l) = r.loading.as_mut() {
        l.ids.extend(groups.map(|g| PolicyId {
            db,
            stream: stream.to_vec(),
            group: g.clone(),
        }));
    }
}

/// Ends the load in progress and returns what it read (`None`: no load was in progress). The
/// caller registers them when the load ended well, and drops them otherwise (the server empties
/// half-loaded databases, or keeps the old ones of a `swapdb` sync).
pub fn take_load() -> Option<Load> {
    lock().loading.take()
}

/// Policies noted by the load in progress, not registered yet (0 when no load is in progress).
pub fn loading_len() -> usize {
    lock().loading.as_ref().map_or(0, |l| l.ids.len())
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
        let id = PolicyId {
            db: 0,
            stream: b"s-reg".to_vec(),
            group: b"g".to_vec(),
        };
        let mut rt = get(&id).unwrap();
        rt.due_ms = u64::MAX - 1;
        rt.cursor = Some(b"5-0".to_vec());
        put(&id, rt);
        assert_eq!(get(&id).unwrap().cursor.as_deref(), Some(&b"5-0"[..]));
        swap_db(0, 7);
        let moved = PolicyId {
            db: 7,
            ..id.clone()
        };
        assert!(get(&id).is_none());
        assert_eq!(get(&moved).unwrap().due_ms, u64::MAX - 1);
        reset(7, b"s-reg", b"g");
        assert_eq!(get(&moved).unwrap().cursor, None);
        remove(&moved);
        assert!(get(&moved).is_none());
    }
}
