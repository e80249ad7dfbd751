//! Runs one sequence against a primary and its replica (with the module, or without it) and
//! checks, after every reload, restart and sync, that the dataset is what it was: the primary's
//! before and after, the primary and its replica. Records what the other run is compared on:
//! the database the main client is in after each operation, the plain keys at each check.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use reclaim_testkit::dataset::{self, Dataset, StreamDetail};
use reclaim_testkit::{cmd, Connection, Server, Value};

use crate::gen::{self, Op, Persist, Step, DBS};

/// What went wrong, at which operation.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Index of the operation (in the sequence run) at which it was seen.
    pub at: usize,
    /// Short kind, the same when a shorter sequence shows the same defect.
    pub kind: String,
    pub detail: String,
}

/// What a run recorded for the comparison with the other run.
#[derive(Debug, Default)]
pub struct Record {
    /// The main client's database after each operation (`None`: not known).
    pub client_db: Vec<Option<i64>>,
    /// At each check: (operation index, plain keys, whether they may differ from the other
    /// run's: a partial maxmemory since the last FLUSHALL).
    pub plain: Vec<(usize, Dataset, bool)>,
    pub failure: Option<Failure>,
    pub checks: usize,
    /// The `MULTI` operations whose `EXEC` failed (`EXECABORT`: a command refused when queued,
    /// e.g. a module command with the wrong arity, or under OOM).
    pub aborted: Vec<usize>,
    /// Replies the client library could not parse (command: error).
    pub unparsable: Vec<String>,
    /// Keys the primary evicted (the most `INFO stats` showed at a check; it restarts from 0
    /// with the server).
    pub evicted: u64,
}

/// The servers' settings shared by both runs of a sequence.
#[derive(Debug, Clone)]
pub struct Setup {
    pub diskless_sync: bool,
    pub diskless_load: &'static str,
}

impl Setup {
    pub fn of(seed: u64) -> Setup {
        let mut rng = gen::Rng::new(seed.rotate_left(17) ^ 0xA5A5);
        Setup {
            diskless_sync: rng.chance(50),
            diskless_load: ["disabled", "swapdb", "on-empty-db"][rng.below(3) as usize],
        }
    }
}

struct Run {
    module: bool,
    setup: Setup,
    primary: Server,
    replica: Server,
    attached: bool,
    main: Connection,
    /// The database the sequence selected on the main client (restored after a restart).
    db: i64,
    aof: Option<bool>,
    /// `reclaim.enabled` as the sequence set it.
    enabled: bool,
    workers: Vec<JoinHandle<()>>,
    stop_workers: Arc<AtomicBool>,
    tainted: bool,
    /// Inside `MULTI` on the main client.
    in_multi: bool,
    /// `maxmemory` as the sequence set it (0 during checks: a read under `maxmemory` evicts, so
    /// the primary would change while it is compared).
    maxmemory: u64,
    rec: Record,
    /// `MULTI` operations to leave out: those the run with the module aborted (the plain server
    /// never sees the module command that made it abort).
    skip: std::collections::BTreeSet<usize>,
}

fn fail(at: usize, kind: &str, detail: impl Into<String>) -> Failure {
    Failure {
        at,
        kind: kind.into(),
        detail: detail.into(),
    }
}

/// Sends a command; `Err` only when the connection is gone (the server died or hung).
fn send(con: &mut Connection, args: &[Vec<u8>]) -> Result<Value, String> {
    let mut c = cmd(std::str::from_utf8(&args[0]).unwrap_or("PING"));
    for a in &args[1..] {
        c.arg(a.as_slice());
    }
    // `req_command`, not `query`: an error inside a reply (`EXEC`'s) stays a value.
    match redis::ConnectionLike::req_command(con, &c) {
        Ok(v) => Ok(v),
        // A reply the client library cannot read (an error line with bytes that are not UTF-8):
        // the server is fine, the connection must be opened again ([`UNPARSABLE`]).
        Err(e) if e.kind() == redis::ErrorKind::Parse => {
            Ok(Value::SimpleString(format!("{UNPARSABLE}{e}")))
        }
        Err(e)
            if e.is_io_error()
                || e.is_timeout()
                || e.is_connection_dropped()
                || e.is_unrecoverable_error() =>
        {
            Err(format!("{e}"))
        }
        Err(e) => Ok(Value::SimpleString(format!("ERR {e}"))),
    }
}

