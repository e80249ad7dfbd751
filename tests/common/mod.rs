//! Test harness: real redis-server processes with the module loaded, on free loopback ports, in
//! temporary directories, always stopped (on drop, also when a test panics).
//!
//! `REDIS_SERVER` selects the server binary (default `redis-server` on PATH); `RECLAIM_MODULE` the
//! module (default: the `libredis_reclaim.so` of `cargo build --release` in the target directory
//! cargo built the tests in, see [`module_path`]; `make test` builds it first).

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use redis::{cmd, Connection, Value};

/// Path of the module under test: `RECLAIM_MODULE` when set, otherwise the one `cargo build
/// --release` built, `<target dir>/release/libredis_reclaim.so`.
///
/// The target dir is `./target`, or `CARGO_TARGET_DIR`, or cargo's `build.target-dir` (a shared
/// target directory), and cargo tells its tests none of these (nor does it build the cdylib for
/// them: `make test` runs `cargo build --release` first). But it always puts an integration test
/// binary in `<target dir>/<profile>/deps/` (`<target dir>/<triple>/<profile>/deps/` with
/// `--target`, where the module is in `<target dir>/<triple>/release/`), so the target dir is
/// found from the test binary's own path: three directories up from `current_exe()`.
pub fn module_path() -> PathBuf {
    if let Ok(p) = std::env::var("RECLAIM_MODULE") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current_exe");
    let target_dir = exe
        .ancestors()
        .nth(3)
        .expect("the test binary is in <target dir>/<profile>/deps/");
    let p = target_dir.join("release/libredis_reclaim.so");
    assert!(
        p.exists(),
        "module not built: {} (run `make test`, or `cargo build --release` first, or set \
         RECLAIM_MODULE)",
        p.display()
    );
    p
}

