//! Section 1, throughput on a stale PEL: the client methods, the Lua script and the module claim
//! and dead-letter the same PEL; best of `BENCH_REPS` runs; its targets, its paragraph, its
//! observations and its gaps in the report.

use super::*;

// ---------------------------------------------------------------------------------------------
// Measurement

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Claim,
    DeadLetter,
}

/// One method's run over one PEL.
#[derive(Clone)]
pub struct Run {
    pub tag: &'static str,
    pub label: String,
    pub kind: Kind,
    pub entries: u64,
    pub wall: Duration,
    pub round_trips: u64,
    /// Server time of the method's own commands (INFO commandstats), µs.
    pub server_us: Option<u64>,
    /// The module's busy time (RECLAIM.STATS last-pass-us), µs.
    pub busy_us: Option<i64>,
    /// Module: event-loop slices and timer ticks during the run; the largest tick so far.
    pub slices: Option<i64>,
    pub ticks: Option<i64>,
    pub max_tick_us: Option<i64>,
    pub check: String,
    /// Every run's entries/s (the fast methods run several times; the best is kept).
    pub all_rates: Vec<f64>,
    /// Every run's entries/s of busy time (the module's runs), in the order run.
    pub all_busy: Vec<Option<f64>>,
}

impl Run {
    pub fn new(tag: &'static str, label: &str, kind: Kind) -> Run {
        Run {
            tag,
            label: label.to_string(),
            kind,
            entries: 0,
            wall: Duration::ZERO,
            round_trips: 0,
            server_us: None,
            busy_us: None,
            slices: None,
            ticks: None,
            max_tick_us: None,
            check: String::new(),
            all_rates: Vec::new(),
            all_busy: Vec::new(),
        }
    }

