//! What a piece of stream work reports: why a step stopped ([`Stop`]), what it did
//! ([`Outcome`]), and a group's PEL in summary form ([`Summary`]). Pure values: the executor
//! fills them in, the run-time state and the counters read them.

use crate::planner::{Fresh, Tally};

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
    /// The server refused a call because its Redis Cluster is down: sweeps wait for it; not an
    /// error of the policy.
    ClusterDown,
    /// The server refused a call because this node does not serve the stream's slot (now): a
    /// slot migration in progress, the policy arrived before the slot was handed over. Not an
    /// error of the policy: the node that serves the slot sweeps it.
    NotServed,
    /// Any other error reply (text included).
    Error(String),
}

impl Stop {
    /// The `status` text `RECLAIM.STATS` shows for this stop, without the name a waiting policy
    /// waits for ([`Stop::status_of`] has it).
    pub fn status(&self) -> String {
        match self {
            Stop::Deadline => "active".into(),
            Stop::Oom => "oom: dead-letter moves wait for memory".into(),
            Stop::NoStream => "waiting: no stream".into(),
            Stop::NoGroup => "waiting: no group".into(),
            Stop::WrongTypeStream => "error: stream key holds the wrong kind of value".into(),
            Stop::WrongTypeDlq => "error: DLQ key holds the wrong kind of value".into(),
            Stop::Storm => "storm".into(),
            Stop::ClusterDown => "cluster-down".into(),
            Stop::NotServed => "waiting: this node does not serve the stream's slot".into(),
            Stop::Error(e) => format!("error: {e}"),
        }
    }

    /// The `status` of a policy of (`stream`, `group`) that stopped so, binary-safe: for a
    /// waiting one, what it waits for, by name (`waiting: no stream <stream>`, `waiting: no
    /// group <group>`), as `RECLAIM.STATS`, `RECLAIM.POLICY GET`/`LIST`, `RECLAIM.HEALTH` and
    /// `IMPORT`'s reply show it (`INFO` escapes the name, [`Stop::write_status`]).
    pub fn status_of(&self, stream: &[u8], group: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        self.write_status(&mut out, stream, group, |o, n| o.extend_from_slice(n));
        out
    }

    /// Appends the status of a policy whose stream the server evicted, waiting for its stream
    /// or group (`self`): `waiting: stream evicted`, or, once a client's `XADD` made the stream
    /// again without its group, `waiting: stream evicted and recreated without group <group>` (the
    /// name written by `name`).
    pub fn write_evicted_status(
        &self,
        out: &mut Vec<u8>,
        group: &[u8],
        mut name: impl FnMut(&mut Vec<u8>, &[u8]),
    ) {
        out.extend_from_slice(b"waiting: stream evicted");
        if *self == Stop::NoGroup {
            out.extend_from_slice(b" and recreated without group ");
            name(out, group);
        }
    }

    /// Appends the status of [`Stop::status_of`] to `out`, the name written by `name`.
    pub(crate) fn write_status(
        &self,
        out: &mut Vec<u8>,
        stream: &[u8],
        group: &[u8],
        mut name: impl FnMut(&mut Vec<u8>, &[u8]),
    ) {
        out.extend_from_slice(self.status().as_bytes());
        match self {
            Stop::NoStream => {
                out.push(b' ');
                name(out, stream);
            }
            Stop::NoGroup => {
                out.push(b' ');
                name(out, group);
            }
            _ => {}
        }
    }

    /// Whether the policy waits for its stream or group (they do not exist; a `NotServed` policy
    /// waits too, for its slot, but nothing of it is missing).
    pub fn is_missing(&self) -> bool {
        matches!(self, Stop::NoStream | Stop::NoGroup)
    }

    /// The policy state this stop leaves it in, in one word (`INFO reclaim`'s `status`, the
    /// `reclaim-<state>` keyspace events): `active` (a deadline is no trouble), `waiting` (no
    /// stream or group yet, or the stream's slot not served here now), `oom`, `storm` (the
    /// breaker holds dead-letters back), `cluster-down`, or `error`.
    pub(crate) fn state(&self) -> &'static str {
        match self {
            Stop::Deadline => "active",
            Stop::Oom => "oom",
            Stop::Storm => "storm",
            Stop::NoStream | Stop::NoGroup | Stop::NotServed => "waiting",
            Stop::ClusterDown => "cluster-down",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_waiting_status_names_what_is_missing() {
        assert_eq!(
            Stop::NoGroup.status_of(b"orders", b"typo\xff g"),
            b"waiting: no group typo\xff g".to_vec()
        );
        assert_eq!(
            Stop::NoStream.status_of(b"ord ers", b"g"),
            b"waiting: no stream ord ers".to_vec()
        );
        assert_eq!(
            Stop::Oom.status_of(b"s", b"g"),
            b"oom: dead-letter moves wait for memory".to_vec()
        );
        let mut out = b"status=".to_vec();
        Stop::NoGroup.write_status(&mut out, b"s", b"a,b", |o, n| {
            crate::metrics::info_escape_into(o, n)
        });
        assert_eq!(out, b"status=waiting: no group a%2Cb".to_vec());
        assert!(Stop::NoStream.is_missing() && !Stop::Storm.is_missing());
        assert_eq!(Stop::NoGroup.state(), "waiting");
        let mut out = Vec::new();
        Stop::NoStream.write_evicted_status(&mut out, b"g", |o, n| o.extend_from_slice(n));
        assert_eq!(out, b"waiting: stream evicted".to_vec());
        out.clear();
        Stop::NoGroup.write_evicted_status(&mut out, b"w g", |o, n| o.extend_from_slice(n));
        assert_eq!(
            out,
            b"waiting: stream evicted and recreated without group w g".to_vec()
        );
    }
}
