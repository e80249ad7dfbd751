//! Setting the scene: the server (the test kit's launcher), the group and its policy, and the
//! worker processes, each its own OS process, up and connected.

use super::*;

/// The server with the module, announced on the timeline.
pub fn announced_server(tl: &Timeline) -> Res<Server> {
    let server = Server::start(&["--appendonly", "no"]);
    let mut con = server.conn();
    let info: String = cmd("INFO").arg("server").query(&mut con)?;
    let version = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("?")
        .trim()
        .to_string();
    tl.say(format!(
        "redis-server {version} on 127.0.0.1:{} with module reclaim, dir {}",
        server.port,
        server.dir.path().display()
    ));
    Ok(server)
}

/// The group, then the policy, each command and its reply on the timeline.
pub fn group_and_policy(con: &mut Connection, tl: &Timeline) -> Res<()> {
    let (min_idle, max, interval) = (
        MIN_IDLE_MS.to_string(),
        MAX_DELIVERIES.to_string(),
        INTERVAL_MS.to_string(),
    );
    let setup: [&[&str]; 3] = [
        &["XGROUP", "CREATE", STREAM, GROUP, "$", "MKSTREAM"],
        &[
            "RECLAIM.POLICY",
            "SET",
            STREAM,
            GROUP,
            "MIN-IDLE",
            &min_idle,
            "MAX-DELIVERIES",
            &max,
            "DLQ",
            DLQ,
            "INTERVAL",
            &interval,
        ],
        &["RECLAIM.POLICY", "GET", STREAM, GROUP],
    ];
    for argv in setup {
        let mut c = cmd(argv[0]);
        for a in &argv[1..] {
            c.arg(*a);
        }
        let reply: Value = c.query(con)?;
        tl.say(format!("> {}  ->  {}", argv.join(" "), show(&reply)));
    }
    Ok(())
}

/// The pool of workers (the victim's stdout read for its STALL line), once every one of them is
/// connected.
pub fn spawn_workers(
    server: &Server,
    con: &mut Connection,
    tl: &Timeline,
    tx: &mpsc::Sender<Event>,
) -> Res<Vec<Proc>> {
    let (port, dir) = (server.port, server.dir.path());
    let mut workers: Vec<Proc> = Vec::new();
    for name in WORKERS {
        let log = dir.join(format!("{name}.log"));
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
    wait_connected(con, &workers)?;
    let pids: Vec<String> = workers
        .iter()
        .map(|p| format!("{} (pid {})", p.name, p.child.id()))
        .collect();
    tl.say(format!(
        "workers up: {}, each looping on RECLAIM.READGROUP GROUP {GROUP} <name> COUNT {BATCH} BLOCK {BLOCK_MS} STREAMS {STREAM} > (no recovery process)",
        pids.join(", ")
    ));
    Ok(workers)
}

/// Waits until every worker named its connection (CLIENT SETNAME), at most 10 s.
fn wait_connected(con: &mut Connection, workers: &[Proc]) -> Res<()> {
    let ready_by = Instant::now() + Duration::from_secs(10);
    loop {
        let list: String = cmd("CLIENT").arg("LIST").query(con)?;
        let up = workers
            .iter()
            .filter(|p| list.contains(&format!(" name={} ", p.name)))
            .count();
        if up == workers.len() {
            return Ok(());
        }
        if Instant::now() > ready_by {
            return Err(format!("workers did not connect within 10 s:\n{list}").into());
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// One worker process; killed and reaped on drop.
pub struct Proc {
    pub name: String,
    pub log: PathBuf,
    pub child: Child,
    /// Exit status once reaped.
    pub exited: Option<std::process::ExitStatus>,
}

impl Proc {
    pub fn spawn(
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

    pub fn kill(&mut self) -> Res<std::process::ExitStatus> {
        if let Some(s) = self.exited {
            return Ok(s);
        }
        self.child.kill()?;
        let s = self.child.wait()?;
        self.exited = Some(s);
        Ok(s)
    }

    /// `Some(status)` the first time the process is seen to have exited by itself.
    pub fn exited_now(&mut self) -> Option<std::process::ExitStatus> {
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