/// The server binary under test.
pub fn server_binary() -> String {
    std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".to_string())
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

/// How much slower than usual the server under test runs (`RECLAIM_TEST_SLOWDOWN`, default 1;
/// `make test-valgrind` sets it): every [`wait_for`] deadline is multiplied by it.
pub fn slowdown() -> u64 {
    std::env::var("RECLAIM_TEST_SLOWDOWN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
        .max(1)
}

/// Polls `f` every 10 ms until it returns `Some`, or panics with `what` after `secs` seconds
/// (times [`slowdown`]).
pub fn wait_for<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let secs = secs * slowdown();
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {secs}s waiting for: {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// One redis-server process with the module loaded.
pub struct Server {
    pub port: u16,
    pub dir: tempfile::TempDir,
    pub args: Vec<String>,
    /// Whether the server loads the module (see [`Server::start_without_module`]).
    pub module: bool,
    child: Option<Child>,
}

impl Server {
    /// Starts a server with the module and `extra` arguments (`--name value` pairs, as on the
    /// redis-server command line).
    pub fn start(extra: &[&str]) -> Server {
        Server::launch(extra, true)
    }

    /// Starts a server without the module, for measuring what the server does on its own.
    pub fn start_without_module(extra: &[&str]) -> Server {
        Server::launch(extra, false)
    }

    fn launch(extra: &[&str], module: bool) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut s = Server {
            port: 0,
            dir,
            args: extra.iter().map(|s| s.to_string()).collect(),
            module,
            child: None,
        };
        // Another process (a client's or replica's outgoing connection takes an ephemeral port
        // too) can take the free port before the server binds it: then try another.
        for attempt in 1.. {
            s.port = free_port();
            match s.spawn() {
                Ok(()) => break,
                Err(log) if attempt < 5 => eprintln!("port {} was taken, retrying: {log}", s.port),
                Err(log) => panic!("redis-server could not bind 5 ports; last log:\n{log}"),
            }
        }
        s
    }

    /// Starts a server with the default test arguments.
    pub fn new() -> Server {
        Server::start(&[])
    }

    /// Starts the process on `self.port` and waits until it answers PING as itself (its INFO
    /// `process_id` is the child's), so a test never talks to another test's server. `Err(log)`
    /// when the port was already in use; panics with the log on any other exit.
    fn spawn(&mut self) -> Result<(), String> {
        let log = self.dir.path().join("server.log");
        // A restart appends to the same log: only what this process writes counts.
        let skip = std::fs::metadata(&log)
            .map(|m| m.len() as usize)
            .unwrap_or(0);
        let mut c = Command::new(server_binary());
        c.arg("--port")
            .arg(self.port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(&log)
            .arg("--save")
            .arg("");
        if self.module {
            c.arg("--loadmodule").arg(module_path());
        }
        c.args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = c
            .spawn()
            .expect("start redis-server (is it installed? see `make deps`)");
        let pid = child.id();
        self.child = Some(child);
        let port = self.port;
        wait_for(
            20,
            &format!(
                "redis-server (pid {pid}) on port {port} to answer PING (log: {})",
                log.display()
            ),
            || {
                if let Some(ch) = self.child.as_mut() {
                    if let Ok(Some(status)) = ch.try_wait() {
                        self.child = None;
                        let all = std::fs::read(&log).unwrap_or_default();
                        let text =
                            String::from_utf8_lossy(all.get(skip..).unwrap_or(&[])).into_owned();
                        if text.contains("Address already in use") {
                            return Some(Err(text));
                        }
                        panic!("redis-server exited with {status}; log:\n{text}");
                    }
                }
                let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
                let mut con = client.get_connection().ok()?;
                // A server still loading its AOF/RDB answers LOADING: keep waiting.
                let _: String = cmd("PING").query(&mut con).ok()?;
                let info: String = cmd("INFO").arg("server").query(&mut con).ok()?;
                let theirs = info
                    .lines()
                    .find_map(|l| l.strip_prefix("process_id:"))
                    .and_then(|v| v.trim().parse::<u32>().ok());
                (theirs == Some(pid)).then_some(Ok(()))
            },
        )
    }

    /// The last `n` lines of the server log.
    pub fn log_tail(&self, n: usize) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// A new connection.
    pub fn conn(&self) -> Connection {
        let client =
            redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).expect("client");
        let con = client
            .get_connection_with_timeout(Duration::from_secs(10))
            .expect("connect");
        con.set_read_timeout(Some(Duration::from_secs(60))).ok();
        con
    }

    /// A RESP3 connection.
    pub fn conn3(&self) -> Connection {
        let client =
            redis::Client::open(format!("redis://127.0.0.1:{}/?protocol=resp3", self.port))
                .expect("client");
        client
            .get_connection_with_timeout(Duration::from_secs(10))
            .expect("connect")
    }

    /// Kills the server with SIGKILL (no save) and waits for it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kills the server and its forked children (a BGSAVE or a sync in progress, which a forked
    /// child may be sending to a replica itself) with SIGKILL.
    pub fn kill_with_children(&mut self) {
        if let Some(c) = self.child.as_ref() {
            let pid = c.id();
            let list = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
                .unwrap_or_default();
            for child in list.split_whitespace() {
                let _ = Command::new("kill").arg("-9").arg(child).status();
            }
        }
        self.kill();
    }

    /// Stops the server with `SHUTDOWN` (saving according to its config) and waits for it.
    pub fn shutdown(&mut self) {
        if let Some(mut c) = self.child.take() {
            let mut con = self.conn();
            let _: redis::RedisResult<()> = cmd("SHUTDOWN").query(&mut con);
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the server again on the same port and directory (after `kill` or `shutdown`).
    pub fn restart(&mut self) {
        self.kill();
        if let Err(log) = self.spawn() {
            panic!(
                "port {} was taken before the restart; log:\n{log}",
                self.port
            );
        }
    }

    /// Starts a replica of this server (with the module) and waits until its link is up.
    pub fn replica(&self, extra: &[&str]) -> Server {
        let port = self.port.to_string();
        let mut args: Vec<&str> = vec!["--replicaof", "127.0.0.1", &port];
        args.extend_from_slice(extra);
        let r = Server::start(&args);
        let mut con = r.conn();
        wait_for(20, "replica link up", || {
            let info: String = cmd("INFO").arg("replication").query(&mut con).ok()?;
            info.contains("master_link_status:up").then_some(())
        });
        r
    }

    /// The server log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    }
}

impl Drop for Server {
    /// Kills the server. When the test is failing, first prints whether the server was still
    /// running and the end of its log, so a CI failure shows what the server saw.
    fn drop(&mut self) {
        if std::thread::panicking() {
            let state = match self.child.as_mut().map(|c| c.try_wait()) {
                Some(Ok(None)) => "running".to_string(),
                Some(Ok(Some(status))) => format!("exited: {status}"),
                Some(Err(e)) => format!("unknown: {e}"),
                None => "stopped by the test".to_string(),
            };
            eprintln!(
                "--- redis-server on port {} ({state}), end of its log:\n{}\n---",
                self.port,
                self.log_tail(40)
            );
        }
        self.kill();
    }
}

/// Field/value reply (RESP2 flat array or RESP3 map) as a list of (field, value) pairs.
pub fn pairs(v: &Value) -> Vec<(String, Value)> {
    match v {
        Value::Array(a) => a
            .chunks(2)
            .map(|c| {
                (
                    redis::from_redis_value::<String>(c[0].clone()).unwrap_or_default(),
                    c[1].clone(),
                )
            })
            .collect(),
        Value::Map(m) => m
            .iter()
            .map(|(k, v)| {
                (
                    redis::from_redis_value::<String>(k.clone()).unwrap_or_default(),
                    v.clone(),
                )
            })
            .collect(),
        other => panic!("not a field/value reply: {other:?}"),
    }
}

/// One integer field of a field/value reply.
pub fn int_field(v: &Value, name: &str) -> i64 {
    let (_, val) = pairs(v)
        .into_iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no field {name} in {v:?}"));
    redis::from_redis_value(val).expect("integer field")
}

/// One string field of a field/value reply.
pub fn str_field(v: &Value, name: &str) -> String {
    let (_, val) = pairs(v)
        .into_iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no field {name} in {v:?}"));
    redis::from_redis_value(val).expect("string field")
}

/// `RECLAIM.STATS key group` as a reply value.
pub fn stats(con: &mut Connection, key: &str, group: &str) -> Value {
    cmd("RECLAIM.STATS")
        .arg(key)
        .arg(group)
        .query(con)
        .expect("RECLAIM.STATS")
}

/// One pending entry as XPENDING reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pend {
    pub id: String,
    pub consumer: String,
    pub idle: i64,
    pub count: i64,
}

/// `XPENDING key group - + 1000000` as a list.
pub fn pending(con: &mut Connection, key: &str, group: &str) -> Vec<Pend> {
    let v: Vec<(String, String, i64, i64)> = cmd("XPENDING")
        .arg(key)
        .arg(group)
        .arg("-")
        .arg("+")
        .arg(1_000_000)
        .query(con)
        .expect("XPENDING");
    v.into_iter()
        .map(|(id, consumer, idle, count)| Pend {
            id,
            consumer,
            idle,
            count,
        })
        .collect()
}

/// The error text of a command that must fail.
pub fn error_of(con: &mut Connection, c: &redis::Cmd) -> String {
    match c.query::<Value>(con) {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => {
            // redis-rs splits "CODE message"; put them back together as the wire text.
            match (e.code(), e.detail()) {
                (Some(code), Some(detail)) => format!("{code} {detail}"),
                (Some(code), None) => code.to_string(),
                _ => e.to_string(),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers for the persistence and replication tests.
// ---------------------------------------------------------------------------------------------

impl Server {
    /// A new connection with database `db` selected.
    pub fn conn_db(&self, db: i64) -> Connection {
        let client =
            redis::Client::open(format!("redis://127.0.0.1:{}/{db}", self.port)).expect("client");
        let con = client
            .get_connection_with_timeout(Duration::from_secs(10))
            .expect("connect");
        con.set_read_timeout(Some(Duration::from_secs(60))).ok();
        con
    }

    /// The files of the server's `appendonlydir`, as (file name, contents), sorted by name.
    pub fn aof_files(&self) -> Vec<(String, Vec<u8>)> {
        let dir = self.dir.path().join("appendonlydir");
        let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
            .map(|e| {
                let e = e.expect("dir entry");
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).expect("read AOF file"),
                )
            })
            .collect();
        out.sort();
        out
    }

    /// The AOF files the manifest lists now, as (file name, type `b`/`h`/`i`, contents), in
    /// manifest order.
    pub fn aof_manifest_files(&self) -> Vec<(String, String, Vec<u8>)> {
        let dir = self.dir.path().join("appendonlydir");
        let files = self.aof_files();
        let manifest = files
            .iter()
            .find(|(n, _)| n.ends_with(".manifest"))
            .map(|(_, d)| String::from_utf8_lossy(d).into_owned())
            .unwrap_or_else(|| panic!("no AOF manifest in {}", dir.display()));
        manifest
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                let field = |k: &str| {
                    w.iter()
                        .position(|x| *x == k)
                        .and_then(|i| w.get(i + 1))
                        .unwrap_or_else(|| panic!("manifest line without {k}: {l}"))
                        .to_string()
                };
                let name = field("file");
                let ty = field("type");
                let data = std::fs::read(dir.join(&name)).expect("read AOF file");
                (name, ty, data)
            })
            .collect()
    }
}

/// `INFO section` as (field, value) pairs.
pub fn info(con: &mut Connection, section: &str) -> Vec<(String, String)> {
    let text: String = cmd("INFO").arg(section).query(con).expect("INFO");
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.trim().to_string()))
        .collect()
}

/// One integer field of `INFO section`.
pub fn info_int(con: &mut Connection, section: &str, field: &str) -> i64 {
    let all = info(con, section);
    let (_, v) = all
        .iter()
        .find(|(k, _)| k == field)
        .unwrap_or_else(|| panic!("no {field} in INFO {section}: {all:?}"));
    v.parse()
        .unwrap_or_else(|_| panic!("{field} is not an integer: {v}"))
}

/// Waits until no AOF rewrite is running or scheduled, and checks that the last one succeeded.
pub fn wait_aof_rewrite_done(con: &mut Connection) {
    wait_for(20, "AOF rewrite to finish", || {
        let i = info(con, "persistence");
        let f = |k: &str| i.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        (f("aof_rewrite_in_progress").as_deref() == Some("0")
            && f("aof_rewrite_scheduled").as_deref() == Some("0"))
        .then_some(())
    });
    let i = info(con, "persistence");
    let status = i
        .iter()
        .find(|(n, _)| n == "aof_last_bgrewrite_status")
        .map(|(_, v)| v.clone());
    assert_eq!(status.as_deref(), Some("ok"), "INFO persistence: {i:?}");
}

/// The bytes of a bulk/simple string reply.
pub fn bytes_of(v: &Value) -> Vec<u8> {
    match v {
        Value::BulkString(b) => b.clone(),
        Value::SimpleString(s) => s.clone().into_bytes(),
        Value::Okay => b"OK".to_vec(),
        Value::Int(i) => i.to_string().into_bytes(),
        other => panic!("not a string reply: {other:?}"),
    }
}

/// A reclaim policy as `RECLAIM.POLICY GET` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyView {
    pub min_idle: i64,
    pub max_deliveries: i64,
    pub dlq: Option<Vec<u8>>,
    pub claimant: Vec<u8>,
    pub count: i64,
    pub interval: i64,
}

