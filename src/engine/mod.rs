//! Stream work under a policy, through `RM_Call`: the sweep executor ([`sweep`]) and the settling
//! of what work did ([`settle`]). Calls [`crate::state`], [`crate::ffi`] and [`crate::model`].

pub mod consumers;
pub mod deadletter;
pub mod guards;
pub mod owned;
pub mod parked;
pub mod pending;
pub mod readgroup;
pub mod redrive;
pub mod settle;
pub mod sweep;
pub mod touches;
