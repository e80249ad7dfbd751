//! Eviction is never silent: whether the server's `maxmemory` settings can evict the module's
//! keys, told once per change in the log ([`tick`]), and what the module does when the server
//! evicts one of them ([`on_evicted`]).
//!
//! How the module knows, cheaply:
//! - the settings (`maxmemory`, `maxmemory-policy`) are read with one `CONFIG GET` at the first
//!   tick, on the tick after a `CONFIG SET` of either (server event `Config`, Redis 7.0+), when
//!   the context flags `MAXMEMORY`/`EVICT` change, and at least once a second
//!   ([`crate::state::eviction::READ_EVERY_MS`]);
//! - TTLs of the module's keys: each visit of a policy by the timer checks its policy key, its
//!   stream and its DLQ (`RM_GetExpire`, O(1) each, the keys opened without touching their
//!   LRU); the keyspace events `expire` (on a policy key, a redrive task key or a stream with
//!   policies) and `persist` note them at once.

use std::os::raw::c_void;

use redis_module::{raw, CallReply, CallResult, Context};

use crate::ffi::{self, events};
use crate::model::eviction::{self, Risk};
use crate::model::keys;
use crate::model::metrics::{self, Stat};
use crate::model::text::printable;
use crate::state::eviction as known;
use crate::state::registry::{self, PolicyId};

/// `CONFIG SET` changed configs (server event `Config`, Redis 7.0+): when `maxmemory` or
/// `maxmemory-policy` is among them, the next tick reads the settings again.
pub unsafe extern "C" fn on_config(
    _ctx: *mut raw::RedisModuleCtx,
    _e: raw::RedisModuleEvent,
    _sub: u64,
    data: *mut c_void,
) {
    ffi::guard("config event", || {
        let info = unsafe { &*(data as *const raw::RedisModuleConfigChange) };
        let names = (0..info.num_changes as usize)
            .map(|i| unsafe { std::ffi::CStr::from_ptr(*info.config_names.add(i)) });
        if names
            .into_iter()
            .any(|n| n.to_bytes().starts_with(b"maxmemory"))
        {
            known::mark_dirty();
        }
    });
}

/// Every tick: reads the settings again when they may have changed ([`known::needs_read`]), and
/// tells the log when the risk changed (a warning when it begins or changes, a notice when it
/// ends).
pub fn tick(ctx: &Context) {
    let flags = ffi::memory_flags(ctx);
    let now = crate::model::clock::now_ms();
    if known::needs_read(flags, now) {
        known::set_settings(read_settings(ctx), flags, now);
    }
    match known::take_change() {
        Some((Risk::None, line)) => ffi::notice(ctx, &line),
        Some((_, line)) => ffi::warn(ctx, &line),
        None => {}
    }
}

/// `CONFIG GET maxmemory maxmemory-policy` (`None` when the reply is not what 7.0+ answers).
fn read_settings(ctx: &Context) -> Option<eviction::Settings> {
    let r: CallResult = ctx.call_ext(
        "CONFIG",
        &ffi::read_opts(),
        &[&b"GET"[..], b"maxmemory", b"maxmemory-policy"][..],
    );
    let Ok(CallReply::Array(a)) = r else {
        return None;
    };
    let words: Vec<Vec<u8>> = a.iter().filter_map(|e| ffi::call_bytes(&e)).collect();
    eviction::settings_of(
        words
            .chunks(2)
            .filter(|p| p.len() == 2)
            .map(|p| (&p[0][..], &p[1][..])),
    )
}

/// A visit of policy `id` (its value `dlq`): notes whether its policy key, stream and DLQ have
/// a TTL (three O(1) looks), in the database selected in `ctx`.
pub fn check_ttls(ctx: &Context, id: &PolicyId, dlq: Option<&[u8]>) {
    let policy_key = keys::policy_key(&id.stream);
    for key in [Some(&policy_key[..]), Some(&id.stream[..]), dlq]
        .into_iter()
        .flatten()
    {
        known::note_ttl(id.db, key, ffi::has_ttl(ctx, key));
    }
    if let Some(d) = dlq {
        known::note_dlq(id, d);
    }
}

