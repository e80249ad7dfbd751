//! Direct stream access through the module API, without an `RM_Call` round trip: keys opened with
//! `RM_OpenKey` ([`Key`]), entries read in one walk of `RM_StreamIterator*` ([`Key::read_entries`]),
//! appends with `RM_StreamAdd` ([`Key::add`]) and their explicit propagation with `RM_Replicate`
//! ([`replicate_xadd`]), replies of entries as XREADGROUP writes them ([`reply_entry`], with or without delivery metadata).
//!
//! What a command would also do is done here by hand where it matters: an append fires the
//! stream's `xadd` keyspace event and is propagated as `XADD key <id> field value ...` with its
//! concrete ID, exactly as `XADD key * ...` is; the server signals blocked readers of the key when
//! the key is closed (`RM_StreamAdd` marks it), and `WATCH` sees the write.

use std::os::raw::{c_int, c_long};

use redis_module::{raw, Context, RedisString};

/// One stream ID (`ms-seq`).
pub type StreamId = (u64, u64);

/// An entry's fields and values, in order: `field, value, field, value...`.
pub type Fields = Vec<RedisString>;

/// The text of a stream ID, `<ms>-<seq>`, in a buffer of its own (no allocation: an ID goes out
/// with every dead letter's propagation and every redelivered entry's reply).
pub struct IdText {
    buf: [u8; 41],
    len: usize,
}

impl IdText {
    pub fn of(id: StreamId) -> Self {
        let mut out = IdText {
            buf: [0; 41],
            len: 0,
        };
        let mut b = itoa::Buffer::new();
        out.push(b.format(id.0).as_bytes());
        out.push(b"-");
        out.push(b.format(id.1).as_bytes());
        out
    }

    fn push(&mut self, part: &[u8]) {
        self.buf[self.len..self.len + part.len()].copy_from_slice(part);
        self.len += part.len();
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// At most this many entries are stepped over, in one walk of [`Key::read_entries`], between two
/// entries asked for; past it the walk starts again at the next one (a seek in the stream's
/// index instead of a walk through entries nobody asked for).
const MAX_STEP_OVER: usize = 64;

/// What a key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// Nothing.
    Empty,
    /// A stream.
    Stream,
    /// A value of another type.
    Other,
}

/// A key open through `RM_OpenKey`, closed on drop (where the server signals the readers blocked
/// on a stream that `RM_StreamAdd` appended to).
pub struct Key {
    ptr: *mut raw::RedisModuleKey,
}

impl Key {
    /// Opens `name` in the database selected in `ctx`, for reading or (`write`) writing.
    pub fn open(ctx: &Context, name: &RedisString, write: bool) -> Key {
        let mode = if write {
            raw::REDISMODULE_READ | raw::REDISMODULE_WRITE
        } else {
            raw::REDISMODULE_READ
        };
        let ptr = unsafe { raw::RedisModule_OpenKey.unwrap()(ctx.ctx, name.inner, mode as c_int) };
        Key {
            ptr: ptr.cast::<raw::RedisModuleKey>(),
        }
    }

    /// What the key holds.
    pub fn kind(&self) -> KeyKind {
        if self.ptr.is_null() {
            return KeyKind::Empty;
        }
        let t = unsafe { raw::RedisModule_KeyType.unwrap()(self.ptr) } as isize;
        if t == raw::REDISMODULE_KEYTYPE_EMPTY {
            KeyKind::Empty
        } else if t == raw::REDISMODULE_KEYTYPE_STREAM {
            KeyKind::Stream
        } else {
            KeyKind::Other
        }
    }

