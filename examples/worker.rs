//! A redis-reclaim worker with the `redis` crate: run as many as you like, each with its own
//! `--consumer`.
//!
//! Every worker calls `RECLAIM.READGROUP` instead of `XREADGROUP ... >`: it gets the entries due
//! for redelivery (left by crashed or failing workers) before new ones, so there is no recovery
//! process. A handler that fails leaves its entry unacknowledged: the entry comes back to some
//! worker once `MIN-IDLE` has passed, and lands in the DLQ after `MAX-DELIVERIES` attempts.
//!
//! ```text
//! cargo run --release --example worker -- --consumer w1 [--port 6379] [--stream orders] [--group workers]
//! ```
//!
//! `--until-idle MS` stops the worker once it has been given nothing for MS milliseconds (0: never).

use std::time::{Duration, Instant};

use redis::streams::{StreamId, StreamReadReply};
use redis::Commands;

/// The work. An entry with a `poison` field fails, every time.
fn handle(entry: &StreamId) -> Result<(), String> {
    if entry.contains_key("poison") {
        return Err("poison entry".into());
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = Args::parse()?;
    let client = redis::Client::open(format!("redis://{}:{}/", a.host, a.port))?;
    let mut con = client.get_connection()?;

    let mut last = Instant::now();
    while a.until_idle.is_zero() || last.elapsed() < a.until_idle {
        // RECLAIM.READGROUP replies exactly as XREADGROUP does: the crate's StreamReadReply parses it.
        let reply: Option<StreamReadReply> = redis::cmd("RECLAIM.READGROUP")
            .arg("GROUP")
            .arg(&a.group)
            .arg(&a.consumer)
            .arg("COUNT")
            .arg(10)
            .arg("BLOCK")
            .arg(1000)
            .arg("STREAMS")
            .arg(&a.stream)
            .arg(">")
            .query(&mut con)?;
        for entry in reply.into_iter().flat_map(|r| r.keys).flat_map(|k| k.ids) {
            last = Instant::now();
            match handle(&entry) {
                Ok(()) => {
                    let _: i64 = con.xack(&a.stream, &a.group, &[&entry.id])?;
                    println!("ok {}", entry.id);
                }
                // No XACK: redelivered after MIN-IDLE, dead-lettered after MAX-DELIVERIES.
                Err(e) => println!("failed {}: {e}", entry.id),
            }
        }
    }
    Ok(())
}

/// `--host`, `--port`, `--stream`, `--group`, `--consumer` (required), `--until-idle`.
struct Args {
    host: String,
    port: u16,
    stream: String,
    group: String,
    consumer: String,
    until_idle: Duration,
}

impl Args {
    fn parse() -> Result<Args, String> {
        let mut a = Args {
            host: "127.0.0.1".into(),
            port: 6379,
            stream: "orders".into(),
            group: "workers".into(),
            consumer: String::new(),
            until_idle: Duration::ZERO,
        };
        let mut it = std::env::args().skip(1);
        while let Some(name) = it.next() {
            let value = it.next().ok_or(format!("{name} needs a value"))?;
            let bad = |e: std::num::ParseIntError| format!("{name}: {e}");
            match name.as_str() {
                "--host" => a.host = value,
                "--port" => a.port = value.parse().map_err(bad)?,
                "--stream" => a.stream = value,
                "--group" => a.group = value,
                "--consumer" => a.consumer = value,
                "--until-idle" => a.until_idle = Duration::from_millis(value.parse().map_err(bad)?),
                _ => return Err(format!("unknown option {name}")),
            }
        }
        if a.consumer.is_empty() {
            return Err("--consumer NAME is required".into());
        }
        Ok(a)
    }
}
