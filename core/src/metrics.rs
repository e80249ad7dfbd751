//! What the module counts: [`Stat`] (what each policy counts), the per-policy [`Counters`]
//! (`RECLAIM.STATS`) whose every increment also feeds the server-wide total of `INFO reclaim`,
//! the two server-wide counters the pass state machine adds to (`STEPS`, `TRACKING_OVERFLOWS`),
//! and the `INFO` escaping. The module's other server-wide counters are the module's
//! (`src/state/metrics.rs`).
//!
//! Everything here is a leaf: it calls no other module of the crate.

use std::sync::atomic::{AtomicU64, Ordering};

/// One counter.
#[derive(Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// A counter at 0.
    pub const fn new() -> Self {
        Counter(AtomicU64::new(0))
    }
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    /// Sets to `n`.
    pub fn set(&self, n: u64) {
        self.0.store(n, Ordering::Relaxed);
    }
    /// Raises to `n` if `n` is larger.
    pub fn max(&self, n: u64) {
        self.0.fetch_max(n, Ordering::Relaxed);
    }
    /// Current value.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// What each policy counts (`RECLAIM.STATS`) and the server sums over all policies
/// (`INFO reclaim`, which keeps the sums when policies go).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stat {
    /// Complete passes over the PEL.
    Passes,
    /// Complete passes that paged every pending entry to check delivery counts.
    FullPasses,
    /// Complete passes that only purged trimmed entries (no entry could be stale yet).
    ScansSkipped,
    /// Consumers' own PELs paged to check delivery counts after a command that could raise them.
    ConsumerChecks,
    /// Entries claimed for the claimant.
    Claimed,
    /// Entries moved to the DLQ (appended and acknowledged).
    DeadLettered,
    /// Pending entries whose stream entry was gone, removed from the PEL.
    Deleted,
    /// Dead-letter moves skipped because the server was out of memory (retried later).
    OomSkips,
    /// Steps that failed (wrong key type, unexpected replies).
    Errors,
    /// Entries handed from the PEL to a worker by `RECLAIM.READGROUP` (a delivery each).
    Redelivered,
    /// Times the `STORM` breaker opened (dead-letters stopped).
    Storms,
    /// Dead letters trimmed from the DLQ by `DLQ-MAXLEN` / `DLQ-MAXAGE` (the sum of the replies
    /// of the `XTRIM` calls that follow dead-letter moves).
    DlqTrimmed,
    /// Records appended to the DLQ with `TOMBSTONES yes` for pending entries deleted from the
    /// stream (`reclaim-reason deleted`); each such entry is also counted in `Deleted`.
    Tombstones,
    /// The module's keys the server evicted (`maxmemory-policy`): policy keys, streams under a
    /// policy, DLQs, redrive task keys. The total counts each key once; a policy counts its
    /// stream's and its DLQ's ([`Counters::add_own`]).
    EvictedKeys,
    /// Consumers deleted by `FORGET-IDLE` (idle that long, nothing pending).
    ConsumersForgotten,
}

impl Stat {
    /// Every stat, in `INFO reclaim` order.
    pub const ALL: [Stat; 15] = [
        Stat::Passes,
        Stat::FullPasses,
        Stat::ScansSkipped,
        Stat::ConsumerChecks,
        Stat::Claimed,
        Stat::DeadLettered,
        Stat::Deleted,
        Stat::OomSkips,
        Stat::Errors,
        Stat::Redelivered,
        Stat::Storms,
        Stat::DlqTrimmed,
        Stat::Tombstones,
        Stat::EvictedKeys,
        Stat::ConsumersForgotten,
    ];

