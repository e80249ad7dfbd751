//! What the module keeps: policies in the keyspace ([`store`]; the `reclaimpl` data type's
//! callbacks, every `unsafe extern "C"` of the type, in `datatype/`), the in-memory index of them with
//! each one's run-time state ([`registry`], [`runtime`]), and the configs ([`config`]). Calls
//! [`crate::ffi`] and [`crate::model`] only.

pub mod config;
mod datatype;
pub mod eviction;
pub mod metrics;
pub mod redrive;
pub mod registry;
/// One policy's run-time state: pure, in the core crate (core/src/runtime/).
pub use reclaim_core::runtime;
pub mod store;