    pub fn wall_rate(&self) -> f64 {
        self.entries as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    /// The figure the comparisons use: server time for (4) and (5), wall time otherwise.
    pub fn rate(&self) -> f64 {
        match self.server_us {
            Some(us) if self.tag.starts_with('5') || self.tag == "4" => {
                self.entries as f64 / (us as f64 / 1e6)
            }
            _ => self.wall_rate(),
        }
    }

    pub fn busy_rate(&self) -> Option<f64> {
        self.busy_us
            .filter(|&b| b > 0)
            .map(|b| self.entries as f64 / (b as f64 / 1e6))
    }
}

/// Parses an XAUTOCLAIM reply: (next cursor, [(id, fields)]).
/// Entries as XAUTOCLAIM returns them: (id, [field, value, ...]).
pub type Entries = Vec<(String, Vec<Vec<u8>>)>;

pub fn autoclaim_reply(v: &Value) -> (String, Entries) {
    let a = items(v);
    let cursor = a.first().and_then(text).unwrap_or_else(|| "0-0".into());
    let entries = a
        .get(1)
        .map(|e| {
            items(e)
                .iter()
                .filter_map(|x| {
                    let x = items(x);
                    let id = text(x.first()?)?;
                    let fields = items(x.get(1)?)
                        .iter()
                        .map(|f| match f {
                            Value::BulkString(b) => b.clone(),
                            o => text(o).unwrap_or_default().into_bytes(),
                        })
                        .collect();
                    Some((id, fields))
                })
                .collect()
        })
        .unwrap_or_default();
    (cursor, entries)
}

/// (1) The pre-6.2 client loop: an XPENDING page of 100, then one XCLAIM per entry.
pub fn m1_xclaim(con: &mut Connection, key: &str, group: &str) -> Res<Run> {
    let mut r = Run::new(
        "1",
        "(1) client: XPENDING page of 100 + XCLAIM per entry",
        Kind::Claim,
    );
    let t0 = Instant::now();
    let mut start = "-".to_string();
    loop {
        let page: Vec<(String, String, i64, i64)> = cmd("XPENDING")
            .arg(key)
            .arg(group)
            .arg(&start)
            .arg("+")
            .arg(100)
            .query(con)?;
        r.round_trips += 1;
        for (id, ..) in &page {
            let v: Value = cmd("XCLAIM")
                .arg(key)
                .arg(group)
                .arg(WORKER)
                .arg(CLIENT_MIN_IDLE)
                .arg(id)
                .query(con)?;
            r.round_trips += 1;
            r.entries += items(&v).len() as u64;
        }
        match page.last() {
            Some(last) if page.len() == 100 => start = format!("({}", last.0),
            _ => break,
        }
    }
    r.wall = t0.elapsed();
    Ok(r)
}

/// (2) / (5): an XAUTOCLAIM cursor loop from a client.
pub fn autoclaim_loop(
    con: &mut Connection,
    key: &str,
    group: &str,
    count: usize,
    justid: bool,
    r: &mut Run,
) -> Res<()> {
    let t0 = Instant::now();
    let mut cursor = "0-0".to_string();
    loop {
        let mut c = cmd("XAUTOCLAIM");
        c.arg(key)
            .arg(group)
            .arg(WORKER)
            .arg(CLIENT_MIN_IDLE)
            .arg(&cursor)
            .arg("COUNT")
            .arg(count);
        if justid {
            c.arg("JUSTID");
        }
        let v: Value = c.query(con)?;
        r.round_trips += 1;
        let a = items(&v);
        cursor = a.first().and_then(text).unwrap_or_else(|| "0-0".into());
        r.entries += a.get(1).map(|e| items(e).len()).unwrap_or(0) as u64;
        if cursor == "0-0" {
            break;
        }
    }
    r.wall = t0.elapsed();
    Ok(())
}

/// (3) A client dead-letter loop: XAUTOCLAIM COUNT 100, then per entry XPENDING (its count),
/// XADD to the DLQ and XACK, each one round trip.
pub fn m3_client_dlq(con: &mut Connection, key: &str, group: &str, dlq: &str) -> Res<Run> {
    let mut r = Run::new(
        "3",
        "(3) client: XAUTOCLAIM 100, then XPENDING + XADD + XACK per entry",
        Kind::DeadLetter,
    );
    let t0 = Instant::now();
    let mut cursor = "0-0".to_string();
    loop {
        let v: Value = cmd("XAUTOCLAIM")
            .arg(key)
            .arg(group)
            .arg(WORKER)
            .arg(CLIENT_MIN_IDLE)
            .arg(&cursor)
            .arg("COUNT")
            .arg(100)
            .query(con)?;
        r.round_trips += 1;
        let (next, entries) = autoclaim_reply(&v);
        for (id, fields) in entries {
            let p: Vec<(String, String, i64, i64)> = cmd("XPENDING")
                .arg(key)
                .arg(group)
                .arg(&id)
                .arg(&id)
                .arg(1)
                .query(con)?;
            let deliveries = p.first().map(|x| x.3).unwrap_or(0);
            let mut add = cmd("XADD");
            add.arg(dlq).arg("*");
            for f in &fields {
                add.arg(f.as_slice());
            }
            add.arg("reclaim-stream")
                .arg(key)
                .arg("reclaim-group")
                .arg(group)
                .arg("reclaim-id")
                .arg(&id)
                .arg("reclaim-consumer")
                .arg(WORKER)
                .arg("reclaim-deliveries")
                .arg(deliveries);
            let _: String = add.query(con)?;
            let acked: i64 = cmd("XACK").arg(key).arg(group).arg(&id).query(con)?;
            r.round_trips += 3;
            r.entries += acked as u64;
        }
        cursor = next;
        if cursor == "0-0" {
            break;
        }
    }
    r.wall = t0.elapsed();
    Ok(r)
}

/// (4) The dead-letter move server-side in Lua, the best script a client can send
/// (lua/dlq_best.lua: XPENDING IDLE, one XRANGE over the batch, XADD each, one XACK), one EVALSHA
/// per batch of 100; its server time from `INFO commandstats`.
pub fn m4_lua_dlq(con: &mut Connection, key: &str, group: &str, dlq: &str) -> Res<Run> {
    let mut r = Run::new(
        "4",
        "(4) Lua: one script per batch of 100 (XPENDING IDLE + XRANGE + XADD + XACK), server time",
        Kind::DeadLetter,
    );
    let sha = load_script(con, LUA_DLQ)?;
    let t0 = Instant::now();
    let (mut trips, mut moved_all) = (0u64, 0u64);
    let us = server_time(con, "evalsha", |con| loop {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis());
        let moved: i64 = cmd("EVALSHA")
            .arg(&sha)
            .arg(2)
            .arg(key)
            .arg(dlq)
            .arg(group)
            .arg(CLIENT_MIN_IDLE)
            .arg(100)
            .arg(now.to_string())
            .query(con)?;
        trips += 1;
        moved_all += moved as u64;
        if moved == 0 {
            return Ok(());
        }
    })?;
    r.round_trips = trips;
    r.entries = moved_all;
    r.server_us = Some(us);
    r.wall = t0.elapsed();
    Ok(r)
}

