//! What Redis calls on its own: the timer and its slices ([`scheduler`]), keyspace and server
//! events ([`events`]), the command filter ([`filter`]) and `INFO` ([`info`]). Calls [`crate::engine`], [`crate::state`],
//! [`crate::ffi`] and [`crate::model`].

pub mod events;
pub mod filter;
pub mod info;
pub mod scheduler;
