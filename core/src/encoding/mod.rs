//! The module's values as bytes: a policy value ([`PolicySet`], the `reclaimpl` data type) in its
//! RDB encoding (versions 1 to [`ENCODING_VERSION`]), written to a [`Sink`] and read from a
//! [`Source`] field by field (unsigned and signed integers, byte strings), and the `DUMP` payload
//! of a value ([`dump`]). The module moves those fields in and out of `RedisModuleIO`
//! (src/state/datatype/); everything the fields mean is here, tested without a server.
//!
//! Reading never panics and never allocates more than the input holds: a field the input lacks,
//! or a value no version writes (an unknown backoff kind or state), ends the read with `None`.
//! Options `RECLAIM.POLICY SET` would refuse are kept as they are (a load must not fail because
//! of content): the module marks such a policy invalid where it is used.

pub mod dump;

use std::collections::BTreeMap;

use crate::policy::{Backoff, Policy, State, Storm, MAX_BACKOFF_STEPS};

/// RDB encoding version of a policy value.
/// 1: 0.1.0 (MIN-IDLE, MAX-DELIVERIES, DLQ, CLAIMANT, COUNT, INTERVAL); 2: also BACKOFF and
/// LIVENESS; 3: also STORM and the state (active, paused, storm); 4: also DLQ-MAXLEN, DLQ-MAXAGE
/// and TOMBSTONES; 5: also FORGET-IDLE. Older values load with BACKOFF FIXED, LIVENESS 0, no
/// STORM, active, DLQ-MAXLEN 0, DLQ-MAXAGE 0, TOMBSTONES no, FORGET-IDLE 0.
pub const ENCODING_VERSION: i32 = 5;

/// The name of the module data type (nine characters, as Redis requires).
pub const TYPE_NAME: &[u8; 9] = b"reclaimpl";

/// All policies of one stream, by consumer group (binary-safe names): the value of a policy key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicySet {
    /// The stream these policies watch.
    pub stream: Vec<u8>,
    /// Group name -> policy.
    pub groups: BTreeMap<Vec<u8>, Policy>,
}

/// Where a policy value is written, in the order [`load_set`] reads it: the RDB (`RM_SaveUnsigned`,
/// `RM_SaveSigned`, `RM_SaveStringBuffer`) or a `DUMP` payload ([`dump::payload`]).
pub trait Sink {
    /// An unsigned integer field.
    fn unsigned(&mut self, v: u64);
    /// A signed integer field.
    fn signed(&mut self, v: i64);
    /// A byte string field.
    fn bytes(&mut self, b: &[u8]);
}

/// Where a policy value is read from, field by field; `None` when the input has no such field
/// (an I/O error, the end of a payload, a field of another kind).
pub trait Source {
    /// An unsigned integer field.
    fn unsigned(&mut self) -> Option<u64>;
    /// A signed integer field.
    fn signed(&mut self) -> Option<i64>;
    /// A byte string field.
    fn bytes(&mut self) -> Option<Vec<u8>>;
}

/// Writes a policy value, encoding version [`ENCODING_VERSION`].
pub fn save_set(out: &mut impl Sink, set: &PolicySet) {
    out.bytes(&set.stream);
    out.unsigned(set.groups.len() as u64);
    for (g, p) in &set.groups {
        out.bytes(g);
        save_policy(out, p);
    }
}

fn save_policy(out: &mut impl Sink, p: &Policy) {
    out.signed(p.min_idle_ms);
    out.signed(p.max_deliveries);
    match &p.dlq {
        Some(d) => {
            out.unsigned(1);
            out.bytes(d);
        }
        None => out.unsigned(0),
    }
    out.bytes(&p.claimant);
    out.signed(p.count);
    out.signed(p.interval_ms);
    save_backoff(out, &p.backoff);
    out.signed(p.liveness_ms);
    match p.storm {
        Some(st) => {
            out.unsigned(1);
            out.signed(st.max);
            out.signed(st.window_ms);
        }
        None => out.unsigned(0),
    }
    out.unsigned(p.state.code());
    out.signed(p.dlq_maxlen);
    out.signed(p.dlq_maxage_ms);
    out.unsigned(u64::from(p.tombstones));
    out.signed(p.forget_idle_ms);
}

