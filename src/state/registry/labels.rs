//! The known policies for `INFO reclaim`: their labels, the walk in key order ([`with_sorted`],
//! built again only after policies came or went), and the server-wide totals.

use super::{lock, PolicyId};
use crate::state::runtime::Runtime;

/// The known policies in key order, with their labels, for `INFO reclaim`'s lines: built when
/// asked after policies came or went, emptied when they do. Bounded by the policies that exist
/// (about 50 bytes each with short names).
#[derive(Default)]
pub(super) struct Sorted {
    /// Positions in the iteration order of `runtimes` (which stays the same while no policy comes
    /// or goes), ordered by database, stream, group.
    order: Vec<u32>,
    /// Their labels ([`PolicyId::write_label`]), one after another in that order: a walk over
    /// them reads memory in order, not thousands of names wherever they were allocated.
    labels: Vec<u8>,
    /// Where each label ends in `labels`.
    ends: Vec<usize>,
}

impl PolicyId {
    /// Appends the policy's label as its `INFO reclaim` line starts, `db=0,stream=...,group=...`,
    /// the names escaped by [`crate::model::metrics::info_escape_into`].
    pub fn write_label(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"db=");
        crate::model::metrics::push_u64(out, self.db.max(0) as u64);
        out.extend_from_slice(b",stream=");
        crate::model::metrics::info_escape_into(out, &self.stream);
        out.extend_from_slice(b",group=");
        crate::model::metrics::info_escape_into(out, &self.group);
    }
}

/// `f(all, sorted)` with the registry locked: `all` is every known policy in the table's own
/// order, `sorted` each one's position in `all` and label ([`PolicyId::write_label`]), ordered
/// by database, stream, group. O(P) with P policies, plus O(P log P) to sort them again the
/// first time after policies came or went. A walk over `all` goes through memory in order; one
/// in key order would jump around it.
pub fn with_sorted<R>(f: impl FnOnce(&[(&PolicyId, &Runtime)], &[(u32, &[u8])]) -> R) -> R {
    let mut r = lock();
    if r.sorted.order.len() != r.runtimes.len() {
        let keys: Vec<&PolicyId> = r.runtimes.keys().collect();
        let mut order: Vec<u32> = (0..keys.len() as u32).collect();
        order.sort_unstable_by_key(|i| keys.get(*i as usize).copied());
        let mut labels = Vec::new();
        let mut ends = Vec::with_capacity(order.len());
        for id in order.iter().filter_map(|i| keys.get(*i as usize)) {
            id.write_label(&mut labels);
            ends.push(labels.len());
        }
        r.sorted = Sorted {
            order,
            labels,
            ends,
        };
    }
    let all: Vec<(&PolicyId, &Runtime)> = r.runtimes.iter().collect();
    let s = &r.sorted;
    let mut start = 0;
    let sorted: Vec<(u32, &[u8])> = s
        .order
        .iter()
        .zip(&s.ends)
        .map(|(i, end)| {
            let label = s.labels.get(start..*end).unwrap_or_default();
            start = *end;
            (*i, label)
        })
        .collect();
    f(&all, &sorted)
}

/// The server-wide figures of `INFO reclaim`, from one walk over the policies (O(policies)).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    /// Known policies (all databases).
    pub policies: u64,
    /// Entries waiting in the inboxes of all policies, as their last passes saw them.
    pub inbox: u64,
    /// Consumers tracked by all policies now (unchecked ones and recent touches; see
    /// [`Runtime::tracked_consumers`]).
    pub tracked_consumers: u64,
}

/// [`Totals`] now.
pub fn totals() -> Totals {
    let r = lock();
    let mut t = Totals {
        policies: r.runtimes.len() as u64,
        ..Totals::default()
    };
    let all: Vec<(&PolicyId, &Runtime)> = r.runtimes.iter().collect();
    walk(&all, |_, rt| {
        t.inbox += rt.summary().inbox;
        t.tracked_consumers += rt.tracked_consumers() as u64;
    });
    t
}

/// `f` of each policy of `all` in turn, asking for the memory of the runtimes a few policies
/// ahead ([`crate::ffi::alloc::prefetch`]): a walk over thousands of runtimes otherwise spends most
/// of its time waiting for memory.
pub fn walk<'a>(all: &[(&'a PolicyId, &'a Runtime)], mut f: impl FnMut(&'a PolicyId, &'a Runtime)) {
    use crate::ffi::alloc::{prefetch, PREFETCH_AHEAD};
    for (i, (id, rt)) in all.iter().enumerate() {
        if let Some((_, ahead)) = all.get(i + PREFETCH_AHEAD) {
            prefetch(std::ptr::from_ref(*ahead).cast());
        }
        f(id, rt);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_escape_names_and_show_the_database() {
        let mut out = Vec::new();
        PolicyId::new(3, b"orders:{eu}", b"a,b=c\xff").write_label(&mut out);
        assert_eq!(out, b"db=3,stream=orders%3A{eu},group=a%2Cb%3Dc%FF");
        out.clear();
        PolicyId::new(-1, b"", b"g").write_label(&mut out);
        assert_eq!(out, b"db=0,stream=,group=g");
    }
}
