//! The eviction risk as the module knows it now: the server's `maxmemory` and
//! `maxmemory-policy` as last read (re-read within a tick of a `CONFIG SET` of either, of a change
//! the context flags show, and at least once a second: [`needs_read`]), the module's keys seen
//! with a TTL (noted where a pass opens them, or by the keyspace events `expire` and `persist`;
//! at most [`MAX_TTL_KEYS`], the passes find the others again), and what the log was told last,
//! so it is told once per change. Pure data behind a lock: the server layer reads the settings
//! and the TTLs, and logs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use crate::model::eviction::{Risk, Settings};
use crate::state::registry::PolicyId;

/// At most this many keys with a TTL are remembered: one is enough for the risk, and the passes
/// note the others again once some are gone.
pub const MAX_TTL_KEYS: usize = 64;

/// At most this many DLQs are remembered with the policy that names them; past it the map
/// starts again empty and the passes fill it again.
pub const MAX_DLQS: usize = 1024;

/// The settings are read again at least this often (ms), whatever the events said.
pub const READ_EVERY_MS: u64 = 1000;

#[derive(Default)]
struct State {
    settings: Settings,
    /// Whether the settings must be read again (a `CONFIG SET maxmemory*`, the load).
    dirty: bool,
    /// The context flags `MAXMEMORY` and `EVICT` when the settings were read.
    flags: u32,
    /// Monotonic ms when the settings were read (0: never).
    read_ms: u64,
    /// The module's keys seen with a TTL, (db, name).
    ttl: BTreeSet<(i32, Vec<u8>)>,
    /// The risk the log was told last (and under which `maxmemory-policy`).
    told: Option<(Risk, String)>,
    /// DLQs the passes saw, (db, name), with a policy that names it.
    dlqs: BTreeMap<(i32, Vec<u8>), PolicyId>,
    /// The same the other way: each policy's DLQ as last seen, so a changed DLQ leaves no stale
    /// entry in `dlqs`.
    dlq_of: BTreeMap<PolicyId, Vec<u8>>,
}

static STATE: Mutex<State> = Mutex::new(State {
    settings: Settings {
        policy: String::new(),
        maxmemory: 0,
    },
    dirty: true,
    flags: 0,
    read_ms: 0,
    ttl: BTreeSet::new(),
    told: None,
    dlqs: BTreeMap::new(),
    dlq_of: BTreeMap::new(),
});

fn with<R>(f: impl FnOnce(&mut State) -> R) -> R {
    let mut s = STATE.lock().unwrap_or_else(|e| e.into_inner());
    f(&mut s)
}

/// The settings may have changed (a `CONFIG SET` of `maxmemory` or `maxmemory-policy`): read
/// them again on the next tick.
pub fn mark_dirty() {
    with(|s| s.dirty = true);
}

/// Whether the settings must be read now: marked dirty, the context flags `flags`
/// (`MAXMEMORY | EVICT`) differ from when they were read, or the last read is older than
/// [`READ_EVERY_MS`] (monotonic ms `now`).
pub fn needs_read(flags: u32, now: u64) -> bool {
    with(|s| s.dirty || s.flags != flags || now.saturating_sub(s.read_ms) >= READ_EVERY_MS)
}

/// Keeps the settings read at monotonic ms `now` with context flags `flags` (`None`: the read
/// failed; tried again on the next tick).
pub fn set_settings(read: Option<Settings>, flags: u32, now: u64) {
    with(|s| {
        if let Some(read) = read {
            s.settings = read;
            s.dirty = false;
            s.flags = flags;
            s.read_ms = now;
        }
    })
}

/// Notes whether the module's key (db, `key`) has a TTL now (`has`).
pub fn note_ttl(db: i32, key: &[u8], has: bool) {
    with(|s| {
        if has {
            if s.ttl.len() < MAX_TTL_KEYS && !s.ttl.contains(&(db, key.to_vec())) {
                s.ttl.insert((db, key.to_vec()));
            }
        } else if !s.ttl.is_empty() {
            s.ttl.remove(&(db, key.to_vec()));
        }
    })
}

/// Notes that policy `id` names DLQ `dlq` (in its database), forgetting the DLQ it named before.
pub fn note_dlq(id: &PolicyId, dlq: &[u8]) {
    with(|s| {
        if s.dlq_of.get(id).is_some_and(|d| d == dlq) {
            return;
        }
        if let Some(old) = s.dlq_of.remove(id) {
            let k = (id.db, old);
            if s.dlqs.get(&k) == Some(id) {
                s.dlqs.remove(&k);
            }
        }
        if s.dlqs.len() >= MAX_DLQS || s.dlq_of.len() >= MAX_DLQS {
            s.dlqs.clear();
            s.dlq_of.clear();
        }
        s.dlqs.insert((id.db, dlq.to_vec()), id.clone());
        s.dlq_of.insert(id.clone(), dlq.to_vec());
    })
}

/// Forgets the DLQs of the policies of (db, `stream`) (of `group` only, when given): they are
/// gone. O(DLQs remembered), at most [`MAX_DLQS`].
pub fn forget_policies(db: i32, stream: &[u8], group: Option<&[u8]>) {
    with(|s| {
        if !s.dlqs.is_empty() {
            let keep = |id: &PolicyId| {
                id.db != db || id.stream != stream || group.is_some_and(|g| id.group != g)
            };
            s.dlqs.retain(|_, id| keep(id));
            s.dlq_of.retain(|id, _| keep(id));
        }
    })
}

