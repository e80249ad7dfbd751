//! `make demo`: the crash scenario, on a real redis-server with the module loaded.
//!
//! A producer writes orders (one of them poison) to the stream `orders`; three worker processes
//! run the plain consumer-group loop with no recovery code; one of them hangs in the middle of a
//! batch and is killed with SIGKILL, leaving entries in its PEL. The module claims those entries
//! for the consumer `reclaim` once they are stale, a recovery worker reads `reclaim`'s history
//! and processes them, and the poison entry (which fails every time) is moved to `orders:dlq`
//! once it has been delivered too often. The demo prints a timeline and a final tally, and exits
//! 0 only when nothing is pending, nothing is lost, and the poison entry is in the DLQ exactly once.
//!
//! The example re-executes itself to run each worker as its own OS process:
//! `demo worker <port> <name> <log-file> [stall-after-ms]` and `demo recover <port> <name> <log-file>`.
//!
//! Environment: `REDIS_SERVER` (default `redis-server`), `RECLAIM_MODULE` (default: the
//! `libredis_reclaim.so` of `cargo build --release`, in the target directory cargo built this
//! example in).

use std::collections::{BTreeMap, BTreeSet};
use std::error::Error;
use std::fs::OpenOptions;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use redis::{cmd, Connection, Value};

type Res<T> = Result<T, Box<dyn Error>>;

const STREAM: &str = "orders";
const GROUP: &str = "workers";
const DLQ: &str = "orders:dlq";
const CLAIMANT: &str = "reclaim";
/// Orders written by the producer, in atomic bursts of `BURST` over `PRODUCE_MS`.
const ORDERS: usize = 300;
const BURST: usize = 5;
const PRODUCE_MS: u64 = 2000;
/// The order (field `n`) that carries `poison 1`.
const POISON_N: usize = 137;
const WORKERS: [&str; 3] = ["w1", "w2", "w3"];
/// The worker that hangs mid-batch (on its first batch after `STALL_AFTER_MS`) and is killed.
const VICTIM: &str = "w2";
const STALL_AFTER_MS: u64 = 1000;
/// Time one entry takes to "process".
const PROCESS_MS: u64 = 3;
/// Bound on the whole scenario once the workers run.
const DEADLINE: Duration = Duration::from_secs(30);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let child = match args.get(1).map(String::as_str) {
        Some("worker") => Some(worker_main(&args)),
        Some("recover") => Some(recover_main(&args)),
        _ => None,
    };
    if let Some(r) = child {
        return match r {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("demo {}: {e}", args[1..].join(" "));
                ExitCode::FAILURE
            }
        };
    }
    // `run` owns the server and the worker processes: they are stopped when it returns or
    // unwinds, before the exit code is reported.
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("demo failed: {e}");
            ExitCode::from(2)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reply helpers
// ---------------------------------------------------------------------------------------------

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Okay => Some("OK".into()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::Nil => "(nil)".into(),
        Value::Array(a) => format!("[{}]", a.iter().map(show).collect::<Vec<_>>().join(", ")),
        Value::Map(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", show(k), show(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => text(other).unwrap_or_else(|| format!("{other:?}")),
    }
}

/// Field/value reply (RESP2 flat array or RESP3 map) as (field, value) pairs.
fn pairs(v: &Value) -> Vec<(String, Value)> {
    match v {
        Value::Array(a) => a
            .chunks(2)
            .filter(|c| c.len() == 2)
            .map(|c| (text(&c[0]).unwrap_or_default(), c[1].clone()))
            .collect(),
        Value::Map(m) => m
            .iter()
            .map(|(k, v)| (text(k).unwrap_or_default(), v.clone()))
            .collect(),
        _ => Vec::new(),
    }
}

fn int_field(v: &Value, name: &str) -> i64 {
    pairs(v)
        .into_iter()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| text(&v))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn str_field(v: &Value, name: &str) -> String {
    pairs(v)
        .into_iter()
        .find(|(k, _)| k == name)
        .and_then(|(_, v)| text(&v))
        .unwrap_or_default()
}

/// One stream entry.
#[derive(Debug, Clone)]
struct Entry {
    id: String,
    fields: Vec<(String, String)>,
}

