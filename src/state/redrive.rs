//! Where redrive tasks live: each in the keyspace, a hash in the DLQ's hash slot
//! ([`crate::model::keys::redrive_key`]) beside its moved set ([`crate::model::keys::redrive_moved_key`]), read and written
//! through `RM_Call` (writes with `!`, propagated with the step's other writes); and in memory
//! only an index of running tasks ([`TASKS`]: database, DLQ, the `RATE` bucket), bounded by the
//! DLQs with a running task, filled by `RECLAIM.REDRIVE` and by a discovery after loads, syncs,
//! `SWAPDB` and promotions ([`rediscover`]).
//!
//! The task key and the moved set are never deleted or written while they hold a value of
//! another type (written by hand).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use lazy_static::lazy_static;
use redis_module::{CallReply, CallResult, Context, KeyType, RedisString};

use crate::ffi::{call_bytes, read_opts, write_opts};
use crate::model::error;
use crate::model::redrive::{Bucket, Task};

lazy_static! {
    /// Running tasks: (database, DLQ) -> the `RATE` bucket. Bounded by the DLQs with a running
    /// task; an entry leaves when its step finds the task ended or gone.
    static ref TASKS: Mutex<BTreeMap<(i32, Vec<u8>), Bucket>> = Mutex::new(BTreeMap::new());
}

/// Whether the next tick must look for tasks the index does not know (after a load, a sync,
/// SWAPDB, a promotion; and at start).
static DISCOVER: AtomicBool = AtomicBool::new(true);

fn tasks() -> MutexGuard<'static, BTreeMap<(i32, Vec<u8>), Bucket>> {
    TASKS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Asks the next tick to look for tasks the index does not know.
pub fn rediscover() {
    DISCOVER.store(true, Ordering::Relaxed);
}

/// Notes that the DLQ `dlq` of database `db` has a running task.
pub fn note(db: i32, dlq: &[u8]) {
    tasks().entry((db, dlq.to_vec())).or_default();
}

/// Forgets the task of `dlq` in database `db` (ended, canceled, or gone).
pub fn forget(db: i32, dlq: &[u8]) {
    tasks().remove(&(db, dlq.to_vec()));
}

/// The running tasks, as (database, DLQ).
pub fn running() -> Vec<(i32, Vec<u8>)> {
    tasks().keys().cloned().collect()
}

/// The pacing of the task of `dlq` in database `db` (a fresh one when not known).
pub fn bucket(db: i32, dlq: &[u8]) -> Bucket {
    tasks()
        .get(&(db, dlq.to_vec()))
        .copied()
        .unwrap_or_default()
}

/// Keeps the task of `dlq` in database `db` running, with its pacing `bucket`.
pub fn keep(db: i32, dlq: Vec<u8>, bucket: Bucket) {
    tasks().insert((db, dlq), bucket);
}

/// Whether the next tick must look for tasks the index does not know (asked by [`rediscover`]);
/// clears the request.
pub fn take_discover() -> bool {
    DISCOVER.swap(false, Ordering::Relaxed)
}

/// The type of the value at `key` in the selected database.
pub fn key_type(ctx: &Context, key: &[u8]) -> KeyType {
    let name = RedisString::create_from_slice(ctx.ctx, key);
    ctx.open_key(&name).key_type()
}

/// The task stored at `key` (`HGETALL`): `Ok(None)` when the key does not exist, `Err` when it
/// holds something that is not a task.
pub fn read_task(ctx: &Context, key: &[u8]) -> Result<Option<Task>, &'static str> {
    match key_type(ctx, key) {
        KeyType::Empty => return Ok(None),
        KeyType::Hash => {}
        _ => return Err(error::REDRIVE_KEY_TAKEN),
    }
    let r: CallResult = ctx.call_ext("HGETALL", &read_opts(), &[key][..]);
    let Ok(CallReply::Array(a)) = r else {
        return Err(error::REDRIVE_KEY_TAKEN);
    };
    let flat: Vec<Vec<u8>> = a.iter().filter_map(|v| call_bytes(&v)).collect();
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = flat
        .chunks(2)
        .filter(|p| p.len() == 2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    Task::from_fields(&pairs)
        .map(Some)
        .ok_or(error::REDRIVE_KEY_TAKEN)
}

/// `HSET key <every field>` through `!` (propagated with the step's other writes).
pub fn write_task(ctx: &Context, key: &[u8], t: &Task) {
    let fields = t.to_fields();
    let mut args: Vec<&[u8]> = Vec::with_capacity(fields.len() * 2 + 1);
    args.push(key);
    for (f, v) in &fields {
        args.push(f);
        args.push(v);
    }
    let _: CallResult = ctx.call_ext("HSET", &write_opts(), &args[..]);
}

/// `DEL key` through `!`.
pub fn del(ctx: &Context, key: &[u8]) {
    let _: CallResult = ctx.call_ext("DEL", &write_opts(), &[key][..]);
}

/// Whether `moved_key` may be used as the moved set: it does not exist or is a set.
pub fn moved_key_usable(ctx: &Context, moved_key: &[u8]) -> bool {
    matches!(key_type(ctx, moved_key), KeyType::Empty | KeyType::Set)
}

/// Deletes the moved set `moved_key`, only when it is a set (never a value of another type
/// written by hand under that name).
pub fn del_moved(ctx: &Context, moved_key: &[u8]) {
    if key_type(ctx, moved_key) == KeyType::Set {
        del(ctx, moved_key);
    }
}
