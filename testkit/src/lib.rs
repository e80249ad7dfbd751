//! The test kit of redis-reclaim: what the integration tests (`tests/*.rs`) and the examples
//! (`examples/bench/`, `examples/demo/`) share. Dev-only (`publish = false`): a dev-dependency of
//! the module's crate, never linked into the module.
//!
//! | module | owns |
//! |---|---|
//! | [`server`] | starting redis-server with the module (free port, temp dir, kill on drop), replicas, restarts, logs |
//! | [`wait`] | polling for a state with a deadline ([`wait_for`]), `RECLAIM_TEST_SLOWDOWN` |
//! | [`replies`] | field/value replies, strings, errors, `INFO` fields |
//! | [`streams`] | groups, entries, deliveries, the PEL |
//! | [`policies`] | `RECLAIM.POLICY` and `RECLAIM.STATS` |
//! | [`readers`] | workers taking deliveries with `RECLAIM.READGROUP` (the inbox, redeliveries) |
//! | [`aof`] | AOF files and their commands |
//! | [`words`] | commands given as words ([`q`], [`run`]) |
//! | [`sweeper`] | the sweeper's progress: `RECLAIM.STATS` fields, waits for steps, passes, skips |
//! | [`dlq`] | the dead-letter invariant ([`assert_partition`]) |
//! | [`docs`] | the fenced blocks of README.md and docs/*.md, run and compared (tests/docs.rs) |
//!
//! Tests and examples `use reclaim_testkit::*;`.

pub mod aof;
pub mod dlq;
pub mod docs;
pub mod policies;
pub mod readers;
pub mod replies;
pub mod server;
pub mod streams;
pub mod sweeper;
pub mod wait;
pub mod words;

pub use redis::{cmd, Connection, Value};

pub use aof::*;
pub use dlq::*;
pub use policies::*;
pub use readers::*;
pub use replies::*;
pub use server::*;
pub use streams::*;
pub use sweeper::*;
pub use wait::*;
pub use words::*;
