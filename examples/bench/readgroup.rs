//! Section 5, `RECLAIM.READGROUP`: the server time per new entry against `XREADGROUP ... >` on the
//! same stream, and the server time per redelivery against a worker's `XAUTOCLAIM` loop on the
//! same PEL; its targets and paragraph in the report.

use super::*;

// ---------------------------------------------------------------------------------------------
// Measurement

/// Server µs per entry of one drain, for each method, in the order run.
pub struct ReadRow {
    pub count: usize,
    /// (XREADGROUP, RECLAIM.READGROUP) µs of server CPU per new entry, one pair per rep.
    pub new: Vec<(f64, f64)>,
}

pub struct ReadResult {
    pub n: usize,
    pub rows: Vec<ReadRow>,
    /// (XAUTOCLAIM loop, RECLAIM.READGROUP) µs of server CPU per redelivered entry, and the
    /// entries the sweep moved into the inbox meanwhile, per rep.
    pub redeliver: Vec<(f64, f64, i64)>,
}

/// How many calls of `COUNT count` go in one pipeline.
const PIPE: usize = 50;

/// Drains group `group` of stream `s` with `cmd_name GROUP group c COUNT count STREAMS s >` in
/// pipelines; returns the server CPU seconds spent and the entries read.
fn drain(con: &mut Connection, cmd_name: &str, group: &str, count: usize) -> Res<(f64, usize)> {
    let c0 = server_cpu(con)?;
    let mut read = 0;
    loop {
        let mut p = redis::pipe();
        for _ in 0..PIPE {
            p.cmd(cmd_name)
                .arg(&["GROUP", group, "c", "COUNT"])
                .arg(count)
                .arg(&["STREAMS", "s", ">"]);
        }
        let replies: Vec<Value> = p.query(con)?;
        let got: usize = replies.iter().map(entries_in).sum();
        read += got;
        if got < PIPE * count {
            return Ok((server_cpu(con)? - c0, read));
        }
    }
}

/// Entries in an `XREADGROUP`-shaped reply of one stream.
fn entries_in(v: &Value) -> usize {
    match v {
        Value::Array(streams) => streams
            .iter()
            .map(|s| items(s).get(1).map(|e| items(e).len()).unwrap_or(0))
            .sum(),
        _ => 0,
    }
}

/// New entries: `n` entries read once by a plain group and once by a group with a policy, per
/// `COUNT`, `reps` times, interleaved.
fn new_entries(con: &mut Connection, n: usize, reps: usize) -> Res<Vec<ReadRow>> {
    let mut rows = Vec::new();
    for count in [10, 100] {
        let mut row = ReadRow {
            count,
            new: Vec::new(),
        };
        for rep in 0..reps {
            let (x, r) = (format!("x{count}-{rep}"), format!("r{count}-{rep}"));
            for g in [&x, &r] {
                let _: () = cmd("XGROUP").arg(&["CREATE", "s", g, "0"]).query(con)?;
            }
            let _: () = cmd("RECLAIM.POLICY")
                .arg(&[
                    "SET",
                    "s",
                    &r,
                    "MIN-IDLE",
                    "3600000",
                    "INTERVAL",
                    LONG_INTERVAL,
                ])
                .query(con)?;
            let (cx, nx) = drain(con, "XREADGROUP", &x, count)?;
            let (cr, nr) = drain(con, "RECLAIM.READGROUP", &r, count)?;
            if nx != n || nr != n {
                return Err(format!("read {nx} and {nr} of {n} entries").into());
            }
            row.new.push((cx * 1e6 / n as f64, cr * 1e6 / n as f64));
            for g in [&x, &r] {
                let _: () = cmd("XGROUP").arg(&["DESTROY", "s", g]).query(con)?;
            }
        }
        eprintln!("   COUNT {count}: {:?}", row.new);
        rows.push(row);
    }
    Ok(rows)
}

/// MIN-IDLE of the redelivery measurement (ms): longer than a drain takes, so that no entry's
/// new lease runs out during it.
const REDELIVER_MIN_IDLE: u64 = 2000;

