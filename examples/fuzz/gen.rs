//! The sequences: a small deterministic RNG and the operations it draws, the same bytes for the
//! same seed on every machine.
//!
//! Key names come in two families that no command mixes:
//! - the module's (`M`): streams `s0..s2` with consumer groups and policies, DLQs `d0` `d1`,
//!   their policy keys, and `parked0` `parked1` (where RENAME puts policy values); the timer and
//!   the workers change them, so they are compared only within one run (a server before and after
//!   a reload, a primary and its replica);
//! - plain keys (`P`): `k0..k3` of every type and streams `p0` `p1` with explicit IDs: no module
//!   command names them, so the run with the module and the run without it must hold the same
//!   plain keys, in the same databases, after every operation.

use std::fmt::Write as _;

/// SplitMix64: small, fast, and the same everywhere.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// 0..n
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }
}

/// Number of databases the servers have (`--databases`).
pub const DBS: i64 = 4;

pub const STREAMS: [&str; 3] = ["s0", "s1", "s2"];
pub const DLQS: [&str; 2] = ["d0", "d1"];
pub const PARKED: [&str; 2] = ["parked0", "parked1"];
pub const GROUPS: [&str; 2] = ["g0", "g1"];
pub const CONSUMERS: [&str; 3] = ["c0", "c1", "c2"];
pub const PLAIN: [&str; 4] = ["k0", "k1", "k2", "k3"];
pub const PLAIN_STREAMS: [&str; 2] = ["p0", "p1"];

/// The policy key of stream `s` (the module's naming: `reclaim:policy:{s}:s` for a name without
/// braces).
pub fn policy_key(s: &str) -> String {
    format!("reclaim:policy:{{{s}}}:{s}")
}

/// Whether a key name belongs to the plain family (compared between the two runs).
pub fn is_plain(name: &[u8]) -> bool {
    PLAIN
        .iter()
        .chain(PLAIN_STREAMS.iter())
        .any(|p| p.as_bytes() == name)
}

/// Every name of the module's family.
fn module_names() -> Vec<String> {
    let mut v: Vec<String> = STREAMS
        .iter()
        .chain(DLQS.iter())
        .chain(PARKED.iter())
        .map(|s| s.to_string())
        .collect();
    v.extend(STREAMS.iter().map(|s| policy_key(s)));
    v
}

/// How a restart brings the dataset back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persist {
    Rdb,
    Aof { preamble: bool },
}

/// One step of a background worker (its IDs are those its last read returned).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `RECLAIM.READGROUP` (module) or `XREADGROUP ... >` (both runs) with BLOCK ms.
    Read {
        module: bool,
        stream: &'static str,
        group: &'static str,
        consumer: &'static str,
        count: u64,
        block: u64,
    },
    Ack,
    Nack {
        delay: u64,
    },
    Extend,
    Term,
}

/// One operation of a sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// A command on the main client. Arguments starting with `\0@` are filled in at run time
    /// ([`placeholder`]).
    Cmd(Vec<Vec<u8>>),
    /// `MULTI`, the commands, `EXEC` on the main client.
    Multi(Vec<Vec<Vec<u8>>>),
    /// `DUMP src`, then `RESTORE dst ttl payload [REPLACE]` (the main client's database).
    DumpRestore {
        src: String,
        dst: String,
        ttl: u64,
        replace: bool,
    },
    /// `RECLAIM.POLICY EXPORT` here, `IMPORT ... REPLACE` into database `to_db` (module only).
    ExportImport {
        to_db: i64,
    },
    /// Background workers, joined before the next check, reload or restart.
    Workers(Vec<Vec<Step>>),
    /// Compare: primary and replica; the plain keys against the other run.
    Check,
    DebugReload,
    /// `DEBUG LOADAOF` (when AOF is on).
    DebugLoadAof,
    BgRewriteAof,
    /// Turn AOF on (with or without the RDB preamble) or off.
    Aof {
        on: bool,
        preamble: bool,
    },
    /// Persist, stop, start again from what was persisted.
    Restart(Persist),
    /// `REPLICAOF NO ONE` on the replica.
    Detach,
    /// The replica follows the primary again (a full or partial sync).
    Attach,
    /// `CONFIG SET maxmemory-policy`, `maxmemory`; `partial`: a limit some keys fit under (the
    /// keys evicted or refused then depend on memory use, which differs with the module: the two
    /// runs' plain keys are not compared until the next FLUSHALL).
    Maxmemory {
        bytes: u64,
        policy: &'static str,
        partial: bool,
    },
    /// An eviction burst (`--evict-burst`): `fill` runs (the readers' groups, values of a few
    /// KB), `readers` block on their streams in the background, then `maxmemory` drops to `bytes`
    /// under `policy` (`limit_first`: the limit is set while the policy is `noeviction` and the
    /// policy after it, so that the evictions run before the next client command rather than
    /// inside `CONFIG SET`), then `writes` run on the main client while the timer and the readers
    /// are busy; then `maxmemory 0` again. Plain keys are not compared with the other run until
    /// the next FLUSHALL (what is evicted depends on memory use).
    Burst {
        fill: Vec<Vec<Vec<u8>>>,
        readers: Vec<Reader>,
        policy: &'static str,
        bytes: u64,
        limit_first: bool,
        writes: Vec<Vec<Vec<u8>>>,
    },
}