    /// The field name in `INFO reclaim` (after `reclaim_`).
    pub fn info_name(self) -> &'static str {
        match self {
            Stat::Passes => "passes",
            Stat::FullPasses => "full_passes",
            Stat::ScansSkipped => "scans_skipped",
            Stat::ConsumerChecks => "consumer_checks",
            Stat::Claimed => "claimed",
            Stat::DeadLettered => "dead_lettered",
            Stat::Deleted => "deleted",
            Stat::OomSkips => "oom_skips",
            Stat::Errors => "errors",
            Stat::Redelivered => "redelivered",
            Stat::Storms => "storms",
            Stat::DlqTrimmed => "dlq_trimmed",
            Stat::Tombstones => "tombstones",
            Stat::EvictedKeys => "evicted_keys",
            Stat::ConsumersForgotten => "consumers_forgotten",
        }
    }

    /// The field name in `RECLAIM.STATS`.
    pub fn stats_name(self) -> &'static str {
        match self {
            Stat::Passes => "passes",
            Stat::FullPasses => "full-passes",
            Stat::ScansSkipped => "scans-skipped",
            Stat::ConsumerChecks => "consumer-checks",
            Stat::Claimed => "claimed",
            Stat::DeadLettered => "dead-lettered",
            Stat::Deleted => "deleted",
            Stat::OomSkips => "oom-skips",
            Stat::Errors => "errors",
            Stat::Redelivered => "redelivered",
            Stat::Storms => "storms",
            Stat::DlqTrimmed => "dlq-trimmed",
            Stat::Tombstones => "tombstones",
            Stat::EvictedKeys => "evicted-keys",
            Stat::ConsumersForgotten => "consumers-forgotten",
        }
    }
}

/// The server-wide sum of each [`Stat`], indexed by `Stat as usize`.
static TOTALS: [Counter; 15] = [
    Counter::new(),
    Counter::new(),
    Counter::new(),
    Counter::new(),
    Counter::new(),
    Counter::new(),
    Counter::new(),
    Counter::new(),
    Counter::new(),
    Counter::new(),
    Counter::new(),
    Counter::new(),
    Counter::new(),
    Counter::new(),
    Counter::new(),
];

/// Adds `n` to the server-wide total of `s` only (an event that no policy, or several, count).
pub fn add_total(s: Stat, n: u64) {
    TOTALS[s as usize].add(n);
}

/// The server-wide sum of `s`.
pub fn total(s: Stat) -> u64 {
    TOTALS[s as usize].get()
}

/// Counters of one policy since the module was loaded on this server (`RECLAIM.STATS`). Every
/// [`Counters::add`] also adds to the server-wide total of `INFO reclaim`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counters {
    counts: [u64; 15],
    /// Wall-clock time (ms since the epoch) when the last complete pass ended; 0 = never.
    pub last_pass_ms: i64,
    /// Time spent in the steps of the last complete pass, in µs.
    pub last_pass_us: i64,
    /// Dead-letters of the last hour and minute ([`Counters::dead_lettered_at`]).
    pub recent_dead: RecentCounts,
}

impl Counters {
    /// Adds `n` to `s`, here and in the server-wide total.
    pub fn add(&mut self, s: Stat, n: u64) {
        self.counts[s as usize] += n;
        TOTALS[s as usize].add(n);
    }

    /// Adds `n` to `s` here only, not to the server-wide total (which counts it elsewhere:
    /// [`add_total`]).
    pub(crate) fn add_own(&mut self, s: Stat, n: u64) {
        self.counts[s as usize] += n;
    }

    /// The policy's count of `s`.
    pub fn get(&self, s: Stat) -> u64 {
        self.counts[s as usize]
    }

    /// Counts `n` dead-letters at wall-clock ms `now` (the total, the server's, and the last
    /// hour's).
    pub(crate) fn dead_lettered_at(&mut self, n: u64, now: i64) {
        self.add(Stat::DeadLettered, n);
        self.recent_dead.add(n, now);
    }
}

/// Counts over a sliding window in `N` buckets of `WIDTH` ms (a ring: the oldest bucket is
/// reused). Fixed size, whatever is counted.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ring<const N: usize, const WIDTH: i64> {
    /// Index (ms / WIDTH) of the newest bucket.
    newest: i64,
    counts: [u32; N],
}

impl<const N: usize, const WIDTH: i64> Default for Ring<N, WIDTH> {
    fn default() -> Self {
        Ring {
            newest: 0,
            counts: [0; N],
        }
    }
}

impl<const N: usize, const WIDTH: i64> Ring<N, WIDTH> {
    fn slot(i: i64) -> usize {
        i.rem_euclid(N as i64) as usize
    }