impl PolicyView {
    /// A policy with the given MIN-IDLE and INTERVAL and the module defaults otherwise.
    pub fn new(min_idle: i64, interval: i64) -> PolicyView {
        PolicyView {
            min_idle,
            max_deliveries: 0,
            dlq: None,
            claimant: b"reclaim".to_vec(),
            count: 100,
            interval,
        }
    }

    /// The same policy with a DLQ and MAX-DELIVERIES.
    pub fn with_dlq(mut self, dlq: &[u8], max_deliveries: i64) -> PolicyView {
        self.dlq = Some(dlq.to_vec());
        self.max_deliveries = max_deliveries;
        self
    }

    /// The same policy with another CLAIMANT.
    pub fn with_claimant(mut self, claimant: &[u8]) -> PolicyView {
        self.claimant = claimant.to_vec();
        self
    }

    /// The same policy with another COUNT.
    pub fn with_count(mut self, count: i64) -> PolicyView {
        self.count = count;
        self
    }

    /// The arguments of `RECLAIM.POLICY SET stream group ...` after `group`, every option given,
    /// in the order the module itself uses when it rewrites or propagates a policy.
    pub fn set_args(&self) -> Vec<Vec<u8>> {
        let mut a: Vec<Vec<u8>> = vec![
            b"MIN-IDLE".to_vec(),
            self.min_idle.to_string().into_bytes(),
            b"MAX-DELIVERIES".to_vec(),
            self.max_deliveries.to_string().into_bytes(),
        ];
        if let Some(d) = &self.dlq {
            a.push(b"DLQ".to_vec());
            a.push(d.clone());
        }
        a.extend([
            b"CLAIMANT".to_vec(),
            self.claimant.clone(),
            b"COUNT".to_vec(),
            self.count.to_string().into_bytes(),
            b"INTERVAL".to_vec(),
            self.interval.to_string().into_bytes(),
        ]);
        a
    }

