//! The sweep executor: one bounded step over a policy's PEL, through `RM_Call`.
//!
//! A step reads at most `max` pending entries after the cursor (`XPENDING key group (cursor + max`,
//! the Redis 6.2+ extended form), lets [`crate::model::planner`] decide, and then, in PEL order:
//! - moves stale entries of other consumers to the CLAIMANT with `XCLAIM key group claimant
//!   min-idle id... JUSTID`: owner = claimant, idle 0, delivery count unchanged (a move is not a
//!   delivery), without copying entry bodies; XCLAIM re-checks idle >= min-idle itself and, since
//!   Redis 7.0, drops from the PEL the entries that were deleted from the stream (they are counted
//!   as `deleted`);
//! - dead-letters a batch ([`Dlq::dead_letter`]): each entry's fields read from the stream (gone ->
//!   `XACK`, counted as `deleted`), appended to the DLQ with the `reclaim-*` fields, then one
//!   `XACK` of exactly the entries appended;
//! - with `TOMBSTONES yes`, gives each entry found deleted a DLQ record (`reclaim-reason
//!   deleted`, no payload) before its `XACK` (`Dlq::bury`);
//! - after appending to the DLQ, trims it as `DLQ-MAXLEN` / `DLQ-MAXAGE` ask (`XTRIM dlq MAXLEN|MINID
//!   ~ ...`, `Dlq::trim_dlq`), and by `DLQ-MAXAGE` at the end of a pass too
//!   (`Dlq::trim_dlq_by_age`), counting what `XTRIM` removed.
//!
//! Every write goes through `RM_Call` with `!` (replicate) and `E` (errors as replies), but the
//! dead letters' appends (`RM_StreamAdd` with `RM_Replicate`, [`Dlq::dead_letter`]); the server's
//! live OOM state is checked before each dead-letter move. All writes of one timer callback or one command reach the AOF and replicas in one
//! MULTI/EXEC (Redis 7.0+, PR #9890), so a DLQ append is never separated from its XACK.
//! Time is checked between batches: a step stops early at `deadline` and resumes from its cursor.
//!
//! [`simulate`] reads what a step reads and decides as [`Target::handle`] does, writing nothing
//! (`RECLAIM.SIMULATE`).

use std::time::Instant;

use redis_module::{CallReply, CallResult, Context, RedisString};

use crate::engine::deadletter::{error_stop, Dlq, REASON_LIMIT};
use crate::engine::guards::check_stream;
use crate::engine::pending::{self, Failed, Owners, Query};
use crate::ffi::events;
use crate::ffi::streams::{Key, StreamId};
use crate::ffi::write_opts;
use crate::model::outcome::{Outcome, Stop};
use crate::model::planner::{self, Action, Batch, Pending, Rule};
use crate::model::policy::Policy;

/// What a step works on: the database selected in `ctx`, the stream and group of a policy, and
/// the policy. Every Redis call of the executor goes through it; its dead-letters through its
/// [`Dlq`].
pub struct Target<'a> {
    /// The context whose selected database holds the stream.
    pub ctx: &'a Context,
    /// Stream key.
    pub stream: &'a [u8],
    /// Consumer group.
    pub group: &'a [u8],
    /// The policy's rules.
    pub policy: &'a Policy,
    /// How long ago (ms) consumers last talked to the module, for `LIVENESS` (empty without it).
    pub seen: &'a [(Vec<u8>, u64)],
    /// Where its dead-letters go, with the allowance of the `STORM` breaker.
    pub dlq: Dlq<'a>,
}

impl<'a> Target<'a> {
    /// A step's target: `policy` of (`stream`, `group`) in the database selected in `ctx`, the
    /// sightings `seen`, and `dead_letters` allowed before the `STORM` breaker opens.
    pub fn new(
        ctx: &'a Context,
        stream: &'a [u8],
        group: &'a [u8],
        policy: &'a Policy,
        seen: &'a [(Vec<u8>, u64)],
        dead_letters: u64,
    ) -> Self {
        Target {
            ctx,
            stream,
            group,
            policy,
            seen,
            dlq: Dlq::new(ctx, stream, group, policy, dead_letters),
        }
    }
}