    /// Adds `n` at wall-clock ms `now`.
    fn add(&mut self, n: u64, now: i64) {
        let i = now.div_euclid(WIDTH);
        if i > self.newest {
            // Empty the buckets between (at most all of them).
            let from = (self.newest + 1).max(i - N as i64 + 1);
            for j in from..=i {
                self.counts[Self::slot(j)] = 0;
            }
            self.newest = i;
        }
        if i > self.newest - N as i64 {
            let c = &mut self.counts[Self::slot(i)];
            *c = c.saturating_add(n.min(u32::MAX as u64) as u32);
        }
    }

    /// The count of the bucket of `now` and the `N - 1` before it.
    fn sum(&self, now: i64) -> u64 {
        let i = now.div_euclid(WIDTH);
        let from = (i - N as i64 + 1).max(self.newest - N as i64 + 1);
        (from..=self.newest.min(i))
            .map(|j| self.counts[Self::slot(j)] as u64)
            .sum()
    }
}

/// What happened lately: the last hour in one-minute buckets, the last minute in ten-second
/// buckets (each figure covers the current bucket and the ones before it: the last 59-60 minutes,
/// the last 50-60 seconds). 264 bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecentCounts {
    hour: Ring<60, 60_000>,
    minute: Ring<6, 10_000>,
}

impl RecentCounts {
    /// Counts `n` at wall-clock ms `now`.
    fn add(&mut self, n: u64, now: i64) {
        if n > 0 {
            self.hour.add(n, now);
            self.minute.add(n, now);
        }
    }

    /// Counted in the last minute, as of `now`.
    pub fn last_minute(&self, now: i64) -> u64 {
        self.minute.sum(now)
    }

    /// Counted in the last hour, as of `now`.
    pub fn last_hour(&self, now: i64) -> u64 {
        self.hour.sum(now)
    }
}

/// Appends `name` to `out` as it appears in a per-policy line of `INFO reclaim` (and so in every
/// label made from it): valid UTF-8 is kept, except `%`, `,`, `=`, `:`, spaces and control
/// characters, which are written `%XX` (their byte in hex, upper case), as is every byte that is
/// not valid UTF-8. So a line splits on `,`, `=` and `:` whatever the names, and `%XX` decodes
/// back to the exact bytes; what is appended is valid UTF-8, with no NUL byte.
pub fn info_escape_into(out: &mut Vec<u8>, name: &[u8]) {
    // Most names are plain ASCII that needs no escape: copied as they are.
    if !name.iter().any(|&b| !b.is_ascii() || needs_escape(b)) {
        out.extend_from_slice(name);
        return;
    }
    const H: &[u8; 16] = b"0123456789ABCDEF";
    let hex = |out: &mut Vec<u8>, b: u8| {
        out.extend_from_slice(&[b'%', H[(b >> 4) as usize], H[(b & 15) as usize]]);
    };
    for chunk in name.utf8_chunks() {
        let valid = chunk.valid().as_bytes();
        // Multi-byte characters pass as they are; only ASCII bytes may need escaping.
        let mut from = 0;
        for (i, &b) in valid.iter().enumerate() {
            if needs_escape(b) {
                out.extend_from_slice(valid.get(from..i).unwrap_or_default());
                hex(out, b);
                from = i + 1;
            }
        }
        out.extend_from_slice(valid.get(from..).unwrap_or_default());
        for b in chunk.invalid() {
            hex(out, *b);
        }
    }
}

/// Whether an ASCII byte of a name is written `%XX` by [`info_escape_into`].
fn needs_escape(b: u8) -> bool {
    b.is_ascii_control() || matches!(b, b'%' | b',' | b'=' | b':' | b' ')
}

/// Appends `n` in decimal to `out`, without the formatting machinery (`INFO reclaim` writes
/// 13 numbers per policy).
pub fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut start = buf.len();
    for slot in buf.iter_mut().rev() {
        *slot = b'0' + (n % 10) as u8;
        n /= 10;
        start -= 1;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(buf.get(start..).unwrap_or_default());
}

/// Steps run (timer and RECLAIM.SWEEP): counted by the pass state machine
/// (`runtime::Runtime::plan_step`). The module's other server-wide counters (ticks, skips, tick
/// times, panics) live in the module crate (`src/state/metrics.rs`), which writes them.
pub static STEPS: Counter = Counter::new();
/// Times a policy's tracking of consumers passed a bound and fell back to checking everyone
/// (see `runtime::MAX_TRACKED`).
pub static TRACKING_OVERFLOWS: Counter = Counter::new();

