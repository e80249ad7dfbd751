//! The worker processes (the demo re-executes itself as each): the plain consumer-group loop
//! with no recovery code, and the recovery worker that reads the claimant's history.

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
/// still in a PEL, as XREADGROUP history reports it) gets no fields.
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
        return Err("usage: demo worker|recover <port> <name> <log-file> [stall-after-ms]".into());
    }
    Ok((args[2].parse()?, args[3].clone(), PathBuf::from(&args[4])))
}

/// What every worker process does first: reads its arguments, exits with the demo, connects and
/// names its connection (`CLIENT SETNAME <name>`), opens its ack log for appending.
fn start_child(args: &[String]) -> Res<(Connection, String, std::fs::File)> {
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

/// `XREADGROUP GROUP workers <name> COUNT 10 [BLOCK ms] STREAMS orders <from>`: a batch of new
/// entries (`>`) or of the consumer's own history (`0`).
fn read_batch(name: &str, block_ms: Option<u64>, from: &str) -> redis::Cmd {
    let mut c = cmd("XREADGROUP");
    c.arg("GROUP").arg(GROUP).arg(name).arg("COUNT").arg(10);
    if let Some(ms) = block_ms {
        c.arg("BLOCK").arg(ms);
    }
    c.arg("STREAMS").arg(STREAM).arg(from);
    c
}

/// Handles one entry: "process" it; a poison entry fails (no XACK, the caller moves on);
/// otherwise XACK it and log its ID (one line, flushed). Returns whether it was acknowledged.
pub fn handle(con: &mut Connection, log: &mut std::fs::File, e: &Order) -> Res<bool> {
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
pub fn worker_main(args: &[String]) -> Res<()> {
    let stall_after = args
        .get(5)
        .map(|s| s.parse::<u64>())
        .transpose()?
        .map(Duration::from_millis);
    let (mut con, name, mut log) = start_child(args)?;
    let started = Instant::now();
    loop {
        let reply: Value = read_batch(&name, Some(100), ">").query(&mut con)?;
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
pub fn recover_main(args: &[String]) -> Res<()> {
    let (mut con, name, mut log) = start_child(args)?;
    loop {
        let reply: Value = read_batch(&name, None, "0").query(&mut con)?;
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
