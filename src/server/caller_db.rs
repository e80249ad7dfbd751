//! Which database a client was in before a `MOVE` or `COPY ... DB`, so the keyspace events
//! leave it there ([`note`] from the command filter, [`keep`] from the keyspace events).
//!
//! Valkey 8.1.1 to 8.1.x runs a module's keyspace callbacks on the client that runs the command
//! and selects the event's database on it without selecting the old one again (valkey-io/valkey
//! #1819, fixed by #4024). `MOVE` and `COPY ... DB` fire their `move_to` / `copy_to` event in the
//! destination database, so a module subscribed to generic events left that client (a
//! connection, a transaction, a script, the primary's link on a replica, the AOF loader) in the
//! destination database: its next commands wrote there. On Redis the callback runs on a
//! temporary client, and selecting a database on it changes nothing.
//!
//! The callback selects the right database again, and only when it knows it exactly:
//! - `MOVE` fires `move_from` in the source database (the client's own) right before
//!   `move_to`: the source is whatever `move_from` saw ([`Moves`]). This holds everywhere,
//!   AOF loading included.
//! - `COPY` fires only `copy_to`. The command filter sees each `COPY ... DB n` before it runs
//!   (or, in a transaction, when it is queued, with the `SELECT`s queued before it), with the
//!   client's id and database ([`Clients`]); `copy_to` looks the copy up by the id of the client
//!   it runs on, the destination key and database. A copy nobody saw selects nothing: never a
//!   guess. A script's client cannot be read by the filter: its copies start in the database
//!   of the client that ran the script, moved by the script's own `SELECT`s (followed for a
//!   script run outside a transaction). The filter sees no command of the AOF loader: there,
//!   and in a script run inside `MULTI`, `COPY ... DB` still leaves the client in the
//!   destination database on those Valkey versions.
//!
//! [`Moves`] and [`Clients`] are pure (unit-tested); [`note`] and [`keep`] read the server.

use std::collections::VecDeque;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};

use redis_module::{raw, Context};

use crate::ffi;

/// The `move_from` waiting for its `move_to`.
#[derive(Debug, Default)]
pub struct Moves {
    from: Option<(Vec<u8>, i32)>,
}

impl Moves {
    pub const fn new() -> Moves {
        Moves { from: None }
    }

    /// `move_from` of `key` in database `db`.
    pub fn moved_from(&mut self, key: &[u8], db: i32) {
        self.from = Some((key.to_vec(), db));
    }

    /// `move_to` of `key`: the database it came from (the client's), once.
    pub fn moved_to(&mut self, key: &[u8]) -> Option<i32> {
        match self.from.take() {
            Some((k, db)) if k == key => Some(db),
            _ => None,
        }
    }
}

/// How many clients (by id) are followed at most, and how many queued commands each: the
/// oldest is forgotten first. A client forgotten, or a transaction longer than that, only
/// means a `copy_to` that selects nothing.
const MAX_CLIENTS: usize = 256;
const MAX_QUEUED: usize = 128;

/// What a transaction queued that decides a copy's source database.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Queued {
    Select(i64),
    Copy { key: Vec<u8>, db: i64 },
}

#[derive(Debug, Default)]
struct Client {
    id: u64,
    /// The filter saw `MULTI` and not yet `EXEC`/`DISCARD`.
    in_multi: bool,
    queued: Vec<Queued>,
    /// How much of `queued` the transaction's copies consumed, and the database there (at
    /// first, the client's when it sent `MULTI`).
    cursor: usize,
    cursor_db: i64,
    /// The last `COPY ... DB` run outside a transaction: (key, destination, source).
    now: Option<(Vec<u8>, i64, i64)>,
}

/// The clients whose `COPY ... DB` may be running or queued.
#[derive(Debug, Default)]
pub struct Clients {
    clients: VecDeque<Client>,
    /// A script a client started outside a transaction, and the database its commands run in
    /// now (the caller's, then its own `SELECT`s): the commands the filter sees from a client it
    /// cannot read, until the next command of one it can, are that script's.
    script: Option<i64>,
}

