//! When sweep work runs: one module timer (Redis `RM_CreateTimer`), re-armed every
//! `reclaim.tick-interval-ms`, that runs due policies' steps within `reclaim.tick-budget-us`; and
//! while a backlog exists, slices of the same size between event-loop iterations (server event
//! `EventLoop`), leaving gaps to clients that are active.
//!
//! Guards, checked at the top of every tick and slice ([`blocked`]; each skip is counted in
//! `INFO reclaim`):
//! - only a primary sweeps (`REDISMODULE_CTX_FLAGS_MASTER`): a replica's state changes only
//!   through its replication stream;
//! - never while loading (RDB, AOF, full sync);
//! - never while writes are paused (`RM_AvoidReplicaTraffic`: CLIENT PAUSE WRITE, FAILOVER). On
//!   Redis 7.0 a timer write during a pause with AOF or replicas crashes the server;
//! - never when out of memory (the live `REDISMODULE_CTX_FLAGS_OOM`, not the stale state RM_Call's
//!   `M` flag reads in a timer);
//! - in Redis Cluster, never while the cluster is down (`cluster_state:fail`): every keyed call
//!   would be refused, an expected state, not an error ([`crate::ffi::cluster::down`]).
//!
//! The timer is never stopped from inside its own callback: it simply re-arms itself.

use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis_module::{raw, Context};

use crate::engine::guards::{self, blocked, Blocked};
use crate::engine::settle;
use crate::engine::sweep::{self, Target};
use crate::ffi;
use crate::ffi::events;
use crate::model::clock::{epoch_ms, now_ms, now_us};
use crate::model::outcome::Outcome;
use crate::model::planner::PassKind;
use crate::model::policy::Policy;
use crate::state::config;
use crate::state::metrics;
use crate::state::registry::{self, PolicyId};
use crate::state::runtime::{Runtime, StepPlan};
use crate::state::store;

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

/// Wakes the readers blocked on streams where an entry may now be due for them (it turned due
/// while they waited, or their search stopped at its bound and goes on): `RECLAIM.READGROUP
/// ... BLOCK` never waits while an entry is due. O(keys readers are blocked on).
/// Not while sweeping is off on this server (a replica, loading, writes paused, out of memory, the
/// cluster down): the server ends those waits itself where it must (CLUSTERDOWN, as for a
/// blocked XREADGROUP).
fn wake_readers(ctx: &Context) {
    let keys = crate::ffi::blocked::waiting_keys();
    if keys.is_empty() || blocked(ctx).is_some() {
        return;
    }
    let now = epoch_ms();
    let before = ffi::selected_db(ctx);
    for (db, key) in keys {
        if registry::readers_may_find(db, &key, now) && ffi::select_db(ctx, db) {
            crate::ffi::blocked::signal_if_waiting(ctx, db, &key);
        }
    }
    ffi::select_db(ctx, before);
}

/// Whether the event-loop hook is subscribed (it is, while a backlog exists).
static DRAINING: AtomicBool = AtomicBool::new(false);
/// Whether a tick found this server a replica since it last swept as a primary.
static WAS_REPLICA: AtomicBool = AtomicBool::new(false);
/// Whether some policy was due again right after the last slice of work.
static BACKLOG: AtomicBool = AtomicBool::new(false);
/// Monotonic ms of the last pruning of expired touches.
static PRUNED_MS: AtomicU64 = AtomicU64::new(0);
/// How often (ms) expired touches are pruned.
const PRUNE_EVERY_MS: u64 = 1000;

fn tick(ctx: &Context) {
    crate::server::eviction::tick(ctx);
    let now = now_ms();
    if now.saturating_sub(PRUNED_MS.load(Ordering::Relaxed)) >= PRUNE_EVERY_MS {
        PRUNED_MS.store(now, Ordering::Relaxed);
        registry::prune_touches(ffi::server_ms());
    }
    // Redrive tasks (`RECLAIM.REDRIVE`): a step of each, under the same guards, within a budget
    // of their own.
    if blocked(ctx).is_none() && config::enabled() {
        let budget = aim();
        let (start, cpu_start) = (Instant::now(), crate::ffi::thread_cpu_us());
        if crate::engine::redrive::run(ctx, start + budget) {
            let us = record_time(start, cpu_start);
            metrics::REDRIVE_MAX_ROUND_US.max(us);
            if us > config::tick_budget_us().max(0) as u64 {
                metrics::REDRIVE_OVER_BUDGET.add(1);
            }
        }
    }
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
    wake_readers(ctx);
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
    let now = now_us();
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
    let end = now_us();
    CMDS_AT_SLICE.store(CLIENT_COMMANDS.load(Ordering::Relaxed), Ordering::Relaxed);
    GAP_UNTIL_US.store(end + (end - now).min(MAX_GAP_US), Ordering::Relaxed);
}