/// A reader blocked during a [`Op::Burst`]: `RECLAIM.READGROUP` (`module`, in the run with the
/// module) or `XREADGROUP`, `GROUP group consumer BLOCK block STREAMS streams... > ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reader {
    pub module: bool,
    pub streams: Vec<&'static str>,
    pub group: &'static str,
    pub consumer: &'static str,
    pub block: u64,
}

impl Reader {
    /// The command, as the run sends it.
    pub fn command(&self, module: bool) -> Vec<Vec<u8>> {
        let name = if self.module && module {
            "RECLAIM.READGROUP"
        } else {
            "XREADGROUP"
        };
        let block = self.block.to_string();
        let mut a = w(&[name, "GROUP", self.group, self.consumer, "BLOCK", &block]);
        a.push(b"STREAMS".to_vec());
        a.extend(self.streams.iter().map(|s| s.as_bytes().to_vec()));
        a.extend(self.streams.iter().map(|_| b">".to_vec()));
        a
    }
}

pub const PLACEHOLDER: &[u8] = b"\0@";

fn ph(kind: &str, parts: &[&str]) -> Vec<u8> {
    let mut v = PLACEHOLDER.to_vec();
    v.extend_from_slice(kind.as_bytes());
    for p in parts {
        v.push(b' ');
        v.extend_from_slice(p.as_bytes());
    }
    v
}

/// A placeholder argument, parsed: (`pending` | `pendingc`, its words).
pub fn placeholder(arg: &[u8]) -> Option<Vec<String>> {
    let rest = arg.strip_prefix(PLACEHOLDER)?;
    Some(
        String::from_utf8_lossy(rest)
            .split(' ')
            .map(String::from)
            .collect(),
    )
}

/// Whether a command exists only with the module (skipped in the run without it).
pub fn module_only(args: &[Vec<u8>]) -> bool {
    let name = args
        .first()
        .map(|a| a.to_ascii_uppercase())
        .unwrap_or_default();
    name.starts_with(b"RECLAIM.")
        || (name == b"CONFIG"
            && args
                .get(2)
                .is_some_and(|k| k.to_ascii_lowercase().starts_with(b"reclaim.")))
}

fn w(parts: &[&str]) -> Vec<Vec<u8>> {
    parts.iter().map(|p| p.as_bytes().to_vec()).collect()
}

/// What the generator may draw.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Also draw what is known to differ today, the servers' own: history reads (`XREADGROUP
    /// ... 0`, counts raised on the primary only), and `COPY ... DB` on Valkey 8.1 (below).
    pub known: bool,
    /// Draw `COPY ... DB n`. Off on Valkey 8.1 unless `known`: there the AOF loader goes on in
    /// the destination database after it (valkey-io/valkey#1819, fixed by #4024; the module
    /// cannot see the loader's database, see src/server/caller_db.rs).
    pub copy_db: bool,
    /// Eviction under load: values of a few KB, and one operation in ten sets `maxmemory` to
    /// 1-3 MB with `allkeys-lru` (or back to none), so the primary evicts keys while the timer,
    /// the workers and the replica run.
    pub evict: bool,
    /// Eviction bursts ([`Op::Burst`]): one operation in twelve blocks readers on several
    /// streams, drops `maxmemory` to 1 byte, 100kb or 1mb under an `allkeys-*` policy and writes.
    pub burst: bool,
}

pub struct Gen<'a> {
    rng: &'a mut Rng,
    opts: Options,
    /// Index of the operation being drawn (explicit stream IDs grow with it).
    index: u64,
}

