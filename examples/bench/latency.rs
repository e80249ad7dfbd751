//! Section 2, client latency while the module drains: a closed-loop client next to a drain of
//! the largest PEL, against a baseline without one; its targets, its paragraph (and
//! `target/bench/latency.csv` for `bench/plot.py`), its observations and its gaps in the report.

use super::*;

// ---------------------------------------------------------------------------------------------
// Measurement

pub const OPS: [&str; 3] = ["PING", "XADD", "XREADGROUP"];

#[derive(Clone, Copy)]
pub struct Sample {
    /// µs since the load started.
    pub t_us: u64,
    pub op: u8,
    pub lat_us: u32,
}

/// A closed loop of PING, XADD lat:in, XREADGROUP (COUNT 1, non-blocking) on lat:in / group lg,
/// on its own connection, until `stop`.
pub fn load(port: u16, stop: Arc<AtomicBool>, origin: Instant) -> Res<Vec<Sample>> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let mut con = client.get_connection_with_timeout(Duration::from_secs(10))?;
    let mut out = Vec::with_capacity(1 << 20);
    let mut i = 0usize;
    while !stop.load(Ordering::Relaxed) {
        let op = (i % 3) as u8;
        let c = match op {
            0 => cmd("PING"),
            1 => {
                let mut c = cmd("XADD");
                c.arg("lat:in").arg("*").arg("f").arg("v");
                c
            }
            _ => {
                let mut c = cmd("XREADGROUP");
                c.arg("GROUP")
                    .arg("lg")
                    .arg("c")
                    .arg("COUNT")
                    .arg(1)
                    .arg("STREAMS")
                    .arg("lat:in")
                    .arg(">");
                c
            }
        };
        let t = Instant::now();
        let _: Value = c.query(&mut con)?;
        let lat = t.elapsed();
        out.push(Sample {
            t_us: t.duration_since(origin).as_micros() as u64,
            op,
            lat_us: lat.as_micros().min(u32::MAX as u128) as u32,
        });
        i += 1;
    }
    Ok(out)
}

#[derive(Clone, Copy, Default)]
pub struct Pct {
    pub n: usize,
    pub p50: u32,
    pub p99: u32,
    pub p999: u32,
    pub max: u32,
}

pub fn percentiles(mut v: Vec<u32>) -> Pct {
    v.sort_unstable();
    let n = v.len();
    let at = |q: f64| -> u32 {
        if n == 0 {
            return 0;
        }
        let i = ((q * n as f64).ceil() as usize).clamp(1, n) - 1;
        v[i]
    };
    Pct {
        n,
        p50: at(0.50),
        p99: at(0.99),
        p999: at(0.999),
        max: v.last().copied().unwrap_or(0),
    }
}

/// The samples of one series inside [from, to] (µs since its load started).
pub struct Series {
    pub name: String,
    pub samples: Vec<Sample>,
    pub from_us: u64,
    pub to_us: u64,
}

impl Series {
    pub fn window(&self, op: Option<u8>) -> Pct {
        percentiles(
            self.samples
                .iter()
                .filter(|s| s.t_us >= self.from_us && s.t_us <= self.to_us)
                .filter(|s| op.map_or(true, |o| s.op == o))
                .map(|s| s.lat_us)
                .collect(),
        )
    }

    pub fn ops_per_s(&self) -> f64 {
        let n = self
            .samples
            .iter()
            .filter(|s| s.t_us >= self.from_us && s.t_us <= self.to_us)
            .count();
        n as f64 / ((self.to_us - self.from_us).max(1) as f64 / 1e6)
    }
}

pub struct Drain {
    pub what: String,
    pub n: usize,
    pub drain: Series,
    pub base: Series,
    pub wall: Duration,
    pub busy_us: i64,
    pub slices: i64,
    pub ticks: i64,
    pub sampled_slices: Pct,
    pub max_tick_us_before: i64,
    pub max_tick_us: i64,
    pub max_tick_cpu_us: i64,
    pub last_tick_us: i64,
    pub latency_latest: Vec<String>,
    pub latency_history: Vec<(i64, i64)>,
    pub check: String,
}

