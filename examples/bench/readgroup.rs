//! Section 5, `RECLAIM.READGROUP`: its server time per call against `XREADGROUP ... >` on the same
//! stream by PEL size and `COUNT`, its redeliveries against a worker's `XAUTOCLAIM` loop, and the
//! longest call of a worker draining a backlog with `BLOCK`; its targets and paragraph in the
//! report, and `target/bench/readgroup.csv` for the plot.

use super::*;

// ---------------------------------------------------------------------------------------------
// Measurement

/// One PEL size and `COUNT`: (XREADGROUP, RECLAIM.READGROUP) server µs per call, one pair per rep.
pub struct CallRow {
    pub pel: usize,
    pub count: usize,
    pub pairs: Vec<(f64, f64)>,
}

/// Redeliveries of a backlog of `m`: (XAUTOCLAIM loop, RECLAIM.READGROUP) server µs per entry,
/// and the entries the sweep moved into the inbox meanwhile, per rep.
pub struct RedeliverRow {
    pub m: usize,
    pub min_idle: u64,
    pub runs: Vec<(f64, f64, i64)>,
}

/// A worker draining `n` stale entries with `COUNT 100 BLOCK 5000`.
pub struct Stall {
    pub n: usize,
    pub calls: usize,
    /// Calls that returned nil (none should: an entry was due at every call).
    pub empty: usize,
    pub longest_ms: f64,
    pub total_ms: f64,
}

pub struct ReadResult {
    pub calls: Vec<CallRow>,
    pub redeliver: Vec<RedeliverRow>,
    pub stall: Option<Stall>,
}

/// Calls per measured window, by `COUNT`.
fn calls_for(count: usize) -> usize {
    match count {
        1 => 2000,
        10 => 1000,
        _ => 300,
    }
}

/// Calls per pipeline.
const PIPE: usize = 100;
/// The `COUNT`s of the per-call comparison.
pub const COUNTS: [usize; 3] = [1, 10, 100];
/// MIN-IDLE of the policy of the per-call comparison: nothing pending turns due while it runs.
const HELD_MIN_IDLE: &str = "600000";

/// `calls` calls of `name GROUP group reader COUNT count STREAMS s >` in pipelines after
/// `CONFIG RESETSTAT`: the server's µs per call (`INFO commandstats` of `stat`) and the IDs read.
fn window(
    con: &mut Connection,
    name: &str,
    stat: &str,
    group: &str,
    count: usize,
    calls: usize,
) -> Res<(f64, Vec<String>)> {
    let mut ids = Vec::with_capacity(calls * count);
    let us = throughput::server_time(con, stat, |con| {
        let mut left = calls;
        while left > 0 {
            let k = left.min(PIPE);
            let mut p = redis::pipe();
            for _ in 0..k {
                p.cmd(name)
                    .arg(&["GROUP", group, "reader", "COUNT"])
                    .arg(count)
                    .arg(&["STREAMS", "s", ">"]);
            }
            let replies: Vec<Value> = p.query(con)?;
            for v in &replies {
                ids.extend(entry_ids(v));
            }
            left -= k;
        }
        Ok(())
    })?;
    Ok((us as f64 / calls as f64, ids))
}

/// The IDs in an `XREADGROUP`-shaped reply (RESP2) of one stream.
fn entry_ids(v: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for s in items(v) {
        if let Some(entries) = items(s).get(1) {
            for e in items(entries) {
                if let Some(id) = items(e).first().and_then(text) {
                    out.push(id);
                }
            }
        }
    }
    out
}

/// Acknowledges `ids` in `group` (so the PEL keeps its size).
fn ack(con: &mut Connection, group: &str, ids: &[String]) -> Res<()> {
    for chunk in ids.chunks(1000) {
        let _: i64 = cmd("XACK").arg("s").arg(group).arg(chunk).query(con)?;
    }
    Ok(())
}