impl<'a> Gen<'a> {
    fn stream(&mut self) -> &'static str {
        STREAMS[self.rng.below(STREAMS.len() as u64) as usize]
    }
    fn group(&mut self) -> &'static str {
        GROUPS[self.rng.below(GROUPS.len() as u64) as usize]
    }
    fn consumer(&mut self) -> &'static str {
        CONSUMERS[self.rng.below(CONSUMERS.len() as u64) as usize]
    }
    fn num(&mut self, lo: u64, hi: u64) -> String {
        self.rng.range(lo, hi).to_string()
    }
    fn db(&mut self) -> String {
        self.rng.below(DBS as u64).to_string()
    }

    /// A command on plain keys (both runs, compared between them).
    fn plain_cmd(&mut self) -> Vec<Vec<u8>> {
        let k = self.rng.pick(&PLAIN).to_string();
        let k2 = self.rng.pick(&PLAIN).to_string();
        let p = self.rng.pick(&PLAIN_STREAMS).to_string();
        let v = self.value();
        let id = format!("{}-{}", self.index + 1, self.rng.below(3));
        match self.rng.below(24) {
            0 => w(&["SET", &k, &v]),
            1 => w(&["APPEND", &k, &v]),
            2 => w(&["INCR", &k]),
            3 => w(&["HSET", &k, "f", &v]),
            4 => w(&["LPUSH", &k, &v]),
            5 => w(&["SADD", &k, &v]),
            6 => w(&["ZADD", &k, &self.num(0, 9), &v]),
            7 => w(&["DEL", &k]),
            8 => w(&["EXPIRE", &k, "100000"]),
            9 => w(&["PERSIST", &k]),
            10 => w(&["RENAME", &k, &k2]),
            11 if self.opts.copy_db => w(&["COPY", &k, &k2, "DB", &self.db()]),
            12 if self.opts.copy_db => w(&["COPY", &k, &k2, "DB", &self.db(), "REPLACE"]),
            11 | 12 => w(&["COPY", &k, &k2, "REPLACE"]),
            13 => w(&["MOVE", &k, &self.db()]),
            14 => w(&["XADD", &p, &id, "f", &v]),
            15 => w(&["XGROUP", "CREATE", &p, "pg", "0", "MKSTREAM"]),
            16 => w(&[
                "XREADGROUP",
                "GROUP",
                "pg",
                "pc",
                "COUNT",
                "2",
                "STREAMS",
                &p,
                ">",
            ]),
            17 => {
                let pend = ph("pending", &[&p, "pg"]);
                vec![b"XACK".to_vec(), p.into_bytes(), b"pg".to_vec(), pend]
            }
            18 if self.opts.copy_db => w(&["COPY", &p, &k, "DB", &self.db()]),
            18 => w(&["COPY", &p, &k]),
            19 => w(&["MOVE", &p, &self.db()]),
            20 => w(&["SETEX", &k, "100000", &v]),
            21 => w(&["UNLINK", &k, &k2]),
            22 => w(&["RENAMENX", &p, &k]),
            _ => w(&["XTRIM", &p, "MAXLEN", &self.num(0, 3)]),
        }
    }

    /// A stream or keyspace command on the module's keys (both runs).
    fn module_key_cmd(&mut self) -> Vec<Vec<u8>> {
        let s = self.stream().to_string();
        let g = self.group().to_string();
        let c = self.consumer().to_string();
        let names = module_names();
        let a = self.rng.pick(&names).clone();
        let b = self.rng.pick(&names).clone();
        let v = self.value();
        match self.rng.below(26) {
            0..=3 => w(&["XADD", &s, "*", "f", &v]),
            4 => w(&["XADD", &s, "MAXLEN", "~", "50", "*", "f", &v]),
            5 | 6 => w(&["XGROUP", "CREATE", &s, &g, "0", "MKSTREAM"]),
            7 => w(&["XGROUP", "CREATE", &s, &g, "$"]),
            8 => w(&["XGROUP", "DESTROY", &s, &g]),
            9 => w(&["XGROUP", "SETID", &s, &g, "0"]),
            10 => w(&["XGROUP", "CREATECONSUMER", &s, &g, &c]),
            11 => w(&["XGROUP", "DELCONSUMER", &s, &g, &c]),
            12 | 13 => w(&[
                "XREADGROUP",
                "GROUP",
                &g,
                &c,
                "COUNT",
                &self.num(1, 5),
                "STREAMS",
                &s,
                ">",
            ]),
            14 => {
                let pend = ph("pending", &[&s, &g]);
                vec![b"XACK".to_vec(), s.into_bytes(), g.into_bytes(), pend]
            }
            15 => {
                let pend = ph("pending", &[&s, &g]);
                let mut x = w(&["XCLAIM", &s, &g, &c, "0"]);
                x.push(pend);
                if self.rng.chance(30) {
                    x.push(b"JUSTID".to_vec());
                }
                if self.rng.chance(30) {
                    x.extend(w(&["RETRYCOUNT", &self.num(0, 6)]));
                }
                x
            }
            16 => w(&[
                "XAUTOCLAIM",
                &s,
                &g,
                &c,
                "0",
                "0-0",
                "COUNT",
                &self.num(1, 10),
            ]),
            17 => w(&["XDEL", &s, "0-1"]),
            18 => w(&["XTRIM", &s, "MAXLEN", &self.num(0, 10)]),
            19 => w(&["DEL", &a]),
            20 => w(&["RENAME", &a, &b]),
            21 if self.opts.copy_db => w(&["COPY", &a, &b, "DB", &self.db()]),
            22 => w(&["COPY", &a, &b, "REPLACE"]),
            23 => w(&["MOVE", &a, &self.db()]),
            24 if self.opts.known => w(&["XREADGROUP", "GROUP", &g, &c, "STREAMS", &s, "0"]),
            25 => self.onto_dlq_policy_key(&s),
            _ => w(&["EXPIRE", &a, "100000"]),
        }
    }

    /// `RENAME` or `COPY` of a policy value onto the policy key of a DLQ: when that is its own
    /// DLQ, the policy would dead-letter into its own stream; the module keeps it, invalid and
    /// inert, through every load (issue 20: a load refused it before, the 7.0.15 drift of issue
    /// 24).
    fn onto_dlq_policy_key(&mut self, s: &str) -> Vec<Vec<u8>> {
        let d = policy_key(DLQS[self.rng.below(2) as usize]);
        let how = if self.rng.chance(50) {
            "RENAME"
        } else {
            "COPY"
        };
        w(&[how, &policy_key(s), &d])
    }

    fn policy_set(&mut self, s: &str, g: &str) -> Vec<Vec<u8>> {
        let mut x = w(&["RECLAIM.POLICY", "SET", s, g]);
        // Now and then another policy's stream: a RENAME or COPY between policy keys may then
        // leave a policy whose DLQ is its own stream (invalid, kept).
        let dlq = if self.rng.chance(10) {
            self.stream()
        } else {
            self.rng.pick(&DLQS)
        };
        let opts: Vec<Vec<String>> = vec![
            vec!["MIN-IDLE".into(), self.num(0, 200)],
            vec!["MAX-DELIVERIES".into(), self.num(0, 4)],
            vec!["DLQ".into(), dlq.into()],
            vec!["CLAIMANT".into(), self.consumer().into()],
            vec!["COUNT".into(), self.num(1, 20)],
            vec!["INTERVAL".into(), self.num(10, 200)],
            vec!["BACKOFF".into(), "EXPONENTIAL".into(), self.num(100, 1000)],
            vec!["LIVENESS".into(), self.num(0, 500)],
            vec!["STORM".into(), self.num(1, 5), self.num(100, 2000)],
            vec!["DLQ-MAXLEN".into(), self.num(0, 10)],
            vec!["DLQ-MAXAGE".into(), self.num(0, 100000)],
            vec![
                "TOMBSTONES".into(),
                self.rng.pick(&["yes", "no"]).to_string(),
            ],
        ];
        for o in opts {
            if self.rng.chance(45) {
                x.extend(o.iter().map(|s| s.as_bytes().to_vec()));
            }
        }
        x
    }

    /// A module command, well formed or not (skipped without the module).
    fn reclaim_cmd(&mut self) -> Vec<Vec<u8>> {
        let s = self.stream().to_string();
        let g = self.group().to_string();
        let c = self.consumer().to_string();
        let d = self.rng.pick(&DLQS).to_string();
        let pend = ph("pendingc", &[&s, &g, &c]);
        match self.rng.below(30) {
            0..=4 => self.policy_set(&s, &g),
            5 => w(&["RECLAIM.POLICY", "GET", &s, &g]),
            6 => w(&["RECLAIM.POLICY", "DEL", &s, &g]),
            7 => w(&["RECLAIM.POLICY", "LIST"]),
            8 => w(&["RECLAIM.POLICY", "PAUSE", &s, &g]),
            9 => w(&["RECLAIM.POLICY", "RESUME", &s, &g]),
            10 => w(&["RECLAIM.POLICY", "PAUSE", &s, &g, "STORM"]),
            11 | 12 => {
                let mut x = w(&[
                    "RECLAIM.READGROUP",
                    "GROUP",
                    &g,
                    &c,
                    "COUNT",
                    &self.num(1, 5),
                ]);
                if self.rng.chance(30) {
                    x.extend(w(&["BLOCK", &self.num(1, 30)]));
                }
                x.extend(w(&["STREAMS", &s, ">"]));
                x
            }
            13 => {
                let mut x = w(&["RECLAIM.EXTEND", &s, &g, &c]);
                x.push(pend);
                x
            }
            14 => {
                let mut x = w(&["RECLAIM.NACK", &s, &g, &c]);
                x.push(pend);
                if self.rng.chance(50) {
                    x.extend(w(&["DELAY", &self.num(0, 100)]));
                }
                x
            }
            15 => {
                let mut x = w(&["RECLAIM.TERM", &s, &g, &c]);
                x.push(pend);
                x.extend(w(&["REASON", "bad"]));
                x
            }
            16 => {
                let mut x = w(&["RECLAIM.REDRIVE", &d]);
                if self.rng.chance(50) {
                    x.extend(w(&["SOURCE", &s, &g]));
                }
                x.extend(w(&["COUNT", &self.num(1, 20), "RATE", &self.num(10, 1000)]));
                x
            }
            17 => w(&["RECLAIM.REDRIVE", "STATUS", &d]),
            18 => w(&["RECLAIM.REDRIVE", "CANCEL", &d]),
            19 => w(&["RECLAIM.SWEEP", &s, &g, "LIMIT", &self.num(1, 50)]),
            20 => w(&[
                "RECLAIM.SIMULATE",
                &s,
                &g,
                "LIMIT",
                &self.num(1, 20),
                "MIN-IDLE",
                "0",
            ]),
            21 => w(&["RECLAIM.STATS", &s, &g]),
            22 => w(&["RECLAIM.HEALTH", &s, &g]),
            23 => w(&["RECLAIM.POLICY", "EXPORT"]),
            24 => w(&[
                "CONFIG",
                "SET",
                "reclaim.enabled",
                *self.rng.pick(&["yes", "no", "yes"]),
            ]),
            25 => w(&[
                "CONFIG",
                "SET",
                "reclaim.tick-interval-ms",
                &self.num(1, 50),
            ]),
            _ => self.ill_formed(&s, &g, &c),
        }
    }

    /// A module command no client should send: wrong arity, bad numbers, unknown options,
    /// non-UTF-8 bytes, options that look like keywords.
    fn ill_formed(&mut self, s: &str, g: &str, c: &str) -> Vec<Vec<u8>> {
        let names = [
            "RECLAIM.POLICY",
            "RECLAIM.READGROUP",
            "RECLAIM.EXTEND",
            "RECLAIM.NACK",
            "RECLAIM.TERM",
            "RECLAIM.REDRIVE",
            "RECLAIM.SWEEP",
            "RECLAIM.SIMULATE",
            "RECLAIM.STATS",
            "RECLAIM.HEALTH",
        ];
        let junk: [&[u8]; 14] = [
            b"SET",
            b"GET",
            b"DLQ",
            b"COUNT",
            b"-1",
            b"0",
            b"9223372036854775808",
            b"BLOCK",
            b"STREAMS",
            b">",
            b"\xff\xfe",
            "\u{100}x".as_bytes(),
            b"",
            b"MIN-IDLE",
        ];
        let mut x = vec![self.rng.pick(&names).as_bytes().to_vec()];
        let n = self.rng.below(7);
        for _ in 0..n {
            let a: Vec<u8> = match self.rng.below(4) {
                0 => s.as_bytes().to_vec(),
                1 => g.as_bytes().to_vec(),
                2 => c.as_bytes().to_vec(),
                _ => self.rng.pick(&junk).to_vec(),
            };
            x.push(a);
        }
        x
    }

    /// A script on the main client (both runs): a command that names another database, then a
    /// write that must land in the caller's.
    fn script(&mut self) -> Vec<Vec<u8>> {
        let k = self.rng.pick(&PLAIN).to_string();
        let k2 = self.rng.pick(&PLAIN).to_string();
        let k3 = self.rng.pick(&PLAIN).to_string();
        let db = self.db();
        match self.rng.below(3) {
            1 if !self.opts.copy_db => w(&[
                "EVAL",
                "redis.call('copy', KEYS[1], KEYS[2]) return redis.call('set', KEYS[3], 'script')",
                "3", &k, &k2, &k3,
            ]),
            0 => w(&[
                "EVAL",
                "redis.call('move', KEYS[1], ARGV[1]) return redis.call('set', KEYS[2], 'script')",
                "2", &k, &k2, &db,
            ]),
            1 => w(&[
                "EVAL",
                "redis.call('copy', KEYS[1], KEYS[2], 'DB', ARGV[1]) return redis.call('set', KEYS[3], 'script')",
                "3", &k, &k2, &k3, &db,
            ]),
            _ => w(&[
                "EVAL",
                "redis.call('select', ARGV[1]) return redis.call('set', KEYS[1], 'script')",
                "1", &k, &db,
            ]),
        }
    }

    fn any_cmd(&mut self) -> Vec<Vec<u8>> {
        match self.rng.below(100) {
            0..=29 => self.plain_cmd(),
            30..=59 => self.module_key_cmd(),
            60..=84 => self.reclaim_cmd(),
            85..=89 => w(&["SELECT", &self.db()]),
            90..=92 => self.script(),
            93 => w(&["SWAPDB", &self.db(), &self.db()]),
            94 => w(&["FLUSHDB"]),
            95 => w(&["CLIENT", "PAUSE", &self.num(10, 80), "WRITE"]),
            _ => self.plain_cmd(),
        }
    }

    fn workers(&mut self) -> Op {
        let n = self.rng.range(1, 3);
        let plans = (0..n)
            .map(|_| {
                let s = self.stream();
                let g = self.group();
                let c = self.consumer();
                (0..self.rng.range(3, 10))
                    .map(|_| match self.rng.below(7) {
                        0..=2 => Step::Read {
                            module: self.rng.chance(60),
                            stream: s,
                            group: g,
                            consumer: c,
                            count: self.rng.range(1, 5),
                            block: self.rng.range(5, 60),
                        },
                        3 => Step::Ack,
                        4 => Step::Nack {
                            delay: self.rng.range(0, 50),
                        },
                        5 => Step::Extend,
                        _ => Step::Term,
                    })
                    .collect()
            })
            .collect();
        Op::Workers(plans)
    }

    /// An eviction burst ([`Op::Burst`]): 1-3 readers, each on two or three of the module's
    /// streams (those of group `g0`, `s0` and `s2`, in either order, most of the time: a read
    /// fails at once when a stream lacks the group); a tiny limit; 5-30 writes of a few KB.
    fn burst(&mut self) -> Op {
        let mut fill = Vec::new();
        let readers: Vec<Reader> = (0..self.rng.range(1, 3))
            .map(|_| {
                let (streams, group) = if self.rng.chance(75) {
                    let two = if self.rng.chance(50) {
                        vec!["s0", "s2"]
                    } else {
                        vec!["s2", "s0"]
                    };
                    (two, "g0")
                } else {
                    (STREAMS.to_vec(), self.group())
                };
                Reader {
                    module: self.rng.chance(80),
                    streams,
                    group,
                    consumer: self.consumer(),
                    block: self.rng.range(200, 800),
                }
            })
            .collect();
        for r in &readers {
            for s in &r.streams {
                fill.push(w(&["XGROUP", "CREATE", s, r.group, "$", "MKSTREAM"]));
            }
        }
        fill.extend(self.writes(3, 12));
        let policy = *self
            .rng
            .pick(&["allkeys-lru", "allkeys-lfu", "allkeys-random"]);
        let bytes = *self.rng.pick(&[1u64, 100 << 10, 1 << 20]);
        let writes = self.writes(5, 20);
        Op::Burst {
            fill,
            readers,
            policy,
            bytes,
            limit_first: self.rng.chance(60),
            writes,
        }
    }

    /// `lo..=hi` writes of a few KB each: `SET` of a plain key, or `XADD` to a module stream.
    fn writes(&mut self, lo: u64, hi: u64) -> Vec<Vec<Vec<u8>>> {
        (0..self.rng.range(lo, hi))
            .map(|_| {
                let v = self.value();
                if self.rng.chance(60) {
                    let k = self.rng.pick(&PLAIN).to_string();
                    w(&["SET", &k, &v])
                } else {
                    let s = self.stream();
                    w(&["XADD", s, "*", "f", &v])
                }
            })
            .collect()
    }

    fn admin(&mut self) -> Op {
        match self.rng.below(13) {
            0 | 1 => Op::DebugReload,
            2 => Op::DebugLoadAof,
            3 => Op::BgRewriteAof,
            4 => Op::Aof {
                on: self.rng.chance(80),
                preamble: self.rng.chance(50),
            },
            5 => Op::Restart(Persist::Rdb),
            6 | 7 => Op::Restart(Persist::Aof {
                preamble: self.rng.chance(50),
            }),
            8 => Op::Detach,
            9 => Op::Attach,
            10 => {
                let policy = *self.rng.pick(&[
                    "noeviction",
                    "allkeys-lru",
                    "volatile-lru",
                    "allkeys-random",
                ]);
                if self.rng.chance(25) {
                    Op::Maxmemory {
                        bytes: self.rng.range(1, 4) << 20,
                        policy,
                        partial: true,
                    }
                } else {
                    Op::Maxmemory {
                        bytes: 1,
                        policy,
                        partial: false,
                    }
                }
            }
            11 => Op::Maxmemory {
                bytes: 0,
                policy: "noeviction",
                partial: false,
            },
            _ => Op::Cmd(w(&["FLUSHALL"])),
        }
    }

    /// A value: short, or a few KB when drawing for eviction.
    fn value(&mut self) -> String {
        let v = format!("v{}", self.rng.below(100));
        if self.opts.evict {
            format!("{v}{}", "x".repeat(self.rng.range(1000, 6000) as usize))
        } else {
            v
        }
    }

    fn one(&mut self) -> Op {
        if self.rng.chance(2) {
            let s = self.stream();
            return Op::Cmd(self.onto_dlq_policy_key(s));
        }
        if self.opts.burst && self.rng.chance(8) {
            return self.burst();
        }
        if self.opts.evict && self.rng.chance(10) {
            return if self.rng.chance(70) {
                Op::Maxmemory {
                    bytes: self.rng.range(1, 3) << 20,
                    policy: "allkeys-lru",
                    partial: true,
                }
            } else {
                Op::Maxmemory {
                    bytes: 0,
                    policy: "noeviction",
                    partial: false,
                }
            };
        }
        match self.rng.below(100) {
            0..=64 => Op::Cmd(self.any_cmd()),
            65..=74 => {
                let n = self.rng.range(1, 6);
                Op::Multi((0..n).map(|_| self.any_cmd()).collect())
            }
            75..=77 => {
                let (src, dst) = if self.rng.chance(50) {
                    (
                        self.rng.pick(&PLAIN).to_string(),
                        self.rng.pick(&PLAIN).to_string(),
                    )
                } else {
                    let names = module_names();
                    let mut dsts = names.clone();
                    dsts.extend(DLQS.iter().map(|d| policy_key(d)));
                    (self.rng.pick(&names).clone(), self.rng.pick(&dsts).clone())
                };
                Op::DumpRestore {
                    src,
                    dst,
                    ttl: if self.rng.chance(20) { 100_000_000 } else { 0 },
                    replace: self.rng.chance(60),
                }
            }
            78 => Op::ExportImport {
                to_db: self.rng.below(DBS as u64) as i64,
            },
            79..=83 => self.workers(),
            84..=90 => self.admin(),
            _ => Op::Check,
        }
    }
}