/// Redeliveries, as a pool meets them: a policy (default `INTERVAL`) is in place when a consumer
/// takes `m` entries and dies; once they are stale, a worker's `XAUTOCLAIM ... COUNT 100` loop
/// takes all of one group's, and `RECLAIM.READGROUP COUNT 100` all of another's, under the
/// policy. Returns (XAUTOCLAIM, RECLAIM.READGROUP) µs per redelivery, and the entries the sweep
/// moved into the inbox meanwhile, per rep.
fn redeliveries(con: &mut Connection, m: usize, reps: usize) -> Res<Vec<(f64, f64, i64)>> {
    let mut out = Vec::new();
    for rep in 0..reps {
        let (a, b) = (format!("a{rep}"), format!("b{rep}"));
        let _: () = cmd("RECLAIM.POLICY")
            .arg(&["SET", "s", &b, "MIN-IDLE"])
            .arg(REDELIVER_MIN_IDLE)
            .query(con)?;
        build_pel(con, "s", &a)?;
        build_pel(con, "s", &b)?;
        thread::sleep(Duration::from_millis(REDELIVER_MIN_IDLE + 100));
        let c0 = server_cpu(con)?;
        let mut cursor = "0-0".to_string();
        let mut claimed = 0;
        loop {
            let v: Value = cmd("XAUTOCLAIM")
                .arg(&["s", &a, WORKER])
                .arg(REDELIVER_MIN_IDLE)
                .arg(&cursor)
                .arg(&["COUNT", "100"])
                .query(con)?;
            let parts = items(&v);
            cursor = parts.first().and_then(text).unwrap_or_default();
            claimed += parts.get(1).map(|e| items(e).len()).unwrap_or(0);
            if cursor == "0-0" {
                break;
            }
        }
        let c1 = server_cpu(con)?;
        // Until every entry was handed over once; an early one whose new lease ran out meanwhile
        // may come again, and counts as one more redelivery.
        let (mut handed, mut seen) = (0, std::collections::HashSet::new());
        let t = Instant::now();
        while seen.len() < m && t.elapsed() < TIMEOUT {
            let v: Value = cmd("RECLAIM.READGROUP")
                .arg(&["GROUP", &b, WORKER, "COUNT", "100", "STREAMS", "s", ">"])
                .query(con)?;
            for s in items(&v) {
                for e in items(s)
                    .get(1)
                    .map(|e| items(e).to_vec())
                    .unwrap_or_default()
                {
                    handed += 1;
                    seen.insert(items(&e).first().and_then(text).unwrap_or_default());
                }
            }
        }
        let c2 = server_cpu(con)?;
        if claimed != m || seen.len() != m {
            let n = seen.len();
            return Err(format!("XAUTOCLAIM took {claimed}, RECLAIM.READGROUP {n} of {m}").into());
        }
        let moved = stats_fields(con, "s", &b).map_or(0, |f| field_int(&f, "claimed"));
        out.push((
            (c1 - c0) * 1e6 / m as f64,
            (c2 - c1) * 1e6 / handed as f64,
            moved,
        ));
        let _: i64 = cmd("RECLAIM.POLICY").arg(&["DEL", "s", &b]).query(con)?;
        for g in [&a, &b] {
            let _: () = cmd("XGROUP").arg(&["DESTROY", "s", g]).query(con)?;
        }
    }
    eprintln!("   redeliveries: {out:?}");
    Ok(out)
}

/// Section 5: `n` new entries, and `n` redeliveries.
pub fn readgroup_section(n: usize, reps: usize) -> Res<ReadResult> {
    eprintln!("== RECLAIM.READGROUP: {n} new entries, {n} redeliveries");
    let srv = start_server()?;
    let mut con = bench_conn(&srv)?;
    build_stream(&mut con, "s", n)?;
    let rows = new_entries(&mut con, n, reps)?;
    let redeliver = redeliveries(&mut con, n, reps)?;
    Ok(ReadResult { n, rows, redeliver })
}

// ---------------------------------------------------------------------------------------------
// Report

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    if v.is_empty() {
        0.0
    } else {
        v[v.len() / 2]
    }
}

/// The (plain, module) pairs of the redelivery rows.
fn pairs(rows: &[(f64, f64, i64)]) -> Vec<(f64, f64)> {
    rows.iter().map(|r| (r.0, r.1)).collect()
}