/// Whether the command named `name` matters here (`MULTI`, `EXEC`, `DISCARD`, `COPY`,
/// `SELECT`, a script) when no script is being followed: the filter's cheap test before it
/// reads anything else.
fn wants(name: &[u8]) -> bool {
    matches!(name.len(), 4..=10)
        && ([&b"multi"[..], b"exec", b"discard", b"copy", b"select"]
            .iter()
            .any(|n| name.eq_ignore_ascii_case(n))
            || runs_script(name))
}

/// Whether a command runs a script (`EVAL`, `EVALSHA`, `FCALL` and their `_RO` forms).
fn runs_script(name: &[u8]) -> bool {
    [
        &b"eval"[..],
        b"evalsha",
        b"eval_ro",
        b"evalsha_ro",
        b"fcall",
        b"fcall_ro",
    ]
    .iter()
    .any(|n| name.eq_ignore_ascii_case(n))
}

/// `COPY src dst [DB n] [REPLACE]`: (dst, n) when a `DB` option names another database (the last
/// one counts, as in Valkey's `copyCommand`).
fn copy_target(argv: &[&[u8]]) -> Option<(Vec<u8>, i64)> {
    let dst = argv.get(2)?;
    let mut db = None;
    let mut i = 3;
    while i < argv.len() {
        if argv[i].eq_ignore_ascii_case(b"db") && i + 1 < argv.len() {
            db = std::str::from_utf8(argv[i + 1]).ok()?.parse::<i64>().ok();
            i += 2;
        } else {
            i += 1;
        }
    }
    Some((dst.to_vec(), db?))
}

impl Clients {
    pub const fn new() -> Clients {
        Clients {
            clients: VecDeque::new(),
            script: None,
        }
    }

    fn get(&mut self, id: u64) -> &mut Client {
        if let Some(i) = self.clients.iter().position(|c| c.id == id) {
            // Most recent last.
            if let Some(c) = self.clients.remove(i) {
                self.clients.push_back(c);
            }
        } else {
            if self.clients.len() >= MAX_CLIENTS {
                self.clients.pop_front();
            }
            self.clients.push_back(Client {
                id,
                ..Client::default()
            });
        }
        let last = self.clients.len() - 1;
        &mut self.clients[last]
    }

    /// Whether a script is being followed: then every command matters (the script's, and the
    /// next one of another client, which ends it).
    pub fn in_script(&self) -> bool {
        self.script.is_some()
    }

    /// The command filter saw `argv` from client `id`, which is in database `db` (`None`: a
    /// client the filter cannot read, a script's or a module's) and, when `multi`, in a
    /// transaction (the server's own flag: a refused `MULTI` leaves none).
    pub fn filtered(&mut self, id: u64, db: Option<i64>, multi: bool, argv: &[&[u8]]) {
        let Some(name) = argv.first() else {
            return;
        };
        let Some(db) = db else {
            // A script's command: its SELECTs move it, its copies start where it is.
            let Some(at) = self.script else {
                return;
            };
            if name.eq_ignore_ascii_case(b"select") {
                let n = argv.get(1).and_then(|d| std::str::from_utf8(d).ok());
                self.script = n.and_then(|d| d.parse().ok()).filter(|n| *n >= 0);
            } else if let Some((key, to)) = copy_target(argv) {
                self.get(id).now = Some((key, to, at));
            }
            return;
        };
        self.script = None;
        if !wants(name) {
            return;
        }
        let c = self.get(id);
        let queuing = multi && c.in_multi;
        if !queuing {
            // A copy that was refused (no event) is not waited for past the next command.
            c.now = None;
        }
        if name.eq_ignore_ascii_case(b"multi") {
            if !multi {
                *c = Client {
                    id,
                    in_multi: true,
                    cursor_db: db,
                    ..Client::default()
                };
            }
        } else if name.eq_ignore_ascii_case(b"exec") || name.eq_ignore_ascii_case(b"discard") {
            c.in_multi = false;
            if name.eq_ignore_ascii_case(b"discard") {
                c.queued.clear();
            }
        } else if name.eq_ignore_ascii_case(b"select") {
            if queuing && c.queued.len() < MAX_QUEUED {
                let n = argv
                    .get(1)
                    .and_then(|d| std::str::from_utf8(d).ok())
                    .and_then(|d| d.parse().ok());
                // Unparsable: the server refuses it when queued; nothing changes.
                if let Some(n) = n {
                    c.queued.push(Queued::Select(n));
                }
            }
        } else if runs_script(name) {
            // Inside a transaction, where it will start is not known here.
            if !queuing {
                self.script = Some(db);
            }
        } else if let Some((key, to)) = copy_target(argv) {
            if queuing {
                if c.queued.len() < MAX_QUEUED {
                    c.queued.push(Queued::Copy { key, db: to });
                } else {
                    // Too long to follow: no copy of this transaction selects anything.
                    c.queued.clear();
                    c.cursor = 0;
                    c.in_multi = false;
                }
            } else {
                c.now = Some((key, to, db));
                c.queued.clear();
                c.cursor = 0;
            }
        }
    }

