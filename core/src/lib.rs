//! reclaim-core: redis-reclaim's pure core. Rules and values with no Redis call and no
//! dependency on `redis-module`, `libc` or any FFI (the compiler keeps it so: this crate has none
//! of them), unit- and property-tested without a server. The module crate names it `crate::model`
//! (`pub use reclaim_core as model`); nothing here names the module crate.
//!
//! Visibility: an item is `pub` only when the module crate (its code or its unit tests) uses it;
//! what only this crate uses is `pub(crate)`, what only its own file uses is private. So the
//! compiler says which of the core's rules the module relies on, and a new use from the module is
//! a visible change here. (`unreachable_pub` cannot check this: every module is public.)

pub mod access;
pub mod args;
pub mod breaker;
pub mod clock;
pub mod encoding;
pub mod error;
pub mod eviction;
pub mod export;
pub mod keys;
pub mod metrics;
pub mod outcome;
pub mod planner;
pub mod policy;
pub mod readgroup;
pub mod redrive;
pub mod resp;
pub mod retention;
pub mod runtime;
pub mod text;
pub mod watch;
