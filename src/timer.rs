//! The sweep timer: one module timer (Redis `RM_CreateTimer`), re-armed every
//! `reclaim.tick-interval-ms`, that runs due policies' steps within `reclaim.tick-budget-us`.
//!
//! Guards, checked at the top of every tick (each skip is counted in `INFO reclaim`):
//! - only a primary sweeps (`REDISMODULE_CTX_FLAGS_MASTER`): a replica's state changes only
//!   through its replication stream;
//! - never while loading (RDB, AOF, full sync);
//! - never while writes are paused (`RM_AvoidReplicaTraffic`: CLIENT PAUSE WRITE, FAILOVER). On
//!   Redis 7.0 a timer write during a pause with AOF or replicas crashes the server;
//! - never when out of memory (the live `REDISMODULE_CTX_FLAGS_OOM`, not the stale state RM_Call's
//!   `M` flag reads in a timer).
//!
//! The timer is never stopped from inside its own callback: it simply re-arms itself.

use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use redis_module::{raw, Context, ContextFlags};

use crate::config;
use crate::ffi;
use crate::metrics;
use crate::planner::{self, Horizon, PassKind};
use crate::policy::Policy;
use crate::registry::{self, Pass, PolicyId, Runtime, Unchecked};
use crate::store;
use crate::sweep::{self, Outcome, Stop};
use crate::watch;

/// Whether the tick timer exists (it re-arms itself from then on).
static ARMED: AtomicBool = AtomicBool::new(false);

/// Starts the tick timer on the first server cron after the module loaded (server event
/// `CronLoop`), not in `RedisModule_OnLoad`: Redis refuses to unload a module with a pending timer,
/// so a `MODULE LOADEX` whose configs are rejected after `OnLoad` could not be undone.
pub unsafe extern "C" fn on_cron(
    ctx: *mut raw::RedisModuleCtx,
    _e: raw::RedisModuleEvent,
    _sub: u64,
    _data: *mut c_void,
) {
    if !ARMED.swap(true, Ordering::Relaxed) {
        arm(ctx);
    }
}

/// Arms the tick timer once more (`reclaim.tick-interval-ms` from now).
fn arm(ctx: *mut raw::RedisModuleCtx) {
    unsafe {
        raw::RedisModule_CreateTimer.unwrap()(
            ctx,
            config::tick_interval_ms(),
            Some(on_tick),
            std::ptr::null_mut(),
        );
    }
}

extern "C" fn on_tick(ctx: *mut raw::RedisModuleCtx, _data: *mut c_void) {
    let context = Context::new(ctx);
    ffi::guard("sweep timer", || tick(&context));
    arm(ctx);
}

/// Why sweeping is off on this server right now, if it is: `replica`, `loading`, `paused`, `oom`.
pub fn blocked(ctx: &Context) -> Option<&'static str> {
    let flags = ctx.get_flags();
    if !flags.contains(ContextFlags::MASTER) {
        return Some("replica");
    }
    if flags.intersects(ContextFlags::LOADING | ContextFlags::ASYNC_LOADING) {
        return Some("loading");
    }
    let paused = unsafe {
        raw::RedisModule_AvoidReplicaTraffic
            .map(|f| f() != 0)
            .unwrap_or(false)
    };
    if paused {
        return Some("paused");
    }
    if flags.contains(ContextFlags::OOM) {
        return Some("oom");
    }
    None
}

fn epoch_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Starts a pass of `policy` at wall-clock ms `wall`: a full pass while delivery counts are
/// unchecked (`MAX-DELIVERIES` above 0), a trim-only pass while no entry can be stale yet, a scan
/// otherwise, looking `lookahead` ms ahead of `MIN-IDLE` (see [`planner::pass_kind`]).
pub fn new_pass(policy: &Policy, rt: &mut Runtime, wall: i64) -> Pass {
    let checked = rt.unchecked != Unchecked::All;
    let kind = planner::pass_kind(policy, checked, wall, rt.stale_not_before_ms);
    let lookahead = rt
        .lookahead_ms
        .unwrap_or_else(|| planner::first_lookahead(policy));
    let threshold = match kind {
        PassKind::Full => 0,
        _ => policy.min_idle_ms.saturating_sub(lookahead).max(1),
    };
    // The counts this pass checks are checked from now on; touches during the pass add to a new
    // set, for the next pass.
    let taken = std::mem::replace(&mut rt.unchecked, Unchecked::Consumers(Default::default()));
    // A full pass checks everyone anyway; without MAX-DELIVERIES counts do not matter.
    let check = match taken {
        Unchecked::Consumers(set) if kind != PassKind::Full && policy.max_deliveries > 0 => {
            set.into_iter().collect()
        }
        _ => Vec::new(),
    };
    Pass {
        kind,
        check,
        idle_mark: rt.idle_mark,
        lookahead_ms: lookahead,
        horizon: Horizon::new(wall, threshold),
        left_some: false,
    }
}

