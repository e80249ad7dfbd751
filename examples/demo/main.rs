//! `make demo`: the crash scenario, on a real redis-server with the module loaded.
//!
//! A producer writes orders (one of them poison) to the stream `orders`; a pool of three worker
//! processes reads it with `RECLAIM.READGROUP` (no recovery process); one of them hangs in the
//! middle of a batch and is killed with SIGKILL, leaving entries in its PEL. Once those entries
//! are stale (`MIN-IDLE`) the module moves them to the inbox and the other workers take them; the
//! poison entry (whose handler fails every time) is handed out `MAX-DELIVERIES` times and then
//! moved to `orders:dlq`. The demo prints a timeline and a final tally, and exits 0 only when
//! nothing is pending, nothing is lost, the poison entry is in the DLQ exactly once after its
//! handler ran exactly `MAX-DELIVERIES` times, and no entry was handed to a worker while another
//! one's lease (`MIN-IDLE` from its delivery) was running.
//!
//! The example re-executes itself to run each worker as its own OS process:
//! `demo worker <port> <name> <log-file> [stall-after-ms]`.
//!
//! Environment: `REDIS_SERVER` (default `redis-server`), `RECLAIM_MODULE` (default
//! `target/release/libredis_reclaim.so` under the crate directory).
//!
//! Layout: `setup.rs` (the server, the group and policy, the worker processes), `workers.rs` (what
//! runs in the worker processes, and their logs), `timeline.rs` (the producer and what happens, as
//! it happens), `tally.rs` (the final count, the lease check and the verdict).

mod setup;
mod tally;
mod timeline;
mod workers;

use std::collections::{BTreeMap, BTreeSet};
use std::error::Error;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use reclaim_testkit::{cmd, int_field, show, str_field, text, Connection, Server, Value};

use setup::*;
use tally::*;
use timeline::*;
use workers::*;

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
/// The worker that hangs mid-batch (on its first batch after `STALL_AFTER_MS` without the poison
/// entry) and is killed.
const VICTIM: &str = "w2";
const STALL_AFTER_MS: u64 = 1000;
/// Time one entry takes to "process".
const PROCESS_MS: u64 = 3;
/// The policy: the lease, the attempts before the DLQ, the time between passes.
const MIN_IDLE_MS: i64 = 1000;
const MAX_DELIVERIES: i64 = 3;
const INTERVAL_MS: i64 = 200;
/// What the lease check allows below `MIN_IDLE_MS`: delivery times are the server's clock in whole
/// ms (`TIME` minus the entry's idle time), each rounded once.
const LEASE_SLACK_MS: i64 = 2;
/// Bound on the whole scenario once the workers run.
const DEADLINE: Duration = Duration::from_secs(30);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let child = match args.get(1).map(String::as_str) {
        Some("worker") => Some(worker_main(&args)),
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
    match run_demo() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("demo failed: {e}");
            ExitCode::from(2)
        }
    }
}

/// The demo: sets the scene, follows the timeline, stops the workers, prints the tally. It owns
/// the server and the worker processes: they are stopped when it returns or unwinds.
fn run_demo() -> Res<bool> {
    let tl = Timeline(Instant::now());
    let server = announced_server(&tl)?;
    let port = server.port;
    let mut con = server.conn();
    group_and_policy(&mut con, &tl)?;

    // The pool of workers, each its own process.
    let (tx, rx) = mpsc::channel::<Event>();
    let mut workers = spawn_workers(&server, &mut con, &tl, &tx)?;

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

    let watch = Watch::follow(&mut con, &rx, &mut workers, tl, t_workers)?;

    // Stop the workers (they loop forever), then count.
    for p in workers.iter_mut() {
        let _ = p.kill();
    }
    tl.say("workers stopped");
    let t = tally::count(&mut con, &workers, &watch, &written)?;
    tally::print(&t, &watch);
    Ok(verdict(&t, &watch))
}