/// The module: sets a policy, then polls RECLAIM.STATS every 5 ms until `field` reaches `n`
/// (wall time), then until the pass is complete (busy time = last-pass-us).
#[allow(clippy::too_many_arguments)]
pub fn module_run(
    con: &mut Connection,
    key: &str,
    group: &str,
    n: usize,
    policy: &[&str],
    field: &str,
    mut r: Run,
) -> Res<Run> {
    let slices0 = reclaim_info(con, "slices");
    let ticks0 = reclaim_info(con, "ticks");
    let t0 = Instant::now();
    bench_policy_set(con, key, group, policy)?;
    r.round_trips = 1;
    let mut timed_out = false;
    loop {
        thread::sleep(POLL);
        let done = stats_fields(con, key, group)
            .map(|s| field_int(&s, field))
            .unwrap_or(0);
        r.entries = done as u64;
        if done >= n as i64 {
            break;
        }
        if t0.elapsed() > TIMEOUT {
            timed_out = true;
            break;
        }
    }
    r.wall = t0.elapsed();
    let waited = Instant::now();
    loop {
        if let Some(s) = stats_fields(con, key, group) {
            if field_int(&s, "passes") >= 1 {
                r.busy_us = Some(field_int(&s, "last-pass-us"));
                break;
            }
        }
        if waited.elapsed() > Duration::from_secs(60) {
            break;
        }
        thread::sleep(POLL);
    }
    r.slices = Some(reclaim_info(con, "slices") - slices0);
    r.ticks = Some(reclaim_info(con, "ticks") - ticks0);
    r.max_tick_us = Some(reclaim_info(con, "max_tick_us"));
    bench_policy_del(con, key, group)?;
    if timed_out {
        r.check = format!("TIMED OUT after {}s", TIMEOUT.as_secs());
    }
    Ok(r)
}

/// CONFIG RESETSTAT, then the server time of `command` after `f` (INFO commandstats usec).
pub fn server_time(
    con: &mut Connection,
    command: &str,
    f: impl FnOnce(&mut Connection) -> Res<()>,
) -> Res<u64> {
    let _: () = cmd("CONFIG").arg("RESETSTAT").query(con)?;
    f(con)?;
    let line = info(con, "commandstats")
        .into_iter()
        .collect::<HashMap<String, String>>()
        .get(&format!("cmdstat_{command}"))
        .cloned()
        .unwrap_or_default();
    Ok(line
        .split(',')
        .find_map(|kv| kv.strip_prefix("usec="))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0))
}

pub struct SizeResult {
    pub n: usize,
    pub runs: Vec<Run>,
    pub build_s: f64,
}

impl SizeResult {
    pub fn get(&self, tag: &str) -> Option<&Run> {
        self.runs.iter().find(|r| r.tag == tag)
    }

    pub fn ratio(&self, a: &str, b: &str) -> Option<f64> {
        Some(self.get(a)?.rate() / self.get(b)?.rate())
    }
}

/// The methods, in the order they run; the fast ones run `reps` times (interleaved) and keep
/// their best run, the ones bound by client round trips ((1), (3)) run once.
pub const METHODS: [(&str, bool); 9] = [
    ("2", true),
    ("4", true),
    ("5", true),
    ("5j", true),
    ("6", true),
    ("6k", true),
    ("6d", true),
    ("1", false),
    ("3", false),
];