/// Ends the pass in progress: what it learnt sets the next passes' kind and lookahead.
fn end_pass(rt: &mut Runtime, policy: &Policy) {
    let Some(p) = rt.pass.take() else {
        return;
    };
    let c = &mut rt.counters;
    // A stale or over-delivered entry left pending must be found again on the next pass; a
    // client's `XCLAIM ... IDLE` during the pass may have made an entry stale behind it.
    if p.left_some {
        rt.unchecked = Unchecked::All;
    }
    let trusted = !p.left_some && rt.idle_mark == p.idle_mark;
    match p.kind {
        PassKind::TrimOnly => {
            c.scans_skipped += 1;
            metrics::SCANS_SKIPPED.add(1);
        }
        PassKind::Full | PassKind::Scan => {
            if p.kind == PassKind::Full {
                c.full_passes += 1;
                metrics::FULL_PASSES.add(1);
            } else {
                rt.lookahead_ms = Some(planner::next_lookahead(
                    p.lookahead_ms,
                    p.horizon.fresh.watched,
                    policy,
                ));
            }
            rt.stale_not_before_ms = if trusted {
                p.horizon.stale_not_before_ms(policy.min_idle_ms)
            } else {
                0
            };
        }
    }
}

/// A pass that ends early (no stream, no group, an error): what it took to check is unchecked
/// again, and nothing it saw is trusted.
fn abort_pass(rt: &mut Runtime) {
    if rt.pass.take().is_some() {
        rt.unchecked = Unchecked::All;
    }
    rt.stale_not_before_ms = 0;
}

/// Folds one step's outcome into a policy's run-time state and the server-wide counters, and sets
/// when the policy is due next (`now` is monotonic ms). `us` is the step's duration.
pub fn apply(rt: &mut Runtime, out: &Outcome, us: i64, policy: &Policy, now: u64) {
    let c = &mut rt.counters;
    c.claimed += out.claimed;
    c.dead_lettered += out.dead_lettered;
    c.deleted += out.deleted;
    c.oom_skips += out.oom_skips;
    metrics::STEPS.add(1);
    metrics::CLAIMED.add(out.claimed);
    metrics::DEAD_LETTERED.add(out.dead_lettered);
    metrics::DELETED.add(out.deleted);
    metrics::OOM_SKIPS.add(out.oom_skips);
    if matches!(out.problem, Some(Stop::WrongTypeDlq)) {
        c.errors += 1;
        metrics::ERRORS.add(1);
    }
    rt.pass_us += us;
    rt.cursor = out.cursor.clone();
    rt.width = out.width;
    if let Some(p) = rt.pass.as_mut() {
        p.horizon.fresh.merge(&out.fresh);
        p.left_some |= out.problem.is_some() || out.oom_skips > 0;
        // A scan copying out too many fresh entries stops looking ahead for the rest of the pass.
        let cap = planner::WATCH_PAGES.saturating_mul(policy.count.max(1) as u64);
        if p.kind == PassKind::Scan && p.horizon.fresh.watched > cap {
            p.horizon.threshold_ms = policy.min_idle_ms;
        }
    }
    let later = now.saturating_add(policy.interval_ms as u64);
    match &out.stop {
        Some(Stop::Deadline) => {
            rt.problem = out.problem.clone();
            rt.due_ms = now;
        }
        Some(s) => {
            if matches!(s, Stop::Error(_) | Stop::WrongTypeStream) {
                c.errors += 1;
                metrics::ERRORS.add(1);
            }
            rt.problem = Some(s.clone());
            rt.cursor = None;
            rt.pass_us = 0;
            abort_pass(rt);
            rt.due_ms = later;
        }
        None => {
            rt.problem = out.problem.clone();
            if out.pass_done {
                c.passes += 1;
                c.last_pass_ms = epoch_ms();
                c.last_pass_us = rt.pass_us;
                metrics::PASSES.add(1);
                end_pass(rt, policy);
                rt.pass_us = 0;
                rt.due_ms = later;
            } else {
                rt.due_ms = now;
            }
        }
    }
}

