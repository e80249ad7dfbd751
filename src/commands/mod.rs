//! What clients call: every `RECLAIM.*` command, each in one module that holds all of it: its
//! table entry (a [`CommandSpec`]: flags, arity, key specs, summary, version), its arguments as
//! `COMMAND DOCS` shows them (`model::args::Arg` data, or derived from the command's grammar
//! table: `model::readgroup::OPTIONS`), its parser (or the one in `model/` it calls) and its
//! handler, thin (parse into typed values, act through [`crate::engine`] and [`crate::state`],
//! reply). Each handler returns `Result<Reply, ReclaimError>`; [`crate::ffi::command::run_command`]
//! sends either. This file only lists the modules' tables ([`FAMILIES`]) and registers them.
//! Syntax and replies are documented in docs/commands.md.

/// The entry point Redis calls for a command (an `extern "C"` function, as a table's `func`):
/// `handler` run by [`crate::ffi::command::run_command`] under the command's display `name`.
macro_rules! entry {
    ($name:expr, $handler:path) => {{
        extern "C" fn entry(
            ctx: *mut redis_module::raw::RedisModuleCtx,
            argv: *mut *mut redis_module::raw::RedisModuleString,
            argc: std::os::raw::c_int,
        ) -> std::os::raw::c_int {
            crate::ffi::command::run_command(ctx, argv, argc, $name, $handler)
        }
        Some(entry)
    }};
}

pub mod common;
pub mod health;
pub mod policy;
pub mod readgroup;
pub mod redrive;
pub mod simulate;
pub mod sweep;
pub mod verbs;

use redis_module::Context;

use crate::ffi::command::{self, CommandSpec};

/// Every command of the module, by module, registered in this order (a container before its
/// subcommands).
pub const FAMILIES: &[&[CommandSpec]] = &[
    policy::COMMANDS,
    sweep::COMMANDS,
    simulate::COMMANDS,
    health::COMMANDS,
    readgroup::COMMANDS,
    verbs::COMMANDS,
    redrive::COMMANDS,
];

/// The module's own ACL category (`+@reclaim`), on servers that let a module add one (Redis
/// 7.4+, Valkey 8): every command is in it.
pub const CATEGORY: &str = "reclaim";

/// Registers every command of [`FAMILIES`], with its ACL categories where the server takes them
/// (Redis 7.2+, Valkey 8), and [`CATEGORY`] where the server adds it. `false` if Redis refused a
/// command.
pub fn register(ctx: &Context) -> bool {
    let own = command::add_acl_category(ctx, CATEGORY).then_some(CATEGORY);
    FAMILIES
        .iter()
        .flat_map(|f| f.iter())
        .all(|c| command::register(ctx, c, own))
}