impl Target<'_> {
    /// Runs `q` on the target's PEL, parsed ([`pending::read`]).
    fn pending(&self, q: Query) -> Result<Vec<Pending>, Stop> {
        pending::read(self.ctx, self.stream, self.group, &q).map_err(|f| match f {
            Failed::Reply(e) => error_stop(&e),
            Failed::Unexpected(m) => Stop::Error(m.into()),
        })
    }

    /// Moves entries to the CLAIMANT: `XCLAIM key group claimant min-idle id... JUSTID` (owner
    /// = claimant, idle reset, delivery count unchanged; XCLAIM re-checks idle >= min-idle, and
    /// propagates each entry with its count, so the count is durable). Entries XCLAIM finds gone
    /// from the stream are counted as `deleted`. With `TOMBSTONES yes`, entries gone from the
    /// stream are found first (the module stream API, as [`Dlq::dead_letter`] does) and left
    /// out of the XCLAIM: they get their DLQ record with their XACK ([`Dlq::bury`]).
    fn move_to_claimant(&self, entries: &[Pending], out: &mut Outcome) -> Result<(), Stop> {
        let mut gone: Vec<&Pending> = Vec::new();
        let mut ids: Vec<&[u8]> = Vec::with_capacity(entries.len());
        if self.dlq.tombstones().is_some() {
            let sname = RedisString::create_from_slice(self.ctx.ctx, self.stream);
            for e in entries {
                if self.dlq.has_entry(&sname, &e.id) {
                    ids.push(&e.id);
                } else {
                    gone.push(e);
                }
            }
        } else {
            ids.extend(entries.iter().map(|e| e.id.as_slice()));
        }
        if !ids.is_empty() {
            let p = self.policy;
            let min_idle = p.min_idle_ms.to_string();
            let mut args: Vec<&[u8]> =
                vec![self.stream, self.group, &p.claimant, min_idle.as_bytes()];
            args.extend(ids.iter().copied());
            args.push(b"JUSTID");
            let res: CallResult = self.ctx.call_ext("XCLAIM", &write_opts(), &args[..]);
            match res {
                Ok(CallReply::Array(a)) => {
                    let n = a.len() as u64;
                    let gone = (ids.len() as u64).saturating_sub(n);
                    out.claimed += n;
                    out.deleted += gone;
                    if n > 0 {
                        events::notify(self.ctx, self.stream, events::CLAIM);
                    }
                    if gone > 0 {
                        events::notify(self.ctx, self.stream, events::PURGE);
                    }
                }
                Err(e) => return Err(error_stop(e.as_bytes())),
                Ok(_) => return Err(Stop::Error("unexpected XCLAIM reply".into())),
            }
        }
        let (buried, res) = self.dlq.bury(&gone, out);
        self.dlq.trim_dlq(buried, out);
        res
    }

    /// The ID of the stream's first entry, `None` when it is empty (the module stream API: no
    /// call).
    fn first_id(&self) -> Result<Option<(u64, u64)>, Stop> {
        Ok(self.edge_ids().0)
    }

    /// The IDs of the stream's first and last entries, `None` when it is empty (the module
    /// stream API, as `XRANGE key - + COUNT 1` and `XREVRANGE key + - COUNT 1` without a call).
    fn edge_ids(&self) -> (Option<StreamId>, Option<StreamId>) {
        let name = RedisString::create_from_slice(self.ctx.ctx, self.stream);
        let key = Key::open(self.ctx, &name, false);
        (key.edge_id(false), key.edge_id(true))
    }

    /// The ID of the stream's first entry alone ([`Target::edge_ids`]).
    fn first_only(&self) -> Option<(u64, u64)> {
        let name = RedisString::create_from_slice(self.ctx.ctx, self.stream);
        Key::open(self.ctx, &name, false).edge_id(false)
    }

    /// Removes trimmed entries from the PEL with one XACK (propagated as is), counted as
    /// `deleted`; with `TOMBSTONES yes`, each gets its DLQ record first ([`Dlq::bury`]).
    fn purge(&self, entries: &[Pending], out: &mut Outcome) -> Result<(), Stop> {
        let refs: Vec<&Pending> = entries.iter().collect();
        let (buried, res) = self.dlq.bury(&refs, out);
        self.dlq.trim_dlq(buried, out);
        res
    }

    fn run(&self, b: &Batch, out: &mut Outcome) -> Result<(), Stop> {
        match b {
            Batch::Skip(..) => Ok(()),
            Batch::Purge(entries) => self.purge(entries, out),
            Batch::Move(entries) => self.move_to_claimant(entries, out),
            Batch::DeadLetter(entries) => self.dlq.dead_letter(entries, out, REASON_LIMIT),
        }
    }

    /// Runs `batches` in order, advancing `out.cursor` past each one done. Checks `deadline`
    /// before every batch but the first, and does not start one that would likely end past it
    /// (as long as the batch before took). A DLQ of the wrong type or a lack of memory skips the
    /// dead-letter moves (noted in `out.problem`) and goes on; any other failure ends the step
    /// (`out.stop`). Returns whether every batch ran.
    fn run_batches(&self, batches: &[Batch], deadline: Option<Instant>, out: &mut Outcome) -> bool {
        let mut last = std::time::Duration::ZERO;
        for (i, b) in batches.iter().enumerate() {
            // Not a batch that would likely end past the deadline (predicted from the one before).
            let t0 = Instant::now();
            if i > 0 && deadline.is_some_and(|d| t0 + last >= d) {
                out.stop = Some(Stop::Deadline);
                return false;
            }
            match self.run(b, out) {
                Ok(()) => {}
                Err(s) if skips_dead_letters(&s) => out.problem = Some(s),
                Err(s) => {
                    out.stop = Some(s);
                    return false;
                }
            }
            out.examined += b.len();
            out.cursor = Some(planner::last_id(b).to_vec());
            if !matches!(b, Batch::Skip(..)) {
                last = t0.elapsed();
            }
        }
        true
    }

    /// Plans `page` and runs its batches; `first` is the stream's first entry ID.
    fn handle(
        &self,
        page: &[Pending],
        first: Option<(u64, u64)>,
        deadline: Option<Instant>,
        out: &mut Outcome,
    ) -> bool {
        let owners = self.owners_of(page);
        let quiet = |c: &[u8]| owners.quiet(c);
        out.fresh.observe(page, self.policy, &quiet);
        let batches = planner::plan(page, self.policy, BATCH, first, &quiet);
        let all = self.run_batches(&batches, deadline, out);
        let done = handled(page, all, out.cursor.as_deref());
        let buckets = planner::bucket_count(self.policy);
        out.tally
            .observe(&page[..done], buckets, crate::model::clock::epoch_ms());
        all
    }

    /// The owners' liveness for `page` ([`pending::owners`]).
    fn owners_of(&self, page: &[Pending]) -> Owners {
        pending::owners(
            self.ctx,
            self.stream,
            self.group,
            self.policy,
            self.seen,
            page,
        )
    }
}

