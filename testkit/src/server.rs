//! The server under test: real redis-server processes with the module loaded, on free loopback
//! ports, in temporary directories, always stopped (on drop, also when a test panics).
//!
//! `REDIS_SERVER` selects the server binary (default `redis-server` on PATH), `REDIS_CLI` its
//! command-line client (see [`cli_binary`]); `RECLAIM_MODULE` the module (default: the
//! `libredis_reclaim.so` of `cargo build --release` in the target directory cargo built the tests
//! in, see [`module_path`]; `make test` builds it first).

use std::collections::BTreeSet;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redis::{cmd, Connection};

use crate::wait::wait_for;

/// Path of the module under test: `RECLAIM_MODULE` when set, otherwise the one `cargo build
/// --release` built, `<target dir>/release/libredis_reclaim.so`.
///
/// The target dir is `./target`, or `CARGO_TARGET_DIR`, or cargo's `build.target-dir` (a shared
/// target directory), and cargo tells its tests none of these (nor does it build the cdylib for
/// them: `make test` runs `cargo build --release` first). But it always puts an integration test
/// binary in `<target dir>/<profile>/deps/`, and an example in `<target dir>/<profile>/examples/`,
/// so the target dir is found from the binary's own path: three directories up from
/// `current_exe()`.
pub fn module_path() -> PathBuf {
    if let Ok(p) = std::env::var("RECLAIM_MODULE") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("current_exe");
    let target_dir = exe
        .ancestors()
        .nth(3)
        .expect("the test binary is in <target dir>/<profile>/deps/ (or examples/)");
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

/// The command-line client for the server under test: `REDIS_CLI` when set, else the
/// `redis-cli` or `valkey-cli` beside the server binary, else `redis-cli` on PATH (installed with
/// redis-server; it talks to every server of the matrix).
pub fn cli_binary() -> PathBuf {
    if let Ok(p) = std::env::var("REDIS_CLI") {
        return PathBuf::from(p);
    }
    let server = PathBuf::from(server_binary());
    if let Some(dir) = server.parent().filter(|d| !d.as_os_str().is_empty()) {
        for name in ["redis-cli", "valkey-cli"] {
            if dir.join(name).is_file() {
                return dir.join(name);
            }
        }
    }
    PathBuf::from("redis-cli")
}

/// A free TCP port on 127.0.0.1, never one this test process was given before: the tests of one
/// binary run in parallel threads, and the OS may hand a port it just gave (and that was closed
/// again, before the server bound it) to the next caller, so two servers would race for it and
/// a test could talk to another test's server.
///
/// With `RECLAIM_PORT_BASE` set (`make ... BASE_PORT=N`), ports come from N upward, skipping
/// those in use, instead of any port the OS picks: for a machine whose firewall or neighbours
/// want servers in a known range. Panics when the variable is not a port, or past 65535.
pub fn free_port() -> u16 {
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(base) = port_base() {
        // From the last port handed out, so a port given back by a stopped server is not reused.
        let next = match given.range(base..).next_back() {
            None => Some(base),
            Some(p) => p.checked_add(1),
        };
        let port = next
            .and_then(|n| (n..=u16::MAX).find(|p| TcpListener::bind(("127.0.0.1", *p)).is_ok()))
            .unwrap_or_else(|| panic!("no free port from RECLAIM_PORT_BASE={base} to 65535"));
        given.insert(port);
        return port;
    }
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .expect("bind")
            .local_addr()
            .expect("addr")
            .port();
        if given.insert(port) {
            return port;
        }
    }
}

