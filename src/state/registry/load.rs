//! A load's staging list: the policies `rdb_load` reads while a load is in progress, registered
//! only once it ended well.

use super::{lock, register, update, PolicyId};
use crate::model::error::ReclaimError;

/// The policies `rdb_load` read during the load in progress, waiting for it to end well.
#[derive(Debug, Default)]
pub struct Load {
    /// (db, stream, group) as `rdb_load` saw them, with the state each policy was saved in and
    /// why it cannot run where it is (`crate::model::policy::Policy::fault_at`), if it cannot.
    pub ids: Vec<(PolicyId, crate::model::policy::State, Option<ReclaimError>)>,
    /// Policy values read under a key name that is not their stream's policy key (kept, inert).
    pub strays: u64,
    /// The load goes into temporary databases (a diskless `swapdb` sync). Redis before 7.4 gives
    /// `rdb_load` database 0 for every value loaded into them (redis#12947), so the databases
    /// in `ids` cannot be trusted.
    pub into_temp_db: bool,
}

/// A load begins (server events `Loading` ..._START, and `ReplAsyncLoad` STARTED with
/// `into_temp_db`, Redis 7.0+): from now until [`take_load`], policies read by `rdb_load` are
/// only noted ([`loaded`]). A `swapdb` sync fires both events: the first one counts.
pub fn load_started(into_temp_db: bool) {
    let mut r = lock();
    if r.loading.is_none() {
        r.loading = Some(Load {
            ids: Vec::new(),
            strays: 0,
            into_temp_db,
        });
    }
}

/// `rdb_load` read the policies of `stream` for these groups, in these states (each with its
/// fault, if it cannot run where it is), in database `db`. During a load they wait for its end;
/// otherwise (a `RESTORE`, whose keyspace event registers them) nothing is kept.
pub fn loaded<'a>(
    db: i32,
    stream: &[u8],
    groups: impl Iterator<
        Item = (
            &'a Vec<u8>,
            crate::model::policy::State,
            Option<ReclaimError>,
        ),
    >,
) {
    let mut r = lock();
    if let Some(l) = r.loading.as_mut() {
        l.ids
            .extend(groups.map(|(g, s, f)| (PolicyId::new(db, stream, g), s, f)));
    }
}

/// `rdb_load` read a policy value under a key name that is not its stream's policy key: counted
/// for the load's summary in the log (outside a load, a `RESTORE`, nothing).
pub fn stray_loaded() {
    if let Some(l) = lock().loading.as_mut() {
        l.strays += 1;
    }
}

/// Registers policy (db, stream, group) ([`register`]) and notes the state it is stored in
/// ([`Runtime::held`]) and its fault ([`Runtime::fault`]), so `INFO reclaim` shows `paused`,
/// `storm` or `invalid` before its first step (and on a replica, which runs none).
pub fn register_held(
    db: i32,
    stream: &[u8],
    group: &[u8],
    state: crate::model::policy::State,
    fault: Option<ReclaimError>,
) {
    register(db, stream, group);
    update(&PolicyId::new(db, stream, group), |rt| {
        rt.hold(state);
        rt.set_fault(fault);
    });
}

/// Ends the load in progress and returns what it read (`None`: no load was in progress). The
/// caller registers them when the load ended well, and drops them otherwise (the server empties
/// half-loaded databases, or keeps the old ones of a `swapdb` sync).
pub fn take_load() -> Option<Load> {
    lock().loading.take()
}
