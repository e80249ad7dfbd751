//! Test harness: real redis-server processes with the module loaded, on free loopback ports, in
//! temporary directories, always stopped (on drop, also when a test panics).
//!
//! `REDIS_SERVER` selects the server binary (default `redis-server` on PATH); `RECLAIM_MODULE` the
//! module (default `target/release/libredis_reclaim.so`, built by `make test`).

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use redis::{cmd, Connection, Value};

/// Path of the module under test.
pub fn module_path() -> PathBuf {
    if let Ok(p) = std::env::var("RECLAIM_MODULE") {
        return PathBuf::from(p);
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/libredis_reclaim.so");
    assert!(
        p.exists(),
        "module not built: run `cargo build --release` (or `make test`) first: {}",
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

/// Polls `f` every 10 ms until it returns `Some`, or panics with `what` after `secs` seconds.
pub fn wait_for<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
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
    child: Option<Child>,
}

impl Server {
    /// Starts a server with the module and `extra` arguments (`--name value` pairs, as on the
    /// redis-server command line).
    pub fn start(extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut s = Server {
            port: free_port(),
            dir,
            args: extra.iter().map(|s| s.to_string()).collect(),
            child: None,
        };
        s.spawn();
        s
    }

    /// Starts a server with the default test arguments.
    pub fn new() -> Server {
        Server::start(&[])
    }

    fn spawn(&mut self) {
        let log = self.dir.path().join("server.log");
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
            .arg("")
            .arg("--loadmodule")
            .arg(module_path())
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        self.child = Some(
            c.spawn()
                .expect("start redis-server (is it installed? see `make deps`)"),
        );
        let port = self.port;
        let logp = log.clone();
        wait_for(
            20,
            &format!(
                "redis-server on port {port} to answer PING (log: {})",
                logp.display()
            ),
            || {
                if let Some(ch) = self.child.as_mut() {
                    if let Ok(Some(status)) = ch.try_wait() {
                        panic!(
                            "redis-server exited with {status}; log:\n{}",
                            std::fs::read_to_string(&logp).unwrap_or_default()
                        );
                    }
                }
                let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
                let mut con = client.get_connection().ok()?;
                let r: redis::RedisResult<String> = cmd("PING").query(&mut con);
                // A server still loading its AOF/RDB answers LOADING: keep waiting.
                r.ok()
            },
        );
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
        self.spawn();
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
    fn drop(&mut self) {
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