/// Per call, at PEL size `pel`: two groups of stream `s` with the same `pel` entries pending at a
/// consumer that holds them (the policy of `gr`, `MIN-IDLE 600000`, finds nothing due, and its
/// first pass has run); for each `COUNT`, `reps` rounds, each appending the entries of one window
/// and reading them with `XREADGROUP` (group `gx`) and with `RECLAIM.READGROUP` (group `gr`), in
/// alternating order; what each read is acknowledged.
fn per_call(pel: usize, reps: usize) -> Res<Vec<CallRow>> {
    eprintln!("   per call, PEL {pel}");
    let srv = start_server()?;
    let mut con = bench_conn(&srv)?;
    if pel > 0 {
        build_stream(&mut con, "s", pel)?;
        for g in ["gx", "gr"] {
            build_pel(&mut con, "s", g)?;
        }
    } else {
        build_stream(&mut con, "s", 1)?;
        for g in ["gx", "gr"] {
            let _: () = cmd("XGROUP")
                .arg(&["CREATE", "s", g, "$"])
                .query(&mut con)?;
        }
    }
    let _: () = cmd("RECLAIM.POLICY")
        .arg(&["SET", "s", "gr", "MIN-IDLE", HELD_MIN_IDLE])
        .query(&mut con)?;
    let t = Instant::now();
    while stats_fields(&mut con, "s", "gr").map_or(0, |f| field_int(&f, "passes")) < 1 {
        if t.elapsed() > TIMEOUT {
            return Err("the policy's first pass did not end".into());
        }
        thread::sleep(POLL);
    }
    let mut rows = Vec::new();
    for count in COUNTS {
        let calls = calls_for(count);
        let mut row = CallRow {
            pel,
            count,
            pairs: Vec::new(),
        };
        for rep in 0..reps {
            build_stream(&mut con, "s", calls * count)?;
            let mut order = [
                ("XREADGROUP", "xreadgroup", "gx"),
                ("RECLAIM.READGROUP", "reclaim.readgroup", "gr"),
            ];
            if rep % 2 == 1 {
                order.reverse();
            }
            let (mut x, mut r) = (0.0, 0.0);
            for (name, stat, g) in order {
                let (us, ids) = window(&mut con, name, stat, g, count, calls)?;
                if ids.len() != calls * count {
                    return Err(format!("{name} read {} of {}", ids.len(), calls * count).into());
                }
                ack(&mut con, g, &ids)?;
                if g == "gx" {
                    x = us;
                } else {
                    r = us;
                }
            }
            row.pairs.push((x, r));
        }
        eprintln!("     COUNT {count}: {:?}", row.pairs);
        rows.push(row);
    }
    let redelivered = stats_fields(&mut con, "s", "gr").map_or(0, |f| field_int(&f, "redelivered"));
    if redelivered != 0 {
        return Err(format!("{redelivered} entries were redelivered (none was due)").into());
    }
    Ok(rows)
}

/// A worker's `XAUTOCLAIM s <group> worker <min_idle> <cursor> COUNT 100` loop to the end of the
/// PEL; how many entries it took.
fn autoclaim_all(con: &mut Connection, group: &str, min_idle: u64) -> Res<usize> {
    let mut cursor = "0-0".to_string();
    let mut claimed = 0;
    loop {
        let v: Value = cmd("XAUTOCLAIM")
            .arg(&["s", group, WORKER])
            .arg(min_idle)
            .arg(&cursor)
            .arg(&["COUNT", "100"])
            .query(con)?;
        let parts = items(&v);
        cursor = parts.first().and_then(text).unwrap_or_default();
        claimed += parts.get(1).map(|e| items(e).len()).unwrap_or(0);
        if cursor == "0-0" {
            return Ok(claimed);
        }
    }
}

/// `RECLAIM.READGROUP GROUP <group> worker COUNT 100 STREAMS s >` until each of the `m` entries
/// was handed over once (`seen`); an early one whose new lease ran out meanwhile may come again,
/// and counts as one more redelivery. How many were handed over.
fn readgroup_all(
    con: &mut Connection,
    group: &str,
    m: usize,
    seen: &mut std::collections::HashSet<String>,
) -> Res<usize> {
    let mut handed = 0;
    let t = Instant::now();
    while seen.len() < m && t.elapsed() < TIMEOUT {
        let v: Value = cmd("RECLAIM.READGROUP")
            .arg(&["GROUP", group, WORKER, "COUNT", "100", "STREAMS", "s", ">"])
            .query(con)?;
        for id in entry_ids(&v) {
            handed += 1;
            seen.insert(id);
        }
    }
    Ok(handed)
}