/// The policy last seen naming `dlq` in database `db` as its DLQ, if any.
pub fn dlq_policy(db: i32, dlq: &[u8]) -> Option<PolicyId> {
    with(|s| {
        if s.dlqs.is_empty() {
            return None;
        }
        s.dlqs.get(&(db, dlq.to_vec())).cloned()
    })
}

/// Forgets the keys with a TTL of database `db` (-1: all), flushed or swapped: the passes note
/// them again.
pub fn forget_db(db: i32) {
    with(|s| {
        s.ttl.retain(|(d, _)| db != -1 && *d != db);
        s.dlqs.retain(|(d, _), _| db != -1 && *d != db);
        s.dlq_of.retain(|id, _| db != -1 && id.db != db);
    })
}

/// The risk now, the value of `eviction-risk`, and `maxmemory-policy` as last read.
pub fn now() -> (Risk, String, String) {
    with(|s| {
        let ttl = s.ttl.iter().next();
        (
            s.settings.risk(ttl),
            s.settings.reason(ttl),
            s.settings.policy.clone(),
        )
    })
}

/// The line to log when the risk changed since the log was told last (kind or
/// `maxmemory-policy`); none at a start without risk. Notes it as told.
pub fn take_change() -> Option<(Risk, String)> {
    with(|s| {
        if s.settings.policy.is_empty() {
            return None;
        }
        let ttl = s.ttl.iter().next();
        let risk = s.settings.risk(ttl);
        let key = (risk, s.settings.policy.clone());
        let changed = match &s.told {
            None => risk != Risk::None,
            Some((was, policy)) => *was != risk || (risk != Risk::None && *policy != key.1),
        };
        s.told = Some(key);
        if !changed {
            return None;
        }
        Some((risk, s.settings.warning(risk, ttl)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(policy: &str, maxmemory: u64) -> Option<Settings> {
        Some(Settings {
            policy: policy.into(),
            maxmemory,
        })
    }

    /// The one test of this file's state (a static): told once per change, bounded TTL keys.
    #[test]
    fn the_log_is_told_once_per_change_and_ttl_keys_stay_bounded() {
        // Nothing read yet: nothing to tell; a start without risk tells nothing either.
        assert_eq!(take_change(), None);
        assert!(needs_read(0, 5000));
        set_settings(settings("noeviction", 10), 0, 5000);
        assert!(!needs_read(0, 5999) && needs_read(512, 5999) && needs_read(0, 6000));
        assert_eq!(take_change(), None);
        // allkeys-*: told once, whatever the limit becomes.
        set_settings(settings("allkeys-lru", 10), 768, 6000);
        assert!(matches!(take_change(), Some((Risk::AllKeys, _))));
        assert_eq!(take_change(), None);
        set_settings(settings("allkeys-lru", 20), 768, 7000);
        assert_eq!(take_change(), None);
        // Another allkeys-* policy is another risk; then its end is told.
        set_settings(settings("allkeys-lfu", 20), 768, 8000);
        assert!(matches!(take_change(), Some((Risk::AllKeys, _))));
        mark_dirty();
        assert!(needs_read(768, 8001));
        set_settings(settings("volatile-lru", 20), 768, 8001);
        let (risk, line) = take_change().expect("the risk ended");
        assert_eq!(risk, Risk::None);
        assert!(line.starts_with("reclaim: eviction risk gone"), "{line}");
        // volatile-*: a risk while a key has a TTL; at most MAX_TTL_KEYS remembered.
        for i in 0..(MAX_TTL_KEYS + 10) {
            note_ttl(0, format!("k{i}").as_bytes(), true);
        }
        assert_eq!(with(|s| s.ttl.len()), MAX_TTL_KEYS);
        assert!(matches!(take_change(), Some((Risk::Volatile, _))));
        assert_eq!(now().0, Risk::Volatile);
        forget_db(0);
        assert_eq!(now().0, Risk::None);
        assert!(matches!(take_change(), Some((Risk::None, _))));
        // DLQs: bounded, and forgotten with their database.
        let id = PolicyId::new(3, b"s", b"g");
        note_dlq(&id, b"s:dlq");
        assert_eq!(dlq_policy(3, b"s:dlq"), Some(id.clone()));
        assert_eq!(dlq_policy(2, b"s:dlq"), None);
        forget_policies(3, b"s", Some(b"other"));
        assert_eq!(dlq_policy(3, b"s:dlq"), Some(id.clone()));
        forget_policies(3, b"s", Some(b"g"));
        assert_eq!(dlq_policy(3, b"s:dlq"), None);
        note_dlq(&id, b"s:dlq");
        forget_policies(3, b"s", None);
        assert_eq!(dlq_policy(3, b"s:dlq"), None);
        // A new DLQ replaces the old one.
        note_dlq(&id, b"old");
        note_dlq(&id, b"s:dlq");
        assert_eq!(dlq_policy(3, b"old"), None);
        forget_db(-1);
        assert_eq!(dlq_policy(3, b"s:dlq"), None);
    }
}