/// Runs method `tag` on group `group` (a PEL of `n` stale entries), checks the result, and frees
/// the group and its DLQ. Long on purpose: one `match` arm per method, each a few lines.
pub fn one_method(con: &mut Connection, key: &str, n: usize, tag: &str, group: &str) -> Res<Run> {
    let dlq = format!("dlq:{group}");
    let idle = MODULE_MIN_IDLE.to_string();
    let mut r = match tag {
        "1" => m1_xclaim(con, key, group)?,
        "2" => {
            let mut r = Run::new("2", "(2) client: XAUTOCLAIM COUNT 100 loop", Kind::Claim);
            autoclaim_loop(con, key, group, 100, false, &mut r)?;
            r
        }
        "3" => m3_client_dlq(con, key, group, &dlq)?,
        "4" => m4_lua_dlq(con, key, group, &dlq)?,
        "5" | "5j" => {
            let justid = tag == "5j";
            let mut r = if justid {
                Run::new(
                    "5j",
                    "(5j) server: XAUTOCLAIM COUNT 1000 JUSTID (reference: no bodies, no count+1)",
                    Kind::Claim,
                )
            } else {
                Run::new(
                    "5",
                    "(5) server: XAUTOCLAIM COUNT 1000 (commandstats usec)",
                    Kind::Claim,
                )
            };
            let us = server_time(con, "xautoclaim", |c| {
                autoclaim_loop(c, key, group, 1000, justid, &mut r)
            })?;
            r.server_us = Some(us);
            r
        }
        "6" => module_run(
            con,
            key,
            group,
            n,
            &["MIN-IDLE", &idle, "INTERVAL", LONG_INTERVAL],
            "claimed",
            Run::new(
                "6",
                "(6) module: claims (COUNT 100, the default)",
                Kind::Claim,
            ),
        )?,
        "6k" => module_run(
            con,
            key,
            group,
            n,
            &[
                "MIN-IDLE",
                &idle,
                "COUNT",
                "1000",
                "INTERVAL",
                LONG_INTERVAL,
            ],
            "claimed",
            Run::new(
                "6k",
                "(6k) module: claims with COUNT 1000 (reference)",
                Kind::Claim,
            ),
        )?,
        "6d" => module_run(
            con,
            key,
            group,
            n,
            &[
                "MIN-IDLE",
                &idle,
                "MAX-DELIVERIES",
                "1",
                "DLQ",
                &dlq,
                "INTERVAL",
                LONG_INTERVAL,
            ],
            "dead-lettered",
            Run::new(
                "6d",
                "(6d) module: dead-letter moves (COUNT 100)",
                Kind::DeadLetter,
            ),
        )?,
        other => return Err(format!("unknown method {other}").into()),
    };
    if r.check.is_empty() {
        let owner = if tag.starts_with('6') {
            "reclaim"
        } else {
            WORKER
        };
        r.check = match r.kind {
            Kind::Claim => check_claimed(con, key, group, owner, n),
            Kind::DeadLetter => check_dead_lettered(con, key, group, &dlq, n),
        };
    }
    // Free the memory before the next method (a destroyed group takes its PEL with it).
    let _: Value = cmd("XGROUP")
        .arg("DESTROY")
        .arg(key)
        .arg(group)
        .query(con)?;
    let _: Value = cmd("DEL").arg(&dlq).query(con)?;
    Ok(r)
}

/// The best (highest entries/s) of a method's runs, with every run's rate kept.
pub fn best_of(mut runs: Vec<Run>) -> Run {
    let rates: Vec<f64> = runs.iter().map(|r| r.rate()).collect();
    let busy: Vec<Option<f64>> = runs.iter().map(|r| r.busy_rate()).collect();
    let bad: Vec<String> = runs
        .iter()
        .filter(|r| r.check != "ok")
        .map(|r| r.check.clone())
        .collect();
    runs.sort_by(|a, b| b.rate().total_cmp(&a.rate()));
    let mut best = runs.swap_remove(0);
    best.all_rates = rates;
    best.all_busy = busy;
    if !bad.is_empty() {
        best.check = bad.join("; ");
    }
    best
}

