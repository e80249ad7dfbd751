//! What Redis calls on its own: the timer and its slices ([`scheduler`]), keyspace and server
//! events ([`events`]), the command filter ([`filter`]), the database a client stays in around
//! `MOVE` and `COPY ... DB` ([`caller_db`], for both) and `INFO` ([`info`]). Calls
//! [`crate::engine`], [`crate::state`], [`crate::ffi`] and [`crate::model`].

pub mod caller_db;
pub mod events;
pub mod eviction;
pub mod filter;
pub mod info;
pub mod scheduler;