    /// Parses a GET reply (or the policy fields of a LIST item).
    pub fn from_reply(v: &Value) -> PolicyView {
        let p = pairs(v);
        let get = |name: &str| -> Value {
            p.iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| panic!("no field {name} in {v:?}"))
        };
        let int = |name: &str| -> i64 {
            match get(name) {
                Value::Int(i) => i,
                other => panic!("field {name} is not an integer: {other:?}"),
            }
        };
        PolicyView {
            min_idle: int("min-idle"),
            max_deliveries: int("max-deliveries"),
            dlq: match get("dlq") {
                Value::Nil => None,
                other => Some(bytes_of(&other)),
            },
            claimant: bytes_of(&get("claimant")),
            count: int("count"),
            interval: int("interval"),
        }
    }
}

/// `RECLAIM.POLICY SET stream group <every option of p>`.
pub fn set_policy(con: &mut Connection, stream: &[u8], group: &[u8], p: &PolicyView) {
    let r: Value = cmd("RECLAIM.POLICY")
        .arg("SET")
        .arg(stream)
        .arg(group)
        .arg(p.set_args())
        .query(con)
        .expect("RECLAIM.POLICY SET");
    assert!(
        matches!(&r, Value::Okay) || matches!(&r, Value::SimpleString(s) if s == "OK"),
        "{r:?}"
    );
}