/// A `BACKOFF` (encoding version 2): a kind (0 fixed, 1 exponential, 2 list), then its values.
fn save_backoff(out: &mut impl Sink, b: &Backoff) {
    match b {
        Backoff::Fixed => out.unsigned(0),
        Backoff::Exponential(max) => {
            out.unsigned(1);
            out.signed(*max);
        }
        Backoff::List(v) => {
            out.unsigned(2);
            out.unsigned(v.len() as u64);
            for x in v {
                out.signed(*x);
            }
        }
    }
}

/// Reads a policy value of encoding version `encver` (1 to [`ENCODING_VERSION`]; `None` for any
/// other). A group count larger than the input fails at the input's end.
pub fn load_set(src: &mut impl Source, encver: i32) -> Option<PolicySet> {
    if !(1..=ENCODING_VERSION).contains(&encver) {
        return None;
    }
    let stream = src.bytes()?;
    let n = src.unsigned()?;
    let mut groups = BTreeMap::new();
    for _ in 0..n {
        let group = src.bytes()?;
        // Kept as it is, whatever its options (see the module doc).
        groups.insert(group, load_policy(src, encver)?);
    }
    Some(PolicySet { stream, groups })
}

fn load_policy(src: &mut impl Source, encver: i32) -> Option<Policy> {
    let min_idle_ms = src.signed()?;
    let max_deliveries = src.signed()?;
    let dlq = match src.unsigned()? {
        1 => Some(src.bytes()?),
        _ => None,
    };
    let claimant = src.bytes()?;
    let count = src.signed()?;
    let interval_ms = src.signed()?;
    let mut p = Policy {
        min_idle_ms,
        max_deliveries,
        dlq,
        claimant,
        count,
        interval_ms,
        // What version 1 lacks: the defaults (also for the later versions' fields read below).
        ..Policy::default()
    };
    if encver >= 2 {
        p.backoff = load_backoff(src)?;
        p.liveness_ms = src.signed()?;
    }
    if encver >= 3 {
        p.storm = match src.unsigned()? {
            0 => None,
            _ => Some(Storm {
                max: src.signed()?,
                window_ms: src.signed()?,
            }),
        };
        p.state = State::from_code(src.unsigned()?)?;
    }
    if encver >= 4 {
        p.dlq_maxlen = src.signed()?;
        p.dlq_maxage_ms = src.signed()?;
        p.tombstones = src.unsigned()? == 1;
    }
    if encver >= 5 {
        p.forget_idle_ms = src.signed()?;
    }
    Some(p)
}

fn load_backoff(src: &mut impl Source) -> Option<Backoff> {
    Some(match src.unsigned()? {
        0 => Backoff::Fixed,
        1 => Backoff::Exponential(src.signed()?),
        2 => {
            // More than SET takes is kept (and marked invalid); each value is read from the
            // input, so a count larger than the input fails at its end, allocating no more
            // than the input holds.
            let n = src.unsigned()?;
            let mut v = Vec::with_capacity((n as usize).min(MAX_BACKOFF_STEPS));
            for _ in 0..n {
                v.push(src.signed()?);
            }
            Backoff::List(v)
        }
        _ => return None,
    })
}

/// Entries of one B-tree node in `std::collections::BTreeMap` (its `CAPACITY`).
const BTREE_NODE_ENTRIES: usize = 11;

impl PolicySet {
    /// The bytes this value holds on the heap, box included: what `MEMORY USAGE` reports for a
    /// policy key (with the key name, which Redis adds). The groups' B-tree is counted as full
    /// nodes of `BTREE_NODE_ENTRIES` (11) entries, at least one, half full on average beyond.
    pub fn heap_bytes(&self) -> usize {
        let entry = std::mem::size_of::<Vec<u8>>() + std::mem::size_of::<Policy>();
        let node = BTREE_NODE_ENTRIES * entry + 16;
        let n = self.groups.len();
        let nodes = if n == 0 {
            0
        } else {
            1 + n.saturating_sub(BTREE_NODE_ENTRIES) * 2 / BTREE_NODE_ENTRIES
        };
        let names: usize = self
            .groups
            .iter()
            .map(|(g, p)| {
                let backoff = match &p.backoff {
                    Backoff::List(v) => v.capacity() * 8,
                    _ => 0,
                };
                g.capacity()
                    + p.claimant.capacity()
                    + p.dlq.as_ref().map_or(0, Vec::capacity)
                    + backoff
            })
            .sum();
        std::mem::size_of::<PolicySet>() + self.stream.capacity() + nodes * node + names
    }
}

#[cfg(test)]
mod tests;