/// Keyspace events that change what the module knows of TTLs on its keys, in database `db`:
/// `expire` on a policy key, a redrive key or a stream with policies notes a TTL; `persist`,
/// and every event that removes a key, forget it.
pub fn on_key_event(db: i32, ev: &[u8], name: &[u8]) {
    match ev {
        b"expire" if keys::is_module_key(name) || !registry::groups_of(db, name).is_empty() => {
            known::note_ttl(db, name, true)
        }
        b"persist" | b"del" | b"expired" | b"evicted" | b"rename_from" | b"move_from" => {
            known::note_ttl(db, name, false)
        }
        _ => {}
    }
}

/// The server evicted `name` in database `db` (keyspace event `evicted`), before the registry
/// forgets anything of it. It runs inside the server's eviction: it opens no key and calls no
/// command (the registry, the log, a keyspace event only). When it is one of the module's keys (a policy key, a stream with
/// policies, a known DLQ, a redrive key): one warning naming it and what was lost, counted
/// (`reclaim_evicted_keys`, and per policy for its stream and DLQ), and the event
/// `reclaim-evicted` on the key.
pub fn on_evicted(ctx: &Context, db: i32, name: &[u8]) {
    let what = if let Some(stream) = keys::stream_of_policy_key(name) {
        policy_key_lost(db, name, &stream)
    } else if name.starts_with(keys::REDRIVE_KEY_PREFIX)
        || name.starts_with(keys::REDRIVE_MOVED_PREFIX)
    {
        format!(
            "the redrive key '{}' (db {db}): the redrive task of its DLQ stops (RECLAIM.REDRIVE starts it again)",
            printable(name)
        )
    } else if let Some(line) = stream_lost(db, name) {
        line
    } else if let Some(line) = dlq_lost(db, name) {
        line
    } else {
        return;
    };
    metrics::add_total(Stat::EvictedKeys, 1);
    let policy = known::now().2;
    ffi::warn(
        ctx,
        &format!(
            "reclaim: the server evicted {what}. Set maxmemory-policy noeviction (now {policy}) to keep the module's keys"
        ),
    );
    events::notify(ctx, name, events::EVICTED);
}

/// The words of a policy key's eviction: which policies were lost and how to restore them.
fn policy_key_lost(db: i32, name: &[u8], stream: &[u8]) -> String {
    let mut groups = registry::groups_of(db, stream);
    groups.sort();
    let groups: Vec<String> = groups
        .iter()
        .take(16)
        .map(|g| format!("'{}'", printable(g)))
        .collect();
    format!(
        "the policy key '{}' (db {db}): the policies of stream '{}' for groups {} are lost; restore them with RECLAIM.POLICY IMPORT (from an EXPORT) or RECLAIM.POLICY SET",
        printable(name),
        printable(stream),
        if groups.is_empty() { "(none known)".to_string() } else { groups.join(", ") }
    )
}

/// A stream with policies was evicted: each of its policies counts it and waits, saying so.
fn stream_lost(db: i32, stream: &[u8]) -> Option<String> {
    let groups = registry::groups_of(db, stream);
    if groups.is_empty() {
        return None;
    }
    for g in &groups {
        registry::update(&PolicyId::new(db, stream, g), |rt| rt.stream_evicted());
    }
    Some(format!(
        "stream '{}' (db {db}) with the policies of {} group(s): its groups and pending entries are lost; the policies wait for it (status 'waiting: stream evicted')",
        printable(stream),
        groups.len()
    ))
}

/// A DLQ the last pass of its policy saw (`known::dlq_policy`) was evicted: counted by the
/// policy, if it still exists. No key is opened here: inside the server's eviction, a look-up
/// could expire (and delete) another key.
fn dlq_lost(db: i32, dlq: &[u8]) -> Option<String> {
    let id = known::dlq_policy(db, dlq)?;
    registry::update(&id, |rt| rt.dlq_evicted())?;
    Some(format!(
        "the DLQ '{}' (db {db}) of the policy of stream '{}' group '{}': its dead letters are lost",
        printable(dlq),
        printable(&id.stream),
        printable(&id.group)
    ))
}
