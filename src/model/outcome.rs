//! What a piece of stream work reports: why a step stopped ([`Stop`]), what it did
//! ([`Outcome`]), and a group's PEL in summary form ([`Summary`]). Pure values: the executor
//! fills them in, the run-time state and the counters read them.

use crate::model::planner::{Fresh, Tally};

/// Why a step ended before handling every entry it read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// The time budget ran out; resume from the cursor.
    Deadline,
    /// The server is out of memory; dead-letter moves wait (counted in `oom_skips`).
    Oom,
    /// The stream key does not exist.
    NoStream,
    /// The stream has no such consumer group.
    NoGroup,
    /// The stream key holds another type.
    WrongTypeStream,
    /// The DLQ key holds another type.
    WrongTypeDlq,
    /// The `STORM` breaker is open, or the next dead-letter would open it: dead-letter moves
    /// wait (the entries stay pending); moves go on.
    Storm,
    /// Any other error reply (text included).
    Error(String),
}

impl Stop {
    /// The `status` text `RECLAIM.STATS` shows for this stop.
    pub fn status(&self) -> String {
        match self {
            Stop::Deadline => "active".into(),
            Stop::Oom => "oom: dead-letter moves wait for memory".into(),
            Stop::NoStream => "waiting: stream does not exist".into(),
            Stop::NoGroup => "waiting: consumer group does not exist".into(),
            Stop::WrongTypeStream => "error: stream key holds the wrong kind of value".into(),
            Stop::WrongTypeDlq => "error: DLQ key holds the wrong kind of value".into(),
            Stop::Storm => "storm".into(),
            Stop::Error(e) => format!("error: {e}"),
        }
    }

    /// The policy state this stop leaves it in, in one word (`INFO reclaim`'s `status`, the
    /// `reclaim-<state>` keyspace events): `active` (a deadline is no trouble), `waiting` (no
    /// stream or group yet), `oom`, `storm` (the breaker holds dead-letters back), or `error`.
    pub fn state(&self) -> &'static str {
        match self {
            Stop::Deadline => "active",
            Stop::Oom => "oom",
            Stop::Storm => "storm",
            Stop::NoStream | Stop::NoGroup => "waiting",
            Stop::WrongTypeStream | Stop::WrongTypeDlq | Stop::Error(_) => "error",
        }
    }
}

/// What one step did.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Pending entries read and decided on.
    pub examined: u64,
    /// Entries claimed.
    pub claimed: u64,
    /// Entries moved to the DLQ.
    pub dead_lettered: u64,
    /// Deleted entries removed from the PEL.
    pub deleted: u64,
    /// Dead-letter moves (and tombstones) skipped for OOM.
    pub oom_skips: u64,
    /// Dead letters trimmed from the DLQ by `DLQ-MAXLEN` / `DLQ-MAXAGE`.
    pub dlq_trimmed: u64,
    /// Tombstones appended to the DLQ (`TOMBSTONES yes`); also counted in `deleted`.
    pub tombstones: u64,
    /// Where the next step starts (`None` = head of the PEL).
    pub cursor: Option<Vec<u8>>,
    /// The ID-window width the next windowed step uses (see `sweep::step_scan`; 0 = not learned).
    pub width: u128,
    /// The entries read that were not stale.
    pub fresh: Fresh,
    /// The entries handled, as they were read (for `RECLAIM.HEALTH`).
    pub tally: Tally,
    /// The pass reached the end of the PEL.
    pub pass_done: bool,
    /// Why the step stopped early, if it did.
    pub stop: Option<Stop>,
    /// A problem that skipped some dead-letter moves without stopping the step (DLQ of the wrong
    /// type, out of memory): those entries stay pending and are retried on the next pass.
    pub problem: Option<Stop>,
    /// The PEL's summary, when the step read it (a trim-only pass reads nothing else): the end
    /// of the pass need not read it again.
    pub summary: Option<Summary>,
}

/// A group's PEL as the summary form `XPENDING key group` reports it (O(consumers) in Redis),
/// read at the end of each complete pass.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Wall-clock ms when it was read (0: never).
    pub at_ms: i64,
    /// Pending entries.
    pub pending: u64,
    /// Of which in the CLAIMANT's inbox.
    pub inbox: u64,
    /// Consumers other than the CLAIMANT with entries pending.
    pub consumers: u64,
    /// The most entries one of them holds.
    pub max_consumer_pending: u64,
    /// The ms part of the lowest pending ID (when the oldest pending entry was added), if any.
    pub oldest_id_ms: Option<u64>,
    /// The lowest pending ID, if any.
    pub lowest_id: Option<(u64, u64)>,
}

impl Summary {
    /// How old (ms) the oldest pending entry was when the summary was read (0: none pending).
    pub fn oldest_pending_ms(&self) -> u64 {
        self.oldest_id_ms
            .map_or(0, |ms| (self.at_ms.max(0) as u64).saturating_sub(ms))
    }
}