/// Whether the event-loop hook is subscribed (it is, while a backlog exists).
static DRAINING: AtomicBool = AtomicBool::new(false);
/// Whether a tick found this server a replica since it last swept as a primary.
static WAS_REPLICA: AtomicBool = AtomicBool::new(false);
/// Whether some policy was due again right after the last slice of work.
static BACKLOG: AtomicBool = AtomicBool::new(false);

fn tick(ctx: &Context) {
    // While the event-loop hook drains a backlog, it does the work: a tick slice on top would
    // make a client wait two slices in a row.
    let draining = DRAINING.load(Ordering::Relaxed)
        && BACKLOG.load(Ordering::Relaxed)
        && blocked(ctx).is_none();
    let backlog = if draining {
        true
    } else {
        registry::len() > 0 && run_slice(ctx, true)
    };
    BACKLOG.store(backlog, Ordering::Relaxed);
    // Subscribe or unsubscribe the event-loop hook from here, never from inside the hook itself
    // (the server is iterating its listeners while it fires the event).
    if backlog != DRAINING.load(Ordering::Relaxed) {
        let ev = raw::RedisModuleEvent {
            id: raw::REDISMODULE_EVENT_EVENTLOOP,
            dataver: 1,
        };
        let cb: raw::RedisModuleEventCallback = if backlog { Some(on_event_loop) } else { None };
        let ok = unsafe {
            raw::RedisModule_SubscribeToServerEvent
                .map(|f| f(ctx.ctx, ev, cb) == raw::REDISMODULE_OK as c_int)
        };
        if ok == Some(true) {
            DRAINING.store(backlog, Ordering::Relaxed);
            if backlog {
                wake();
            }
        }
    }
}

/// The event-loop hook while a backlog exists (server event `EventLoop`, Redis 7.0+):
/// - `AFTER_SLEEP`, right after each wake-up: one more slice of at most `reclaim.tick-budget-us`,
///   before the clients' commands of this iteration, whose replies go out at the end of it: a
///   command that arrives during a slice waits for that slice only;
/// - `BEFORE_SLEEP`: keep the loop from sleeping ([`wake`]). It must be here, not in the slice:
///   Redis writes the wake-up pipe only when its one-shot queue is empty, which it is only after
///   the iteration's file events have run the previous one-shot.
unsafe extern "C" fn on_event_loop(
    ctx: *mut raw::RedisModuleCtx,
    _e: raw::RedisModuleEvent,
    sub: u64,
    _data: *mut c_void,
) {
    if !BACKLOG.load(Ordering::Relaxed) {
        return;
    }
    if sub == raw::REDISMODULE_SUBEVENT_EVENTLOOP_BEFORE_SLEEP {
        wake();
        return;
    }
    // Clients ran commands since the last slice: leave them a gap (as long as that slice, at most
    // MAX_GAP_US) before the next one; the loop keeps turning meanwhile, serving them at once. An
    // idle server drains back to back.
    let now = registry::now_us();
    if CLIENT_COMMANDS.load(Ordering::Relaxed) != CMDS_AT_SLICE.load(Ordering::Relaxed)
        && now < GAP_UNTIL_US.load(Ordering::Relaxed)
    {
        metrics::GAPS.add(1);
        return;
    }
    let context = Context::new(ctx);
    ffi::guard("event-loop slice", || {
        BACKLOG.store(run_slice(&context, false), Ordering::Relaxed);
    });
    let end = registry::now_us();
    CMDS_AT_SLICE.store(CLIENT_COMMANDS.load(Ordering::Relaxed), Ordering::Relaxed);
    GAP_UNTIL_US.store(end + (end - now).min(MAX_GAP_US), Ordering::Relaxed);
}

/// Longest gap left to active clients after a slice, µs: long enough for a client that sends its
/// next command as soon as it has a reply (a loopback round trip), short enough that a drain keeps
/// most of the main thread.
const MAX_GAP_US: u64 = 250;

/// Commands run by clients (not by this module), counted by a command filter.
static CLIENT_COMMANDS: AtomicU64 = AtomicU64::new(0);
/// [`CLIENT_COMMANDS`] when the last slice ended.
static CMDS_AT_SLICE: AtomicU64 = AtomicU64::new(0);
/// Monotonic µs before which no slice runs while clients are active.
static GAP_UNTIL_US: AtomicU64 = AtomicU64::new(0);

