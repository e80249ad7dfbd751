//! The worker processes (the demo re-executes itself as each): the loop every worker of the pool
//! runs on `RECLAIM.READGROUP`, and the log each one writes (what it was handed and when, and what
//! its handler did), which the timeline follows and the tally counts.

use super::*;

/// One stream entry (an order, or a dead-lettered order with its provenance in the DLQ).
#[derive(Debug, Clone)]
pub struct Order {
    pub id: String,
    pub fields: Vec<(String, String)>,
}

impl Order {
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn is_poison(&self) -> bool {
        self.field("poison") == Some("1")
    }

    pub fn show_fields(&self) -> String {
        self.fields
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// An XRANGE-style list of entries. An entry whose fields are nil (deleted from the stream but
/// still in a PEL, as a history read reports it; RECLAIM.READGROUP never returns one) gets no
/// fields.
pub fn entries(v: &Value) -> Vec<Order> {
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
            Some(Order { id, fields })
        })
        .collect()
}

/// The entries of an XREADGROUP reply (nil on timeout; RESP2 `[[key, entries]]` or RESP3 map).
pub fn read_reply(v: &Value) -> Vec<Order> {
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

pub fn connect(port: u16) -> Res<Connection> {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/"))?;
    let con = client.get_connection_with_timeout(Duration::from_secs(5))?;
    con.set_read_timeout(Some(Duration::from_secs(10)))?;
    Ok(con)
}

/// Child processes exit when the demo's end of their stdin closes (the demo exited, however).
pub fn exit_with_parent() {
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

pub fn child_args(args: &[String]) -> Res<(u16, String, PathBuf)> {
    if args.len() < 5 {
        return Err("usage: demo worker <port> <name> <log-file> [stall-after-ms]".into());
    }
    Ok((args[2].parse()?, args[3].clone(), PathBuf::from(&args[4])))
}

/// What every worker process does first: reads its arguments, exits with the demo, connects and
/// names its connection (`CLIENT SETNAME <name>`), opens its log for appending.
fn start_child(args: &[String]) -> Res<(Connection, String, File)> {
    let (port, name, log_path) = child_args(args)?;
    exit_with_parent();
    let mut con = connect(port)?;
    let _: () = cmd("CLIENT").arg("SETNAME").arg(&name).query(&mut con)?;
    let log = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)?;
    Ok((con, name, log))
}

/// Entries a worker asks for at a time, and how long it waits for some.
pub const BATCH: usize = 10;
pub const BLOCK_MS: u64 = 1000;

/// `RECLAIM.READGROUP GROUP workers <name> COUNT 10 BLOCK 1000 STREAMS orders >`: entries due for
/// redelivery first (the inbox, other workers' stale entries), then new ones.
fn read_batch(name: &str) -> redis::Cmd {
    let mut c = cmd("RECLAIM.READGROUP");
    c.arg("GROUP").arg(GROUP).arg(name).arg("COUNT").arg(BATCH);
    c.arg("BLOCK")
        .arg(BLOCK_MS)
        .arg("STREAMS")
        .arg(STREAM)
        .arg(">");
    c
}

/// One line of a worker's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogLine {
    /// `deliver <id> <count> <ms>`: the entry was handed to this worker, its `count`-th delivery,
    /// at `ms` on the server's clock (`None`: the worker no longer held it when it looked).
    Deliver {
        id: String,
        count: i64,
        at_ms: Option<i64>,
    },
    /// `ok <id>`: handled and acknowledged.
    Ok(String),
    /// `fail <id>`: the handler failed (the poison entry); not acknowledged.
    Fail(String),
}

impl LogLine {
    pub fn parse(line: &str) -> Option<LogLine> {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["deliver", id, count, at] => Some(LogLine::Deliver {
                id: id.to_string(),
                count: count.parse().ok()?,
                at_ms: at.parse().ok(),
            }),
            ["ok", id] => Some(LogLine::Ok(id.to_string())),
            ["fail", id] => Some(LogLine::Fail(id.to_string())),
            _ => None,
        }
    }
}

/// A worker's log: its lines, in order.
pub fn read_log(path: &Path) -> Vec<LogLine> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(LogLine::parse)
        .collect()
}

/// Logs the batch a read handed over: `deliver <id> <count> <ms>` per entry. The delivery count and
/// time come from the server, read right after the read in one MULTI/EXEC: `TIME`, and `XPENDING`
/// of this worker's entries (idle time and count); delivered at = TIME - idle, in ms. So the lease
/// check compares server times, not the workers' clocks and scheduling.
fn log_deliveries(con: &mut Connection, name: &str, log: &mut File, batch: &[Order]) -> Res<()> {
    let ((secs, us), pel): ((String, String), Vec<PelEntry>) = redis::pipe()
        .atomic()
        .cmd("TIME")
        .cmd("XPENDING")
        .arg(STREAM)
        .arg(GROUP)
        .arg("-")
        .arg("+")
        .arg(1000)
        .arg(name)
        .query(con)?;
    let now_ms = secs.parse::<i64>()? * 1000 + us.parse::<i64>()? / 1000;
    for e in batch {
        match pel.iter().find(|(id, ..)| *id == e.id) {
            Some((_, _, idle, count)) => {
                writeln!(log, "deliver {} {count} {}", e.id, now_ms - idle)?
            }
            None => writeln!(log, "deliver {} 0 -", e.id)?,
        }
    }
    log.flush()?;
    Ok(())
}

/// Handles one entry: "process" it; the poison entry's handler fails (no XACK, logged `fail`);
/// otherwise XACK it and log `ok`. One line each, flushed.
pub fn handle(con: &mut Connection, log: &mut File, e: &Order) -> Res<()> {
    thread::sleep(Duration::from_millis(PROCESS_MS));
    if e.is_poison() {
        writeln!(log, "fail {}", e.id)?;
    } else {
        let _: i64 = cmd("XACK").arg(STREAM).arg(GROUP).arg(&e.id).query(con)?;
        writeln!(log, "ok {}", e.id)?;
    }
    log.flush()?;
    Ok(())
}

/// The worker loop: read (redeliveries first, then new entries), log what was handed over,
/// handle, acknowledge. With `stall-after-ms`, the first batch after that time of at least two
/// entries, none of them the poison entry, hangs halfway (after handling the first half),
/// reporting `STALL <acked> <held>` on stdout, so that the SIGKILL lands mid-batch. (The tally
/// counts the poison entry's handler runs: a delivery cut short by the kill would be one its
/// handler never ran.)
pub fn worker_main(args: &[String]) -> Res<()> {
    let stall_after = args
        .get(5)
        .map(|s| s.parse::<u64>())
        .transpose()?
        .map(Duration::from_millis);
    let (mut con, name, mut log) = start_child(args)?;
    let started = Instant::now();
    loop {
        let reply: Value = read_batch(&name).query(&mut con)?;
        let batch = read_reply(&reply);
        if batch.is_empty() {
            continue;
        }
        log_deliveries(&mut con, &name, &mut log, &batch)?;
        let stall_at = match stall_after {
            Some(d)
                if started.elapsed() >= d
                    && batch.len() >= 2
                    && !batch.iter().any(Order::is_poison) =>
            {
                Some(batch.len() / 2)
            }
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