    /// `copy_to` of `key` into database `to` ran on client `id`: the database the client was in
    /// when the copy began, if it is known. `valid(n)`: whether database `n` exists (a queued
    /// `SELECT` of one that does not changes nothing).
    pub fn copied(
        &mut self,
        id: u64,
        key: &[u8],
        to: i64,
        mut valid: impl FnMut(i64) -> bool,
    ) -> Option<i64> {
        let i = self.clients.iter().position(|c| c.id == id)?;
        let c = &mut self.clients[i];
        if let Some((k, d, from)) = &c.now {
            if k == key && *d == to {
                let from = *from;
                c.now = None;
                return Some(from);
            }
        }
        // A transaction's copies run in their queued order; one that copies nothing fires no
        // event, and is skipped.
        let mut db = c.cursor_db;
        for (j, q) in c.queued.iter().enumerate().skip(c.cursor) {
            match q {
                Queued::Select(n) => {
                    if valid(*n) {
                        db = *n;
                    }
                }
                Queued::Copy { key: k, db: d } if k == key && *d == to => {
                    c.cursor = j + 1;
                    c.cursor_db = db;
                    return Some(db);
                }
                Queued::Copy { .. } => {}
            }
        }
        None
    }
}

/// `MOVE`s between their `move_from` and `move_to`, and the clients whose `COPY ... DB` may be
/// running or queued.
static MOVES: Mutex<Moves> = Mutex::new(Moves::new());
static CLIENTS: Mutex<Clients> = Mutex::new(Clients::new());
/// [`Clients::in_script`], read without the lock by the filter on every command.
static IN_SCRIPT: AtomicBool = AtomicBool::new(false);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether the command filter must [`note`] a command named `name`: [`wants`] it, or a script is
/// being followed (an atomic load, no lock).
pub fn filter_wants(name: &[u8]) -> bool {
    wants(name) || IN_SCRIPT.load(Ordering::Relaxed)
}

/// The command filter saw a `MULTI`, `EXEC`, `DISCARD`, `SELECT`, `COPY` or script command, or a
/// command of a script (`argv`, at most its first 8 arguments): notes it with the client's id,
/// database and transaction flag (Redis 7.2+ / Valkey `RM_CommandFilterGetClientId` and
/// `RM_GetClientInfoById`; nothing on 7.0, whose keyspace callbacks run on a temporary client).
///
/// # Safety
/// `f` is the filter context the server passed to the command filter.
pub unsafe fn note(f: *mut raw::RedisModuleCommandFilterCtx, argv: &[&[u8]]) {
    let (Some(get_id), Some(get_info)) = (
        raw::RedisModule_CommandFilterGetClientId,
        raw::RedisModule_GetClientInfoById,
    ) else {
        return;
    };
    let id = get_id(f);
    let mut info: raw::RedisModuleClientInfo = std::mem::zeroed();
    info.version = 1;
    // A script's client (and a module's) is not in the server's client table: no information.
    let known = get_info((&mut info as *mut raw::RedisModuleClientInfo).cast(), id)
        == raw::REDISMODULE_OK as c_int;
    let multi = info.flags & u64::from(raw::REDISMODULE_CLIENTINFO_FLAG_MULTI) != 0;
    let mut clients = lock(&CLIENTS);
    clients.filtered(id, known.then_some(i64::from(info.db)), multi, argv);
    IN_SCRIPT.store(clients.in_script(), Ordering::Relaxed);
}

