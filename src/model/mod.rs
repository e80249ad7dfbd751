//! The pure layer: rules and values, no Redis calls (no `redis_module` import), unit-tested
//! without a server. Nothing here calls any other layer.

pub mod access;
pub mod breaker;
pub mod clock;
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
pub mod text;
pub mod watch;