impl Entry {
    fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn is_poison(&self) -> bool {
        self.field("poison") == Some("1")
    }

    fn show_fields(&self) -> String {
        self.fields
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// An XRANGE-style list of entries. An entry whose fields are nil (deleted from the stream but
/// still in a PEL, as XREADGROUP history reports it) gets no fields.
fn entries(v: &Value) -> Vec<Entry> {
    let Value::Array(items) = v else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|it| {
            let Value::Array(e) = it else { return None };
            let id = text(e.first()?)?;
            let fields = match e.get(1) {
                Some(Value::Array(f)) => f
                    .chunks(2)
                    .filter_map(|c| Some((text(c.first()?)?, text(c.get(1)?)?)))
                    .collect(),
                _ => Vec::new(),
            };
            Some(Entry { id, fields })
        })
        .collect()
}

/// The entries of an XREADGROUP reply (nil on timeout; RESP2 `[[key, entries]]` or RESP3 map).
fn read_reply(v: &Value) -> Vec<Entry> {
    match v {
        Value::Array(streams) => streams
            .iter()
            .flat_map(|s| match s {
                Value::Array(kv) if kv.len() == 2 => entries(&kv[1]),
                _ => Vec::new(),
            })
            .collect(),
        Value::Map(m) => m.iter().flat_map(|(_, e)| entries(e)).collect(),
        _ => Vec::new(),
    }
}

fn connect(port: u16) -> Res<Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let con = client.get_connection_with_timeout(Duration::from_secs(5))?;
    con.set_read_timeout(Some(Duration::from_secs(10)))?;
    Ok(con)
}

// ---------------------------------------------------------------------------------------------
// Worker processes
// ---------------------------------------------------------------------------------------------

/// Child processes exit when the demo's end of their stdin closes (the demo exited, however).
fn exit_with_parent() {
    thread::spawn(|| {
        let mut buf = [0u8; 64];
        let mut stdin = std::io::stdin();
        loop {
            match stdin.read(&mut buf) {
                Ok(0) | Err(_) => std::process::exit(0),
                Ok(_) => {}
            }
        }
    });
}

fn child_args(args: &[String]) -> Res<(u16, String, PathBuf)> {
    if args.len() < 5 {
        return Err("usage: demo worker|recover <port> <name> <log-file> [stall-after-ms]".into());
    }
    Ok((args[2].parse()?, args[3].clone(), PathBuf::from(&args[4])))
}

/// Handles one entry: "process" it; a poison entry fails (no XACK, the caller moves on);
/// otherwise XACK it and log its ID (one line, flushed). Returns whether it was acknowledged.
fn handle(con: &mut Connection, log: &mut std::fs::File, e: &Entry) -> Res<bool> {
    thread::sleep(Duration::from_millis(PROCESS_MS));
    if e.is_poison() {
        return Ok(false);
    }
    let _: i64 = cmd("XACK").arg(STREAM).arg(GROUP).arg(&e.id).query(con)?;
    writeln!(log, "{}", e.id)?;
    log.flush()?;
    Ok(true)
}

/// The plain worker loop: read new entries, process, acknowledge. No recovery code at all.
/// With `stall-after-ms`, the first batch read after that time hangs halfway (after acking the
/// first half), reporting `STALL <acked> <held>` on stdout, so that the SIGKILL lands mid-batch.
fn worker_main(args: &[String]) -> Res<()> {
    let (port, name, log_path) = child_args(args)?;
    let stall_after = args
        .get(5)
        .map(|s| s.parse::<u64>())
        .transpose()?
        .map(Duration::from_millis);
    exit_with_parent();
    let mut con = connect(port)?;
    let _: () = cmd("CLIENT").arg("SETNAME").arg(&name).query(&mut con)?;
    let mut log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)?;
    let started = Instant::now();
    loop {
        let reply: Value = cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg(&name)
            .arg("COUNT")
            .arg(10)
            .arg("BLOCK")
            .arg(100)
            .arg("STREAMS")
            .arg(STREAM)
            .arg(">")
            .query(&mut con)?;
        let batch = read_reply(&reply);
        if batch.is_empty() {
            continue;
        }
        let stall_at = match stall_after {
            Some(d) if started.elapsed() >= d => Some(batch.len() / 2),
            _ => None,
        };
        for (i, e) in batch.iter().enumerate() {
            if stall_at == Some(i) {
                println!("STALL {} {}", i, batch.len() - i);
                std::io::stdout().flush()?;
                // Hang here until killed.
                loop {
                    thread::sleep(Duration::from_secs(60));
                }
            }
            handle(&mut con, &mut log, e)?;
        }
    }
}