/// The rows a step handles of the `rows` it read (it asks for one more than `max`), and whether
/// more follow them (the pass, or the window, is not over).
fn split_page(rows: &[Pending], max: i64) -> (&[Pending], bool) {
    let n = rows.len().min(usize::try_from(max).unwrap_or(0));
    (&rows[..n], rows.len() as i64 > max)
}

/// How many entries of `page` a step handled: all of them when every batch ran (`all`), else
/// those up to the cursor it reached (the next step reads the rest again).
fn handled(page: &[Pending], all: bool, cursor: Option<&[u8]>) -> usize {
    if all {
        return page.len();
    }
    cursor.map_or(0, |c| {
        page.iter().position(|e| e.id == c).map_or(0, |i| i + 1)
    })
}

/// Whether a failed batch only skips the dead-letter moves (a DLQ of the wrong type, no memory,
/// the `STORM` breaker: noted as the step's problem, the step goes on), rather than ending the
/// step.
fn skips_dead_letters(s: &Stop) -> bool {
    matches!(s, Stop::WrongTypeDlq | Stop::Oom | Stop::Storm)
}

/// Whether the PEL may hold entries trimmed from the stream: its lowest pending ID
/// (`lowest`, `None`: an empty PEL) below the stream's first entry (`first`, `None`: an empty
/// stream, which holds none of them).
fn holds_trimmed(lowest: Option<(u64, u64)>, first: Option<(u64, u64)>) -> bool {
    match (lowest, first) {
        (None, _) => false,
        (Some(low), Some(first)) => low < first,
        (Some(_), None) => true,
    }
}

/// Pending entries handled per XCLAIM, XACK or dead-letter batch: bounds one call's time.
pub const BATCH: usize = 32;

