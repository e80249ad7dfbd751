//! The final tally: what was produced, processed (and how often), dead-lettered, left pending or
//! lost; how often the poison entry's handler ran; and the lease check over every redelivery. The
//! demo succeeds only when nothing is pending, nothing is lost, the poison entry is in the DLQ
//! exactly once after exactly MAX-DELIVERIES handler runs, and no lease was cut short.

use super::*;

pub fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

pub fn short_list(ids: &[String]) -> String {
    if ids.len() <= 6 {
        ids.join(", ")
    } else {
        format!("{}, ... ({} more)", ids[..5].join(", "), ids.len() - 5)
    }
}

/// The counts of the tally.
pub struct Tally {
    produced: Vec<String>,
    /// (worker, its log), in worker order.
    logs: Vec<(String, Vec<LogLine>)>,
    /// How often each ID was acknowledged.
    times: BTreeMap<String, usize>,
    twice: Vec<String>,
    dlq: Vec<Order>,
    pending: i64,
    lost: Vec<String>,
    lost_pending: usize,
    poison_in_dlq: usize,
    others_in_dlq: Vec<String>,
    /// The workers whose handler ran on the poison entry, by delivery count (one per run).
    poison_runs: Vec<String>,
    /// Deliveries of the poison entry in the workers' logs.
    poison_deliveries: usize,
    lease: Lease,
    st: Value,
}

/// Counts what the workers' logs, the DLQ and the PEL hold now (the workers are stopped);
/// `written` is what the producer wrote, for when it did not finish.
pub fn count(
    con: &mut Connection,
    workers: &[Proc],
    w: &Watch,
    written: &Mutex<Vec<String>>,
) -> Res<Tally> {
    // Whatever the producer wrote, also when it did not finish.
    let produced = w
        .produced
        .clone()
        .unwrap_or_else(|| written.lock().unwrap().clone());
    let logs: Vec<(String, Vec<LogLine>)> = workers
        .iter()
        .map(|p| (p.name.clone(), read_log(&p.log)))
        .collect();
    let mut times: BTreeMap<String, usize> = BTreeMap::new();
    for (_, lines) in &logs {
        for l in lines {
            if let LogLine::Ok(id) = l {
                *times.entry(id.clone()).or_default() += 1;
            }
        }
    }
    let twice: Vec<String> = times
        .iter()
        .filter(|(_, &n)| n > 1)
        .map(|(id, _)| id.to_string())
        .collect();
    let dlq = dlq_entries(con)?;
    let dlq_ids: Vec<String> = dlq
        .iter()
        .filter_map(|e| e.field("reclaim-id").map(str::to_string))
        .collect();
    let (pending, _) = pending_summary(con)?;
    let lost: Vec<String> = produced
        .iter()
        .filter(|id| !times.contains_key(id.as_str()) && !dlq_ids.contains(id))
        .cloned()
        .collect();
    let still: BTreeSet<String> = pel(con)?.into_iter().map(|(id, ..)| id).collect();
    let lost_pending = lost.iter().filter(|id| still.contains(*id)).count();
    let poison = w.poison.clone().unwrap_or_default();
    let poison_in_dlq = dlq_ids.iter().filter(|d| **d == poison).count();
    let others_in_dlq: Vec<String> = dlq_ids.iter().filter(|d| **d != poison).cloned().collect();
    let (poison_deliveries, poison_runs) = handler_runs(&logs, &poison);
    let st: Value = cmd("RECLAIM.STATS").arg(STREAM).arg(GROUP).query(con)?;
    Ok(Tally {
        produced,
        lease: lease(&logs),
        logs,
        times,
        twice,
        dlq,
        pending,
        lost,
        lost_pending,
        poison_in_dlq,
        others_in_dlq,
        poison_runs,
        poison_deliveries,
        st,
    })
}

