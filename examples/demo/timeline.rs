//! The timeline: what happens, as it happens: the producer, the victim's hang and SIGKILL, what
//! the module does (moves to the inbox, dead-letters) and what the workers are handed again (the
//! victim's entries, the poison entry), polled every 20 ms until the queue is drained or the
//! deadline passes.

use super::*;

#[derive(Clone, Copy)]
pub struct Timeline(pub Instant);

impl Timeline {
    pub fn say(&self, msg: impl AsRef<str>) {
        println!("[{:6.2}s] {}", self.0.elapsed().as_secs_f64(), msg.as_ref());
    }
}

pub enum Event {
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
pub fn producer(
    port: u16,
    tl: Timeline,
    tx: mpsc::Sender<Event>,
    written: Arc<Mutex<Vec<String>>>,
) {
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
pub fn pel(con: &mut Connection) -> Res<Vec<(String, String, i64, i64)>> {
    Ok(cmd("XPENDING")
        .arg(STREAM)
        .arg(GROUP)
        .arg("-")
        .arg("+")
        .arg(100_000)
        .query(con)?)
}

/// `XPENDING orders workers` (summary form): total and per-consumer counts.
pub fn pending_summary(con: &mut Connection) -> Res<(i64, BTreeMap<String, i64>)> {
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
/// One pending entry: (id, owner, idle ms, deliveries).
pub type PelEntry = (String, String, i64, i64);

pub type Snapshot = (Vec<PelEntry>, Value, Vec<Order>);

pub fn snapshot(con: &mut Connection) -> Res<Snapshot> {
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

pub fn dlq_entries(con: &mut Connection) -> Res<Vec<Order>> {
    let v: Value = cmd("XRANGE").arg(DLQ).arg("-").arg("+").query(con)?;
    Ok(entries(&v))
}

/// What the timeline has seen so far.
#[derive(Default)]
pub struct Watch {
    /// Every ID the producer wrote, once it is done.
    pub produced: Option<Vec<String>>,
    /// The poison entry's ID, once written.
    pub poison: Option<String>,
    victim_killed: bool,
    /// What the victim held when killed: (count, IDs).
    pub victim_held: Option<(i64, Vec<String>)>,
    last_moved: i64,
    last_dead: i64,
    /// The owner of each pending entry at the last look, and at the one before.
    owners: BTreeMap<String, String>,
    owners_before: BTreeMap<String, String>,
    dlq_seen: usize,
    /// Log lines of each worker already shown (by worker name).
    log_seen: BTreeMap<String, usize>,
    /// No worker exited on its own.
    pub ok: bool,
    /// Nothing pending, every produced ID acknowledged or dead-lettered.
    pub drained: bool,
}

impl Watch {
    /// Follows the scenario, every 20 ms, until drained or [`DEADLINE`]; `t_workers` is when the
    /// workers were up (the victim is killed at the latest 5 s after).
    pub fn follow(
        con: &mut Connection,
        rx: &mpsc::Receiver<Event>,
        workers: &mut [Proc],
        tl: Timeline,
        t_workers: Instant,
    ) -> Res<Watch> {
        let mut w = Watch {
            ok: true,
            ..Watch::default()
        };
        let deadline = Instant::now() + DEADLINE;
        loop {
            let stalled = w.events(rx, tl)?;
            if !w.victim_killed
                && (stalled.is_some() || t_workers.elapsed() > Duration::from_millis(5000))
            {
                w.kill_victim(stalled, workers, con, tl)?;
            }
            w.exited(workers, tl);
            let (now_pel, dlq) = w.module(con, tl)?;
            w.workers(workers, tl);
            if w.is_drained(&now_pel, &dlq, workers) {
                tl.say(format!(
                    "queue drained: XPENDING {STREAM} {GROUP} total 0, every produced ID acknowledged or dead-lettered"
                ));
                w.drained = true;
                return Ok(w);
            }
            if Instant::now() > deadline {
                tl.say(format!(
                    "TIMEOUT: not drained after {} s (producer done: {}, pending: {}); giving up",
                    DEADLINE.as_secs(),
                    w.produced.is_some(),
                    now_pel.len()
                ));
                return Ok(w);
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Events from the producer and the victim; returns the victim's stall (acked, held).
    fn events(&mut self, rx: &mpsc::Receiver<Event>, tl: Timeline) -> Res<Option<(usize, usize)>> {
        let mut stalled = None;
        while let Ok(ev) = rx.try_recv() {
            match ev {
                Event::Poison(id) => self.poison = Some(id),
                Event::Produced(ids) => {
                    tl.say(format!(
                        "producer done: {} orders written ({} .. {})",
                        ids.len(),
                        ids.first().map(String::as_str).unwrap_or("-"),
                        ids.last().map(String::as_str).unwrap_or("-")
                    ));
                    self.produced = Some(ids);
                }
                Event::ProducerFailed(e) => return Err(format!("producer failed: {e}").into()),
                Event::Stalled { acked, held } => stalled = Some((acked, held)),
            }
        }
        Ok(stalled)
    }

    /// Kills the victim (hung mid-batch, or late) with SIGKILL and notes what it held.
    fn kill_victim(
        &mut self,
        stalled: Option<(usize, usize)>,
        workers: &mut [Proc],
        con: &mut Connection,
        tl: Timeline,
    ) -> Res<()> {
        let v = workers
            .iter_mut()
            .find(|p| p.name == VICTIM)
            .ok_or("no victim")?;
        match stalled {
            Some((acked, held)) => tl.say(format!(
                "{VICTIM} hangs in the middle of a batch of {}: acked {acked}, {held} not yet",
                acked + held,
            )),
            None => tl.say(format!(
                "{VICTIM} never hung mid-batch (no batch after {STALL_AFTER_MS} ms?); killing it anyway"
            )),
        }
        let pid = v.child.id();
        let status = v.kill()?;
        self.victim_killed = true;
        let (total, per) = pending_summary(con)?;
        let held = per.get(VICTIM).copied().unwrap_or(0);
        let ids: Vec<String> = pel(con)?
            .into_iter()
            .filter(|(_, owner, _, _)| owner == VICTIM)
            .map(|(id, ..)| id)
            .collect();
        tl.say(format!(
            "killed {VICTIM} (pid {pid}) with SIGKILL: {status}; XPENDING {STREAM} {GROUP} summary: total {total}, {VICTIM} holds {} ({})",
            plural(held as usize, "entry", "entries"),
            short_list(&ids)
        ));
        self.victim_held = Some((held, ids));
        Ok(())
    }

    /// Workers that died on their own.
    fn exited(&mut self, workers: &mut [Proc], tl: Timeline) {
        for p in workers.iter_mut() {
            if let Some(s) = p.exited_now() {
                tl.say(format!("worker {} exited unexpectedly: {s}", p.name));
                self.ok = false;
            }
        }
    }

    /// What the module did since the last look: moves to the inbox, dead-letters. Returns the
    /// PEL and the DLQ as seen.
    fn module(&mut self, con: &mut Connection, tl: Timeline) -> Res<(Vec<PelEntry>, Vec<Order>)> {
        // One MULTI/EXEC, so the PEL, the counters and the DLQ are seen at the same instant (the
        // module's timer never runs inside a transaction).
        let (now_pel, st, dlq) = snapshot(con)?;
        let (moved, dead) = (int_field(&st, "claimed"), int_field(&st, "dead-lettered"));
        if moved > self.last_moved {
            tl.say(format!(
                "module moved {} into the inbox, `{CLAIMANT}`'s PEL, delivery counts unchanged (RECLAIM.STATS claimed={moved} inbox={})",
                plural((moved - self.last_moved) as usize, "stale entry", "stale entries"),
                int_field(&st, "inbox"),
            ));
            self.last_moved = moved;
        }
        self.owners_before = std::mem::replace(
            &mut self.owners,
            now_pel
                .iter()
                .map(|(id, owner, ..)| (id.clone(), owner.clone()))
                .collect(),
        );
        if dead > self.last_dead || dlq.len() > self.dlq_seen {
            for e in &dlq[self.dlq_seen.min(dlq.len())..] {
                let what = if e.field("reclaim-id") == self.poison.as_deref() {
                    "the poison entry"
                } else {
                    "an entry"
                };
                tl.say(format!(
                    "dead-lettered {what}: XRANGE {DLQ} -> {} {}",
                    e.id,
                    e.show_fields()
                ));
            }
            self.dlq_seen = dlq.len();
            self.last_dead = dead;
        }
        Ok((now_pel, dlq))
    }

    /// What the workers' logs show since the last look: entries handed over again (their
    /// delivery 2 or later), and every delivery of the poison entry and what its handler did.
    fn workers(&mut self, workers: &[Proc], tl: Timeline) {
        for p in workers {
            let log = read_log(&p.log);
            let seen = self.log_seen.entry(p.name.clone()).or_default();
            let new = &log[(*seen).min(log.len())..];
            *seen = log.len();
            let mut again: BTreeMap<i64, Vec<String>> = BTreeMap::new();
            for line in new {
                match line {
                    LogLine::Deliver { id, count, .. } if Some(id) == self.poison.as_ref() => {
                        tl.say(format!("poison {id}: delivery {count}, to {}", p.name))
                    }
                    LogLine::Deliver { id, count, .. } if *count > 1 => {
                        again.entry(*count).or_default().push(id.clone())
                    }
                    LogLine::Fail(id) => {
                        tl.say(format!("poison {id}: {}'s handler failed: no XACK", p.name))
                    }
                    _ => {}
                }
            }
            for (count, ids) in again {
                // Where they were at the look before (the inbox, or a worker that went quiet).
                let mut from: BTreeMap<&str, usize> = BTreeMap::new();
                for id in &ids {
                    if let Some(o) = self.owners_before.get(id) {
                        *from
                            .entry(if o == CLAIMANT { "the inbox" } else { o })
                            .or_default() += 1;
                    }
                }
                let from: Vec<String> = from.iter().map(|(k, n)| format!("{k} x{n}")).collect();
                tl.say(format!(
                    "{} was handed {} again (delivery {count}{}): {}",
                    p.name,
                    plural(ids.len(), "entry", "entries"),
                    if from.is_empty() {
                        String::new()
                    } else {
                        format!(", from {}", from.join(", "))
                    },
                    short_list(&ids)
                ));
            }
        }
    }

    /// Nothing pending, and every produced ID acknowledged in a worker's log or in the DLQ.
    fn is_drained(&self, now_pel: &[PelEntry], dlq: &[Order], workers: &[Proc]) -> bool {
        let Some(ids) = &self.produced else {
            return false;
        };
        if !now_pel.is_empty() {
            return false;
        }
        let mut done: BTreeSet<String> = BTreeSet::new();
        for p in workers {
            done.extend(read_log(&p.log).into_iter().filter_map(|l| match l {
                LogLine::Ok(id) => Some(id),
                _ => None,
            }));
        }
        done.extend(
            dlq.iter()
                .filter_map(|e| e.field("reclaim-id").map(str::to_string)),
        );
        ids.iter().all(|id| done.contains(id))
    }
}
