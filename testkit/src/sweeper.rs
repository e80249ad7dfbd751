//! The sweeper's progress: `RECLAIM.STATS` fields of one policy, the server-wide `INFO reclaim`
//! counters, and waits for a number of steps, passes or skips (a progress counter, never a
//! duration).

use redis::Connection;

use crate::policies::{set_policy_opts, stats};
use crate::replies::{int_field, pairs, reclaim_info, str_field};
use crate::wait::wait_for;
use crate::words::run;

/// The fields of `RECLAIM.STATS`, in order (docs/commands.md).
pub const STATS_FIELDS: [&str; 21] = [
    "passes",
    "claimed",
    "dead-lettered",
    "deleted",
    "oom-skips",
    "errors",
    "last-pass-ms",
    "last-pass-us",
    "full-passes",
    "scans-skipped",
    "consumer-checks",
    "redelivered",
    "storms",
    "dlq-trimmed",
    "tombstones",
    "evicted-keys",
    "consumers-forgotten",
    "inbox",
    "stale-not-before",
    "cursor",
    "status",
];

/// One integer field of `RECLAIM.STATS s g` (panics when there is no policy).
pub fn stat(c: &mut Connection, s: &str, g: &str, field: &str) -> i64 {
    int_field(&stats(c, s, g), field)
}

/// One integer field of `RECLAIM.STATS s g`, `None` when the command fails (no policy).
pub fn try_stat(c: &mut Connection, s: &str, g: &str, field: &str) -> Option<i64> {
    let v: redis::Value = redis::cmd("RECLAIM.STATS").arg(s).arg(g).query(c).ok()?;
    Some(int_field(&v, field))
}

/// The `status` field of `RECLAIM.STATS s g`.
pub fn status(c: &mut Connection, s: &str, g: &str) -> String {
    str_field(&stats(c, s, g), "status")
}

/// Waits until the timer ran `n` more sweep steps than now (server-wide `reclaim_steps`).
pub fn wait_steps(c: &mut Connection, n: i64) {
    let start = reclaim_info(c, "steps");
    wait_for(20, &format!("{n} more sweep steps"), || {
        (reclaim_info(c, "steps") >= start + n).then_some(())
    });
}

/// Waits until the timer skipped `n` more ticks for `why` (`paused`, `oom`, `replica`:
/// `reclaim_ticks_skipped_<why>`).
pub fn wait_ticks_skipped(c: &mut Connection, why: &str, n: i64) {
    let field = format!("ticks_skipped_{why}");
    let start = reclaim_info(c, &field);
    wait_for(20, &format!("{n} more ticks skipped ({why})"), || {
        (reclaim_info(c, &field) >= start + n).then_some(())
    });
}

/// Waits until the policy of (s, g) completed `n` more passes than now (the timer kept sweeping).
pub fn wait_passes(c: &mut Connection, s: &str, g: &str, n: i64) {
    let start = stat(c, s, g, "passes");
    wait_for(20, &format!("{n} more passes of ({s}, {g})"), || {
        (stat(c, s, g, "passes") >= start + n).then_some(())
    });
}

/// Waits until the policy of (s, g) skipped `n` more scans than now (trim-only passes).
pub fn wait_scans_skipped(c: &mut Connection, s: &str, g: &str, n: i64) {
    let start = stat(c, s, g, "scans-skipped");
    wait_for(20, &format!("{n} more skipped scans of ({s}, {g})"), || {
        (stat(c, s, g, "scans-skipped") >= start + n).then_some(())
    });
}

/// An INTERVAL no test waits for: the timer's next pass is an hour away, so only RECLAIM.SWEEP
/// (or a policy reset) touches the PEL after the first pass.
pub const HOUR: &str = "3600000";

/// Sets a policy whose timer pass runs once (on the group as it is now) and then not for an hour,
/// and waits for that pass. Anything set up afterwards is left to RECLAIM.SWEEP, so the sweep's
/// reply is exact. `opts` (words, as for [`set_policy_opts`]) must not contain INTERVAL.
pub fn quiet_policy(c: &mut Connection, s: &str, g: &str, opts: &str) {
    let before = try_stat(c, s, g, "passes").unwrap_or(0);
    set_policy_opts(c, s, g, &format!("{opts} INTERVAL {HOUR}"));
    wait_for(10, "the policy's first (empty) pass", || {
        (stat(c, s, g, "passes") > before).then_some(())
    });
}

/// The fields of a `RECLAIM.SWEEP` reply, in order (docs/commands.md).
pub const SWEEP_FIELDS: [&str; 5] = [
    "claimed",
    "dead-lettered",
    "deleted",
    "dlq-trimmed",
    "tombstones",
];

/// `RECLAIM.SWEEP s g` -> (claimed, dead-lettered, deleted), after checking the reply's fields.
pub fn sweep(c: &mut Connection, s: &str, g: &str) -> (i64, i64, i64) {
    swept(&run(c, &["RECLAIM.SWEEP", s, g]))
}

/// `RECLAIM.SWEEP s g LIMIT n` -> (claimed, dead-lettered, deleted), after checking the reply's
/// fields.
pub fn sweep_limit(c: &mut Connection, s: &str, g: &str, n: i64) -> (i64, i64, i64) {
    swept(&run(c, &["RECLAIM.SWEEP", s, g, "LIMIT", &n.to_string()]))
}

/// (claimed, dead-lettered, deleted) of a `RECLAIM.SWEEP` reply whose fields are
/// [`SWEEP_FIELDS`].
fn swept(v: &redis::Value) -> (i64, i64, i64) {
    let keys: Vec<String> = pairs(v).into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, SWEEP_FIELDS, "{v:?}");
    (
        int_field(v, "claimed"),
        int_field(v, "dead-lettered"),
        int_field(v, "deleted"),
    )
}