pub fn throughput(n: usize, reps: usize) -> Res<SizeResult> {
    eprintln!("== throughput, N = {n}");
    let srv = start_server()?;
    let mut con = bench_conn(&srv)?;
    let key = "bench";
    let t = Instant::now();
    build_stream(&mut con, key, n)?;
    let mut plan: Vec<(&str, String)> = Vec::new();
    for rep in 0..reps {
        for (tag, repeat) in METHODS {
            if repeat {
                plan.push((tag, format!("m{tag}.{rep}")));
            }
        }
    }
    for (tag, repeat) in METHODS {
        if !repeat {
            plan.push((tag, format!("m{tag}")));
        }
    }
    for (tag, g) in &plan {
        let got = build_pel(&mut con, key, g)?;
        if got != n {
            return Err(format!("group {g}: {got} entries delivered, expected {n}").into());
        }
        if *tag == "6d" {
            raise_counts(&mut con, key, g, 5)?;
        }
    }
    let build_s = t.elapsed().as_secs_f64();
    eprintln!("   built {} PELs of {n} in {build_s:.1}s", plan.len());
    thread::sleep(Duration::from_millis(2 * CLIENT_MIN_IDLE));
    let mut by_tag: Vec<(&str, Vec<Run>)> = METHODS.iter().map(|(t, _)| (*t, Vec::new())).collect();
    for (tag, g) in &plan {
        let r = one_method(&mut con, key, n, tag, g)?;
        eprintln!(
            "   {:<84} {:>9.0}/s  wall {:>9.1} ms  {}",
            r.label,
            r.rate(),
            r.wall.as_secs_f64() * 1e3,
            r.check
        );
        if let Some(slot) = by_tag.iter_mut().find(|(t, _)| t == tag) {
            slot.1.push(r);
        }
    }
    let order = ["1", "2", "3", "4", "5", "5j", "6", "6k", "6d"];
    let mut runs = Vec::new();
    for tag in order {
        if let Some((_, v)) = by_tag.iter_mut().find(|(t, _)| *t == tag) {
            if !v.is_empty() {
                runs.push(best_of(std::mem::take(v)));
            }
        }
    }
    Ok(SizeResult { n, runs, build_s })
}

// ---------------------------------------------------------------------------------------------
// Report

/// The section's rows of the targets table; pushes the keys of the missed ones.
pub fn targets(o: &mut String, s: &SizeResult, missed: &mut Vec<&'static str>) {
    let n = thousands(s.n as f64);
    for (label, a, b, target, key) in [
        (
            "claim throughput >= 0.8x the server's XAUTOCLAIM (5)",
            "6",
            "5",
            0.8,
            "claim",
        ),
        (
            "dead-letter throughput >= 2x the Lua script (4)",
            "6d",
            "4",
            2.0,
            "dlq-lua",
        ),
        (
            "dead-letter throughput >= 30x the client loop (3)",
            "6d",
            "3",
            30.0,
            "dlq-client",
        ),
    ] {
        let r = s.ratio(a, b);
        if r.map_or(true, |x| x < target) {
            missed.push(key);
        }
        let _ = writeln!(
            o,
            "| {label} | {} at N = {n} | {} |",
            ratio_str(r),
            verdict_ratio(r, target)
        );
    }
}