/// Runs `body` on a fresh outcome (cursor and width as given), turning an early `Err` (the stream
/// is gone, a reply could not be read) into the outcome's `stop`; when it ended a pass, trims
/// the DLQ by age ([`Dlq::trim_dlq_by_age`]).
fn stepping(
    t: &Target,
    cursor: Option<&[u8]>,
    width: u128,
    body: impl FnOnce(&mut Outcome) -> Result<(), Stop>,
) -> Outcome {
    let mut out = Outcome {
        cursor: cursor.map(|c| c.to_vec()),
        width,
        ..Outcome::default()
    };
    if let Err(s) = body(&mut out) {
        out.stop = Some(s);
    }
    if out.pass_done {
        t.dlq.trim_dlq_by_age(&mut out);
    }
    out
}

/// Runs one step of a full pass ([`planner::PassKind::Full`]), or of a consumer check when
/// `consumer` is given, on `t`: reads at most `max` pending entries after `cursor` (of `consumer`
/// only, when given) and handles them, stopping early at `deadline` (checked between batches; at
/// least one batch always runs). Never panics on unexpected replies: they end the step with
/// [`Stop::Error`].
pub fn step_page(
    t: &Target,
    consumer: Option<&[u8]>,
    cursor: Option<&[u8]>,
    max: i64,
    deadline: impl Into<Option<Instant>>,
) -> Outcome {
    let deadline = deadline.into();
    stepping(t, cursor, 0, |out| {
        if let Some(s) = check_stream(t.ctx, t.stream) {
            return Err(s);
        }
        let start: Vec<u8> = match cursor {
            None => b"-".to_vec(),
            Some(c) => [b"(", c].concat(),
        };
        // One entry more than the step handles: whether it comes back tells if the pass is over.
        let page = t.pending(Query {
            idle: None,
            start: &start,
            end: b"+",
            count: max.saturating_add(1),
            consumer,
        })?;
        let first = t.first_id()?;
        let (page, has_more) = split_page(&page, max);
        if t.handle(page, first, deadline, out) && !has_more {
            out.pass_done = true;
            out.cursor = None;
        }
        Ok(())
    })
}

/// One pending entry as [`simulate`] found it, and the rule that decides it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// The entry as `XPENDING` reports it.
    pub entry: Pending,
    /// The rule that decides it ([`planner::decide`], or [`Rule::Deleted`]); its action is
    /// `rule.action()`.
    pub rule: Rule,
}

/// What [`simulate`] found: the entries examined, in PEL order, and whether the PEL has more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Simulation {
    /// The first `limit` pending entries, each with its rule.
    pub entries: Vec<Planned>,
    /// The PEL has entries after the last one examined.
    pub more: bool,
}

/// What the steps of [`step_page`] would do now to the first `limit` pending entries of `t`
/// (`RECLAIM.SWEEP ... LIMIT limit`), entry by entry, without writing anything: the same reads
/// (`XPENDING key group - + <limit+1>`, the stream's first entry, the owners' liveness with
/// `LIVENESS`), the same decision ([`planner::decide`], which [`planner::plan`] acts on), and
/// for each entry to be moved or dead-lettered the same tests, in the same order, as
/// [`Dlq::dead_letter`] and `XCLAIM`: for a dead-letter, the `STORM` allowance first
/// (`t.dlq.dead_letters` used up: [`Rule::Storm`], the entry stays pending), then whether its stream
/// entry still exists (gone: [`Rule::Deleted`], removed from the PEL only); each planned
/// dead-letter takes one of `t.dlq.dead_letters`, in PEL order. Reads only, through `RM_Call`
/// without `!` and the module stream API; touches no run-time state.
pub fn simulate(t: &Target, limit: i64) -> Result<Simulation, Stop> {
    if let Some(s) = check_stream(t.ctx, t.stream) {
        return Err(s);
    }
    let mut page = t.pending(Query {
        idle: None,
        start: b"-",
        end: b"+",
        count: limit.saturating_add(1),
        consumer: None,
    })?;
    let first = t.first_id()?;
    let more = page.len() as i64 > limit;
    page.truncate(limit.max(0) as usize);
    let owners = t.owners_of(&page);
    let sname = RedisString::create_from_slice(t.ctx.ctx, t.stream);
    let entries = page
        .into_iter()
        .map(|entry| {
            let mut rule = planner::decide(&entry, t.policy, first, owners.quiet(&entry.consumer));
            let action = rule.action();
            if action == Action::DeadLetter && t.dlq.dead_letters.get() == 0 {
                rule = Rule::Storm;
            } else if matches!(action, Action::Move | Action::DeadLetter)
                && !t.dlq.has_entry(&sname, &entry.id)
            {
                rule = Rule::Deleted;
            } else if action == Action::DeadLetter {
                t.dlq
                    .dead_letters
                    .set(t.dlq.dead_letters.get().saturating_sub(1));
            }
            Planned { entry, rule }
        })
        .collect();
    Ok(Simulation { entries, more })
}