/// Redeliveries, as a pool meets them: a policy (`MIN-IDLE min_idle`, default `INTERVAL`) is in
/// place when a consumer takes `m` entries and dies; once they are stale, a worker's `XAUTOCLAIM
/// ... COUNT 100` loop takes all of one group's, and `RECLAIM.READGROUP COUNT 100` all of
/// another's, under the policy; the server's CPU time of each (`INFO cpu`).
fn redeliveries(m: usize, min_idle: u64, reps: usize) -> Res<RedeliverRow> {
    eprintln!("   redeliveries of {m}");
    let srv = start_server()?;
    let mut con = bench_conn(&srv)?;
    build_stream(&mut con, "s", m)?;
    let mut row = RedeliverRow {
        m,
        min_idle,
        runs: Vec::new(),
    };
    for rep in 0..reps {
        let (a, b) = (format!("a{rep}"), format!("b{rep}"));
        let _: () = cmd("RECLAIM.POLICY")
            .arg(&["SET", "s", &b, "MIN-IDLE"])
            .arg(min_idle)
            .query(&mut con)?;
        build_pel(&mut con, "s", &a)?;
        build_pel(&mut con, "s", &b)?;
        thread::sleep(Duration::from_millis(min_idle + 100));
        // Which method goes first alternates by round: the second finds the stream's nodes
        // warm in the CPU's caches.
        let (mut x_us, mut m_us) = (0.0, 0.0);
        let mut claimed = 0;
        let mut seen = std::collections::HashSet::new();
        for second in [false, true] {
            let c0 = server_cpu(&mut con)?;
            if second == (rep % 2 == 1) {
                claimed = autoclaim_all(&mut con, &a, min_idle)?;
                x_us = (server_cpu(&mut con)? - c0) * 1e6 / m as f64;
            } else {
                let handed = readgroup_all(&mut con, &b, m, &mut seen)?;
                m_us = (server_cpu(&mut con)? - c0) * 1e6 / handed.max(1) as f64;
            }
        }
        if claimed != m || seen.len() != m {
            let n = seen.len();
            return Err(format!("XAUTOCLAIM took {claimed}, RECLAIM.READGROUP {n} of {m}").into());
        }
        let moved = stats_fields(&mut con, "s", &b).map_or(0, |f| field_int(&f, "claimed"));
        row.runs.push((x_us, m_us, moved));
        let _: i64 = cmd("RECLAIM.POLICY")
            .arg(&["DEL", "s", &b])
            .query(&mut con)?;
        for g in [&a, &b] {
            let _: () = cmd("XGROUP").arg(&["DESTROY", "s", g]).query(&mut con)?;
        }
    }
    eprintln!("     {:?}", row.runs);
    Ok(row)
}

/// The stall test: `n` entries of a dead consumer, stale under a policy (`MIN-IDLE 1000`); one
/// worker calls `RECLAIM.READGROUP ... COUNT 100 BLOCK 5000` until it has had every one.
fn stall(n: usize) -> Res<Stall> {
    eprintln!("   a worker drains {n} stale entries with BLOCK");
    let srv = start_server()?;
    let mut con = bench_conn(&srv)?;
    build_stream(&mut con, "s", n)?;
    build_pel(&mut con, "s", "g")?;
    let _: () = cmd("RECLAIM.POLICY")
        .arg(&["SET", "s", "g", "MIN-IDLE", "1000"])
        .query(&mut con)?;
    thread::sleep(Duration::from_millis(1200));
    let mut seen = std::collections::HashSet::new();
    let (mut calls, mut empty, mut longest) = (0, 0, Duration::ZERO);
    let t = Instant::now();
    while seen.len() < n && t.elapsed() < TIMEOUT {
        let c = Instant::now();
        let v: Value = cmd("RECLAIM.READGROUP")
            .arg(&["GROUP", "g", WORKER, "COUNT", "100", "BLOCK", "5000"])
            .arg(&["STREAMS", "s", ">"])
            .query(&mut con)?;
        longest = longest.max(c.elapsed());
        calls += 1;
        let ids = entry_ids(&v);
        if ids.is_empty() {
            empty += 1;
        }
        seen.extend(ids);
    }
    Ok(Stall {
        n,
        calls,
        empty,
        longest_ms: longest.as_secs_f64() * 1e3,
        total_ms: t.elapsed().as_secs_f64() * 1e3,
    })
}