/// The sequence of `len` operations of `seed` (ends with a check).
pub fn sequence(seed: u64, len: usize, opts: Options) -> Vec<Op> {
    let mut rng = Rng::new(seed);
    let mut g = Gen {
        rng: &mut rng,
        opts,
        index: 0,
    };
    let mut ops = Vec::with_capacity(len + 1);
    // A start every sequence shares: groups and policies to work on.
    for (i, s) in STREAMS.iter().enumerate() {
        ops.push(Op::Cmd(w(&[
            "XGROUP",
            "CREATE",
            s,
            GROUPS[i % 2],
            "0",
            "MKSTREAM",
        ])));
        ops.push(Op::Cmd(w(&["XADD", s, "*", "f", "seed"])));
        let set = g.policy_set(s, GROUPS[i % 2]);
        ops.push(Op::Cmd(set));
    }
    while ops.len() < len {
        g.index = ops.len() as u64;
        let op = g.one();
        ops.push(op);
    }
    ops.push(Op::Check);
    ops
}

/// One argument as a person would type it (quoted when needed, bytes escaped).
pub fn show_arg(a: &[u8]) -> String {
    if let Some(p) = placeholder(a) {
        return format!("<{}>", p.join(" "));
    }
    let plain = !a.is_empty()
        && a.iter()
            .all(|&c| c.is_ascii_graphic() && c != b'"' && c != b'\\' && c != b'\'');
    if plain {
        return String::from_utf8_lossy(a).into_owned();
    }
    let mut s = String::from("\"");
    for &c in a {
        match c {
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(c as char),
            _ => {
                let _ = write!(s, "\\x{c:02x}");
            }
        }
    }
    s.push('"');
    s
}