/// Section 1 of the report.
pub fn report(o: &mut String, res: &Results, largest: Option<&SizeResult>) {
    let _ = writeln!(o, "## 1. Throughput on a stale PEL\n");
    let _ = writeln!(
        o,
        "One stream of N entries (`n <i> body <64 bytes>`), one consumer group per method, every \
     entry delivered once to a consumer `dead` that never acknowledges (`XREADGROUP COUNT 10000` \
     in EVAL chunks), then a wait until every entry is idle for more than 100 ms: each method \
     starts from an identical PEL. Client methods claim for `worker` with min-idle 100 ms on one \
     connection, one command per round trip. The module runs a policy with `MIN-IDLE 50` and \
     `INTERVAL 3600000` (one pass), set on a fresh group; its wall time runs from \
     `RECLAIM.POLICY SET` until `RECLAIM.STATS` (polled every 5 ms) shows all N handled, so it \
     includes the wait for the next tick (up to 10 ms) and the 5 ms polling granularity. \
     *Busy* is the module's own step time for that pass (`last-pass-us`). For the dead-letter \
     run every entry's delivery count is first raised to 5 (`XCLAIM ... RETRYCOUNT 5 JUSTID`) \
     and the policy has `MAX-DELIVERIES 1 DLQ ...`. Methods (3) and (4) treat every entry as \
     poison. (5) is the server's own time for `XAUTOCLAIM` (`INFO commandstats` usec after \
     `CONFIG RESETSTAT`), not wall time; (5j) and (6k) are for reference only. The methods not \
     bound by client round trips run {} times each, interleaved (every method once, then again), \
     and the best run is kept (all runs are listed); (1) and (3) run once. Each group is \
     destroyed (and its DLQ deleted) after its run.\n",
        res.reps
    );
    for s in &res.sizes {
        size_table(o, s);
    }
    if !res.sizes.is_empty() {
        ratios(o, res);
        per_entry_costs(o, largest);
    }
}

/// One size's table of runs, and what the module runs used.
/// Long on purpose: its `writeln!`s follow the printed layout of one table or paragraph.
fn size_table(o: &mut String, s: &SizeResult) {
    let _ = writeln!(
        o,
        "### N = {}\n\n(PELs built in {:.1} s.)\n",
        thousands(s.n as f64),
        s.build_s
    );
    let _ = writeln!(
    o,
    "| method | kind | entries | wall ms | entries/s | every run, entries/s | round trips | server / busy time | busy entries/s | check |"
);
    let _ = writeln!(o, "|---|---|---:|---:|---:|---:|---:|---:|---:|---|");
    for r in &s.runs {
        let kind = match r.kind {
            Kind::Claim => "claim",
            Kind::DeadLetter => "dead-letter",
        };
        let (time, busy_rate) = match (r.server_us, r.busy_us) {
            (Some(us), _) => (
                format!("{} ms server", ms(Duration::from_micros(us))),
                format!("{} (server)", thousands(r.rate())),
            ),
            (None, Some(b)) => (
                format!("{} ms busy", ms(Duration::from_micros(b.max(0) as u64))),
                r.busy_rate().map(thousands).unwrap_or_else(|| "n/a".into()),
            ),
            _ => ("".into(), "".into()),
        };
        let _ = writeln!(
            o,
            "| {} | {kind} | {} | {} | **{}** | {} | {} | {} | {} | {} |",
            r.label,
            thousands(r.entries as f64),
            ms(r.wall),
            thousands(r.rate()),
            r.all_rates
                .iter()
                .map(|x| thousands(*x))
                .collect::<Vec<_>>()
                .join(" / "),
            thousands(r.round_trips as f64),
            time,
            busy_rate,
            r.check
        );
    }
    let _ = writeln!(o);
    let mods: Vec<&Run> = s.runs.iter().filter(|r| r.slices.is_some()).collect();
    if !mods.is_empty() {
        let _ = writeln!(
        o,
        "Module runs: {}.\n",
        mods.iter()
            .map(|r| format!(
                "({}) used {} ticks + {} event-loop slices ({} µs of steps per tick/slice on average), longest tick/slice on this server so far {} µs",
                r.tag,
                r.ticks.unwrap_or(0),
                r.slices.unwrap_or(0),
                r.busy_us.unwrap_or(0) / (r.ticks.unwrap_or(0) + r.slices.unwrap_or(0)).max(1),
                r.max_tick_us.unwrap_or(0)
            ))
            .collect::<Vec<_>>()
            .join("; ")
    );
    }
}