/// Median ratio (module / plain) of the pairs.
fn ratio(pairs: &[(f64, f64)]) -> f64 {
    median(pairs.iter().map(|(p, r)| r / p).collect())
}

/// The section's rows in the targets table.
pub fn targets(o: &mut String, r: &ReadResult, missed: &mut Vec<&'static str>) {
    if let Some(row) = r.rows.iter().max_by_key(|x| x.count) {
        let q = ratio(&row.new);
        let _ = writeln!(
            o,
            "| `RECLAIM.READGROUP` server time per new entry vs `XREADGROUP` (COUNT {}): at most 1.2x | {q:.2}x (median of {}) | {} |",
            row.count,
            row.new.len(),
            if q <= 1.2 { "met" } else { "missed" }
        );
        if q > 1.2 {
            missed.push("readgroup-new");
        }
    }
    let speed = 1.0 / ratio(&pairs(&r.redeliver));
    let _ = writeln!(
        o,
        "| `RECLAIM.READGROUP` redeliveries per second of server time vs a worker's `XAUTOCLAIM` loop: at least 1x | {speed:.2}x | {} |",
        if speed >= 1.0 { "met" } else { "missed" }
    );
    if speed < 1.0 {
        missed.push("readgroup-redeliver");
    }
}

/// Section 5 of the report.
pub fn report(o: &mut String, r: &ReadResult) {
    let _ = writeln!(
        o,
        "## 5. RECLAIM.READGROUP against XREADGROUP and XAUTOCLAIM\n"
    );
    let _ = writeln!(
        o,
        "A stream of {} entries. **New entries:** for each `COUNT`, one group reads it all with \
         `XREADGROUP GROUP g c COUNT n STREAMS s >` and another, with a policy that finds \
         nothing due (`MIN-IDLE 3600000`), with `RECLAIM.READGROUP`, in pipelines of {PIPE} \
         calls, one right after the other; the server's CPU time (`INFO cpu`) per entry read. \
         **Redeliveries:** as a pool meets them: a policy (`MIN-IDLE {REDELIVER_MIN_IDLE}`, default \
         `INTERVAL`) is in place when a consumer takes {} entries and dies; once they are stale, \
         a worker's `XAUTOCLAIM s g worker {REDELIVER_MIN_IDLE} <cursor> COUNT 100` loop takes all \
         of one group's and `RECLAIM.READGROUP ... COUNT 100` all of another's; the server's CPU \
         time per entry handed over (the sweep's work in that time included). Each pair is one rep; the ratio is the median.\n",
        thousands(r.n as f64),
        thousands(r.n as f64)
    );
    let _ = writeln!(
        o,
        "| what | XREADGROUP / XAUTOCLAIM µs per entry | RECLAIM.READGROUP µs per entry | ratio (median) |\n|---|---|---|---:|"
    );
    let cells = |pairs: &[(f64, f64)], i: usize| -> String {
        pairs
            .iter()
            .map(|p| format!("{:.2}", if i == 0 { p.0 } else { p.1 }))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for row in &r.rows {
        let _ = writeln!(
            o,
            "| new entries, COUNT {} | {} | {} | {:.2}x |",
            row.count,
            cells(&row.new, 0),
            cells(&row.new, 1),
            ratio(&row.new)
        );
    }
    let red = pairs(&r.redeliver);
    let moved: Vec<String> = r.redeliver.iter().map(|x| x.2.to_string()).collect();
    let _ = writeln!(
        o,
        "| redeliveries, COUNT 100 | {} | {} | {:.2}x |\n",
        cells(&red, 0),
        cells(&red, 1),
        ratio(&red)
    );
    let _ = writeln!(
        o,
        "Entries the sweep moved into the inbox during the redelivery runs (the rest were taken \
         straight from the dead consumer): {}.\n",
        moved.join(", ")
    );
    let _ = writeln!(
        o,
        "With nothing due, a one-stream `RECLAIM.READGROUP` costs its policy lookup, one \
         `XPENDING` of the claimant's own PEL (O(log N)), and an `XREADGROUP` through `RM_Call` \
         whose reply is forwarded unparsed; it pages no PEL. A redelivery is one `XCLAIM` per \
         batch that returns the entries with their fields, where `XAUTOCLAIM` also scans.\n"
    );
}
