//! What the module tells `INFO`: section `reclaim` (the module's state and the counters of
//! [`crate::state::metrics::fields`]) and section `reclaim_policies` (one line per policy, from what its passes
//! learnt: [`PolicyRow`], no call into Redis).

use std::os::raw::c_int;

use redis_module::raw;

use crate::ffi;
use crate::model::metrics;
use crate::state::registry;

/// `INFO reclaim`: section `reclaim`, the module's state now (policies, tracked consumers,
/// memory), then the counters of [`crate::state::metrics::fields`]; and section `reclaim_policies`, one line
/// per policy ([`PolicyRow`]), left out of crash reports.
pub unsafe extern "C" fn on_info(ctx: *mut raw::RedisModuleInfoCtx, for_crash_report: c_int) {
    ffi::guard("INFO", || unsafe {
        let totals = registry::totals();
        let (risk, _, memory_policy) = crate::state::eviction::now();
        let state = [
            ("enabled", crate::state::config::enabled() as u64),
            ("policies", totals.policies),
            ("inbox", totals.inbox),
            ("tracked_consumers", totals.tracked_consumers),
            ("used_memory", crate::ffi::alloc::used_bytes()),
            (
                "blocked_readers",
                crate::ffi::blocked::blocked_clients() as u64,
            ),
            (
                "eviction_risk",
                (risk != crate::model::eviction::Risk::None) as u64,
            ),
        ];
        // NULL: the module's default section, `# reclaim`, fields prefixed `reclaim_`.
        raw::RedisModule_InfoAddSection.unwrap()(ctx, std::ptr::null());
        let memory_policy = std::ffi::CString::new(memory_policy).unwrap_or_default();
        for (name, v) in crate::state::metrics::fields(&state) {
            let Ok(n) = std::ffi::CString::new(name) else {
                continue;
            };
            raw::RedisModule_InfoAddFieldULongLong.unwrap()(ctx, n.as_ptr(), v);
            if name == "eviction_risk" {
                // The `maxmemory-policy` the risk was judged under (ASCII, no spaces).
                raw::RedisModule_InfoAddFieldCString.unwrap()(
                    ctx,
                    c"maxmemory_policy".as_ptr(),
                    memory_policy.as_ptr(),
                );
            }
        }
        if for_crash_report != 0 {
            return;
        }
        if raw::RedisModule_InfoAddSection.unwrap()(ctx, c"policies".as_ptr())
            != raw::REDISMODULE_OK as c_int
        {
            return; // INFO asked for another section
        }
        let mut name: Vec<u8> = Vec::with_capacity(32);
        policy_lines(|i, line| {
            name.clear();
            name.extend_from_slice(b"policy_");
            metrics::push_u64(&mut name, i as u64);
            name.push(0);
            raw::RedisModule_InfoAddFieldCString.unwrap()(
                ctx,
                name.as_ptr().cast(),
                line.as_ptr().cast(),
            );
        });
    });
}

/// Hands every policy's line (its label, then its [`PolicyRow`]), NUL-terminated, with its
/// position, to `emit`, ordered by database, stream, group. First a walk in the table's own order
/// copies each row's figures out of its runtime ([`registry::walk`]); then each line is written
/// and handed over at once, while it is in the cache (`RM_InfoAddFieldCString` only appends to
/// the reply: it calls nothing of the module, so it may run with the registry locked). With
/// 10,000 policies, waiting for memory was most of the cost: the walk asks for runtimes ahead,
/// and the labels are kept in key order ([`registry::with_sorted`]).
fn policy_lines(mut emit: impl FnMut(usize, &[u8])) {
    use crate::ffi::alloc::{prefetch, PREFETCH_AHEAD};
    let enabled = crate::state::config::enabled();
    let cluster_down = crate::ffi::cluster::is_down();
    registry::with_sorted(|all, sorted| {
        let mut rows: Vec<PolicyRow> = Vec::with_capacity(all.len());
        registry::walk(all, |id, rt| {
            rows.push(PolicyRow::of(id, rt, enabled, cluster_down))
        });
        let mut line: Vec<u8> = Vec::with_capacity(512);
        for (n, (i, label)) in sorted.iter().enumerate() {
            if let Some(ahead) = sorted
                .get(n + PREFETCH_AHEAD)
                .and_then(|(i, _)| rows.get(*i as usize))
            {
                prefetch(std::ptr::from_ref(ahead).cast());
            }
            let Some(row) = rows.get(*i as usize) else {
                continue;
            };
            line.clear();
            line.extend_from_slice(label);
            row.write(&mut line);
            line.push(0);
            emit(n, &line);
        }
    })
}