/// The ratios table, one column per size.
/// Long on purpose: its `writeln!`s follow the printed layout of one table or paragraph.
fn ratios(o: &mut String, res: &Results) {
    let _ = writeln!(o, "### Ratios (entries/s over entries/s)\n");
    let mut head = String::from("| ratio |");
    let mut sep = String::from("|---|");
    for s in &res.sizes {
        let _ = write!(head, " N = {} |", thousands(s.n as f64));
        sep.push_str("---:|");
    }
    let _ = writeln!(o, "{head} target |\n{sep}---|");
    let rows: [(&str, &str, &str, &str); 9] = [
        (
            "module claims / (5) server XAUTOCLAIM time",
            "6",
            "5",
            ">= 0.8x",
        ),
        ("module claims / (2) client XAUTOCLAIM loop", "6", "2", ""),
        ("module claims / (1) client XCLAIM per entry", "6", "1", ""),
        ("module dead-letter / (4) Lua script", "6d", "4", ">= 2x"),
        ("module dead-letter / (3) client loop", "6d", "3", ">= 30x"),
        (
            "(for reference) module claims COUNT 1000 / (5)",
            "6k",
            "5",
            "",
        ),
        (
            "(for reference) module claims / (5j) XAUTOCLAIM JUSTID time",
            "6",
            "5j",
            "",
        ),
        ("(for reference) (5) / (5j) JUSTID", "5", "5j", ""),
        (
            "(for reference) (2) client loop / (5) server time",
            "2",
            "5",
            "",
        ),
    ];
    for (label, a, b, target) in rows {
        let _ = write!(o, "| {label} |");
        for s in &res.sizes {
            let _ = write!(o, " {} |", ratio_str(s.ratio(a, b)));
        }
        let _ = writeln!(o, " {target} |");
    }
    let busy = [
        ("module claims, busy time only / (5)", "6", "5"),
        ("module dead-letter, busy time only / (4)", "6d", "4"),
    ];
    for (label, module, other) in busy {
        let _ = write!(o, "| {label} |");
        for s in &res.sizes {
            let r = s
                .get(module)
                .and_then(|r| r.busy_rate())
                .zip(s.get(other).map(|r| r.rate()))
                .map(|(a, b)| a / b);
            let _ = write!(o, " {} |", ratio_str(r));
        }
        let _ = writeln!(o, " |");
    }
    // The dead-letter target run by run: the runs are interleaved (every method once, then
    // again), so run i of the module and run i of the script are seconds apart.
    let _ = write!(
        o,
        "| module dead-letter, busy time / (4) Lua server time, every run (interleaved) |"
    );
    for s in &res.sizes {
        let cell = match (s.get("6d"), s.get("4")) {
            (Some(m), Some(l)) => m
                .all_busy
                .iter()
                .zip(&l.all_rates)
                .map(|(b, r)| b.map_or("-".to_string(), |b| format!("{:.2}x", b / r)))
                .collect::<Vec<_>>()
                .join(" / "),
            _ => "-".to_string(),
        };
        let _ = write!(o, " {cell} |");
    }
    let _ = writeln!(o, " >= 2x each |");
    let _ = writeln!(o);
}