pub fn show_cmd(args: &[Vec<u8>]) -> String {
    args.iter()
        .map(|a| show_arg(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// An operation as one line (commands as redis-cli would take them).
pub fn show(op: &Op) -> String {
    match op {
        Op::Cmd(a) => show_cmd(a),
        Op::Multi(cmds) => {
            let inner: Vec<String> = cmds.iter().map(|c| show_cmd(c)).collect();
            format!("MULTI ; {} ; EXEC", inner.join(" ; "))
        }
        Op::DumpRestore {
            src,
            dst,
            ttl,
            replace,
        } => format!(
            "RESTORE {dst} {ttl} <DUMP {src}>{}",
            if *replace { " REPLACE" } else { "" }
        ),
        Op::ExportImport { to_db } => {
            format!("RECLAIM.POLICY IMPORT <EXPORT> REPLACE (in db {to_db})")
        }
        Op::Workers(plans) => {
            let ws: Vec<String> = plans
                .iter()
                .map(|p| {
                    p.iter()
                        .map(|s| format!("{s:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                })
                .collect();
            format!("workers in the background: [{}]", ws.join("] ["))
        }
        Op::Check => "(check: replica = primary; plain keys = the run without the module)".into(),
        Op::DebugReload => "DEBUG RELOAD (then compare)".into(),
        Op::DebugLoadAof => "DEBUG LOADAOF (then compare)".into(),
        Op::BgRewriteAof => "BGREWRITEAOF".into(),
        Op::Aof { on, preamble } => format!(
            "CONFIG SET aof-use-rdb-preamble {} ; CONFIG SET appendonly {}",
            if *preamble { "yes" } else { "no" },
            if *on { "yes" } else { "no" }
        ),
        Op::Restart(Persist::Rdb) => "SAVE ; SHUTDOWN ; start from the RDB (then compare)".into(),
        Op::Restart(Persist::Aof { preamble }) => format!(
            "AOF on (preamble {}), rewrite ; SHUTDOWN ; start from the AOF (then compare)",
            if *preamble { "yes" } else { "no" }
        ),
        Op::Detach => "(replica) REPLICAOF NO ONE".into(),
        Op::Attach => "(replica) REPLICAOF primary (then compare)".into(),
        Op::Maxmemory { bytes, policy, .. } => {
            format!("CONFIG SET maxmemory-policy {policy} ; CONFIG SET maxmemory {bytes}")
        }
        Op::Burst {
            fill,
            readers,
            policy,
            bytes,
            limit_first,
            writes,
        } => {
            let fs: Vec<String> = fill.iter().map(|c| show_cmd(c)).collect();
            let rs: Vec<String> = readers.iter().map(|r| show_cmd(&r.command(true))).collect();
            let limit = if *limit_first {
                format!("CONFIG SET maxmemory-policy noeviction ; CONFIG SET maxmemory {bytes} ; CONFIG SET maxmemory-policy {policy}")
            } else {
                format!("CONFIG SET maxmemory-policy {policy} ; CONFIG SET maxmemory {bytes}")
            };
            let ws: Vec<String> = writes.iter().map(|c| show_cmd(c)).collect();
            format!(
                "eviction burst: {} ; blocked in the background: [{}] ; {limit} ; {} ; CONFIG SET maxmemory 0",
                fs.join(" ; "),
                rs.join("] ["),
                ws.join(" ; ")
            )
        }
    }
}