/// `RECLAIM.POLICY GET stream group`.
pub fn get_policy(con: &mut Connection, stream: &[u8], group: &[u8]) -> Option<PolicyView> {
    let v: Value = cmd("RECLAIM.POLICY")
        .arg("GET")
        .arg(stream)
        .arg(group)
        .query(con)
        .expect("RECLAIM.POLICY GET");
    match v {
        Value::Nil => None,
        v => Some(PolicyView::from_reply(&v)),
    }
}

/// `RECLAIM.POLICY DEL stream group`.
pub fn del_policy(con: &mut Connection, stream: &[u8], group: &[u8]) -> i64 {
    cmd("RECLAIM.POLICY")
        .arg("DEL")
        .arg(stream)
        .arg(group)
        .query(con)
        .expect("RECLAIM.POLICY DEL")
}

/// `RECLAIM.POLICY LIST` as (stream, group, policy), in reply order.
pub fn list_policies(con: &mut Connection) -> Vec<(Vec<u8>, Vec<u8>, PolicyView)> {
    let v: Value = cmd("RECLAIM.POLICY")
        .arg("LIST")
        .query(con)
        .expect("RECLAIM.POLICY LIST");
    let Value::Array(items) = v else {
        panic!("LIST is not an array: {v:?}");
    };
    items
        .iter()
        .map(|it| {
            let p = pairs(it);
            let f = |name: &str| {
                bytes_of(
                    &p.iter()
                        .find(|(k, _)| k == name)
                        .unwrap_or_else(|| panic!("no {name} in {it:?}"))
                        .1,
                )
            };
            (f("key"), f("group"), PolicyView::from_reply(it))
        })
        .collect()
}