/// Command filter (Redis `RM_RegisterCommandFilter`, with `NOSELF`; it sees every command of
/// clients, Lua scripts, functions and other modules, not the module's own): counts them, so a
/// drain knows whether it shares the server, and marks the streams whose delivery counts or idle
/// times a command may change ([`crate::watch`], [`registry::touch`]). For any other
/// command it costs an atomic increment, one argument read and a length compare.
pub unsafe extern "C" fn on_client_command(f: *mut raw::RedisModuleCommandFilterCtx) {
    CLIENT_COMMANDS.fetch_add(1, Ordering::Relaxed);
    ffi::guard("command filter", || {
        let argc = raw::RedisModule_CommandFilterArgsCount.unwrap()(f).max(0);
        let arg = |i: c_int| -> &[u8] {
            let s = raw::RedisModule_CommandFilterArgGet.unwrap()(f, i);
            if s.is_null() {
                return &[];
            }
            let mut len = 0usize;
            let p = raw::RedisModule_StringPtrLen.unwrap()(s, &mut len);
            if p.is_null() {
                &[]
            } else {
                std::slice::from_raw_parts(p.cast::<u8>(), len)
            }
        };
        if argc == 0 {
            return;
        }
        let name = arg(0);
        if watch::names_another_db(name) {
            remember_caller_db(f);
            return;
        }
        if watch::is_exec(name) {
            registry::touch_on_exec();
            return;
        }
        if !watch::may_touch(name) {
            return;
        }
        let argv: Vec<&[u8]> = (0..argc).map(arg).collect();
        for t in watch::touches(&argv) {
            registry::touch(t.stream, t.group, t.consumer, t.sets_idle);
        }
    });
}

unsafe extern "C" fn noop(_data: *mut c_void) {}

/// The database (+ 1; 0 = none) of the client running the current `MOVE` or `COPY`, for
/// [`restore_caller_db`].
static CALLER_DB: AtomicU64 = AtomicU64::new(0);

/// Notes the caller's database before a `MOVE` or `COPY` runs (Redis 7.2+ / Valkey
/// `RM_CommandFilterGetClientId` and `RM_GetClientInfoById`; nothing on 7.0, which does not need
/// it).
unsafe fn remember_caller_db(f: *mut raw::RedisModuleCommandFilterCtx) {
    CALLER_DB.store(0, Ordering::Relaxed);
    let (Some(get_id), Some(get_info)) = (
        raw::RedisModule_CommandFilterGetClientId,
        raw::RedisModule_GetClientInfoById,
    ) else {
        return;
    };
    let id = get_id(f);
    let mut info: raw::RedisModuleClientInfo = std::mem::zeroed();
    info.version = 1;
    if get_info((&mut info as *mut raw::RedisModuleClientInfo).cast(), id)
        == raw::REDISMODULE_OK as c_int
    {
        CALLER_DB.store(info.db as u64 + 1, Ordering::Relaxed);
    }
}

/// Called at the end of the `move_to` and `copy_to` keyspace events: selects the caller's database
/// again. Valkey 8.1 runs module keyspace callbacks on the client that ran the command and selects
/// the event's database on it without restoring it (valkey-io/valkey#1819, fixed by #4024), so
/// after `MOVE key 1` or `COPY a b DB 1` that client was left in database 1 whenever a module
/// subscribed to generic events. On Redis the callback's client is a temporary one, and this
/// changes nothing.
pub fn restore_caller_db(ctx: &Context) {
    let db = CALLER_DB.swap(0, Ordering::Relaxed);
    if db > 0 {
        ffi::select_db(ctx, (db - 1) as i32);
    }
}

/// Keeps the event loop from sleeping until the next timer: schedules an empty one-shot callback
/// (Redis 7.0 `RM_EventLoopAddOneShot`, which writes to the module pipe the loop polls).
fn wake() {
    unsafe {
        if let Some(f) = raw::RedisModule_EventLoopAddOneShot {
            f(Some(noop), std::ptr::null_mut());
        }
    }
}

