//! The final tally: what was produced, processed (and how often), dead-lettered, left pending or
//! lost; the demo succeeds only when nothing is pending, nothing is lost and the poison entry is in
//! the DLQ exactly once.

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
    /// (worker, IDs it acknowledged), in worker order.
    logs: Vec<(String, Vec<String>)>,
    /// How often each ID was acknowledged.
    times: BTreeMap<String, usize>,
    twice: Vec<String>,
    dlq: Vec<Order>,
    pending: i64,
    lost: Vec<String>,
    lost_pending: usize,
    poison_in_dlq: usize,
    others_in_dlq: Vec<String>,
    st: Value,
}

/// Counts what the workers' ack logs, the DLQ and the PEL hold now (the workers are stopped);
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
    let mut logs: Vec<(String, Vec<String>)> = Vec::new();
    for p in workers {
        logs.push((p.name.clone(), read_log(&p.log)));
    }
    let mut times: BTreeMap<String, usize> = BTreeMap::new();
    for (_, ids) in &logs {
        for id in ids {
            *times.entry(id.clone()).or_default() += 1;
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
    let poison_in_dlq = w
        .poison
        .as_ref()
        .map(|p| dlq_ids.iter().filter(|d| *d == p).count())
        .unwrap_or(0);
    let others_in_dlq: Vec<String> = dlq_ids
        .iter()
        .filter(|d| Some(*d) != w.poison.as_ref())
        .cloned()
        .collect();
    let st: Value = cmd("RECLAIM.STATS").arg(STREAM).arg(GROUP).query(con)?;
    Ok(Tally {
        produced,
        logs,
        times,
        twice,
        dlq,
        pending,
        lost,
        lost_pending,
        poison_in_dlq,
        others_in_dlq,
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
        recovered,
        ..
    } = w;
    println!();
    println!(
        "RECLAIM.STATS {STREAM} {GROUP}: passes={} claimed={} dead-lettered={} deleted={} errors={} status={}",
        int_field(&t.st, "passes"),
        int_field(&t.st, "claimed"),
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
            .map(|(n, ids)| format!("{n} {}", ids.len()))
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
            "poison {p}, after {} deliveries",
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
        let with_poison = poison.as_ref().is_some_and(|p| ids.contains(p));
        println!(
            "  ({VICTIM} held {h} pending when killed{}; `{CLAIMANT}` processed {} claimed by the module)",
            if with_poison { ", the poison entry among them" } else { "" },
            plural(*recovered, "entry", "entries")
        );
    }
}

/// The verdict: prints OK or what failed; true when nothing is pending, nothing lost, the poison
/// entry dead-lettered once and no worker exited on its own.
pub fn verdict(t: &Tally, w: &Watch) -> bool {
    let Tally {
        produced,
        pending,
        lost,
        poison_in_dlq,
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
    if !ok {
        problems.push("a worker exited on its own".into());
    }
    if problems.is_empty() {
        println!("OK: nothing pending, nothing lost, the poison entry dead-lettered once");
        true
    } else {
        println!("FAILED: {}", problems.join("; "));
        false
    }
}
