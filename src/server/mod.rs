//! What Redis calls on its own: the timer and its slices ([`scheduler`]), keyspace and server
//! events, the command filter and `INFO` ([`hooks`]). Calls [`crate::engine`], [`crate::state`],
//! [`crate::ffi`] and [`crate::model`].

pub mod hooks;
pub mod scheduler;
