//! The test kit of redis-reclaim: what the integration tests (`tests/*.rs`, listed by feature in
//! tests/README.md) and the examples (`examples/bench/`, `examples/demo/`, `examples/fuzz/`) share. Dev-only
//! (`publish = false`): a dev-dependency of the module's crate, never linked into the module.
//!
//! | module | owns |
//! |---|---|
//! | [`cluster`] | a real Redis Cluster (`redis-cli --cluster create`), reshard, failover, a killed primary, key slots; lone cluster nodes and [`TwoNodes`] (one serving every slot, one none), `SETSLOT`, `MIGRATE` |
//! | [`server`] | starting redis-server with the module (free port, temp dir, kill on drop), replicas, restarts, logs, `role`, `FAILOVER TO`, the keyspace events of database 0 ([`listen`]) |
//! | [`wait`] | polling for a state with a deadline ([`wait_for`]), `RECLAIM_TEST_SLOWDOWN`, `WAIT` for a replica, blocked clients ([`wait_blocked`]) |
//! | [`replies`] | field/value replies, strings, errors, whole replies ([`reply_of`]), `INFO` fields, the server's clock |
//! | [`errors`] | error texts asserted in more than one file |
//! | [`streams`] | groups, entries, deliveries, the PEL (exact owners, idle times and counts: [`set_pending`]), waits for idle times and ages |
//! | [`policies`] | `RECLAIM.POLICY` (parsed, and as exact replies) and `RECLAIM.STATS` |
//! | [`readers`] | workers taking deliveries with `RECLAIM.READGROUP` (the inbox, redeliveries) |
//! | [`acl`] | ACL users (a role: a user with its rules) and connections authenticated as one; a role's table of answers |
//! | [`python`] | `python3` with redis-py from `.cache/py` ([`python()`]), the project's directory |
//! | [`aof`] | AOF files and their commands |
//! | [`delays`] | what a delayed `RECLAIM.NACK` leaves: the delay key and its due times, the NACK record key; a field of a flat entry |
//! | [`words`] | commands given as words ([`q`], [`run`]) or as byte strings ([`bin_cmd`], [`args!`]) |
//! | [`sweeper`] | the sweeper's progress: `RECLAIM.STATS` fields, waits for steps, passes, skips; `RECLAIM.SWEEP` |
//! | [`dlq`] | the dead-letter invariant ([`assert_partition`]); `RECLAIM.REDRIVE` and its task's state ([`wait_state`]) |
//! | [`dump`] | `DUMP` payloads crafted for `RESTORE` ([`patch_dump`]: content replaced, CRC-64 again) |
//! | [`dataset`] | a server's whole dataset key by key, and the differences between two ([`dataset::snapshot`], [`dataset::diff`]) |
//! | [`docs`] | the fenced blocks of README.md and docs/*.md, run and compared (tests/docs.rs) |
//!
//! Tests and examples `use reclaim_testkit::*;`.

pub mod acl;
pub mod aof;
pub mod cluster;
pub mod dataset;
pub mod delays;
pub mod dlq;
pub mod docs;
pub mod dump;
pub mod errors;
pub mod policies;
pub mod python;
pub mod readers;
pub mod replies;
pub mod server;
pub mod streams;
pub mod sweeper;
pub mod wait;
pub mod words;

pub use redis::{cmd, Connection, Value};

pub use acl::*;
pub use aof::*;
pub use cluster::*;
pub use delays::*;
pub use dlq::*;
pub use dump::*;
pub use errors::*;
pub use policies::*;
pub use python::*;
pub use readers::*;
pub use replies::*;
pub use server::*;
pub use streams::*;
pub use sweeper::*;
pub use wait::*;
pub use words::*;