/// What one entry cost each method at the largest size.
fn per_entry_costs(o: &mut String, largest: Option<&SizeResult>) {
    let _ = writeln!(
        o,
        "Per-entry costs at the largest size: {}.\n",
        largest
            .map(|s| {
                s.runs
                    .iter()
                    .map(|r| {
                        let us = match (r.server_us, r.busy_us) {
                            (Some(u), _) => u as f64,
                            (None, Some(b)) => b as f64,
                            _ => r.wall.as_secs_f64() * 1e6,
                        };
                        format!("({}) {:.2} µs", r.tag, us / (r.entries.max(1) as f64))
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    );
    let _ = writeln!(
        o,
        "(server time for (5)/(5j), module busy time for (6)/(6k)/(6d), wall time otherwise.)\n"
    );
    let _ = writeln!(
        o,
        "Counted instead of timed ([bench/cg_deadletter.py](../bench/cg_deadletter.py): \
         callgrind, 20,000 entries with 64-byte bodies delivered 5 times, Redis 7.0.15, the \
         whole server's instructions), a dead-letter move cost the script (4) 75.1k \
         instructions and the module 31.8k: 2.36x its rate (33.9k and 2.22x before the \
         `reclaim-*` names were kept and a consumer's name and a delivery count made once per \
         run of entries).\n"
    );
}

/// The section's observations (XAUTOCLAIM JUSTID, COUNT 1000).
pub fn observations(s: &SizeResult) -> Vec<String> {
    let mut obs = Vec::new();
    if let (Some(a), Some(b)) = (s.get("5"), s.get("5j")) {
        obs.push(format!(
        "`XAUTOCLAIM` returning entry bodies (5) runs at {:.0}% of the speed of `JUSTID` (5j), \
         which copies nothing and does not count a delivery. The module claims like (5j) \
         (`XCLAIM ... RETRYCOUNT n+1 JUSTID`), so against (5j) its ratio is {}.",
        a.rate() / b.rate() * 100.0,
        ratio_str(s.ratio("6", "5j"))
    ));
    }
    if let Some(r) = s.get("6k") {
        obs.push(format!(
            "With `COUNT 1000` a single claim step is longer than the budget: (6k) spent {} µs of \
         steps per tick/slice on average, and the longest tick/slice on that server reached \
         {} µs.",
            r.busy_us.unwrap_or(0) / (r.ticks.unwrap_or(0) + r.slices.unwrap_or(0)).max(1),
            r.max_tick_us.unwrap_or(0)
        ));
    }
    obs
}

/// The section's paragraphs of "What would close the gaps".
pub fn gaps(o: &mut String, big: Option<&SizeResult>, missed: &[&str]) {
    if missed.contains(&"claim") {
        let (mod_us, srv_us) = big
            .map(|s| {
                (
                    s.get("6").and_then(|r| r.busy_us).unwrap_or(0) as f64 / s.n as f64,
                    s.get("5").and_then(|r| r.server_us).unwrap_or(0) as f64 / s.n as f64,
                )
            })
            .unwrap_or((0.0, 0.0));
        let wall_us = big
            .and_then(|s| s.get("6"))
            .map(|r| r.wall.as_secs_f64() * 1e6 / r.entries.max(1) as f64)
            .unwrap_or(0.0);
        let _ = writeln!(
        o,
        "- **Claim throughput.** The module spends {mod_us:.2} µs of step time per claimed entry \
         ({wall_us:.2} µs of wall time) where `XAUTOCLAIM` itself needs {srv_us:.2} µs. A step \
         reads an `XPENDING` page through `RM_Call` (every entry is encoded as RESP and parsed \
         back into `CallReply` objects), runs `XRANGE - + COUNT 1` for the trim check, and sends \
         the IDs back in `XCLAIM`s of at most 64. What would close it: reading the trim \
         boundary once per slice instead of per step, and a claim path that does not \
         round-trip the page through RESP (for `MAX-DELIVERIES 0`, `XAUTOCLAIM ... JUSTID` \
         then one `XCLAIM ... RETRYCOUNT` fix-up).\n"
    );
    }
    if missed.contains(&"dlq-lua") || missed.contains(&"dlq-client") {
        let (mod_us, lua_us) = big
            .map(|s| {
                (
                    s.get("6d").and_then(|r| r.busy_us).unwrap_or(0) as f64 / s.n as f64,
                    s.get("4")
                        .map(|r| r.wall.as_secs_f64() * 1e6 / s.n as f64)
                        .unwrap_or(0.0),
                )
            })
            .unwrap_or((0.0, 0.0));
        let _ = writeln!(
        o,
        "- **Dead-letter throughput.** A move costs the module {mod_us:.2} µs of step time; the Lua \
         script does it in {lua_us:.2} µs per entry of wall time, round trips included. The \
         module reads each body through the stream API, runs one `XADD` per entry through \
         `RM_Call`, and one `XACK` per batch of up to 64; the `XADD` (argument strings, command \
         lookup, propagation, reply) now dominates. What would close it: appending with \
         `RM_StreamAdd` and propagating the concrete `XADD` with `RM_Replicate` (same \
         `MULTI`/`EXEC`), saving the `RM_Call` overhead. The ratio against the client loop (3) \
         is bounded by the round-trip time of one client: three round trips per entry at \
         ~{:.0} µs each.\n",
        big.and_then(|s| s.get("3"))
            .map(|r| r.wall.as_secs_f64() * 1e6 / r.round_trips.max(1) as f64)
            .unwrap_or(0.0)
    );
    }
}