/// At the end of the `move_from`, `move_to` and `copy_to` callbacks (`ev`, on `key`): selects
/// again the database the client that runs the command was in, when it is known exactly. On
/// Redis the callback's client is a temporary one, and this changes nothing. Not covered, on
/// Valkey 8.1.1 to 8.1.x only, because nothing tells the source database: `COPY ... DB` in a
/// script run inside `MULTI` (the script's client goes on in the destination database, and the
/// server propagates the copy there, so a replica copies nothing) and in the AOF loader (the
/// commands after it load into the destination database until the AOF's next `SELECT`).
pub fn keep(ctx: &Context, ev: &[u8], key: &[u8]) {
    let here = ffi::selected_db(ctx);
    let back = match ev {
        b"move_from" => {
            lock(&MOVES).moved_from(key, here);
            None
        }
        b"move_to" => lock(&MOVES).moved_to(key),
        b"copy_to" => {
            let id = unsafe { raw::RedisModule_GetClientId.map_or(0, |f| f(ctx.ctx)) };
            // A database that does not exist is found by trying to select it.
            let found = lock(&CLIENTS).copied(id, key, i64::from(here), |n| {
                i32::try_from(n).is_ok_and(|n| ffi::select_db(ctx, n))
            });
            Some(found.and_then(|n| i32::try_from(n).ok()).unwrap_or(here))
        }
        _ => None,
    };
    if let Some(db) = back {
        if db != ffi::selected_db(ctx) {
            ffi::select_db(ctx, db);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<Vec<u8>> {
        s.split(' ').map(|w| w.as_bytes().to_vec()).collect()
    }

    fn filter(c: &mut Clients, id: u64, db: i64, multi: bool, cmd: &str) {
        let a = argv(cmd);
        let r: Vec<&[u8]> = a.iter().map(Vec::as_slice).collect();
        c.filtered(id, Some(db), multi, &r);
    }

    /// A command of a client the filter cannot read (a script's).
    fn unread(c: &mut Clients, id: u64, cmd: &str) {
        let a = argv(cmd);
        let r: Vec<&[u8]> = a.iter().map(Vec::as_slice).collect();
        c.filtered(id, None, false, &r);
    }

    #[test]
    fn a_script_starts_in_its_callers_database() {
        let mut c = Clients::default();
        filter(&mut c, 5, 3, false, "EVAL x 0");
        unread(&mut c, 1, "COPY a b DB 0");
        unread(&mut c, 1, "SELECT 2");
        unread(&mut c, 1, "COPY a c DB 0");
        assert_eq!(
            c.copied(1, b"b", 0, |_| true),
            None,
            "replaced by the later copy"
        );
        assert_eq!(c.copied(1, b"c", 0, |_| true), Some(2));
        // The next command of a client the filter reads ends the script.
        filter(&mut c, 5, 3, false, "GET k");
        unread(&mut c, 1, "COPY a d DB 0");
        assert_eq!(c.copied(1, b"d", 0, |_| true), None);
        // A script queued in a transaction: not followed.
        filter(&mut c, 5, 3, false, "MULTI");
        filter(&mut c, 5, 3, true, "EVAL x 0");
        filter(&mut c, 5, 3, true, "EXEC");
        unread(&mut c, 1, "COPY a e DB 0");
        assert_eq!(c.copied(1, b"e", 0, |_| true), None);
    }

    #[test]
    fn a_move_returns_to_where_move_from_was() {
        let mut m = Moves::default();
        m.moved_from(b"k", 2);
        assert_eq!(m.moved_to(b"other"), None);
        m.moved_from(b"k", 2);
        assert_eq!(m.moved_to(b"k"), Some(2));
        assert_eq!(m.moved_to(b"k"), None, "once");
    }

    #[test]
    fn a_copy_outside_a_transaction_returns_to_the_clients_database() {
        let mut c = Clients::default();
        filter(&mut c, 7, 3, false, "COPY a b DB 1 REPLACE");
        assert_eq!(c.copied(8, b"b", 1, |_| true), None, "another client");
        assert_eq!(c.copied(7, b"b", 2, |_| true), None, "another database");
        assert_eq!(c.copied(7, b"b", 1, |_| true), Some(3));
        assert_eq!(c.copied(7, b"b", 1, |_| true), None, "once");
        // Without DB, or with a bad one, nothing is noted.
        filter(&mut c, 7, 3, false, "COPY a b");
        filter(&mut c, 7, 3, false, "COPY a b DB x");
        assert_eq!(c.copied(7, b"b", 3, |_| true), None);
        // The last DB counts.
        filter(&mut c, 7, 0, false, "copy a b db 1 db 2");
        assert_eq!(c.copied(7, b"b", 2, |_| true), Some(0));
    }

    #[test]
    fn a_refused_copy_is_forgotten_at_the_next_command() {
        let mut c = Clients::default();
        // Refused (no copy_to), then SELECT 2 and the same copy in a transaction.
        filter(&mut c, 7, 0, false, "COPY a b DB 1");
        filter(&mut c, 7, 0, false, "SELECT 2");
        filter(&mut c, 7, 2, false, "MULTI");
        filter(&mut c, 7, 2, true, "COPY a b DB 1");
        filter(&mut c, 7, 2, true, "EXEC");
        assert_eq!(c.copied(7, b"b", 1, |_| true), Some(2));
    }

    #[test]
    fn a_transaction_follows_its_queued_selects() {
        let mut c = Clients::default();
        // From db 1: MULTI; SELECT 0; COPY a b DB 3; SELECT 9 (no such db); COPY x y DB 3;
        // SELECT 2; COPY a c DB 3; EXEC.
        filter(&mut c, 5, 1, false, "MULTI");
        for cmd in [
            "SELECT 0",
            "COPY a b DB 3",
            "SELECT 9",
            "COPY x y DB 3",
            "SELECT 2",
            "COPY a c DB 3",
        ] {
            filter(&mut c, 5, 1, true, cmd);
        }
        filter(&mut c, 5, 1, true, "EXEC");
        let valid = |n: i64| (0..4).contains(&n);
        assert_eq!(c.copied(5, b"b", 3, valid), Some(0));
        // `COPY x y` copied nothing (no event): the next event is `a c`.
        assert_eq!(c.copied(5, b"c", 3, valid), Some(2));
        assert_eq!(c.copied(5, b"y", 3, valid), None, "already passed");
    }

    #[test]
    fn a_refused_multi_or_a_discard_queues_nothing() {
        let mut c = Clients::default();
        // MULTI refused (the server's flag stays off): COPY runs at once.
        filter(&mut c, 5, 1, false, "MULTI");
        filter(&mut c, 5, 1, false, "COPY a b DB 2");
        assert_eq!(c.copied(5, b"b", 2, |_| true), Some(1));
        filter(&mut c, 5, 1, false, "MULTI");
        filter(&mut c, 5, 1, true, "COPY a b DB 2");
        filter(&mut c, 5, 1, true, "DISCARD");
        assert_eq!(c.copied(5, b"b", 2, |_| true), None);
    }

    #[test]
    fn bounded() {
        let mut c = Clients::default();
        for id in 0..(MAX_CLIENTS as u64 + 10) {
            filter(&mut c, id, 0, false, "COPY a b DB 1");
        }
        assert_eq!(c.clients.len(), MAX_CLIENTS);
        assert_eq!(
            c.copied(0, b"b", 1, |_| true),
            None,
            "the oldest went first"
        );
        filter(&mut c, 1000, 0, false, "MULTI");
        for _ in 0..MAX_QUEUED + 5 {
            filter(&mut c, 1000, 0, true, "COPY a b DB 1");
        }
        assert!(c.clients.iter().all(|x| x.queued.len() <= MAX_QUEUED));
    }
}