/// Longest gap left to active clients after a slice, µs: long enough for a client that sends its
/// next command as soon as it has a reply (a loopback round trip), short enough that a drain keeps
/// most of the main thread.
const MAX_GAP_US: u64 = 250;

/// Commands run by clients (not by this module), counted by the command filter
/// ([`client_command`]).
static CLIENT_COMMANDS: AtomicU64 = AtomicU64::new(0);
/// [`CLIENT_COMMANDS`] when the last slice ended.
static CMDS_AT_SLICE: AtomicU64 = AtomicU64::new(0);
/// Monotonic µs before which no slice runs while clients are active.
static GAP_UNTIL_US: AtomicU64 = AtomicU64::new(0);

/// Counts a command run by a client: a drain then knows it shares the server.
pub fn client_command() {
    CLIENT_COMMANDS.fetch_add(1, Ordering::Relaxed);
}

unsafe extern "C" fn noop(_data: *mut c_void) {}

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
    if why == Some(Blocked::Replica) {
        WAS_REPLICA.store(true, Ordering::Relaxed);
    } else if why.is_none() && WAS_REPLICA.swap(false, Ordering::Relaxed) {
        registry::forget_learnt();
        crate::state::redrive::rediscover();
    }
    if let Some(why) = why {
        if count_skips {
            why.skip_counter().add(1);
        }
        return false;
    }
    let start = Instant::now();
    let cpu_start = crate::ffi::thread_cpu_us();
    let deadline = start + aim();
    let now = now_ms();
    let db_before = ffi::selected_db(ctx);
    let mut worked = false;
    while let Some(id) = registry::next_due(now) {
        worked = true;
        let t0 = Instant::now();
        if !visit(ctx, &id, now, deadline) {
            registry::remove(&id);
            crate::state::eviction::forget_policies(id.db, &id.stream, Some(&id.group));
            continue;
        }
        // A step always reads its page and runs its first batch: do not start one that would
        // likely end past the budget (predicted from the step just done).
        let after = Instant::now();
        if after + (after - t0) >= deadline {
            break;
        }
    }
    ffi::select_db(ctx, db_before);
    if worked {
        record_slice(count_skips, start, cpu_start);
    }
    registry::next_due(now_ms()).is_some()
}

/// How long a tick or slice aims to run: 3/4 of `reclaim.tick-budget-us`. Steps and batches are
/// sized and started from estimates (the cost of the ones before); the last quarter is for
/// estimates that come out short, and for what the machine adds to the main thread's CPU time
/// while a slice runs (interrupts, a virtual CPU descheduled: on a loaded 2-core VM, gaps of
/// 100-300 µs in a loop that only reads the thread's CPU clock).
fn aim() -> Duration {
    Duration::from_micros(config::tick_budget_us().max(0) as u64 * 3 / 4)
}

/// Counts a tick (`timer`) or slice that did work, with its wall and CPU time; one longer than
/// 1 ms is a `reclaim-tick` latency sample.
fn record_slice(timer: bool, start: Instant, cpu_start: u64) {
    if timer {
        metrics::TICKS.add(1);
    } else {
        metrics::SLICES.add(1);
    }
    record_time(start, cpu_start);
}

/// Records the wall and CPU time of a tick, a slice or a round of redrive steps (which has a
/// budget of its own, of the same size): `reclaim_last_tick_us`, the maxima, the ticks over
/// budget; one longer than 1 ms is a `reclaim-tick` latency sample. Returns its wall time, µs.
fn record_time(start: Instant, cpu_start: u64) -> u64 {
    let us = start.elapsed().as_micros() as u64;
    metrics::LAST_TICK_US.set(us);
    metrics::MAX_TICK_US.max(us);
    metrics::MAX_TICK_CPU_US.max(crate::ffi::thread_cpu_us().saturating_sub(cpu_start));
    if us > config::tick_budget_us().max(0) as u64 {
        metrics::OVER_BUDGET.add(1);
    }
    if us >= 1000 {
        ffi::latency_sample(b"reclaim-tick\0", (us / 1000) as i64);
    }
    us
}