/// `RECLAIM_PORT_BASE`, the first port [`free_port`] hands out; `None` when unset or empty.
pub fn port_base() -> Option<u16> {
    let v = std::env::var("RECLAIM_PORT_BASE").ok()?;
    let v = v.trim();
    if v.is_empty() {
        return None;
    }
    match v.parse::<u16>() {
        Ok(p) if p > 0 => Some(p),
        _ => panic!("RECLAIM_PORT_BASE must be a port number (1 to 65535), not {v:?}"),
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

    /// Starts a server with the module, an AOF written at every command and `DEBUG` enabled: for
    /// the tests of what survives `DEBUG RELOAD` and a restart from the AOF.
    pub fn with_aof_and_debug() -> Server {
        Server::start(&[
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--enable-debug-command",
            "yes",
        ])
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

    /// Starts a server with the default test arguments. (No `Default`: this starts a process.)
    #[allow(clippy::new_without_default)]
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

    /// A new connection (replies within 60 s).
    pub fn conn(&self) -> Connection {
        self.conn_with_read_timeout(Duration::from_secs(60))
    }

    /// A new connection whose replies may take up to `read` (the bench's long scripts).
    pub fn conn_with_read_timeout(&self, read: Duration) -> Connection {
        self.open(&format!("redis://127.0.0.1:{}/", self.port), read)
    }

    /// A connection to `url`, connected within 10 s, replies within `read`.
    fn open(&self, url: &str, read: Duration) -> Connection {
        let client = redis::Client::open(url).expect("client");
        let con = client
            .get_connection_with_timeout(Duration::from_secs(10))
            .expect("connect");
        con.set_read_timeout(Some(read)).ok();
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

    /// Starts a server (with the module) that loads the RDB file `tests/fixtures/<name>` of the
    /// project at start-up: one saved by an older version of the module, to show it still loads.
    pub fn from_fixture(name: &str) -> Server {
        let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures")
            .join(name);
        let mut s = Server::start(&["--dbfilename", "old.rdb"]);
        s.kill();
        std::fs::copy(&fixture, s.dir.path().join("old.rdb"))
            .unwrap_or_else(|e| panic!("copy {}: {e}", fixture.display()));
        s.restart();
        s
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

impl Server {
    /// A new connection with database `db` selected.
    pub fn conn_db(&self, db: i64) -> Connection {
        let url = format!("redis://127.0.0.1:{}/{db}", self.port);
        self.open(&url, Duration::from_secs(60))
    }
}

/// `REPLICAOF 127.0.0.1 <primary's port>`: the server of `con` becomes a replica of `primary`.
pub fn replicaof(con: &mut Connection, primary: &Server) {
    let _: () = cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(primary.port)
        .query(con)
        .expect("REPLICAOF");
}

/// `REPLICAOF NO ONE`: the server of `con` becomes a primary.
pub fn promote(con: &mut Connection) {
    let _: () = cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(con)
        .expect("REPLICAOF NO ONE");
}

/// The `role` field of `INFO replication` (`master` or `slave`).
pub fn role(con: &mut Connection) -> String {
    crate::replies::info_field(con, "replication", "role")
}

/// The coordinated `FAILOVER TO` `replica` from the primary of `con`: waits until the replica
/// acknowledged everything (FAILOVER TO needs it online on the primary's side, which happens at
/// its first REPLCONF ACK, up to a second after its link is up), fails over, and waits until the
/// replica is the primary and the old primary a replica of it with its link up.
pub fn failover_to(con: &mut Connection, replica: &Server) {
    crate::wait::replica_acked(con);
    let port = replica.port.to_string();
    let _: () = crate::words::q(con, &["FAILOVER", "TO", "127.0.0.1", &port]);
    let mut rc = replica.conn();
    wait_for(20, "the failover to complete", || {
        let link_up = crate::replies::info(con, "replication")
            .iter()
            .any(|(k, v)| k == "master_link_status" && v == "up");
        (role(&mut rc) == "master" && role(con) == "slave" && link_up).then_some(())
    });
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

/// Collects the keyspace events of database 0 (`__keyspace@0__:*`) on a thread of its own.
pub fn listen(s: &Server) -> std::sync::mpsc::Receiver<(String, String)> {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut con = s.conn();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut ps = con.as_pubsub();
        ps.psubscribe("__keyspace@0__:*").expect("PSUBSCRIBE");
        ps.set_read_timeout(Some(Duration::from_millis(200))).ok();
        let _ = ready_tx.send(());
        loop {
            match ps.get_message() {
                Ok(m) => {
                    let key = m
                        .get_channel_name()
                        .trim_start_matches("__keyspace@0__:")
                        .to_string();
                    let ev: String = m.get_payload().unwrap_or_default();
                    if tx.send((key, ev)).is_err() {
                        return;
                    }
                }
                Err(e) if e.is_timeout() => continue,
                Err(_) => return,
            }
        }
    });
    ready_rx
        .recv_timeout(Duration::from_secs(10))
        .expect("subscribed");
    rx
}