/// One policy's line in `INFO reclaim` (section `reclaim_policies`), after
/// `reclaim_policy_<n>:` and its label ([`registry::PolicyId::write_label`]), in the keyspace
/// style: `db=0,stream=...,group=...,pending=...`. Only what passes already learnt: no call into
/// Redis. The PEL figures (`pending`, `inbox`, `consumers`, `max_consumer_pending`,
/// `oldest_pending_ms`) are those of the end of the last complete pass (`last_pass_ms`); the
/// counters are since the module was loaded; `status` is [`crate::state::runtime::Runtime::status`],
/// and for a waiting policy what it waits for, the name escaped (`waiting: no group typo%2Cg`).
pub struct PolicyRow<'a> {
    summary: crate::model::outcome::Summary,
    /// claimed, dead_lettered, deleted, redelivered, errors, passes, evicted_keys.
    counts: [u64; 7],
    last_pass_ms: i64,
    status: &'static str,
    /// The policy and its runtime, for the status of a waiting policy (rare: read only then).
    waiting: Option<(&'a registry::PolicyId, &'a crate::state::runtime::Runtime)>,
}

impl<'a> PolicyRow<'a> {
    /// The row of policy `id` now (`enabled`: `reclaim.enabled`; `cluster_down`: this Redis
    /// Cluster node sees its cluster down).
    pub fn of(
        id: &'a registry::PolicyId,
        rt: &'a crate::state::runtime::Runtime,
        enabled: bool,
        cluster_down: bool,
    ) -> Self {
        use crate::model::metrics::Stat::*;
        let c = rt.counters();
        let status = rt.status(enabled, cluster_down);
        PolicyRow {
            summary: rt.summary().clone(),
            counts: [
                Claimed,
                DeadLettered,
                Deleted,
                Redelivered,
                Errors,
                Passes,
                EvictedKeys,
            ]
            .map(|s| c.get(s)),
            last_pass_ms: c.last_pass_ms,
            status,
            waiting: (status == "waiting").then_some((id, rt)),
        }
    }

    /// Appends the row to `out`, after the label (`,pending=...`; ASCII, no NUL byte), without
    /// the formatting machinery: `INFO reclaim` writes one per policy.
    pub fn write(&self, out: &mut Vec<u8>) {
        let s = &self.summary;
        let [claimed, dead_lettered, deleted, redelivered, errors, passes, evicted_keys] =
            self.counts;
        let num = |out: &mut Vec<u8>, field: &[u8], n: u64| {
            out.extend_from_slice(field);
            metrics::push_u64(out, n);
        };
        num(out, b",pending=", s.pending);
        num(out, b",inbox=", s.inbox);
        num(out, b",claimed=", claimed);
        num(out, b",dead_lettered=", dead_lettered);
        num(out, b",deleted=", deleted);
        num(out, b",oldest_pending_ms=", s.oldest_pending_ms());
        out.extend_from_slice(b",status=");
        match self.waiting {
            Some((id, rt)) => rt.write_status(out, (true, false), &id.stream, &id.group, |o, n| {
                metrics::info_escape_into(o, n)
            }),
            None => out.extend_from_slice(self.status.as_bytes()),
        }
        num(out, b",consumers=", s.consumers);
        num(out, b",max_consumer_pending=", s.max_consumer_pending);
        num(out, b",redelivered=", redelivered);
        num(out, b",errors=", errors);
        num(out, b",passes=", passes);
        num(out, b",last_pass_ms=", self.last_pass_ms.max(0) as u64);
        num(out, b",evicted_keys=", evicted_keys);
    }
}