/// Runs one step of policy `id`. Returns `false` when the policy no longer exists. Its run-time
/// state changes in place, through its methods, in short spells under the registry's lock; the
/// step itself, the settling of its dead-letters and its events run with no lock held.
fn visit(ctx: &Context, id: &PolicyId, now: u64, deadline: Instant) -> bool {
    if !ffi::select_db(ctx, id.db) {
        return false;
    }
    let Some(policy) = store::get(ctx, &id.stream, &id.group) else {
        return false;
    };
    crate::server::eviction::check_ttls(ctx, id, policy.dlq.as_deref());
    crate::engine::touches::confirm(ctx, id);
    let t0 = Instant::now();
    let left_ns = deadline.saturating_duration_since(t0).as_nanos() as u64;
    let enabled = config::enabled();
    let fault = store::fault(&id.stream, &policy);
    if fault.is_none() && policy.halted(enabled).is_none() {
        release_parked(ctx, id, &policy);
    }
    let planned = registry::update(id, |rt| {
        rt.plan_step(&policy, fault, enabled, now, epoch_ms(), left_ns)
    });
    let Some(Some(plan)) = planned else {
        // Halted or invalid: announced when it changes (`reclaim-invalid`).
        if let Some(Some(state)) = registry::update(id, Runtime::announce) {
            events::notify_state(ctx, &id.stream, state);
        }
        return true;
    };
    let mut out = step(ctx, id, &policy, &plan, deadline);
    let took = t0.elapsed();
    let checked = Runtime::narrow_outcome(&plan, &mut out);
    // One spell under the lock: the step counted (`Runtime::apply`), settled, and what to tell
    // after it; when the breaker opens, what to tell is read after it did.
    let opens = settle::must_open(&policy, &out);
    let wall = epoch_ms();
    let notes = settle::after_step(ctx, id, &policy, &out, |rt| {
        rt.finish_step(checked, &out, took, &policy, now, wall);
        (!opens).then(|| rt.after_step_notes())
    });
    let notes = match notes {
        Some(Some(n)) => Some(n),
        Some(None) => registry::update(id, Runtime::after_step_notes),
        None => None,
    };
    if let Some((state, waiting)) = notes {
        if let Some(state) = state {
            events::notify_state(ctx, &id.stream, state);
        }
        if let Some(stop) = waiting {
            ctx.log_notice(&guards::waiting_notice(id, &stop));
        }
    }
    if out.claimed > 0 {
        // Moved into the inbox: readers waiting on the stream take them.
        crate::ffi::blocked::signal_if_waiting(ctx, id.db, &id.stream);
    }
    true
}

/// Releases the parked entries of policy `id` that are due (before its step, so the pass that
/// starts now moves them), when its run-time state says one may be, or a pass starts.
fn release_parked(ctx: &Context, id: &PolicyId, policy: &Policy) {
    let wall = epoch_ms();
    if registry::read(id, |rt| rt.parked_check_due(wall)) != Some(true) {
        return;
    }
    let r = crate::engine::parked::release(ctx, &id.stream, &id.group, policy, wall);
    let first_bad = registry::update(id, |rt| {
        rt.parked_released(r.moved, r.next_ms, r.wrong_type)
    });
    if first_bad == Some(true) {
        ctx.log_warning(&format!(
            "reclaim: the delay key of stream {} holds a value that is not a sorted set: kept, nothing parked there is released",
            crate::model::text::printable(&id.stream)
        ));
    }
}

/// The step `plan` of policy `id` (value `policy`), stopping early at `deadline`: first the
/// consumers whose delivery counts may have risen (their own PELs, paged), then the pass proper.
fn step(
    ctx: &Context,
    id: &PolicyId,
    policy: &Policy,
    plan: &StepPlan,
    deadline: Instant,
) -> Outcome {
    let (stream, group) = (&id.stream, &id.group);
    let target = Target::new(ctx, stream, group, policy, &plan.seen, plan.dead_letters);
    let cursor = plan.cursor.as_deref();
    match (&plan.consumer, plan.kind) {
        (Some(consumer), _) => {
            sweep::step_page(&target, Some(consumer), cursor, plan.max, deadline)
        }
        (None, PassKind::Full) => sweep::step_page(&target, None, cursor, plan.max, deadline),
        (None, PassKind::Scan | PassKind::TrimOnly) => sweep::step_scan(
            &target,
            sweep::Window {
                cursor,
                width: plan.width,
                threshold_ms: plan.threshold_ms,
                trim_only: plan.kind == PassKind::TrimOnly,
            },
            plan.max,
            deadline,
        ),
    }
}