#[cfg(test)]
mod tests {
    use super::*;

    /// [`info_escape_into`] as a string.
    fn info_escape(name: &[u8]) -> String {
        let mut out = Vec::with_capacity(name.len());
        info_escape_into(&mut out, name);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn policy_counts_feed_the_totals() {
        let mut a = Counters::default();
        let mut b = Counters::default();
        let before = total(Stat::Claimed);
        a.add(Stat::Claimed, 3);
        b.add(Stat::Claimed, 4);
        assert_eq!((a.get(Stat::Claimed), b.get(Stat::Claimed)), (3, 4));
        assert!(total(Stat::Claimed) >= before + 7);
    }

    #[test]
    fn recent_counts_slide() {
        let mut r = RecentCounts::default();
        let t0 = 1_700_000_000_000i64;
        r.add(2, t0);
        r.add(3, t0 + 15_000);
        assert_eq!(
            (r.last_minute(t0 + 15_000), r.last_hour(t0 + 15_000)),
            (5, 5)
        );
        // A minute later the first two are out of the minute, still in the hour.
        assert_eq!(r.last_minute(t0 + 61_000), 3);
        assert_eq!(r.last_minute(t0 + 80_000), 0);
        assert_eq!(r.last_hour(t0 + 80_000), 5);
        r.add(1, t0 + 30 * 60_000);
        assert_eq!(r.last_hour(t0 + 30 * 60_000), 6);
        // An hour and more later: only the last one.
        assert_eq!(r.last_hour(t0 + 61 * 60_000), 1);
        r.add(4, t0 + 200 * 60_000);
        assert_eq!(r.last_hour(t0 + 200 * 60_000), 4);
        assert_eq!(r.last_minute(t0 + 200 * 60_000), 4);
        // A figure asked for a time before the newest bucket counts what is in its window.
        assert_eq!(r.last_hour(t0 + 199 * 60_000), 0);
        assert_eq!(RecentCounts::default().last_hour(t0), 0);
    }

    #[test]
    fn info_names_escape() {
        assert_eq!(info_escape(b"orders:{eu}"), "orders%3A{eu}");
        assert_eq!(info_escape(b"a,b=c d%"), "a%2Cb%3Dc%20d%25");
        assert_eq!(info_escape(b"x\r\n\x00"), "x%0D%0A%00");
        assert_eq!(info_escape("caf\u{e9}".as_bytes()), "caf\u{e9}");
        assert_eq!(info_escape(b"\xff\xfeok"), "%FF%FEok");
        assert_eq!(info_escape(b""), "");
        assert_eq!(info_escape("\u{e9}:\u{e9}".as_bytes()), "\u{e9}%3A\u{e9}");
    }

    #[test]
    fn push_u64_writes_decimal() {
        for n in [0, 7, 10, 99, 12_345, u64::MAX] {
            let mut v = b"x=".to_vec();
            push_u64(&mut v, n);
            assert_eq!(v, format!("x={n}").into_bytes());
        }
    }

    /// `%XX` decoded back to its byte.
    fn unescape(s: &str) -> Vec<u8> {
        let b = s.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'%' {
                out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
                i += 3;
            } else {
                out.push(b[i]);
                i += 1;
            }
        }
        out
    }

    proptest::proptest! {
        /// Whatever a name holds, its `INFO` form splits on nothing and decodes back to it.
        #[test]
        fn info_escape_is_safe_and_lossless(name in proptest::collection::vec(proptest::num::u8::ANY, 0..40), text in ".{0,20}") {
            for n in [&name[..], text.as_bytes()] {
                let e = info_escape(n);
                proptest::prop_assert!(!e.bytes().any(|c| c.is_ascii_control() || matches!(c, b',' | b'=' | b':' | b' ')));
                proptest::prop_assert_eq!(unescape(&e), n.to_vec());
            }
        }

        #[test]
        fn push_u64_is_decimal(n in proptest::num::u64::ANY) {
            let mut v = Vec::new();
            push_u64(&mut v, n);
            proptest::prop_assert_eq!(v, n.to_string().into_bytes());
        }
    }
}