/// Where a scan step starts, and what it learnt so far.
pub struct Window<'a> {
    /// Last ID handled (`None`: the head of the PEL).
    pub cursor: Option<&'a [u8]>,
    /// The ID-window width learned so far (0 = start small).
    pub width: u128,
    /// The `IDLE` threshold of the scan, ms (at most `MIN-IDLE`).
    pub threshold_ms: i64,
    /// Only purge trimmed entries ([`planner::PassKind::TrimOnly`]).
    pub trim_only: bool,
}

/// Runs one step of a scan pass ([`planner::PassKind::Scan`]), or of a trim-only pass, on `t`,
/// where fresh entries need not be copied out of the server:
/// 1. trimmed entries (below the stream's first entry) are read with `XPENDING key group - (first
///    count` and purged, at most `max` per step; a trim-only pass ends when none is left;
/// 2. otherwise one ID window after the cursor is scanned with `XPENDING key group IDLE threshold
///    start end count` (Redis 6.2+), which returns only entries idle for at least the threshold
///    at a fraction of the cost of paging; stale ones are claimed or dead-lettered, the others
///    only noted (`fresh`). A window's width adapts to the PEL's density so that one scan takes
///    about [`planner::WINDOW_TARGET_US`]; the last window ends at `+`.
///
/// Same guarantees as [`step_page`].
pub fn step_scan(t: &Target, w: Window, max: i64, deadline: impl Into<Option<Instant>>) -> Outcome {
    let deadline = deadline.into();
    stepping(t, w.cursor, w.width, |out| {
        if let Some(s) = check_stream(t.ctx, t.stream) {
            return Err(s);
        }
        let (first, last) = if w.trim_only {
            (t.first_only(), None)
        } else {
            t.edge_ids()
        };
        if w.trim_only && nothing_trimmed(t, first, out) {
            // The one call of a pass over a PEL where nothing can be stale yet.
            out.pass_done = true;
            out.cursor = None;
            return Ok(());
        }
        if purge_trimmed(t, first, max, out)? {
            return Ok(());
        }
        if w.trim_only {
            out.pass_done = true;
            out.cursor = None;
            return Ok(());
        }
        scan_window(t, &w, first, last, max, deadline, out)
    })
}

/// Whether the PEL holds no entry trimmed from the stream, by its summary (`XPENDING key group`,
/// O(consumers): the lowest pending ID against the stream's first entry `first`), kept in `out`
/// for the end of the pass. `false` when it holds some, or the summary could not be read (the
/// paged read that follows reports why).
fn nothing_trimmed(t: &Target, first: Option<(u64, u64)>, out: &mut Outcome) -> bool {
    let claimant = &t.policy.claimant;
    let Some(s) = pending::summary(t.ctx, t.stream, t.group, claimant, |_, _| {}) else {
        return false;
    };
    let none = !holds_trimmed(s.lowest_id, first);
    if none {
        out.summary = Some(s);
    }
    none
}

/// Step 1 of [`step_scan`]: purges up to `max` entries trimmed from the stream (below `first`,
/// whatever their idle time). Whether there were any.
fn purge_trimmed(
    t: &Target,
    first: Option<(u64, u64)>,
    max: i64,
    out: &mut Outcome,
) -> Result<bool, Stop> {
    let below: Vec<u8> = match first {
        Some(f) => format!("({}-{}", f.0, f.1).into_bytes(),
        None => b"+".to_vec(),
    };
    let trimmed = t.pending(Query {
        idle: None,
        start: b"-",
        end: &below,
        count: max,
        consumer: None,
    })?;
    if trimmed.is_empty() {
        return Ok(false);
    }
    match t.purge(&trimmed, out) {
        Ok(()) => {}
        // A tombstone could not be appended: the entries stay pending (the problem is noted) and
        // the step goes on with its window, as a dead-letter move that cannot be made.
        Err(s @ (Stop::WrongTypeDlq | Stop::Oom)) => {
            out.problem = Some(s);
            return Ok(false);
        }
        Err(s) => return Err(s),
    }
    out.examined += trimmed.len() as u64;
    Ok(true)
}