/// The recovery worker: reads the claimant's history (entries the module claimed for it),
/// processes and acknowledges them the same way; sleeps 100 ms when a read acknowledged nothing.
fn recover_main(args: &[String]) -> Res<()> {
    let (port, name, log_path) = child_args(args)?;
    exit_with_parent();
    let mut con = connect(port)?;
    let _: () = cmd("CLIENT").arg("SETNAME").arg(&name).query(&mut con)?;
    let mut log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)?;
    loop {
        let reply: Value = cmd("XREADGROUP")
            .arg("GROUP")
            .arg(GROUP)
            .arg(&name)
            .arg("COUNT")
            .arg(10)
            .arg("STREAMS")
            .arg(STREAM)
            .arg("0")
            .query(&mut con)?;
        let mut acked = 0;
        for e in read_reply(&reply) {
            if handle(&mut con, &mut log, &e)? {
                acked += 1;
            }
        }
        if acked == 0 {
            thread::sleep(Duration::from_millis(100));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The demo process: server, children, producer, timeline
// ---------------------------------------------------------------------------------------------

/// redis-server with the module; killed (SIGKILL) and reaped on drop.
struct Server {
    port: u16,
    child: Child,
}

impl Server {
    fn start(dir: &Path) -> Res<Server> {
        let module = match std::env::var_os("RECLAIM_MODULE") {
            Some(p) => PathBuf::from(p),
            // Cargo builds an example into `<target dir>/<profile>/examples/`, and `cargo build
            // --release` the module into `<target dir>/release/`, whatever the target dir is
            // (`./target`, `CARGO_TARGET_DIR`, `build.target-dir`).
            None => std::env::current_exe()?
                .ancestors()
                .nth(3)
                .ok_or("the demo binary is not in <target dir>/<profile>/examples/")?
                .join("release/libredis_reclaim.so"),
        };
        if !module.exists() {
            return Err(format!(
                "module not found: {} (run `make demo`, or set RECLAIM_MODULE)",
                module.display()
            )
            .into());
        }
        let binary = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let log = dir.join("server.log");
        let child = Command::new(&binary)
            .arg("--port")
            .arg(port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .arg("--dir")
            .arg(dir)
            .arg("--logfile")
            .arg(&log)
            .arg("--save")
            .arg("")
            .arg("--appendonly")
            .arg("no")
            .arg("--loadmodule")
            .arg(&module)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start {binary} (is it installed? `make deps`): {e}"))?;
        let mut s = Server { port, child };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = s.child.try_wait()? {
                return Err(format!(
                    "redis-server exited with {status}; log:\n{}",
                    std::fs::read_to_string(&log).unwrap_or_default()
                )
                .into());
            }
            if let Ok(mut con) = connect(port) {
                if cmd("PING").query::<String>(&mut con).is_ok() {
                    return Ok(s);
                }
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "redis-server on port {port} did not answer PING within 10 s (log: {})",
                    log.display()
                )
                .into());
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One worker process; killed and reaped on drop.
struct Proc {
    name: String,
    log: PathBuf,
    child: Child,
    /// Exit status once reaped.
    exited: Option<std::process::ExitStatus>,
}

impl Proc {
    fn spawn(
        port: u16,
        mode: &str,
        name: &str,
        log: PathBuf,
        extra: &[String],
        stdout: Stdio,
    ) -> Res<Proc> {
        let child = Command::new(std::env::current_exe()?)
            .arg(mode)
            .arg(port.to_string())
            .arg(name)
            .arg(&log)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(stdout)
            .stderr(Stdio::inherit())
            .spawn()?;
        Ok(Proc {
            name: name.to_string(),
            log,
            child,
            exited: None,
        })
    }

    fn kill(&mut self) -> Res<std::process::ExitStatus> {
        if let Some(s) = self.exited {
            return Ok(s);
        }
        self.child.kill()?;
        let s = self.child.wait()?;
        self.exited = Some(s);
        Ok(s)
    }

    /// `Some(status)` the first time the process is seen to have exited by itself.
    fn exited_now(&mut self) -> Option<std::process::ExitStatus> {
        if self.exited.is_some() {
            return None;
        }
        match self.child.try_wait() {
            Ok(Some(s)) => {
                self.exited = Some(s);
                Some(s)
            }
            _ => None,
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if self.exited.is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[derive(Clone, Copy)]
struct Timeline(Instant);

impl Timeline {
    fn say(&self, msg: impl AsRef<str>) {
        println!("[{:6.2}s] {}", self.0.elapsed().as_secs_f64(), msg.as_ref());
    }
}

enum Event {
    /// The victim worker hangs mid-batch: it acknowledged `acked` entries of the batch and
    /// still holds `held`.
    Stalled {
        acked: usize,
        held: usize,
    },
    Poison(String),
    Produced(Vec<String>),
    ProducerFailed(String),
}

/// Writes `ORDERS` orders in atomic bursts of `BURST` (MULTI/EXEC, so a woken worker gets a
/// whole burst as one batch), evenly over `PRODUCE_MS`.
fn producer(port: u16, tl: Timeline, tx: mpsc::Sender<Event>, written: Arc<Mutex<Vec<String>>>) {
    let run = || -> Res<Vec<String>> {
        let mut con = connect(port)?;
        let bursts = ORDERS.div_ceil(BURST);
        let start = Instant::now();
        let mut ids = Vec::with_capacity(ORDERS);
        for b in 0..bursts {
            let due = start + Duration::from_millis(PRODUCE_MS * b as u64 / bursts as u64);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                thread::sleep(wait);
            }
            let ns: Vec<usize> = (b * BURST + 1..=((b + 1) * BURST).min(ORDERS)).collect();
            let mut p = redis::pipe();
            p.atomic();
            for &n in &ns {
                let c = p.cmd("XADD").arg(STREAM).arg("*").arg("n").arg(n);
                if n == POISON_N {
                    c.arg("poison").arg(1);
                }
            }
            let got: Vec<String> = p.query(&mut con)?;
            for (&n, id) in ns.iter().zip(&got) {
                if n == POISON_N {
                    tl.say(format!("producer: order n={n} is poison (poison 1): {id}"));
                    let _ = tx.send(Event::Poison(id.clone()));
                }
            }
            ids.extend(got.iter().cloned());
            written.lock().unwrap().extend(got);
        }
        Ok(ids)
    };
    let _ = tx.send(match run() {
        Ok(ids) => Event::Produced(ids),
        Err(e) => Event::ProducerFailed(e.to_string()),
    });
}

/// `XPENDING orders workers - + 100000`: (id, owner, idle ms, deliveries).
fn pel(con: &mut Connection) -> Res<Vec<(String, String, i64, i64)>> {
    Ok(cmd("XPENDING")
        .arg(STREAM)
        .arg(GROUP)
        .arg("-")
        .arg("+")
        .arg(100_000)
        .query(con)?)
}

/// `XPENDING orders workers` (summary form): total and per-consumer counts.
fn pending_summary(con: &mut Connection) -> Res<(i64, BTreeMap<String, i64>)> {
    let v: Value = cmd("XPENDING").arg(STREAM).arg(GROUP).query(con)?;
    let Value::Array(a) = &v else {
        return Err(format!("unexpected XPENDING reply: {}", show(&v)).into());
    };
    let total = a
        .first()
        .and_then(text)
        .and_then(|s| s.parse().ok())
        .unwrap_or(-1);
    let mut per = BTreeMap::new();
    if let Some(Value::Array(cs)) = a.get(3) {
        for c in cs {
            if let Value::Array(pair) = c {
                if let (Some(n), Some(k)) = (
                    pair.first().and_then(text),
                    pair.get(1).and_then(text).and_then(|s| s.parse().ok()),
                ) {
                    per.insert(n, k);
                }
            }
        }
    }
    Ok((total, per))
}

/// The PEL (as [`pel`]), `RECLAIM.STATS` and the DLQ entries, read atomically.
type Snapshot = (Vec<(String, String, i64, i64)>, Value, Vec<Entry>);

fn snapshot(con: &mut Connection) -> Res<Snapshot> {
    let (p, st, d): (Value, Value, Value) = redis::pipe()
        .atomic()
        .cmd("XPENDING")
        .arg(STREAM)
        .arg(GROUP)
        .arg("-")
        .arg("+")
        .arg(100_000)
        .cmd("RECLAIM.STATS")
        .arg(STREAM)
        .arg(GROUP)
        .cmd("XRANGE")
        .arg(DLQ)
        .arg("-")
        .arg("+")
        .query(con)?;
    Ok((redis::from_redis_value(p)?, st, entries(&d)))
}

fn read_log(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

fn dlq_entries(con: &mut Connection) -> Res<Vec<Entry>> {
    let v: Value = cmd("XRANGE").arg(DLQ).arg("-").arg("+").query(con)?;
    Ok(entries(&v))
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn short_list(ids: &[String]) -> String {
    if ids.len() <= 6 {
        ids.join(", ")
    } else {
        format!("{}, ... ({} more)", ids[..5].join(", "), ids.len() - 5)
    }
}

fn run() -> Res<bool> {
    let tl = Timeline(Instant::now());
    let dir = tempfile::tempdir()?;
    let server = Server::start(dir.path())?;
    let port = server.port;
    let mut con = connect(port)?;
    let info: String = cmd("INFO").arg("server").query(&mut con)?;
    let version = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("?")
        .trim()
        .to_string();
    tl.say(format!(
        "redis-server {version} on 127.0.0.1:{port} with module reclaim, dir {}",
        dir.path().display()
    ));

    // Setup: the group, then the policy.
    let setup: [&[&str]; 3] = [
        &["XGROUP", "CREATE", STREAM, GROUP, "$", "MKSTREAM"],
        &[
            "RECLAIM.POLICY",
            "SET",
            STREAM,
            GROUP,
            "MIN-IDLE",
            "1000",
            "MAX-DELIVERIES",
            "3",
            "DLQ",
            DLQ,
            "INTERVAL",
            "200",
        ],
        &["RECLAIM.POLICY", "GET", STREAM, GROUP],
    ];
    for argv in setup {
        let mut c = cmd(argv[0]);
        for a in &argv[1..] {
            c.arg(*a);
        }
        let reply: Value = c.query(&mut con)?;
        tl.say(format!("> {}  ->  {}", argv.join(" "), show(&reply)));
    }

    // Workers, each its own process, and the recovery worker.
    let (tx, rx) = mpsc::channel::<Event>();
    let mut workers: Vec<Proc> = Vec::new();
    for name in WORKERS {
        let log = dir.path().join(format!("{name}.log"));
        let victim = name == VICTIM;
        let extra = if victim {
            vec![STALL_AFTER_MS.to_string()]
        } else {
            vec![]
        };
        let out = if victim {
            Stdio::piped()
        } else {
            Stdio::null()
        };
        let mut p = Proc::spawn(port, "worker", name, log, &extra, out)?;
        if victim {
            let stdout = p.child.stdout.take().ok_or("no stdout")?;
            let tx = tx.clone();
            thread::spawn(move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    let f: Vec<usize> = line
                        .split_whitespace()
                        .skip(1)
                        .filter_map(|s| s.parse().ok())
                        .collect();
                    if line.starts_with("STALL") && f.len() == 2 {
                        let _ = tx.send(Event::Stalled {
                            acked: f[0],
                            held: f[1],
                        });
                    }
                }
            });
        }
        workers.push(p);
    }
    let rlog = dir.path().join(format!("{CLAIMANT}.log"));
    workers.push(Proc::spawn(
        port,
        "recover",
        CLAIMANT,
        rlog.clone(),
        &[],
        Stdio::null(),
    )?);
    // Every worker names its connection (CLIENT SETNAME) once connected.
    let ready_by = Instant::now() + Duration::from_secs(10);
    loop {
        let list: String = cmd("CLIENT").arg("LIST").query(&mut con)?;
        let up = workers
            .iter()
            .filter(|p| list.contains(&format!(" name={} ", p.name)))
            .count();
        if up == workers.len() {
            break;
        }
        if Instant::now() > ready_by {
            return Err(format!("workers did not connect within 10 s:\n{list}").into());
        }
        thread::sleep(Duration::from_millis(10));
    }
    let pids: Vec<String> = workers
        .iter()
        .map(|p| format!("{} (pid {})", p.name, p.child.id()))
        .collect();
    tl.say(format!(
        "workers up: {}; `{CLAIMANT}` reads its history: XREADGROUP GROUP {GROUP} {CLAIMANT} COUNT 10 STREAMS {STREAM} 0",
        pids.join(", ")
    ));

    let t_workers = Instant::now();
    tl.say(format!(
        "producer: {ORDERS} orders (field n), bursts of {BURST} over ~{:.1} s; {VICTIM} will hang mid-batch after ~{:.1} s",
        PRODUCE_MS as f64 / 1000.0,
        STALL_AFTER_MS as f64 / 1000.0
    ));
    let written: Arc<Mutex<Vec<String>>> = Arc::default();
    {
        let tx = tx.clone();
        let written = written.clone();
        thread::spawn(move || producer(port, tl, tx, written));
    }
    drop(tx);

    let deadline = Instant::now() + DEADLINE;
    let mut produced: Option<Vec<String>> = None;
    let mut poison: Option<String> = None;
    let mut victim_killed = false;
    let mut victim_held: Option<(i64, Vec<String>)> = None;
    let (mut last_claimed, mut last_dead) = (0i64, 0i64);
    let mut prev_pel: BTreeMap<String, (String, i64)> = BTreeMap::new();
    let mut poison_state: Option<(String, i64)> = None;
    let mut dlq_seen = 0usize;
    let mut recovered = 0usize;
    let mut ok = true;
    let mut drained = false;
    loop {
        // Events from the producer and the victim.
        let mut stalled = None;
        while let Ok(ev) = rx.try_recv() {
            match ev {
                Event::Poison(id) => poison = Some(id),
                Event::Produced(ids) => {
                    tl.say(format!(
                        "producer done: {} orders written ({} .. {})",
                        ids.len(),
                        ids.first().map(String::as_str).unwrap_or("-"),
                        ids.last().map(String::as_str).unwrap_or("-")
                    ));
                    produced = Some(ids);
                }
                Event::ProducerFailed(e) => return Err(format!("producer failed: {e}").into()),
                Event::Stalled { acked, held } => stalled = Some((acked, held)),
            }
        }
        if !victim_killed
            && (stalled.is_some() || t_workers.elapsed() > Duration::from_millis(5000))
        {
            let v = workers
                .iter_mut()
                .find(|p| p.name == VICTIM)
                .ok_or("no victim")?;
            match stalled {
                Some((acked, held)) => tl.say(format!(
                    "{VICTIM} hangs in the middle of a batch of {}: acked {acked}, {} not yet",
                    acked + held,
                    held
                )),
                None => tl.say(format!(
                    "{VICTIM} never hung mid-batch (no batch after {STALL_AFTER_MS} ms?); killing it anyway"
                )),
            }
            let pid = v.child.id();
            let status = v.kill()?;
            victim_killed = true;
            let (total, per) = pending_summary(&mut con)?;
            let held = per.get(VICTIM).copied().unwrap_or(0);
            let ids: Vec<String> = pel(&mut con)?
                .into_iter()
                .filter(|(_, owner, _, _)| owner == VICTIM)
                .map(|(id, ..)| id)
                .collect();
            tl.say(format!(
                "killed {VICTIM} (pid {pid}) with SIGKILL: {status}; XPENDING {STREAM} {GROUP} summary: total {total}, {VICTIM} holds {} ({})",
                plural(held as usize, "entry", "entries"),
                short_list(&ids)
            ));
            victim_held = Some((held, ids));
        }

        // Workers that died on their own.
        for p in workers.iter_mut() {
            if let Some(s) = p.exited_now() {
                tl.say(format!("worker {} exited unexpectedly: {s}", p.name));
                ok = false;
            }
        }

        // What the module did.
        // One MULTI/EXEC, so the PEL, the counters and the DLQ are seen at the same instant (the
        // module's timer never runs inside a transaction).
        let (now_pel, st, dlq) = snapshot(&mut con)?;
        let (claimed, dead) = (int_field(&st, "claimed"), int_field(&st, "dead-lettered"));
        if claimed > last_claimed {
            let mut from: BTreeMap<String, usize> = BTreeMap::new();
            for (id, owner, ..) in &now_pel {
                if owner != CLAIMANT {
                    continue;
                }
                match prev_pel.get(id) {
                    Some((prev, _)) if prev != CLAIMANT => {
                        *from.entry(prev.clone()).or_default() += 1
                    }
                    _ => {}
                }
            }
            let from = if from.is_empty() {
                String::new()
            } else {
                format!(
                    ", taken from {}",
                    from.iter()
                        .map(|(k, n)| format!("{k} x{n}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            tl.say(format!(
                "module claimed {} for `{CLAIMANT}`{from} (RECLAIM.STATS claimed={claimed}, passes={}, status={})",
                plural((claimed - last_claimed) as usize, "stale entry", "stale entries"),
                int_field(&st, "passes"),
                str_field(&st, "status"),
            ));
            last_claimed = claimed;
        }
        if let Some(pid) = &poison {
            let now = now_pel
                .iter()
                .find(|(id, ..)| id == pid)
                .map(|(_, owner, _, n)| (owner.clone(), *n));
            if now != poison_state {
                match &now {
                    Some((owner, n)) => tl.say(format!(
                        "poison {pid}: pending at {owner}, delivery count {n}{}",
                        if owner == CLAIMANT
                            && poison_state.as_ref().is_some_and(|(o, _)| o == CLAIMANT)
                        {
                            " (read from reclaim's history by the recovery worker: failed again)"
                        } else if owner == CLAIMANT {
                            " (claimed by the module; next read of reclaim's history adds one)"
                        } else {
                            " (its handler failed: no XACK)"
                        }
                    )),
                    None => tl.say(format!("poison {pid}: no longer pending")),
                }
                poison_state = now;
            }
        }
        prev_pel = now_pel
            .iter()
            .map(|(id, owner, _, n)| (id.clone(), (owner.clone(), *n)))
            .collect();
        if dead > last_dead || dlq.len() > dlq_seen {
            for e in &dlq[dlq_seen.min(dlq.len())..] {
                let what = if Some(e.field("reclaim-id").unwrap_or("")) == poison.as_deref() {
                    "the poison entry"
                } else {
                    "an entry"
                };
                tl.say(format!(
                    "module dead-lettered {what}: XRANGE {DLQ} -> {} {}",
                    e.id,
                    e.show_fields()
                ));
            }
            dlq_seen = dlq.len();
            last_dead = dead;
        }
        let rl = read_log(&rlog).len();
        if rl > recovered {
            tl.say(format!(
                "recovery worker `{CLAIMANT}` processed {} claimed {} (total {rl})",
                rl - recovered,
                if rl - recovered == 1 {
                    "entry"
                } else {
                    "entries"
                }
            ));
            recovered = rl;
        }

        // Drained: nothing pending, every produced ID acknowledged or dead-lettered.
        if let Some(ids) = &produced {
            if now_pel.is_empty() {
                let mut done: BTreeSet<String> = BTreeSet::new();
                for p in &workers {
                    done.extend(read_log(&p.log));
                }
                done.extend(
                    dlq.iter()
                        .filter_map(|e| e.field("reclaim-id").map(str::to_string)),
                );
                if ids.iter().all(|id| done.contains(id)) {
                    tl.say(format!(
                        "queue drained: XPENDING {STREAM} {GROUP} total 0, every produced ID acknowledged or dead-lettered"
                    ));
                    drained = true;
                    break;
                }
            }
        }
        if Instant::now() > deadline {
            tl.say(format!(
                "TIMEOUT: not drained after {} s (producer done: {}, pending: {}); giving up",
                DEADLINE.as_secs(),
                produced.is_some(),
                now_pel.len()
            ));
            break;
        }
        thread::sleep(Duration::from_millis(20));
    }

    // Stop the workers (they loop forever), then count.
    for p in workers.iter_mut() {
        let _ = p.kill();
    }
    tl.say("workers stopped");

    // Whatever the producer wrote, also when it did not finish.
    let produced = produced.unwrap_or_else(|| written.lock().unwrap().clone());
    let mut logs: Vec<(String, Vec<String>)> = Vec::new();
    for p in &workers {
        logs.push((p.name.clone(), read_log(&p.log)));
    }
    let mut times: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, ids) in &logs {
        for id in ids {
            *times.entry(id.as_str()).or_default() += 1;
        }
    }
    let twice: Vec<String> = times
        .iter()
        .filter(|(_, &n)| n > 1)
        .map(|(id, _)| id.to_string())
        .collect();
    let dlq = dlq_entries(&mut con)?;
    let dlq_ids: Vec<String> = dlq
        .iter()
        .filter_map(|e| e.field("reclaim-id").map(str::to_string))
        .collect();
    let (pending, _) = pending_summary(&mut con)?;
    let lost: Vec<String> = produced
        .iter()
        .filter(|id| !times.contains_key(id.as_str()) && !dlq_ids.contains(id))
        .cloned()
        .collect();
    let still: BTreeSet<String> = pel(&mut con)?.into_iter().map(|(id, ..)| id).collect();
    let lost_pending = lost.iter().filter(|id| still.contains(*id)).count();
    let poison_in_dlq = poison
        .as_ref()
        .map(|p| dlq_ids.iter().filter(|d| *d == p).count())
        .unwrap_or(0);
    let others_in_dlq: Vec<String> = dlq_ids
        .iter()
        .filter(|d| Some(*d) != poison.as_ref())
        .cloned()
        .collect();
    let st: Value = cmd("RECLAIM.STATS")
        .arg(STREAM)
        .arg(GROUP)
        .query(&mut con)?;

    println!();
    println!(
        "RECLAIM.STATS {STREAM} {GROUP}: passes={} claimed={} dead-lettered={} deleted={} errors={} status={}",
        int_field(&st, "passes"),
        int_field(&st, "claimed"),
        int_field(&st, "dead-lettered"),
        int_field(&st, "deleted"),
        int_field(&st, "errors"),
        str_field(&st, "status")
    );
    println!("final tally");
    println!("  produced          {:>4}", produced.len());
    println!(
        "  processed         {:>4}   unique IDs acknowledged ({})",
        times.len(),
        logs.iter()
            .map(|(n, ids)| format!("{n} {}", ids.len()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "  processed twice   {:>4}   at-least-once duplicates{}",
        twice.len(),
        if twice.is_empty() {
            String::new()
        } else {
            format!(": {}", short_list(&twice))
        }
    );
    let poison_desc = match (
        &poison,
        dlq.iter()
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
        dlq.len(),
        if others_in_dlq.is_empty() {
            String::new()
        } else {
            format!("; also: {}", short_list(&others_in_dlq))
        }
    );
    println!("  still pending     {pending:>4}");
    println!(
        "  lost              {:>4}{}",
        lost.len(),
        if lost.is_empty() {
            String::new()
        } else {
            format!(
                "   in no ack log and not in the DLQ ({lost_pending} of them still pending): {}",
                short_list(&lost)
            )
        }
    );
    if let Some((h, ids)) = &victim_held {
        let with_poison = poison.as_ref().is_some_and(|p| ids.contains(p));
        println!(
            "  ({VICTIM} held {h} pending when killed{}; `{CLAIMANT}` processed {} claimed by the module)",
            if with_poison { ", the poison entry among them" } else { "" },
            plural(recovered, "entry", "entries")
        );
    }

    let mut problems = Vec::new();
    if !drained {
        problems.push("the queue did not drain in time".to_string());
    }
    if produced.len() != ORDERS {
        problems.push(format!("produced {} of {ORDERS}", produced.len()));
    }
    if pending != 0 {
        problems.push(format!("{pending} still pending"));
    }
    if !lost.is_empty() {
        problems.push(format!("{} lost", lost.len()));
    }
    if poison_in_dlq != 1 {
        problems.push(format!("poison in the DLQ {poison_in_dlq} times (want 1)"));
    }
    if !ok {
        problems.push("a worker exited on its own".into());
    }
    if problems.is_empty() {
        println!("OK: nothing pending, nothing lost, the poison entry dead-lettered once");
        Ok(true)
    } else {
        println!("FAILED: {}", problems.join("; "));
        Ok(false)
    }
}