/// One pending entry, binary-safe: (id, owner, delivery count). Idle time left out: it differs
/// between servers and restarts.
pub type PendRaw = (String, Vec<u8>, i64);

/// `XPENDING key group - + 1000000` as (id, owner, count), binary-safe.
pub fn pending_raw(con: &mut Connection, key: &[u8], group: &[u8]) -> Vec<PendRaw> {
    let v: Vec<(String, Vec<u8>, i64, i64)> = cmd("XPENDING")
        .arg(key)
        .arg(group)
        .arg("-")
        .arg("+")
        .arg(1_000_000)
        .query(con)
        .expect("XPENDING");
    v.into_iter().map(|(id, c, _idle, n)| (id, c, n)).collect()
}

/// One stream entry: (id, [field, value, ...]).
pub type Entry = (String, Vec<Vec<u8>>);

/// `XRANGE key - +`.
pub fn xrange(con: &mut Connection, key: &[u8]) -> Vec<Entry> {
    cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .query(con)
        .expect("XRANGE")
}

/// The value of `field` in a stream entry's field list.
pub fn entry_field(e: &Entry, field: &str) -> Vec<u8> {
    e.1.chunks(2)
        .find(|c| c[0] == field.as_bytes())
        .map(|c| c[1].clone())
        .unwrap_or_else(|| panic!("no field {field} in entry {e:?}"))
}

/// `XLEN key`.
pub fn xlen(con: &mut Connection, key: &[u8]) -> i64 {
    cmd("XLEN").arg(key).query(con).expect("XLEN")
}

/// `XGROUP CREATE key group $ MKSTREAM`.
pub fn create_group(con: &mut Connection, key: &[u8], group: &[u8]) {
    let _: () = cmd("XGROUP")
        .arg("CREATE")
        .arg(key)
        .arg(group)
        .arg("$")
        .arg("MKSTREAM")
        .query(con)
        .expect("XGROUP CREATE");
}

/// Appends `n` entries `n <tag>-<i>` to `key`; returns their IDs.
pub fn add_entries(con: &mut Connection, key: &[u8], tag: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            cmd("XADD")
                .arg(key)
                .arg("*")
                .arg("n")
                .arg(format!("{tag}-{i}"))
                .query(con)
                .expect("XADD")
        })
        .collect()
}

/// The command `XREADGROUP GROUP group consumer COUNT 100000 STREAMS key >`.
pub fn read_group_cmd(key: &[u8], group: &[u8], consumer: &[u8]) -> redis::Cmd {
    let mut c = cmd("XREADGROUP");
    c.arg("GROUP")
        .arg(group)
        .arg(consumer)
        .arg("COUNT")
        .arg(100_000)
        .arg("STREAMS")
        .arg(key)
        .arg(">");
    c
}

/// `consumer` reads every new entry of `key` in `group` (and, in these tests, never acks).
pub fn read_group(con: &mut Connection, key: &[u8], group: &[u8], consumer: &[u8]) {
    let _: Value = read_group_cmd(key, group, consumer)
        .query(con)
        .expect("XREADGROUP");
}