/// Starts the closed-loop client ([`load`]) against `port`: its stop flag, its time origin and its
/// thread.
fn start_load(
    port: u16,
) -> (
    Arc<AtomicBool>,
    Instant,
    thread::JoinHandle<Res<Vec<Sample>>>,
) {
    let stop = Arc::new(AtomicBool::new(false));
    let origin = Instant::now();
    let h = {
        let stop = stop.clone();
        thread::spawn(move || load(port, stop, origin))
    };
    (stop, origin, h)
}

/// Runs the load around a drain of (key, group) by the module, then the same load for the same
/// duration with nothing to sweep.
/// Long on purpose: one measurement from setup to reading, in the order it runs; splitting it
/// would scatter what is timed and what is not.
#[allow(clippy::too_many_arguments)]
pub fn drain_with_load(
    srv: &Server,
    con: &mut Connection,
    key: &str,
    group: &str,
    n: usize,
    policy: &[&str],
    metric: &str,
    what: &str,
) -> Res<Drain> {
    let lead = Duration::from_millis(300);
    let _: () = cmd("LATENCY").arg("RESET").query(con)?;
    let max_before = reclaim_info(con, "max_tick_us");
    let slices0 = reclaim_info(con, "slices");
    let ticks0 = reclaim_info(con, "ticks");
    let done0 = info_int(con, "reclaim", metric);

    // The drain.
    let (stop, origin, h) = start_load(srv.port);
    thread::sleep(lead);
    let t_set = origin.elapsed();
    bench_policy_set(con, key, group, policy)?;
    // Poll every 1 ms here: the window ends at the last poll that still saw work left, so it
    // holds no requests from after the drain.
    // Each poll also samples `reclaim_last_tick_us` when a tick or slice ran since the last poll.
    let mut check = String::from("ok");
    let mut t_last_busy = origin.elapsed();
    let mut slice_samples: Vec<u32> = Vec::new();
    let mut units = ticks0 + slices0;
    let mut t_prev = t_set;
    let mut t_first_work: Option<Duration> = None;
    loop {
        thread::sleep(Duration::from_millis(1));
        let t = origin.elapsed();
        let i: HashMap<String, String> = info(con, "reclaim").into_iter().collect();
        let f = |k: &str| -> i64 { i.get(k).and_then(|v| v.parse().ok()).unwrap_or(0) };
        let now_units = f("reclaim_ticks") + f("reclaim_slices");
        if now_units != units {
            units = now_units;
            slice_samples.push(f("reclaim_last_tick_us").max(0) as u32);
            t_first_work.get_or_insert(t_prev);
        }
        if f(metric) - done0 >= n as i64 {
            break;
        }
        t_last_busy = t;
        t_prev = t;
        if origin.elapsed() > TIMEOUT {
            check = "TIMED OUT".into();
            break;
        }
    }
    let t_done = origin.elapsed();
    thread::sleep(lead);
    stop.store(true, Ordering::Relaxed);
    let samples = h.join().map_err(|_| "load thread panicked")??;
    let wall = t_done - t_set;
    let mut busy_us = 0;
    let waited = Instant::now();
    while waited.elapsed() < Duration::from_secs(60) {
        if let Some(s) = stats_fields(con, key, group) {
            if field_int(&s, "passes") >= 1 {
                busy_us = field_int(&s, "last-pass-us");
                break;
            }
        }
        thread::sleep(POLL);
    }
    let slices = reclaim_info(con, "slices") - slices0;
    let ticks = reclaim_info(con, "ticks") - ticks0;
    let max_tick_us = reclaim_info(con, "max_tick_us");
    let max_tick_cpu_us = reclaim_info(con, "max_tick_cpu_us");
    let last_tick_us = reclaim_info(con, "last_tick_us");
    let latency_latest = latency_latest(con);
    let hist: Value = cmd("LATENCY")
        .arg("HISTORY")
        .arg("reclaim-tick")
        .query(con)
        .unwrap_or(Value::Nil);
    let latency_history = items(&hist)
        .iter()
        .map(|e| {
            let e = items(e);
            (
                e.first().map(int_of).unwrap_or(0),
                e.get(1).map(int_of).unwrap_or(0),
            )
        })
        .collect();
    bench_policy_del(con, key, group)?;
    let drain = Series {
        name: format!("{what}: drain"),
        samples,
        from_us: t_first_work.unwrap_or(t_set).as_micros() as u64,
        to_us: t_last_busy.max(t_first_work.unwrap_or(t_set)).as_micros() as u64,
    };
    let span = Duration::from_micros(drain.to_us - drain.from_us);

    // The baseline: the same load and the same polling, for the same duration, nothing to sweep.
    let (stop, origin, h) = start_load(srv.port);
    thread::sleep(lead);
    let b0 = origin.elapsed();
    while origin.elapsed() < b0 + span {
        thread::sleep(Duration::from_millis(1));
        let _ = info_int(con, "reclaim", metric);
    }
    let b1 = origin.elapsed();
    thread::sleep(lead);
    stop.store(true, Ordering::Relaxed);
    let samples = h.join().map_err(|_| "load thread panicked")??;
    let base = Series {
        name: format!("{what}: baseline"),
        samples,
        from_us: b0.as_micros() as u64,
        to_us: b1.as_micros() as u64,
    };
    Ok(Drain {
        what: what.to_string(),
        n,
        drain,
        base,
        wall,
        busy_us,
        slices,
        ticks,
        sampled_slices: percentiles(slice_samples),
        max_tick_us_before: max_before,
        max_tick_us,
        max_tick_cpu_us,
        last_tick_us,
        latency_latest,
        latency_history,
        check,
    })
}