/// Backlogs of redeliveries below this many entries run [`SHORT_ROUNDS`] rounds (at least).
const SHORT_BACKLOG: usize = 100_000;
/// The rounds of a short backlog: its windows are tens of ms of server CPU, noisier.
const SHORT_ROUNDS: usize = 6;

/// Section 5: per call at each PEL size of `pels`, redeliveries of each backlog of `backlogs`,
/// and the stall test; writes `readgroup.csv` into `data` for the plot.
pub fn readgroup_section(
    pels: &[usize],
    backlogs: &[usize],
    reps: usize,
    data: &Path,
) -> Res<ReadResult> {
    eprintln!("== RECLAIM.READGROUP: PEL sizes {pels:?}, backlogs {backlogs:?}");
    let mut calls = Vec::new();
    for &p in pels {
        calls.extend(per_call(p, even(reps))?);
    }
    let mut redeliver = Vec::new();
    for &m in backlogs {
        // A lease longer than the drain takes (about 10 µs per entry and more).
        let min_idle = (m as u64 / 20).max(2000);
        let rounds = even(if m < SHORT_BACKLOG {
            reps.max(SHORT_ROUNDS)
        } else {
            reps
        });
        redeliver.push(redeliveries(m, min_idle, rounds)?);
    }
    let stall = Some(stall(50_000)?);
    let res = ReadResult {
        calls,
        redeliver,
        stall,
    };
    write_csv(&res, data)?;
    Ok(res)
}

/// `readgroup.csv`: pel,count,ratio (of the rounds, [`ratio`]), for bench/plot.py.
fn write_csv(r: &ReadResult, data: &Path) -> Res<()> {
    std::fs::create_dir_all(data)?;
    let mut s = String::from("pel,count,ratio\n");
    for row in &r.calls {
        let _ = writeln!(s, "{},{},{:.4}", row.pel, row.count, ratio(&row.pairs));
    }
    std::fs::write(data.join("readgroup.csv"), s)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Report

/// How [`ratio`] combines the rounds, as the report says it.
const BALANCED: &str = "the median of the rounds' ratios, over an even number of rounds (each \
    method goes first equally often: whatever the second of a round inherits from the first \
    weighs on both alike; the two middle ratios averaged), which a spike of the machine's in one \
    round does not move";

/// The (plain, module) pairs of the redelivery rows.
fn pairs(rows: &[(f64, f64, i64)]) -> Vec<(f64, f64)> {
    rows.iter().map(|r| (r.0, r.1)).collect()
}

/// The ratio (module / plain) of the pairs, as [`BALANCED`] says: the median of the rounds'
/// ratios, the two middle ones averaged (the rounds alternate which method goes first, and
/// there is an even number of them, [`even`]). 0 without a round.
pub fn ratio(pairs: &[(f64, f64)]) -> f64 {
    let mut v: Vec<f64> = pairs
        .iter()
        .filter(|(p, _)| *p > 0.0)
        .map(|(p, r)| r / p)
        .collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 0 => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        n => v[n / 2],
    }
}

/// `reps` rounded up to an even number: each method of a comparison goes first equally often.
fn even(reps: usize) -> usize {
    reps + reps % 2
}