/// The command that sets the delivery count of pending `ids` to `count` without changing the
/// owner (`XCLAIM key group owner 0 ids... RETRYCOUNT count JUSTID`).
pub fn set_deliveries_cmd(
    key: &[u8],
    group: &[u8],
    owner: &[u8],
    ids: &[String],
    count: i64,
) -> redis::Cmd {
    let mut c = cmd("XCLAIM");
    c.arg(key)
        .arg(group)
        .arg(owner)
        .arg(0)
        .arg(ids)
        .arg("RETRYCOUNT")
        .arg(count)
        .arg("JUSTID");
    c
}

/// Runs [`set_deliveries_cmd`].
pub fn set_deliveries(
    con: &mut Connection,
    key: &[u8],
    group: &[u8],
    owner: &[u8],
    ids: &[String],
    count: i64,
) {
    let v: Vec<String> = set_deliveries_cmd(key, group, owner, ids, count)
        .query(con)
        .expect("XCLAIM");
    assert_eq!(v.len(), ids.len(), "XCLAIM claimed {v:?} of {ids:?}");
}

/// Splits the RESP commands of an AOF file (arrays of bulk strings; `#` annotation lines are
/// skipped). Panics on anything else, or on a truncated command.
pub fn parse_aof(data: &[u8]) -> Vec<Vec<Vec<u8>>> {
    fn line(data: &[u8], pos: &mut usize) -> Vec<u8> {
        let start = *pos;
        let end = data[start..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .map(|i| start + i)
            .unwrap_or_else(|| panic!("unterminated line at byte {start}"));
        *pos = end + 2;
        data[start..end].to_vec()
    }
    fn number(l: &[u8]) -> usize {
        std::str::from_utf8(l)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad length {:?}", String::from_utf8_lossy(l)))
    }
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let l = line(data, &mut pos);
        match l.first() {
            Some(b'#') => continue,
            Some(b'*') => {
                let n = number(&l[1..]);
                let mut args = Vec::with_capacity(n);
                for _ in 0..n {
                    let h = line(data, &mut pos);
                    assert_eq!(h.first(), Some(&b'$'), "expected a bulk string header");
                    let len = number(&h[1..]);
                    assert!(pos + len + 2 <= data.len(), "truncated bulk string");
                    args.push(data[pos..pos + len].to_vec());
                    assert_eq!(&data[pos + len..pos + len + 2], b"\r\n");
                    pos += len + 2;
                }
                out.push(args);
            }
            _ => panic!(
                "unexpected AOF line at byte {pos}: {:?}",
                String::from_utf8_lossy(&l)
            ),
        }
    }
    out
}

/// Whether AOF command `c` is `name` (case-insensitive).
pub fn is_cmd(c: &[Vec<u8>], name: &str) -> bool {
    c.first()
        .is_some_and(|n| n.eq_ignore_ascii_case(name.as_bytes()))
}

/// The command `RECLAIM.POLICY SET stream group <every option of p>` (for pipelines).
pub fn set_policy_cmd(stream: &[u8], group: &[u8], p: &PolicyView) -> redis::Cmd {
    let mut c = cmd("RECLAIM.POLICY");
    c.arg("SET").arg(stream).arg(group).arg(p.set_args());
    c
}

/// Creates `group` on `key` (with the stream) unless it exists already.
pub fn ensure_group(con: &mut Connection, key: &[u8], group: &[u8]) {
    let r: redis::RedisResult<()> = cmd("XGROUP")
        .arg("CREATE")
        .arg(key)
        .arg(group)
        .arg("$")
        .arg("MKSTREAM")
        .query(con);
    if let Err(e) = r {
        assert_eq!(e.code(), Some("BUSYGROUP"), "XGROUP CREATE: {e}");
    }
}

/// The integer field `reclaim_<name>` of `INFO reclaim`.
pub fn reclaim_info(con: &mut Connection, name: &str) -> i64 {
    info_int(con, "reclaim", &format!("reclaim_{name}"))
}