pub struct LatencyResult {
    pub budget_us: i64,
    pub drains: Vec<Drain>,
}

/// Section 2: a server with a stale PEL of `n`, a claims drain and a dead-letter drain under
/// load, each with its baseline; writes `latency.csv` to `data_dir`.
/// Long on purpose: one measurement from setup to reading, in the order it runs; splitting it
/// would scatter what is timed and what is not.
pub fn latency(n: usize, data_dir: &Path) -> Res<LatencyResult> {
    eprintln!("== latency during a drain, N = {n}");
    let srv = start_server()?;
    let mut con = bench_conn(&srv)?;
    let budget_us: i64 = config_get(&mut con, "reclaim.tick-budget-us")
        .parse()
        .unwrap_or(0);
    let key = "lat:src";
    build_stream(&mut con, key, n)?;
    build_pel(&mut con, key, "claims")?;
    build_pel(&mut con, key, "dlq")?;
    raise_counts(&mut con, key, "dlq", 5)?;
    let _: () = cmd("XGROUP")
        .arg("CREATE")
        .arg("lat:in")
        .arg("lg")
        .arg("$")
        .arg("MKSTREAM")
        .query(&mut con)?;
    thread::sleep(Duration::from_millis(2 * CLIENT_MIN_IDLE));
    let idle = MODULE_MIN_IDLE.to_string();
    let mut drains = Vec::new();
    eprintln!("   claims drain + baseline");
    drains.push(drain_with_load(
        &srv,
        &mut con,
        key,
        "claims",
        n,
        &["MIN-IDLE", &idle, "INTERVAL", LONG_INTERVAL],
        "reclaim_claimed",
        "claims",
    )?);
    eprintln!("   dead-letter drain + baseline");
    drains.push(drain_with_load(
        &srv,
        &mut con,
        key,
        "dlq",
        n,
        &[
            "MIN-IDLE",
            &idle,
            "MAX-DELIVERIES",
            "1",
            "DLQ",
            "lat:dlq",
            "INTERVAL",
            LONG_INTERVAL,
        ],
        "reclaim_dead_lettered",
        "dead-letter",
    )?);
    // The time series for bench/plot.py: one row per request, t relative to the window start.
    std::fs::create_dir_all(data_dir)?;
    let mut csv = String::from("series,t_ms,op,latency_us\n");
    for d in &drains {
        for s in [&d.drain, &d.base] {
            let _ = writeln!(
                csv,
                "# window,{},{:.3}",
                s.name,
                (s.to_us - s.from_us) as f64 / 1e3
            );
            for x in &s.samples {
                let _ = writeln!(
                    csv,
                    "{},{:.3},{},{}",
                    s.name,
                    (x.t_us as f64 - s.from_us as f64) / 1e3,
                    OPS[x.op as usize],
                    x.lat_us
                );
            }
        }
    }
    std::fs::write(data_dir.join("latency.csv"), csv)?;
    for d in &drains {
        let (a, b) = (d.drain.window(None), d.base.window(None));
        eprintln!(
            "   {}: drain {:.0} ms, p99 {} us (baseline {} us), max tick {} us",
            d.what,
            d.wall.as_secs_f64() * 1e3,
            a.p99,
            b.p99,
            d.max_tick_us
        );
    }
    Ok(LatencyResult { budget_us, drains })
}