/// The section's rows in the targets table.
pub fn targets(o: &mut String, r: &ReadResult, missed: &mut Vec<&'static str>) {
    if !r.calls.is_empty() {
        let worst = r
            .calls
            .iter()
            .map(|c| (ratio(&c.pairs), c))
            .max_by(|a, b| a.0.total_cmp(&b.0));
        if let Some((q, c)) = worst {
            let met = q <= 1.1;
            let _ = writeln!(
                o,
                "| `RECLAIM.READGROUP` server time per call within 1.1x of `XREADGROUP` at every PEL size and COUNT (nothing due) | worst {q:.2}x (PEL {}, COUNT {}); see section 5 | {} |",
                thousands(c.pel as f64),
                c.count,
                if met { "met" } else { "missed" }
            );
            if !met {
                missed.push("readgroup-new");
            }
        }
    }
    for row in &r.redeliver {
        let speed = 1.0 / ratio(&pairs(&row.runs));
        let _ = writeln!(
            o,
            "| `RECLAIM.READGROUP` redeliveries per second of server time at least a worker's `XAUTOCLAIM` loop's ({} stale) | {speed:.2}x | {} |",
            thousands(row.m as f64),
            if speed >= 1.0 { "met" } else { "missed" }
        );
        if speed < 1.0 {
            missed.push("readgroup-redeliver");
        }
    }
    if let Some(s) = &r.stall {
        let _ = writeln!(
            o,
            "| no stall: a worker draining {} stale entries with `BLOCK 5000` never gets an empty reply | {} calls, {} empty, longest {:.1} ms | {} |",
            thousands(s.n as f64),
            s.calls,
            s.empty,
            s.longest_ms,
            if s.empty == 0 { "met" } else { "missed" }
        );
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
        "**Per call, by PEL size and COUNT.** A stream whose two groups hold the same PEL of the \
         given size, pending at a consumer that is alive as far as the policy can tell \
         (`MIN-IDLE {HELD_MIN_IDLE}` on group `gr`: nothing is due; its first pass has run). For \
         each `COUNT`, each round appends the entries of one window and reads them, in pipelines \
         of {PIPE}, with `XREADGROUP GROUP gx reader COUNT n STREAMS s >` ({} calls at COUNT 1, \
         {} at 10, {} at 100) and with `RECLAIM.READGROUP GROUP gr ...`, in alternating order; \
         after `CONFIG RESETSTAT`, the server's time per call is `INFO commandstats`' usec of \
         `xreadgroup`, or of `reclaim.readgroup` (which holds the time of the `XREADGROUP` it \
         runs inside). What each read is acknowledged, so the PEL keeps its size. The ratio is \
         {BALANCED} (every round listed).\n",
        calls_for(1),
        calls_for(10),
        calls_for(100)
    );
    let _ = writeln!(
        o,
        "| pending | COUNT | XREADGROUP µs per call | RECLAIM.READGROUP µs per call | ratio (median) |\n|---:|---:|---|---|---:|"
    );
    let cells = |pairs: &[(f64, f64)], i: usize| -> String {
        pairs
            .iter()
            .map(|p| format!("{:.2}", if i == 0 { p.0 } else { p.1 }))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for row in &r.calls {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | **{:.2}x** |",
            thousands(row.pel as f64),
            row.count,
            cells(&row.pairs, 0),
            cells(&row.pairs, 1),
            ratio(&row.pairs)
        );
    }
    if !r.calls.is_empty() {
        let _ = writeln!(
            o,
            "\n![RECLAIM.READGROUP's server time per call over XREADGROUP's](bench-readgroup.png)\n"
        );
        let _ = writeln!(
            o,
            "With nothing due, a one-stream read is answered from what the policy's passes and \
             earlier reads learnt, kept in the policy's run-time state (no policy key read, no \
             PEL page): the caller's ACL checks (as `XREADGROUP`, `XCLAIM`, and the DLQ's \
             writes where the policy may dead-letter on a read), then one `XREADGROUP` through \
             `RM_Call` whose reply is forwarded unparsed. What it adds does not grow with the \
             PEL; it is a fixed cost per call, so it weighs most at `COUNT 1` (see \"What would \
             close the gaps\").\n"
        );
    }
    if !r.redeliver.is_empty() {
        let _ = writeln!(
            o,
            "**Redeliveries**, as a pool meets them: a policy (default `INTERVAL`) is in place \
             when a consumer takes the backlog and dies; once it is stale, a worker's \
             `XAUTOCLAIM s a worker <min-idle> <cursor> COUNT 100` loop takes all of one group's \
             and `RECLAIM.READGROUP ... COUNT 100` all of another's; the server's CPU time \
             (`INFO cpu`) per entry handed over (the sweep's work in that time included). Each \
             pair is one round, which method goes first alternating by round (the second finds \
             the stream warm in the CPU's caches); the ratio is {BALANCED}. A backlog under \
             {} entries takes a few tens of ms of CPU per round, where the machine's noise \
             weighs most: it runs {SHORT_ROUNDS} rounds.\n",
            report::thousands(SHORT_BACKLOG as f64)
        );
        let _ = writeln!(
            o,
            "| stale entries | MIN-IDLE | XAUTOCLAIM µs per entry | RECLAIM.READGROUP µs per entry | READGROUP's rate / XAUTOCLAIM's | moved into the inbox by the sweep meanwhile |\n|---:|---:|---|---|---:|---|"
        );
        for row in &r.redeliver {
            let red = pairs(&row.runs);
            let moved: Vec<String> = row.runs.iter().map(|x| x.2.to_string()).collect();
            let _ = writeln!(
                o,
                "| {} | {} | {} | {} | **{:.2}x** | {} |",
                thousands(row.m as f64),
                row.min_idle,
                cells(&red, 0),
                cells(&red, 1),
                1.0 / ratio(&red),
                moved.join(", ")
            );
        }
        let _ = writeln!(
            o,
            "\nBoth spend most of their time in the server's check that each claimed entry still \
             exists in the stream (`XCLAIM` and `XAUTOCLAIM` seek it from its listpack's first \
             entry). A redelivery is a page of the PEL read from the policy's read cursor (as \
             many entries as are wanted), the fields read in one walk of the stream through the \
             module API, and one `XCLAIM ... JUSTID` per batch. Counted instead of timed \
             ([bench/cg_redeliver.py](../bench/cg_redeliver.py): callgrind, 20,000 stale entries \
             with 64-byte bodies, `MIN-IDLE 100`, no pass meanwhile, Redis 7.0.15), the server \
             spent 52.8k-53.4k instructions per entry on the `XAUTOCLAIM` loop and \
             44.1k-44.3k on `RECLAIM.READGROUP` (three runs): 1.20x its rate.\n"
        );
    }
    if let Some(s) = &r.stall {
        let _ = writeln!(
            o,
            "**No stall.** {} entries pending at a dead consumer, stale under a policy \
             (`MIN-IDLE 1000`); one worker calls `RECLAIM.READGROUP GROUP g worker COUNT 100 \
             BLOCK 5000 STREAMS s >` until it has had every one: **{} calls, {} of them empty, \
             the longest {:.1} ms**, {:.0} ms in all. A call that finds nothing due within its \
             search bound (4,000 pending entries examined) goes on from there on the next turn \
             of the event loop instead of waiting its `BLOCK` time.\n",
            thousands(s.n as f64),
            s.calls,
            s.empty,
            s.longest_ms,
            s.total_ms
        );
    }
}