/// Prints the tally. One `println!` per line of the output, so it is long: that is the layout
/// of the tally, kept in one place to read it as it is printed.
pub fn print(t: &Tally, w: &Watch) {
    let (pending, lost_pending) = (t.pending, t.lost_pending);
    let Watch {
        poison,
        victim_held,
        ..
    } = w;
    println!();
    println!(
        "RECLAIM.STATS {STREAM} {GROUP}: passes={} claimed={} redelivered={} inbox={} dead-lettered={} deleted={} errors={} status={}",
        int_field(&t.st, "passes"),
        int_field(&t.st, "claimed"),
        int_field(&t.st, "redelivered"),
        int_field(&t.st, "inbox"),
        int_field(&t.st, "dead-lettered"),
        int_field(&t.st, "deleted"),
        int_field(&t.st, "errors"),
        str_field(&t.st, "status")
    );
    println!("final tally");
    println!("  produced          {:>4}", t.produced.len());
    println!(
        "  processed         {:>4}   unique IDs acknowledged ({})",
        t.times.len(),
        t.logs
            .iter()
            .map(|(n, lines)| format!(
                "{n} {}",
                lines.iter().filter(|l| matches!(l, LogLine::Ok(_))).count()
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "  processed twice   {:>4}   at-least-once duplicates{}",
        t.twice.len(),
        if t.twice.is_empty() {
            String::new()
        } else {
            format!(": {}", short_list(&t.twice))
        }
    );
    let poison_desc = match (
        &poison,
        t.dlq
            .iter()
            .find(|e| e.field("reclaim-id") == poison.as_deref()),
    ) {
        (Some(p), Some(e)) => format!(
            "poison {p}, reclaim-deliveries {}",
            e.field("reclaim-deliveries").unwrap_or("?")
        ),
        (Some(p), None) => format!("poison {p} NOT in the DLQ"),
        (None, _) => "poison never written".into(),
    };
    println!(
        "  dead-lettered     {:>4}   {poison_desc}{}",
        t.dlq.len(),
        if t.others_in_dlq.is_empty() {
            String::new()
        } else {
            format!("; also: {}", short_list(&t.others_in_dlq))
        }
    );
    println!(
        "  poison handler    {:>4}   runs, one per delivery ({}; {} logged; MAX-DELIVERIES {MAX_DELIVERIES})",
        t.poison_runs.len(),
        t.poison_runs.join(", "),
        plural(t.poison_deliveries, "delivery", "deliveries"),
    );
    println!("  still pending     {pending:>4}");
    println!(
        "  lost              {:>4}{}",
        t.lost.len(),
        if t.lost.is_empty() {
            String::new()
        } else {
            format!(
                "   in no ack log and not in the DLQ ({lost_pending} of them still pending): {}",
                short_list(&t.lost)
            )
        }
    );
    if let Some((h, ids)) = &victim_held {
        println!(
            "  ({VICTIM} held {h} pending when killed; handed again to {})",
            taken_by(&t.logs, ids)
        );
    }
    let l = &t.lease;
    println!(
        "lease check: {} ({} to another worker), each at least MIN-IDLE ({MIN_IDLE_MS} ms, less {LEASE_SLACK_MS} ms of rounding) after the delivery before it: {}",
        plural(l.redeliveries, "redelivery", "redeliveries"),
        l.to_another,
        if l.cut_short.is_empty() { "yes" } else { "NO" }
    );
    if let Some((gap, id, from, to)) = &l.shortest {
        println!("  shortest gap      {gap:>4} ms   {id} ({from} -> {to})");
    }
    for c in &l.cut_short {
        println!("  lease cut short: {c}");
    }
    if l.unmeasured > 0 {
        println!(
            "  ({} without a time: the worker no longer held the entry when it looked)",
            plural(l.unmeasured, "redelivery", "redeliveries")
        );
    }
    println!(
        "  (delivery times: the server's clock, TIME minus the entry's idle time, read by each worker in one MULTI/EXEC right after each read)"
    );
}

/// Who was handed `ids` after their first delivery: `w1 x3, w3 x2`.
fn taken_by(logs: &[(String, Vec<LogLine>)], ids: &[String]) -> String {
    let mut by: BTreeMap<&str, usize> = BTreeMap::new();
    for (name, lines) in logs {
        for l in lines {
            if let LogLine::Deliver { id, count, .. } = l {
                if *count > 1 && ids.contains(id) {
                    *by.entry(name).or_default() += 1;
                }
            }
        }
    }
    if by.is_empty() {
        return "nobody".into();
    }
    by.iter()
        .map(|(n, k)| format!("{n} x{k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The verdict: prints OK or what failed; true when nothing is pending, nothing lost, the poison
/// entry dead-lettered once after MAX-DELIVERIES handler runs, no lease cut short and no worker
/// exited on its own.
pub fn verdict(t: &Tally, w: &Watch) -> bool {
    let Tally {
        produced,
        pending,
        lost,
        poison_in_dlq,
        poison_runs,
        lease,
        ..
    } = t;
    let (drained, ok) = (w.drained, w.ok);
    let mut problems = Vec::new();
    if !drained {
        problems.push("the queue did not drain in time".to_string());
    }
    if produced.len() != ORDERS {
        problems.push(format!("produced {} of {ORDERS}", produced.len()));
    }
    if *pending != 0 {
        problems.push(format!("{pending} still pending"));
    }
    if !lost.is_empty() {
        problems.push(format!("{} lost", lost.len()));
    }
    if *poison_in_dlq != 1 {
        problems.push(format!("poison in the DLQ {poison_in_dlq} times (want 1)"));
    }
    if poison_runs.len() as i64 != MAX_DELIVERIES {
        problems.push(format!(
            "the poison entry's handler ran {} times (want MAX-DELIVERIES, {MAX_DELIVERIES})",
            poison_runs.len()
        ));
    }
    let reclaim_deliveries = t
        .dlq
        .iter()
        .find(|e| e.field("reclaim-id") == w.poison.as_deref())
        .and_then(|e| e.field("reclaim-deliveries"));
    if *poison_in_dlq == 1 && reclaim_deliveries != Some(MAX_DELIVERIES.to_string().as_str()) {
        problems.push(format!(
            "the poison entry's reclaim-deliveries is {reclaim_deliveries:?} (want {MAX_DELIVERIES})"
        ));
    }
    if !lease.cut_short.is_empty() {
        problems.push(format!(
            "{} while an earlier delivery's lease ran",
            plural(
                lease.cut_short.len(),
                "redelivery came",
                "redeliveries came"
            )
        ));
    }
    if !ok {
        problems.push("a worker exited on its own".into());
    }
    if problems.is_empty() {
        println!(
            "OK: nothing pending, nothing lost, the poison entry dead-lettered once after {MAX_DELIVERIES} handler runs, no lease cut short"
        );
        true
    } else {
        println!("FAILED: {}", problems.join("; "));
        false
    }
}

/// How often `id` was handed to a worker and, in order of its delivery count, the workers whose
/// handler then ran on it (an `ok` or `fail` line after its `deliver` line in the same log).
fn handler_runs(logs: &[(String, Vec<LogLine>)], id: &str) -> (usize, Vec<String>) {
    let mut delivered = 0;
    let mut runs: Vec<(i64, String)> = Vec::new();
    for (name, lines) in logs {
        let mut count = None;
        for l in lines {
            match l {
                LogLine::Deliver {
                    id: d, count: n, ..
                } if d == id => {
                    delivered += 1;
                    count = Some(*n);
                }
                LogLine::Ok(d) | LogLine::Fail(d) if d == id => {
                    runs.push((count.take().unwrap_or(0), name.clone()));
                }
                _ => {}
            }
        }
    }
    runs.sort();
    (delivered, runs.into_iter().map(|(_, w)| w).collect())
}

/// The lease check: consecutive deliveries of one entry at least `MIN_IDLE_MS` apart (less
/// [`LEASE_SLACK_MS`]), so no entry was handed to a worker while an earlier delivery's lease ran.
/// Delivery times are the server's: each worker read `TIME` and its entries' idle times in one
/// MULTI/EXEC right after each read (see `log_deliveries`).
#[derive(Default)]
pub struct Lease {
    /// Deliveries after an entry's first.
    redeliveries: usize,
    /// Of those, to another worker than the delivery before.
    to_another: usize,
    /// The shortest gap between consecutive deliveries of one entry: (ms, id, from, to).
    shortest: Option<(i64, String, String, String)>,
    /// Consecutive deliveries closer than the lease, described.
    cut_short: Vec<String>,
    /// Redeliveries without a time (the worker no longer held the entry when it looked).
    unmeasured: usize,
}

/// One delivery in a worker's log: (delivery count, time in ms, worker).
type Delivered<'a> = (i64, Option<i64>, &'a str);

fn lease(logs: &[(String, Vec<LogLine>)]) -> Lease {
    let mut by_id: BTreeMap<&str, Vec<Delivered>> = BTreeMap::new();
    for (name, lines) in logs {
        for l in lines {
            if let LogLine::Deliver { id, count, at_ms } = l {
                by_id.entry(id).or_default().push((*count, *at_ms, name));
            }
        }
    }
    let mut l = Lease::default();
    for (id, mut ds) in by_id {
        ds.sort_by_key(|(count, at, _)| (at.unwrap_or(i64::MAX), *count));
        for pair in ds.windows(2) {
            let ((_, a, from), (_, b, to)) = (pair[0], pair[1]);
            l.redeliveries += 1;
            if from != to {
                l.to_another += 1;
            }
            let (Some(a), Some(b)) = (a, b) else {
                l.unmeasured += 1;
                continue;
            };
            let gap = b - a;
            if !matches!(&l.shortest, Some((g, ..)) if *g <= gap) {
                l.shortest = Some((gap, id.to_string(), from.to_string(), to.to_string()));
            }
            if gap < MIN_IDLE_MS - LEASE_SLACK_MS {
                l.cut_short
                    .push(format!("{id}: {from} at {a} ms, {to} at {b} ms ({gap} ms)"));
            }
        }
    }
    l
}