// ---------------------------------------------------------------------------------------------
// Report

/// The section's rows of the targets table (p99 per drain, budget); pushes the missed keys.
pub fn targets(o: &mut String, l: &LatencyResult, missed: &mut Vec<&'static str>) {
    for d in &l.drains {
        let (a, b) = (d.drain.window(None), d.base.window(None));
        let diff = a.p99 as f64 - b.p99 as f64;
        let ok = diff <= 1000.0;
        if !ok {
            missed.push("latency");
        }
        let _ = writeln!(
        o,
        "| p99 within 1 ms of the baseline while the module drains ({}) | {:.2} ms vs {:.2} ms (+{:.2} ms) | {} |",
        d.what,
        a.p99 as f64 / 1e3,
        b.p99 as f64 / 1e3,
        diff / 1e3,
        if ok {
            "**met**".to_string()
        } else {
            format!("**missed** by {:.2} ms", diff / 1e3 - 1.0)
        }
    );
    }
    let worst = l.drains.iter().map(|d| d.max_tick_us).max().unwrap_or(0);
    let worst_cpu = l
        .drains
        .iter()
        .map(|d| d.max_tick_cpu_us)
        .max()
        .unwrap_or(0);
    let p99 = l
        .drains
        .iter()
        .map(|d| d.sampled_slices.p99)
        .max()
        .unwrap_or(0);
    let limit = l.budget_us * 6 / 5;
    let ok = worst_cpu <= limit;
    if !ok {
        missed.push("budget");
    }
    let _ = writeln!(
    o,
    "| ticks within budget: `reclaim_max_tick_cpu_us` at most 1.2x `reclaim.tick-budget-us` ({} µs) through the drains | longest tick/slice {} µs of main-thread CPU (`reclaim_max_tick_cpu_us`); {} µs of wall time (`reclaim_max_tick_us`, includes time the OS did not run the server); sampled slices p99 {} µs | {} |",
    limit,
    worst_cpu,
    worst,
    p99,
    if ok {
        "**met**".to_string()
    } else {
        format!(
            "**missed** by {} µs of CPU ({:.0}% over the budget)",
            worst_cpu - limit,
            (worst_cpu - l.budget_us) as f64 / l.budget_us as f64 * 100.0
        )
    }
);
}

/// Section 2 of the report.
pub fn report(o: &mut String, l: &LatencyResult) {
    let n = l.drains.first().map(|d| d.n).unwrap_or(0);
    let _ = writeln!(o, "## 2. Client latency while the module drains\n");
    let _ = writeln!(
    o,
    "N = {} stale entries (the largest size), drained by a policy as in section 1 (claims; \
     then dead-letter moves of entries delivered 5 times, `MAX-DELIVERIES 1`), on a server of \
     its own. A separate client thread sends `PING`, `XADD lat:in * f v` and `XREADGROUP GROUP \
     lg c COUNT 1 STREAMS lat:in >` (non-blocking) in a closed loop, one at a time, and records \
     every round trip with its start time. `INFO reclaim` is polled every 1 ms; the drain \
     window runs from the last poll before the module's first tick or slice until the last \
     poll that still showed work left, so it holds no request from before the first tick \
     (up to 10 ms after `RECLAIM.POLICY SET`) or after the drain. The baseline is the same load (and the same 1 ms `INFO` polling) for the same \
     duration right after, with no policy. Budget `reclaim.tick-budget-us` = {} µs.\n",
    thousands(n as f64),
    l.budget_us
);
    for d in &l.drains {
        drain_paragraph(o, l, d);
    }
    let _ = writeln!(
        o,
        "![client latency during the drains and the baselines](bench-latency.png)\n\n\
     The plot (`bench/plot.py` from `target/bench/latency.csv`) shows every request's round \
     trip over time, drain and baseline on the same axes; the shaded band is the drain window.\n"
    );
}