/// Step 2 of [`step_scan`]: one ID window after the cursor.
fn scan_window(
    t: &Target,
    w: &Window,
    first: Option<(u64, u64)>,
    last: Option<(u64, u64)>,
    max: i64,
    deadline: Option<Instant>,
    out: &mut Outcome,
) -> Result<(), Stop> {
    // The window starts at the next pending entry after the cursor (an O(log n) lookup), so empty
    // stretches of ID space cost nothing and every window holds at least one entry: a pass always
    // progresses, however slow the server and however narrow the window.
    let after: Vec<u8> = match w.cursor {
        Some(c) => [b"(", c].concat(),
        None => b"-".to_vec(),
    };
    let next = t.pending(Query {
        idle: None,
        start: &after,
        end: b"+",
        count: 1,
        consumer: None,
    })?;
    let Some(next) = next.into_iter().next() else {
        out.pass_done = true;
        out.cursor = None;
        return Ok(());
    };
    let start_v = planner::parse_id(&next.id).map(planner::id_value);
    let end_v = match (start_v, last) {
        (Some(sv), Some(l)) => {
            planner::window_end(sv, w.width.max(planner::FIRST_WINDOW), planner::id_value(l))
        }
        _ => None,
    };
    let end: Vec<u8> = end_v
        .map(|e| planner::id_text(e).into_bytes())
        .unwrap_or_else(|| b"+".to_vec());
    let t0 = Instant::now();
    let page = t.pending(Query {
        idle: Some(w.threshold_ms.clamp(1, t.policy.min_idle_ms.max(1))),
        start: &next.id,
        end: &end,
        count: max.saturating_add(1),
        consumer: None,
    })?;
    let (page, has_more) = split_page(&page, max);
    if !has_more {
        out.width = planner::next_width(w.width, t0.elapsed().as_micros() as u64);
    }
    if t.handle(page, first, deadline, out) && !has_more {
        match end_v {
            Some(e) => out.cursor = Some(planner::id_text(e).into_bytes()),
            None => {
                out.pass_done = true;
                out.cursor = None;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(ids: &[&str]) -> Vec<Pending> {
        ids.iter()
            .map(|id| Pending {
                id: id.as_bytes().to_vec(),
                consumer: b"c".to_vec(),
                idle_ms: 0,
                deliveries: 1,
            })
            .collect()
    }

    fn ids(page: &[Pending]) -> Vec<&[u8]> {
        page.iter().map(|e| e.id.as_slice()).collect()
    }

    #[test]
    fn a_page_is_max_rows_and_one_more_says_the_pass_goes_on() {
        let r = rows(&["1-0", "2-0", "3-0"]);
        let (page, more) = split_page(&r, 2);
        assert_eq!((ids(page), more), (vec![&b"1-0"[..], b"2-0"], true));
        let (page, more) = split_page(&r, 3);
        assert_eq!((page.len(), more), (3, false));
        let (page, more) = split_page(&r[..0], 5);
        assert_eq!((page.len(), more), (0, false));
        // A count of 0 or below handles nothing; any row means more.
        assert_eq!(split_page(&r, 0).0.len(), 0);
        assert!(split_page(&r, -1).1);
    }

    #[test]
    fn a_step_stopped_early_handled_the_rows_up_to_its_cursor() {
        let r = rows(&["1-0", "2-0", "3-0"]);
        assert_eq!(handled(&r, true, None), 3);
        assert_eq!(handled(&r, false, Some(b"2-0")), 2);
        // No batch done (cursor before the page) or a cursor not on the page: nothing.
        assert_eq!(handled(&r, false, None), 0);
        assert_eq!(handled(&r, false, Some(b"0-5")), 0);
    }

    #[test]
    fn dead_letter_failures_skip_and_others_end_the_step() {
        for s in [Stop::WrongTypeDlq, Stop::Oom, Stop::Storm] {
            assert!(skips_dead_letters(&s), "{s:?}");
        }
        for s in [Stop::NoGroup, Stop::Deadline, Stop::Error("x".into())] {
            assert!(!skips_dead_letters(&s), "{s:?}");
        }
    }

    #[test]
    fn trimmed_entries_are_those_below_the_streams_first() {
        assert!(!holds_trimmed(None, Some((5, 0))));
        assert!(!holds_trimmed(None, None));
        assert!(!holds_trimmed(Some((5, 0)), Some((5, 0))));
        assert!(!holds_trimmed(Some((6, 0)), Some((5, 9))));
        assert!(holds_trimmed(Some((5, 0)), Some((5, 1))));
        assert!(holds_trimmed(Some((1, 0)), None));
    }
}