    /// The ID of the stream's first entry (`last`: its last), `None` when it holds none or is not
    /// a stream (`XRANGE key - + COUNT 1`, `XREVRANGE key + - COUNT 1`, without a call).
    pub fn edge_id(&self, last: bool) -> Option<StreamId> {
        if self.kind() != KeyKind::Stream {
            return None;
        }
        let flags = if last {
            raw::REDISMODULE_STREAM_ITERATOR_REVERSE as c_int
        } else {
            0
        };
        let started = unsafe {
            raw::RedisModule_StreamIteratorStart.unwrap()(
                self.ptr,
                flags,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        if started != raw::REDISMODULE_OK as c_int {
            return None;
        }
        let mut id = raw::RedisModuleStreamID { ms: 0, seq: 0 };
        let mut n: c_long = 0;
        let ok =
            unsafe { raw::RedisModule_StreamIteratorNextID.unwrap()(self.ptr, &mut id, &mut n) };
        unsafe { raw::RedisModule_StreamIteratorStop.unwrap()(self.ptr) };
        (ok == raw::REDISMODULE_OK as c_int).then_some((id.ms, id.seq))
    }

    /// The fields of each entry of `ids` (ascending, no duplicates), `None` for one the stream
    /// does not hold. One walk of the stream's entries from the first ID asked for, stepping over
    /// at most [`MAX_STEP_OVER`] entries between two asked for (else a new walk starts at the
    /// next one): a run of neighbouring entries costs one seek, not one each.
    pub fn read_entries(&self, ids: &[StreamId]) -> Vec<Option<Fields>> {
        self.read_entries_upto(ids, usize::MAX)
    }

    /// [`Key::read_entries`] of the first entries of `ids` only, with at most `max_bytes` of
    /// fields and values copied out (their lengths): the first entry is read whatever its size;
    /// the walk stops before an entry that would take the total past `max_bytes` (its copy is
    /// dropped at once). Returns the entries read, a prefix of `ids`.
    pub fn read_entries_upto(&self, ids: &[StreamId], max_bytes: usize) -> Vec<Option<Fields>> {
        let mut out: Vec<Option<Fields>> = Vec::with_capacity(ids.len());
        if self.kind() != KeyKind::Stream {
            out.resize_with(ids.len(), || None);
            return out;
        }
        let Some(&last) = ids.last() else {
            return out;
        };
        let mut copied: Option<usize> = None;
        while out.len() < ids.len() {
            let from = ids[out.len()];
            let mut start = raw::RedisModuleStreamID {
                ms: from.0,
                seq: from.1,
            };
            let mut end = raw::RedisModuleStreamID {
                ms: last.0,
                seq: last.1,
            };
            let started = unsafe {
                raw::RedisModule_StreamIteratorStart.unwrap()(self.ptr, 0, &mut start, &mut end)
            };
            if started != raw::REDISMODULE_OK as c_int {
                out.resize_with(ids.len(), || None);
                break;
            }
            let full = self.walk(ids, &mut out, (&mut copied, max_bytes));
            unsafe { raw::RedisModule_StreamIteratorStop.unwrap()(self.ptr) };
            if full {
                break;
            }
        }
        out
    }

    /// One walk of the iterator started at `ids[out.len()]`: fills `out` until the walk ends
    /// (the range is done: the rest is not in the stream) or steps over too many entries; or
    /// until the next entry's fields would take the bytes `copied` so far (`None`: no entry read
    /// yet) past `max_bytes`: then `true`, that entry not read.
    fn walk(
        &self,
        ids: &[StreamId],
        out: &mut Vec<Option<Fields>>,
        (copied, max_bytes): (&mut Option<usize>, usize),
    ) -> bool {
        let mut stepped = 0;
        loop {
            let mut id = raw::RedisModuleStreamID { ms: 0, seq: 0 };
            let mut n: c_long = 0;
            let ok = unsafe {
                raw::RedisModule_StreamIteratorNextID.unwrap()(self.ptr, &mut id, &mut n)
            };
            if ok != raw::REDISMODULE_OK as c_int {
                out.resize_with(ids.len(), || None);
                return false;
            }
            let got = (id.ms, id.seq);
            while out.len() < ids.len() && ids[out.len()] < got {
                out.push(None);
            }
            if out.len() == ids.len() {
                return false;
            }
            if ids[out.len()] != got {
                stepped += 1;
                if stepped > MAX_STEP_OVER {
                    return false;
                }
                self.skip_fields();
                continue;
            }
            stepped = 0;
            let f = self.fields(n);
            let size: usize = f.iter().map(|x| x.as_slice().len()).sum();
            let total = copied.unwrap_or(0).saturating_add(size);
            if copied.is_some() && total > max_bytes {
                return true;
            }
            *copied = Some(total);
            out.push(Some(f));
        }
    }

    /// Steps over the fields of the iterator's current entry: the server's iterator expects every
    /// field of an entry to be read before the next entry (Redis 7.0), and nothing is copied
    /// when no string is asked for.
    fn skip_fields(&self) {
        loop {
            let ok = unsafe {
                raw::RedisModule_StreamIteratorNextField.unwrap()(
                    self.ptr,
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                )
            };
            if ok != raw::REDISMODULE_OK as c_int {
                return;
            }
        }
    }

    /// The `n` field-value pairs of the iterator's current entry.
    fn fields(&self, n: c_long) -> Fields {
        let mut f = Vec::with_capacity(n.max(0) as usize * 2);
        loop {
            let mut k: *mut raw::RedisModuleString = std::ptr::null_mut();
            let mut v: *mut raw::RedisModuleString = std::ptr::null_mut();
            let ok = unsafe {
                raw::RedisModule_StreamIteratorNextField.unwrap()(self.ptr, &mut k, &mut v)
            };
            if ok != raw::REDISMODULE_OK as c_int {
                return f;
            }
            // Freshly allocated for us (no automatic memory here): freed when dropped.
            f.push(RedisString::from_redis_module_string(
                std::ptr::null_mut(),
                k,
            ));
            f.push(RedisString::from_redis_module_string(
                std::ptr::null_mut(),
                v,
            ));
        }
    }

    /// Appends an entry with `argv` (`field, value, ...`) and a new ID (as `XADD key *`), to a
    /// key open for writing (created if empty). The ID it got, or `None` when the append failed
    /// (the key holds another type, the stream's last ID is the largest there is, an element is
    /// too large).
    pub fn add(&self, argv: &mut [*mut raw::RedisModuleString]) -> Option<StreamId> {
        let mut id = raw::RedisModuleStreamID { ms: 0, seq: 0 };
        let ok = unsafe {
            raw::RedisModule_StreamAdd.unwrap()(
                self.ptr,
                raw::REDISMODULE_STREAM_ADD_AUTOID as c_int,
                &mut id,
                argv.as_mut_ptr(),
                (argv.len() / 2) as i64,
            )
        };
        (ok == raw::REDISMODULE_OK as c_int).then_some((id.ms, id.seq))
    }
}

impl Drop for Key {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            unsafe { raw::RedisModule_CloseKey.unwrap()(self.ptr) };
        }
    }
}

/// Propagates the append of `argv` (`field, value, ...`) to `key` as `XADD key <ms>-<seq> field
/// value ...` (what Redis propagates for `XADD key * ...`), and fires `key`'s `xadd` keyspace
/// event as `XADD` does. With the other writes of the same callback, in one `MULTI`/`EXEC`.
pub fn replicate_xadd(
    ctx: &Context,
    key: &RedisString,
    id: StreamId,
    argv: &mut [*mut raw::RedisModuleString],
) {
    let id = IdText::of(id);
    let id = id.as_bytes();
    unsafe {
        raw::RedisModule_Replicate.unwrap()(
            ctx.ctx,
            c"XADD".as_ptr(),
            c"sbv".as_ptr(),
            key.inner,
            id.as_ptr(),
            id.len(),
            argv.as_mut_ptr(),
            argv.len(),
        );
        raw::RedisModule_NotifyKeyspaceEvent.unwrap()(
            ctx.ctx,
            raw::REDISMODULE_NOTIFY_STREAM as c_int,
            c"xadd".as_ptr(),
            key.inner,
        );
    }
}

/// Replies one entry as XREADGROUP does, `[id, [field, value, ...]]`; with `meta` (idle ms,
/// delivery count) as Redis 8.4's `XREADGROUP ... CLAIM` does, `[id, [field, value, ...], idle,
/// count]`, both integers.
pub fn reply_entry(ctx: &Context, id: StreamId, fields: &[RedisString], meta: Option<(i64, i64)>) {
    let id = IdText::of(id);
    let id = id.as_bytes();
    unsafe {
        raw::RedisModule_ReplyWithArray.unwrap()(ctx.ctx, if meta.is_some() { 4 } else { 2 });
        raw::RedisModule_ReplyWithStringBuffer.unwrap()(ctx.ctx, id.as_ptr().cast(), id.len());
        raw::RedisModule_ReplyWithArray.unwrap()(ctx.ctx, fields.len() as c_long);
        for f in fields {
            raw::RedisModule_ReplyWithString.unwrap()(ctx.ctx, f.inner);
        }
        if let Some((idle, count)) = meta {
            raw::RedisModule_ReplyWithLongLong.unwrap()(ctx.ctx, idle);
            raw::RedisModule_ReplyWithLongLong.unwrap()(ctx.ctx, count);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::IdText;

    #[test]
    fn id_text_is_ms_dash_seq_at_every_width() {
        for (id, text) in [
            ((0, 0), "0-0"),
            ((1526919030474, 55), "1526919030474-55"),
            (
                (u64::MAX, u64::MAX),
                "18446744073709551615-18446744073709551615",
            ),
        ] {
            assert_eq!(IdText::of(id).as_bytes(), text.as_bytes());
        }
    }
}