/// The reply [`send`] gives for one the client library could not parse.
pub const UNPARSABLE: &str = "UNPARSABLE ";

fn words(parts: &[&str]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.as_bytes().to_vec()).collect()
}

fn info_field(con: &mut Connection, section: &str, name: &str) -> Option<String> {
    let s: String = cmd("INFO").arg(section).query(con).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(|v| v.trim().to_string())
}

fn set_arg(args: &mut Vec<String>, name: &str, value: &str) {
    if let Some(i) = args.iter().position(|a| a == name) {
        if i + 1 < args.len() {
            args[i + 1] = value.to_string();
            return;
        }
    }
    args.push(name.to_string());
    args.push(value.to_string());
}

fn remove_arg(args: &mut Vec<String>, name: &str) {
    if let Some(i) = args.iter().position(|a| a == name) {
        args.drain(i..(i + 2).min(args.len()));
    }
}

impl Run {
    fn start(module: bool, setup: Setup) -> Run {
        let base = |extra: &[String]| -> Vec<String> {
            let mut a: Vec<String> = [
                "--databases",
                &DBS.to_string(),
                "--enable-debug-command",
                "yes",
                "--repl-diskless-sync-delay",
                "0",
                "--appendfsync",
                "always",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect();
            a.extend(extra.iter().cloned());
            a
        };
        let p_args = base(&[
            "--repl-diskless-sync".into(),
            if setup.diskless_sync { "yes" } else { "no" }.into(),
        ]);
        let p_ref: Vec<&str> = p_args.iter().map(String::as_str).collect();
        let primary = if module {
            Server::start(&p_ref)
        } else {
            Server::start_without_module(&p_ref)
        };
        let port = primary.port.to_string();
        let r_args = base(&[
            "--replicaof".into(),
            "127.0.0.1".into(),
            port,
            "--repl-diskless-load".into(),
            setup.diskless_load.into(),
        ]);
        let r_ref: Vec<&str> = r_args.iter().map(String::as_str).collect();
        let replica = if module {
            Server::start(&r_ref)
        } else {
            Server::start_without_module(&r_ref)
        };
        let main = primary.conn_with_read_timeout(Duration::from_secs(30));
        let mut run = Run {
            module,
            setup,
            primary,
            replica,
            attached: true,
            main,
            db: 0,
            aof: None,
            enabled: true,
            workers: Vec::new(),
            stop_workers: Arc::new(AtomicBool::new(false)),
            tainted: false,
            in_multi: false,
            maxmemory: 0,
            rec: Record::default(),
            skip: Default::default(),
        };
        run.wait_link(0).ok();
        run
    }

    /// Waits until the replica's link is up (after a start, restart or REPLICAOF).
    fn wait_link(&mut self, at: usize) -> Result<(), Failure> {
        let mut con = self.replica.conn_with_read_timeout(Duration::from_secs(30));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if info_field(&mut con, "replication", "master_link_status").as_deref() == Some("up") {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(fail(at, "replica link down", format!(
                    "the replica's link to its primary is not up after 30 s; replica log:\n{}\nprimary log:\n{}",
                    self.replica.log_tail(15),
                    self.primary.log_tail(15)
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn join_workers(&mut self) {
        self.stop_workers.store(true, Ordering::Relaxed);
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
        self.stop_workers = Arc::new(AtomicBool::new(false));
    }

    fn set_enabled(&mut self, on: bool) {
        if !self.module {
            return;
        }
        let v = if on { "yes" } else { "no" };
        let _ = send(
            &mut self.main,
            &words(&["CONFIG", "SET", "reclaim.enabled", v]),
        );
        if !self.attached {
            let mut r = self.replica.conn();
            let _ = send(&mut r, &words(&["CONFIG", "SET", "reclaim.enabled", v]));
        }
    }

    /// Workers stopped, the module's timer stopped, the replica caught up.
    fn quiesce(&mut self, at: usize) -> Result<(), Failure> {
        self.join_workers();
        self.set_enabled(false);
        if self.maxmemory > 0 {
            let _ = send(&mut self.main, &words(&["CONFIG", "SET", "maxmemory", "0"]));
        }
        // A pause the sequence started must be over before the replica can catch up.
        let _ = send(&mut self.main, &words(&["CLIENT", "UNPAUSE"]));
        if self.attached {
            self.wait_link(at)?;
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let n = send(&mut self.main, &words(&["WAIT", "1", "2000"]))
                    .map_err(|e| self.died(at, "WAIT", e))?;
                let p = info_field(&mut self.main, "replication", "master_repl_offset");
                let mut r = self.replica.conn();
                let q = info_field(&mut r, "replication", "slave_repl_offset");
                if n == Value::Int(1) && p.is_some() && p == q {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(fail(
                        at,
                        "replica lag",
                        format!(
                        "the replica did not catch up in 30 s (primary offset {p:?}, replica {q:?})"
                    ),
                    ));
                }
            }
        }
        Ok(())
    }

    fn resume(&mut self) {
        let on = self.enabled;
        self.set_enabled(on);
        if self.maxmemory > 0 {
            let m = self.maxmemory.to_string();
            let _ = send(&mut self.main, &words(&["CONFIG", "SET", "maxmemory", &m]));
        }
        let db = self.db;
        let _ = send(&mut self.main, &words(&["SELECT", &db.to_string()]));
    }

    fn died(&mut self, at: usize, what: &str, e: String) -> Failure {
        let p = self.primary.alive();
        let r = self.replica.alive();
        fail(
            at,
            "server died or hung",
            format!(
                "{what}: {e}; primary {}, replica {}\nprimary log:\n{}\nreplica log:\n{}",
                if p { "running" } else { "gone" },
                if r { "running" } else { "gone" },
                self.primary.log_tail(20),
                self.replica.log_tail(10)
            ),
        )
    }

    /// The dataset of the primary or the replica, without what the servers themselves do not
    /// propagate (with or without the module): consumer groups' `entries-read` (Redis 7.0.15
    /// propagates a read as `XCLAIM ... LASTID` without it, so a replica, and a primary that
    /// replays its AOF, have `(nil)` there), and consumers without pending entries (a blocking
    /// `XREADGROUP` that finds nothing creates its consumer on the primary only, on Redis 8.2 and
    /// Valkey 8.1: not on the replica, not in the AOF).
    fn snapshot(&mut self, replica: bool, at: usize) -> Result<Dataset, Failure> {
        let mut con = if replica {
            self.replica.conn()
        } else {
            self.primary.conn()
        };
        let mut d = dataset::snapshot(&mut con, DBS, StreamDetail::default()).map_err(|e| {
            fail(
                at,
                "snapshot",
                format!(
                    "reading the {} failed: {e}",
                    if replica { "replica" } else { "primary" }
                ),
            )
        })?;
        dataset::forget_entries_read(&mut d);
        dataset::forget_empty_consumers(&mut d);
        Ok(d)
    }

    /// Compares the replica with the primary (when attached) and records the plain keys.
    fn check(&mut self, at: usize) -> Result<(), Failure> {
        self.quiesce(at)?;
        let p = self.snapshot(false, at)?;
        if self.attached {
            let r = self.snapshot(true, at)?;
            let d = dataset::diff(&p, &r, |_, _| true, 12);
            if !d.is_empty() {
                return Err(fail(
                    at,
                    "replica differs",
                    format!(
                        "primary (first) vs replica (second):\n  {}\nreplica log:\n{}",
                        d.join("\n  "),
                        self.replica_errors()
                    ),
                ));
            }
        }
        let errs = self.replica_errors();
        if !errs.is_empty() {
            return Err(fail(at, "replica refused its primary's commands", errs));
        }
        let evicted =
            info_field(&mut self.main, "stats", "evicted_keys").and_then(|v| v.parse().ok());
        self.rec.evicted = self.rec.evicted.max(evicted.unwrap_or(0));
        let plain: Dataset = p
            .into_iter()
            .filter(|((_, k), _)| gen::is_plain(k))
            .collect();
        self.rec.plain.push((at, plain, self.tainted));
        self.rec.checks += 1;
        self.resume();
        Ok(())
    }

    /// The replica's log lines about commands of its primary it refused.
    fn replica_errors(&self) -> String {
        self.replica
            .log()
            .lines()
            .filter(|l| l.contains("sending an error to its master"))
            .take(5)
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// `before`, then what `reload` does, then the same dataset again (and the replica too).
    fn reload(
        &mut self,
        at: usize,
        what: &str,
        reload: impl FnOnce(&mut Run) -> Result<(), Failure>,
    ) -> Result<(), Failure> {
        self.quiesce(at)?;
        let before = self.snapshot(false, at)?;
        reload(self)?;
        let after = self.snapshot(false, at)?;
        let d = dataset::diff(&before, &after, |_, _| true, 12);
        if !d.is_empty() {
            return Err(fail(
                at,
                &format!("{what} changed the dataset"),
                format!(
                    "before (first) vs after (second):\n  {}\nprimary log:\n{}",
                    d.join("\n  "),
                    self.primary.log_tail(12)
                ),
            ));
        }
        self.check(at)
    }

    fn restart(&mut self, at: usize, persist: Persist) -> Result<(), Failure> {
        self.reload(at, &format!("restart ({persist:?})"), |run| {
            match persist {
                Persist::Rdb => {
                    let _ = send(
                        &mut run.main,
                        &words(&["CONFIG", "SET", "appendonly", "no"]),
                    );
                    run.aof = None;
                    // A sync's BGSAVE may be running: wait for it.
                    let deadline = Instant::now() + Duration::from_secs(30);
                    while info_field(&mut run.main, "persistence", "rdb_bgsave_in_progress")
                        .as_deref()
                        != Some("0")
                        && Instant::now() < deadline
                    {
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    let v = send(&mut run.main, &words(&["SAVE"]))
                        .map_err(|e| run.died(at, "SAVE", e))?;
                    if v != Value::Okay {
                        return Err(fail(
                            at,
                            "SAVE failed",
                            format!("{v:?}\n{}", run.primary.log_tail(10)),
                        ));
                    }
                    remove_arg(&mut run.primary.args, "--appendonly");
                }
                Persist::Aof { preamble } => {
                    run.aof_on(at, preamble)?;
                }
            }
            if run.module {
                set_arg(&mut run.primary.args, "--reclaim.enabled", "no");
            }
            let _ = send(&mut run.main, &words(&["SHUTDOWN", "NOSAVE"]));
            let deadline = Instant::now() + Duration::from_secs(30);
            while run.primary.alive() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            run.primary.restart();
            run.main = run.primary.conn_with_read_timeout(Duration::from_secs(30));
            if run.module {
                remove_arg(&mut run.primary.args, "--reclaim.enabled");
            }
            Ok(())
        })
    }

    fn aof_on(&mut self, at: usize, preamble: bool) -> Result<(), Failure> {
        let pre = if preamble { "yes" } else { "no" };
        send(
            &mut self.main,
            &words(&["CONFIG", "SET", "aof-use-rdb-preamble", pre]),
        )
        .map_err(|e| self.died(at, "CONFIG", e))?;
        send(
            &mut self.main,
            &words(&["CONFIG", "SET", "appendonly", "yes"]),
        )
        .map_err(|e| self.died(at, "CONFIG", e))?;
        if self.aof != Some(preamble) {
            self.wait_rewrite(at)?;
            // The preamble applies to the next rewrite.
            send(&mut self.main, &words(&["BGREWRITEAOF"]))
                .map_err(|e| self.died(at, "BGREWRITEAOF", e))?;
            self.wait_rewrite(at)?;
        }
        self.aof = Some(preamble);
        set_arg(&mut self.primary.args, "--appendonly", "yes");
        set_arg(&mut self.primary.args, "--aof-use-rdb-preamble", pre);
        Ok(())
    }

    fn wait_rewrite(&mut self, at: usize) -> Result<(), Failure> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let p = info_field(&mut self.main, "persistence", "aof_rewrite_in_progress");
            let s = info_field(&mut self.main, "persistence", "aof_rewrite_scheduled");
            if p.as_deref() == Some("0") && s.as_deref() == Some("0") {
                break;
            }
            if Instant::now() > deadline {
                return Err(fail(at, "AOF rewrite hung", self.primary.log_tail(10)));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let st = info_field(&mut self.main, "persistence", "aof_last_bgrewrite_status");
        if st.as_deref() != Some("ok") {
            return Err(fail(at, "AOF rewrite failed", self.primary.log_tail(10)));
        }
        Ok(())
    }

    /// Fills in the placeholders of a command.
    fn resolve(&mut self, args: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, String> {
        let mut out = Vec::with_capacity(args.len());
        for a in args {
            match gen::placeholder(a) {
                None => out.push(a.clone()),
                Some(p) => {
                    let mut q = vec![
                        b"XPENDING".to_vec(),
                        p[1].clone().into_bytes(),
                        p[2].clone().into_bytes(),
                    ];
                    q.extend(words(&["-", "+", "1"]));
                    if p[0] == "pendingc" {
                        q.push(p[3].clone().into_bytes());
                    }
                    let v = send(&mut self.main, &q)?;
                    let id = match v {
                        Value::Array(items) => items.into_iter().next().and_then(|e| match e {
                            Value::Array(f) => f.into_iter().next(),
                            _ => None,
                        }),
                        _ => None,
                    };
                    out.push(match id {
                        Some(Value::BulkString(b)) => b,
                        _ => b"0-1".to_vec(),
                    });
                }
            }
        }
        Ok(out)
    }

    /// [`send`] on the main client; after a reply the client library could not parse, a new
    /// connection in the same database (the old one may be out of step), and the reply noted.
    fn send_main(&mut self, args: &[Vec<u8>]) -> Result<Value, String> {
        let v = send(&mut self.main, args)?;
        if let Value::SimpleString(e) = &v {
            if let Some(e) = e.strip_prefix(UNPARSABLE) {
                self.rec
                    .unparsable
                    .push(format!("{}: {e}", gen::show_cmd(args)));
                self.main = self.primary.conn_db(self.db);
                self.in_multi = false;
            }
        }
        Ok(v)
    }

    fn client_db(&mut self) -> Option<i64> {
        let v: String = cmd("CLIENT").arg("INFO").query(&mut self.main).ok()?;
        v.split_whitespace()
            .find_map(|f| f.strip_prefix("db="))
            .and_then(|d| d.parse().ok())
    }

    fn note_select(&mut self, args: &[Vec<u8>], reply: &Value) {
        if args
            .first()
            .is_some_and(|a| a.eq_ignore_ascii_case(b"select"))
            && *reply == Value::Okay
        {
            if let Some(db) = args
                .get(1)
                .and_then(|d| std::str::from_utf8(d).ok())
                .and_then(|d| d.parse().ok())
            {
                self.db = db;
            }
        }
        if args
            .first()
            .is_some_and(|a| a.eq_ignore_ascii_case(b"flushall"))
        {
            // Nothing evicted so far is left; what a partial limit evicts next still differs
            // (1 byte: everything is evicted or refused in both runs alike).
            self.tainted = self.maxmemory > 1;
        }
        if args.len() >= 4
            && args[0].eq_ignore_ascii_case(b"config")
            && args[2].eq_ignore_ascii_case(b"reclaim.enabled")
            && *reply == Value::Okay
        {
            self.enabled = args[3].eq_ignore_ascii_case(b"yes");
        }
    }

    fn op(&mut self, at: usize, op: &Op) -> Result<(), Failure> {
        match op {
            Op::Cmd(args) => {
                if module_skip(self.module, args) {
                    return Ok(());
                }
                let args = self
                    .resolve(args)
                    .map_err(|e| self.died(at, "command", e))?;
                let v = self
                    .send_main(&args)
                    .map_err(|e| self.died(at, &gen::show_cmd(&args), e))?;
                self.note_select(&args, &v);
            }
            Op::Multi(_) if self.skip.contains(&at) => {}
            Op::Multi(cmds) => {
                let cmds: Vec<&Vec<Vec<u8>>> = cmds
                    .iter()
                    .filter(|c| !module_skip(self.module, c))
                    .collect();
                let mut resolved = Vec::new();
                for c in cmds {
                    resolved.push(self.resolve(c).map_err(|e| self.died(at, "command", e))?);
                }
                send(&mut self.main, &words(&["MULTI"])).map_err(|e| self.died(at, "MULTI", e))?;
                self.in_multi = true;
                for c in &resolved {
                    self.send_main(c)
                        .map_err(|e| self.died(at, &gen::show_cmd(c), e))?;
                }
                if !self.in_multi {
                    // The connection was opened again: this transaction is gone.
                    self.rec.aborted.push(at);
                    return Ok(());
                }
                self.in_multi = false;
                let v = send(&mut self.main, &words(&["EXEC"]))
                    .map_err(|e| self.died(at, "EXEC", e))?;
                if matches!(&v, Value::ServerError(_))
                    || matches!(&v, Value::SimpleString(e) if e.starts_with("ERR"))
                {
                    self.rec.aborted.push(at);
                }
                if let Value::Array(replies) = &v {
                    for (c, r) in resolved.iter().zip(replies.iter()) {
                        self.note_select(c, r);
                    }
                }
            }
            Op::DumpRestore {
                src,
                dst,
                ttl,
                replace,
            } => {
                let v = send(&mut self.main, &words(&["DUMP", src]))
                    .map_err(|e| self.died(at, "DUMP", e))?;
                if let Value::BulkString(payload) = v {
                    let mut a = words(&["RESTORE", dst, &ttl.to_string()]);
                    a.push(payload);
                    if *replace {
                        a.push(b"REPLACE".to_vec());
                    }
                    send(&mut self.main, &a).map_err(|e| self.died(at, "RESTORE", e))?;
                }
            }
            Op::ExportImport { to_db } => {
                if !self.module {
                    return Ok(());
                }
                let v = send(&mut self.main, &words(&["RECLAIM.POLICY", "EXPORT"]))
                    .map_err(|e| self.died(at, "EXPORT", e))?;
                if let Value::BulkString(doc) = v {
                    let mut c = self.primary.conn_db(*to_db);
                    let mut a = words(&["RECLAIM.POLICY", "IMPORT"]);
                    a.push(doc);
                    a.push(b"REPLACE".to_vec());
                    send(&mut c, &a).map_err(|e| self.died(at, "IMPORT", e))?;
                }
            }
            Op::Workers(plans) => {
                for (i, plan) in plans.iter().enumerate() {
                    let plan = plan.clone();
                    let con = self.primary.conn_with_read_timeout(Duration::from_secs(30));
                    let stop = self.stop_workers.clone();
                    let module = self.module;
                    let h = std::thread::Builder::new()
                        .name(format!("worker-{i}"))
                        .spawn(move || worker(con, plan, module, stop))
                        .expect("spawn worker");
                    self.workers.push(h);
                }
            }
            Op::Check => self.check(at)?,
            Op::DebugReload => self.reload(at, "DEBUG RELOAD", |run| {
                let v = send(&mut run.main, &words(&["DEBUG", "RELOAD"]))
                    .map_err(|e| run.died(at, "DEBUG RELOAD", e))?;
                if v != Value::Okay {
                    return Err(fail(
                        at,
                        "DEBUG RELOAD failed",
                        format!("{v:?}\n{}", run.primary.log_tail(10)),
                    ));
                }
                Ok(())
            })?,
            Op::DebugLoadAof => {
                if self.aof.is_none() {
                    return Ok(());
                }
                self.reload(at, "DEBUG LOADAOF", |run| {
                    let v = send(&mut run.main, &words(&["DEBUG", "LOADAOF"]))
                        .map_err(|e| run.died(at, "DEBUG LOADAOF", e))?;
                    if v != Value::Okay {
                        return Err(fail(
                            at,
                            "DEBUG LOADAOF failed",
                            format!("{v:?}\n{}", run.primary.log_tail(10)),
                        ));
                    }
                    Ok(())
                })?
            }
            Op::BgRewriteAof => {
                self.wait_rewrite(at)?;
                send(&mut self.main, &words(&["BGREWRITEAOF"]))
                    .map_err(|e| self.died(at, "BGREWRITEAOF", e))?;
                self.wait_rewrite(at)?;
            }
            Op::Aof { on, preamble } => {
                if *on {
                    self.aof_on(at, *preamble)?;
                } else {
                    send(
                        &mut self.main,
                        &words(&["CONFIG", "SET", "appendonly", "no"]),
                    )
                    .map_err(|e| self.died(at, "CONFIG", e))?;
                    self.aof = None;
                    remove_arg(&mut self.primary.args, "--appendonly");
                }
            }
            Op::Restart(p) => self.restart(at, *p)?,
            Op::Detach => {
                if self.attached {
                    self.join_workers();
                    let mut r = self.replica.conn();
                    send(&mut r, &words(&["REPLICAOF", "NO", "ONE"]))
                        .map_err(|e| self.died(at, "REPLICAOF", e))?;
                    self.attached = false;
                    if self.module {
                        let on = if self.enabled { "yes" } else { "no" };
                        let _ = send(&mut r, &words(&["CONFIG", "SET", "reclaim.enabled", on]));
                    }
                }
            }
            Op::Attach => {
                if !self.attached {
                    self.join_workers();
                    let mut r = self.replica.conn();
                    let port = self.primary.port.to_string();
                    send(&mut r, &words(&["REPLICAOF", "127.0.0.1", &port]))
                        .map_err(|e| self.died(at, "REPLICAOF", e))?;
                    self.attached = true;
                    self.wait_link(at)?;
                    self.check(at)?;
                }
            }
            Op::Maxmemory {
                bytes,
                policy,
                partial,
            } => {
                send(
                    &mut self.main,
                    &words(&["CONFIG", "SET", "maxmemory-policy", policy]),
                )
                .map_err(|e| self.died(at, "CONFIG", e))?;
                send(
                    &mut self.main,
                    &words(&["CONFIG", "SET", "maxmemory", &bytes.to_string()]),
                )
                .map_err(|e| self.died(at, "CONFIG", e))?;
                self.maxmemory = *bytes;
                if *partial {
                    self.tainted = true;
                }
            }
            Op::Burst {
                fill,
                readers,
                policy,
                bytes,
                limit_first,
                writes,
            } => {
                for c in fill {
                    self.send_main(c)
                        .map_err(|e| self.died(at, &gen::show_cmd(c), e))?;
                }
                self.block_readers(readers);
                if *limit_first {
                    self.config(at, "maxmemory-policy", "noeviction")?;
                    self.config(at, "maxmemory", &bytes.to_string())?;
                    self.config(at, "maxmemory-policy", policy)?;
                } else {
                    self.config(at, "maxmemory-policy", policy)?;
                    self.config(at, "maxmemory", &bytes.to_string())?;
                }
                // What a limit some keys fit under evicts depends on memory use (1 byte: all).
                self.tainted |= *bytes > 1;
                for c in writes {
                    self.send_main(c)
                        .map_err(|e| self.died(at, &gen::show_cmd(c), e))?;
                }
                self.config(at, "maxmemory", "0")?;
                self.maxmemory = 0;
            }
        }
        Ok(())
    }

    fn config(&mut self, at: usize, name: &str, value: &str) -> Result<(), Failure> {
        send(&mut self.main, &words(&["CONFIG", "SET", name, value]))
            .map(|_| ())
            .map_err(|e| self.died(at, "CONFIG", e))
    }

    /// Starts the readers of an eviction burst in the background (joined with the workers), and
    /// waits until they block, at most a second (a read that fails at once never does).
    fn block_readers(&mut self, readers: &[gen::Reader]) {
        let blocked = |con: &mut Connection| -> u64 {
            info_field(con, "clients", "blocked_clients")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        let before = blocked(&mut self.main);
        for (i, r) in readers.iter().enumerate() {
            let args = r.command(self.module);
            // In the main client's database, where the burst fills and writes.
            let mut con = self.primary.conn_with_read_timeout(Duration::from_secs(30));
            let _ = send(&mut con, &words(&["SELECT", &self.db.to_string()]));
            let stop = self.stop_workers.clone();
            // The first reads take what is new; a read that finds nothing blocks.
            let h = std::thread::Builder::new()
                .name(format!("reader-{i}"))
                .spawn(move || {
                    for _ in 0..4 {
                        match send(&mut con, &args) {
                            Ok(Value::Nil) | Err(_) => return,
                            Ok(_) if stop.load(Ordering::Relaxed) => return,
                            Ok(_) => {}
                        }
                    }
                })
                .expect("spawn reader");
            self.workers.push(h);
        }
        let deadline = Instant::now() + Duration::from_secs(1);
        while blocked(&mut self.main) < before + readers.len() as u64 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

fn module_skip(module: bool, args: &[Vec<u8>]) -> bool {
    !module && gen::module_only(args)
}

/// A background worker: reads (blocking a little), then acts on what it read last.
fn worker(mut con: Connection, plan: Vec<Step>, module: bool, stop: Arc<AtomicBool>) {
    let mut last: Vec<Vec<u8>> = Vec::new();
    let mut target: Option<(&str, &str, &str)> = None;
    for step in plan {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let args: Vec<Vec<u8>> = match (&step, target) {
            (
                Step::Read {
                    module: m,
                    stream,
                    group,
                    consumer,
                    count,
                    block,
                },
                _,
            ) => {
                target = Some((stream, group, consumer));
                let name = if *m && module {
                    "RECLAIM.READGROUP"
                } else {
                    "XREADGROUP"
                };
                words(&[
                    name,
                    "GROUP",
                    group,
                    consumer,
                    "COUNT",
                    &count.to_string(),
                    "BLOCK",
                    &block.to_string(),
                    "STREAMS",
                    stream,
                    ">",
                ])
            }
            (_, None) => continue,
            (_, Some(_)) if last.is_empty() => continue,
            (Step::Ack, Some((s, g, _))) => [words(&["XACK", s, g]), last.clone()].concat(),
            (Step::Nack { delay }, Some((s, g, c))) if module => [
                words(&["RECLAIM.NACK", s, g, c]),
                last.clone(),
                words(&["DELAY", &delay.to_string()]),
            ]
            .concat(),
            (Step::Extend, Some((s, g, c))) if module => {
                [words(&["RECLAIM.EXTEND", s, g, c]), last.clone()].concat()
            }
            (Step::Term, Some((s, g, c))) if module => {
                [words(&["RECLAIM.TERM", s, g, c]), last.clone()].concat()
            }
            _ => continue,
        };
        match send(&mut con, &args) {
            Err(_) => return,
            Ok(v) => {
                if matches!(step, Step::Read { .. }) {
                    last = read_ids(&v);
                }
            }
        }
    }
}

/// The entry IDs of an XREADGROUP-style reply.
fn read_ids(v: &Value) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let streams: Vec<&Value> = match v {
        Value::Array(a) => a.iter().collect(),
        Value::Map(m) => m.iter().map(|(_, v)| v).collect(),
        _ => return out,
    };
    for s in streams {
        let entries = match s {
            Value::Array(pair) if pair.len() == 2 => &pair[1],
            other => other,
        };
        if let Value::Array(es) = entries {
            for e in es {
                if let Value::Array(f) = e {
                    if let Some(Value::BulkString(id)) = f.first() {
                        out.push(id.clone());
                    }
                }
            }
        }
    }
    out
}

/// Runs `ops` on fresh servers (with the module or without) and stops them. Never panics: a
/// panic of the test kit (a server that would not start) is a failure of the run.
pub fn run(ops: &[Op], module: bool, setup: &Setup, skip: &[usize]) -> Record {
    let started = catch_unwind(AssertUnwindSafe(|| Run::start(module, setup.clone())));
    let mut r = match started {
        Ok(r) => r,
        Err(p) => {
            return Record {
                failure: Some(fail(0, "servers did not start", panic_text(&p))),
                ..Record::default()
            }
        }
    };
    let _ = &r.setup;
    r.skip = skip.iter().copied().collect();
    for (at, op) in ops.iter().enumerate() {
        let res = catch_unwind(AssertUnwindSafe(|| r.op(at, op)));
        let res = match res {
            Ok(x) => x,
            Err(p) => Err(fail(
                at,
                "server did not come back",
                format!(
                    "{}\nprimary log:\n{}",
                    panic_text(&p),
                    r.primary.log_tail(20)
                ),
            )),
        };
        if let Err(f) = res {
            r.rec.failure = Some(f);
            break;
        }
        let db = r.client_db();
        r.rec.client_db.push(db);
    }
    r.join_workers();
    std::mem::take(&mut r.rec)
}

fn panic_text(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic".into())
}