/// The "readgroup-new" paragraph of "What would close the gaps".
pub fn count1_gap(o: &mut String) {
    let _ = writeln!(
        o,
        "- **`RECLAIM.READGROUP` at `COUNT 1`.** With nothing due it adds a fixed cost per call, \
         which `COUNT 10` and `COUNT 100` hide in the entries' own work. Under callgrind \
         ([bench/cg_readgroup.py](../bench/cg_readgroup.py) `MODULE 20000 1`: instructions per \
         call, 20,000 pending, Redis 7.0.15) a plain `XREADGROUP` took 50.2k instructions and \
         `RECLAIM.READGROUP` 61.2k (1.22x): the `XREADGROUP` it runs 48.6k; `RM_Call`'s own \
         work 5.1k (the argument vector 1.2k, copying the reply out of the call's client 1.6k, \
         releasing that client 0.8k, the command lookup and the rest); the caller's ACL checks \
         3.0k (the user looked up once, then `XREADGROUP` and `XCLAIM` checked as commands: \
         1.0k in `RM_ACLCheckCommandPermissions`, the rest their argument vectors and the user \
         look-up); the module API's dispatch, the parsing, the look-up of what reads learnt and \
         the arguments passed on 2.9k (the arguments borrowed, not copied, and short lists kept \
         on the stack: 12.4k in all before). 1.1x would leave 5k for all of it, less than \
         `RM_Call`'s own share: not reachable while the read goes through `RM_Call`, the module \
         API's only way to run a consumer-group read. Rewriting the command into a plain \
         `XREADGROUP` in the command filter when nothing is due would skip `RM_Call`, but also \
         the module's `BLOCK` (a reader waiting in a plain `XREADGROUP` is not woken when an \
         entry turns due: the stall of issue 22), the check of what the read may do under the \
         policy, the liveness sighting and the module's counters: not done.\n"
    );
}