/// One drain against its baseline: the table, the module's counters, `LATENCY` output.
/// Long on purpose: its `writeln!`s follow the printed layout of one table or paragraph.
fn drain_paragraph(o: &mut String, l: &LatencyResult, d: &Drain) {
    let _ = writeln!(
    o,
    "### {} drain: {} entries in {} ms ({} entries/s; module busy {} ms in {} ticks + {} event-loop slices, {} µs per tick/slice on average) {}\n",
    d.what,
    thousands(d.n as f64),
    ms(d.wall),
    thousands(d.n as f64 / d.wall.as_secs_f64().max(1e-9)),
    ms(Duration::from_micros(d.busy_us.max(0) as u64)),
    d.ticks,
    d.slices,
    d.busy_us / (d.ticks + d.slices).max(1),
    if d.check == "ok" { String::new() } else { format!("({})", d.check) }
);
    let _ = writeln!(
        o,
        "| series | requests | requests/s | p50 µs | p99 µs | p99.9 µs | max µs |"
    );
    let _ = writeln!(o, "|---|---:|---:|---:|---:|---:|---:|");
    for (name, s) in [("drain", &d.drain), ("baseline", &d.base)] {
        let p = s.window(None);
        let _ = writeln!(
            o,
            "| **{name}, all requests** | {} | {} | {} | **{}** | {} | {} |",
            thousands(p.n as f64),
            thousands(s.ops_per_s()),
            p.p50,
            p.p99,
            p.p999,
            p.max
        );
        for (i, op) in OPS.iter().enumerate() {
            let p = s.window(Some(i as u8));
            let _ = writeln!(
                o,
                "| {name}, {op} | {} | | {} | {} | {} | {} |",
                thousands(p.n as f64),
                p.p50,
                p.p99,
                p.p999,
                p.max
            );
        }
    }
    let _ = writeln!(o);
    let _ = writeln!(
    o,
    "Tick/slice durations sampled during the drain (`reclaim_last_tick_us` at each 1 ms poll that saw a new tick or slice): {} samples, p50 {} µs, p99 {} µs, max {} µs (budget {} µs).\n",
    d.sampled_slices.n,
    d.sampled_slices.p50,
    d.sampled_slices.p99,
    d.sampled_slices.max,
    l.budget_us
);
    let _ = writeln!(
    o,
    "After the drain: `reclaim_max_tick_us` {} µs (before it: {} µs), `reclaim_max_tick_cpu_us` {} µs, `reclaim_last_tick_us` {} µs. `LATENCY LATEST` (threshold 1 ms, reset before the drain):\n",
    d.max_tick_us, d.max_tick_us_before, d.max_tick_cpu_us, d.last_tick_us
);
    let _ = writeln!(o, "```");
    if d.latency_latest.is_empty() {
        let _ = writeln!(o, "(empty)");
    }
    for line in &d.latency_latest {
        let _ = writeln!(o, "{line}");
    }
    let _ = writeln!(o, "```\n");
    if !d.latency_history.is_empty() {
        let mut hist: HashMap<i64, usize> = HashMap::new();
        for (_, v) in &d.latency_history {
            *hist.entry(*v).or_default() += 1;
        }
        let mut h: Vec<_> = hist.into_iter().collect();
        h.sort_unstable();
        let _ = writeln!(
        o,
        "`LATENCY HISTORY reclaim-tick` (one sample per second, the worst tick/slice of that second): {}.\n",
        h.iter()
            .map(|(v, c)| format!("{c} x {v} ms"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    }
}

/// The section's observations, one per drain.
pub fn observations(l: &LatencyResult) -> Vec<String> {
    let mut obs = Vec::new();
    for d in &l.drains {
        obs.push(format!(
            "During the {} drain the closed-loop client got {} requests/s against {} without a \
         drain ({:.0}%); p50 {} µs vs {} µs{}. Sampled tick/slice durations: p50 {} µs, p99 \
         {} µs, max {} µs; `reclaim_max_tick_us` {} µs against a budget of {} µs.",
            d.what,
            thousands(d.drain.ops_per_s()),
            thousands(d.base.ops_per_s()),
            d.drain.ops_per_s() / d.base.ops_per_s().max(1e-9) * 100.0,
            d.drain.window(None).p50,
            d.base.window(None).p50,
            if d.drain.window(None).p50 as i64 >= l.budget_us * 9 / 10 {
                ": the typical request waited for at least one whole slice"
            } else {
                ""
            },
            d.sampled_slices.p50,
            d.sampled_slices.p99,
            d.sampled_slices.max,
            d.max_tick_us,
            l.budget_us
        ));
    }
    obs
}

/// The "latency" paragraph of "What would close the gaps".
pub fn latency_gap(o: &mut String, lat: Option<&LatencyResult>) {
    let (p50, base50, avg_slice) = lat
        .and_then(|l| l.drains.first())
        .map(|d| {
            (
                d.drain.window(None).p50,
                d.base.window(None).p50,
                d.busy_us / (d.ticks + d.slices).max(1),
            )
        })
        .unwrap_or((0, 0, 0));
    let _ = writeln!(
        o,
        "- **Latency during a drain.** A drain runs one slice of at most the budget right \
     after each wake-up of the event loop (`EventLoop` `AFTER_SLEEP`), before the clients' \
     commands of that iteration, and leaves active clients a gap of up to 250 µs after \
     each slice: most requests are served in a gap (here p50 {p50} µs against {base50} µs \
     without a drain; slices of {avg_slice} µs on average), and a request that arrives \
     during a slice waits for the rest of it, up to the budget. The tail above that comes \
     from the drain keeping one core busy on a 2-core machine that also runs the client, \
     the 1 ms `INFO` poller and other work: compare the scheduling jitter in the machine \
     table, and the wall-time maximum of a slice with its CPU-time maximum. What would \
     close it: a smaller budget (`CONFIG SET reclaim.tick-budget-us 200`: shorter waits, \
     slower drain). Two designs were measured and dropped: a drain that sleeps through its \
     gaps on a 1 ms timer (a third of the drain speed under any client activity), and one \
     that sleeps in the event loop until a helper thread wakes it at the end of the gap \
     (over 5 runs each, its median p99 was 0.1 ms lower for claims and 0.7 ms lower for \
     dead-letter moves, but its p50 two to four times higher and its drains 30% slower).\n"
    );
}

/// The "budget" paragraph of "What would close the gaps" (`largest` for row 6k).
pub fn budget_gap(o: &mut String, largest: Option<&SizeResult>, jitter: ((u64, u64), (u64, u64))) {
    let count1000 = largest
        .and_then(|s| s.get("6k"))
        .map(|r| {
            format!(
                " With `COUNT 1000` (row 6k) one claim step alone is longer than the budget: \
             {} µs of steps per tick/slice on average, {} µs at most.",
                r.busy_us.unwrap_or(0) / (r.ticks.unwrap_or(0) + r.slices.unwrap_or(0)).max(1),
                r.max_tick_us.unwrap_or(0)
            )
        })
        .unwrap_or_default();
    let _ = writeln!(
        o,
        "- **Budget overruns.** A tick or slice aims at 3/4 of the budget: a step reads only as \
     many entries as are likely to be handled in the time left, checks the deadline between \
     batches (of at most 32 claims or 16 dead-letter moves) and does not start a batch, or a \
     slice another step, likely to end past it; but a step's `XPENDING` read and first batch \
     always run.{count1000} A debug build that marked every step and batch with the thread's \
     CPU clock found, in every slice over 520 µs (claim and dead-letter drains, 5,000 \
     policies), one gap of 100 to 300 µs (once 4,248 µs) between two marks whose work \
     otherwise took 5 to 80 µs, at random places (inside an `XCLAIM`, between two steps): the \
     same gaps a busy loop that does nothing but read its own thread's CPU clock sees on \
     this machine (the machine table), i.e. the CPU clock charging the server for time it did \
     not spend on the module. The module's own slices stay under the aim; such a gap late in \
     a slice takes it past 1.2x the budget. Overruns of several ms in wall time are the \
     shared machine preempting the server: compare `reclaim_max_tick_cpu_us` with \
     `reclaim_max_tick_us`, and the scheduling jitter of the machine (longest gap {} µs).\n",
        jitter.0 .0.max(jitter.1 .0)
    );
}