/// One slice of sweep work: due policies' steps until `reclaim.tick-budget-us` is used. Returns
/// whether a policy is still due (a backlog). Counts a skip (only when `count_skips`, i.e. from
/// the timer) when sweeping is off on this server.
fn run_slice(ctx: &Context, count_skips: bool) -> bool {
    let why = blocked(ctx);
    // Back to primary after being a replica (failover, REPLICAOF NO ONE): what the passes learnt
    // before may not hold for the PELs the new role brings.
    if why == Some("replica") {
        WAS_REPLICA.store(true, Ordering::Relaxed);
    } else if why.is_none() && WAS_REPLICA.swap(false, Ordering::Relaxed) {
        registry::forget_learnt();
    }
    if let Some(why) = why {
        if count_skips {
            match why {
                "replica" => metrics::SKIPPED_REPLICA.add(1),
                "loading" => metrics::SKIPPED_LOADING.add(1),
                "paused" => metrics::SKIPPED_PAUSED.add(1),
                _ => metrics::SKIPPED_OOM.add(1),
            }
        }
        return false;
    }
    let start = Instant::now();
    let cpu_start = metrics::thread_cpu_us();
    // Steps and batches are sized and started from estimates (the cost of the ones before):
    // aim at 7/8 of the budget, leaving the rest for estimates that come out short.
    let deadline = start + Duration::from_micros(config::tick_budget_us() as u64 * 7 / 8);
    let now = registry::now_ms();
    let db_before = ffi::selected_db(ctx);
    let mut worked = false;
    while let Some((id, mut rt)) = registry::next_due(now) {
        worked = true;
        let t0 = Instant::now();
        if !visit(ctx, &id, &mut rt, now, deadline) {
            registry::remove(&id);
            continue;
        }
        registry::put(&id, rt);
        // A step always reads its page and runs its first batch: do not start one that would
        // likely end past the budget (predicted from the step just done).
        let after = Instant::now();
        if after + (after - t0) >= deadline {
            break;
        }
    }
    ffi::select_db(ctx, db_before);
    if worked {
        if count_skips {
            metrics::TICKS.add(1);
        } else {
            metrics::SLICES.add(1);
        }
        let us = start.elapsed().as_micros() as u64;
        metrics::LAST_TICK_US.set(us);
        metrics::MAX_TICK_US.max(us);
        metrics::MAX_TICK_CPU_US.max(metrics::thread_cpu_us().saturating_sub(cpu_start));
        if us >= 1000 {
            ffi::latency_sample(b"reclaim-tick\0", (us / 1000) as i64);
        }
    }
    registry::next_due(registry::now_ms()).is_some()
}

/// Runs one step of policy `id`. Returns `false` when the policy no longer exists.
fn visit(ctx: &Context, id: &PolicyId, rt: &mut Runtime, now: u64, deadline: Instant) -> bool {
    if !ffi::select_db(ctx, id.db) {
        return false;
    }
    let Some(policy) = store::get(ctx, &id.stream, &id.group) else {
        return false;
    };
    let t0 = Instant::now();
    if rt.pass.is_none() {
        let p = new_pass(&policy, rt, epoch_ms());
        rt.pass = Some(p);
    }
    let Some(pass) = rt.pass.as_ref() else {
        return true;
    };
    // At most COUNT entries, and no more than are likely to be handled in the time left (at the
    // policy's recent cost per entry): a step stopped by the deadline half-way through its page
    // reads the rest of it again next time.
    let left_ns = deadline.saturating_duration_since(t0).as_nanos() as u64;
    let max = planner::step_entries(policy.count, left_ns, rt.entry_ns);
    let checking = pass.check.first().cloned();
    let mut out = match (&checking, pass.kind) {
        // First the consumers whose delivery counts may have risen: their own PELs, paged.
        (Some(consumer), _) => sweep::step(
            ctx,
            &id.stream,
            &id.group,
            &policy,
            Some(consumer),
            rt.cursor.as_deref(),
            max,
            Some(deadline),
        ),
        (None, PassKind::Full) => sweep::step(
            ctx,
            &id.stream,
            &id.group,
            &policy,
            None,
            rt.cursor.as_deref(),
            max,
            Some(deadline),
        ),
        (None, PassKind::Scan | PassKind::TrimOnly) => sweep::step_windowed(
            ctx,
            &id.stream,
            &id.group,
            &policy,
            rt.cursor.as_deref(),
            rt.width,
            pass.horizon.threshold_ms,
            pass.kind == PassKind::TrimOnly,
            max,
            Some(deadline),
        ),
    };
    if checking.is_some() {
        // A consumer check does not teach the pass when entries go stale (it sees one consumer).
        out.fresh = Default::default();
        if out.pass_done {
            // That consumer is done: the next step checks the next one, or starts the pass proper.
            out.pass_done = false;
            if let Some(p) = rt.pass.as_mut() {
                p.check.remove(0);
            }
            rt.counters.consumer_checks += 1;
            metrics::CONSUMER_CHECKS.add(1);
        }
    }
    let took = t0.elapsed();
    if out.examined > 0 {
        rt.entry_ns = planner::next_entry_ns(rt.entry_ns, took.as_nanos() as u64, out.examined);
    }
    apply(rt, &out, took.as_micros() as i64, &policy, now);
    true
}
