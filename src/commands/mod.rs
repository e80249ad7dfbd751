//! What clients call: every `RECLAIM.*` command, one file per family, each handler thin (parse
//! into typed values, act through [`crate::engine`] and [`crate::state`], reply). Each returns
//! `Result<Reply, ReclaimError>`; [`crate::ffi::command::run_command`] sends either. This file
//! holds the registration: the table [`COMMANDS`] (flags, arity, key specs, handler) and the
//! entry points. Syntax and replies are documented in docs/commands.md.

pub mod common;
pub mod docs;
pub mod health;
pub mod policy;
pub mod readgroup;
pub mod redrive;
pub mod simulate;
pub mod sweep;
pub mod verbs;

use std::os::raw::c_int;

use redis_module::{raw, Context};

use crate::commands::common::{ACCESS, DELETE, INSERT, KEY_RO, KEY_RW, READGROUP_KEY, UPDATE};
use crate::commands::docs::{self as d, V010, V020};
use crate::ffi::command::{self, CommandSpec, Spec};

macro_rules! entry {
    ($fname:ident, $name:expr, $handler:path) => {
        extern "C" fn $fname(
            ctx: *mut raw::RedisModuleCtx,
            argv: *mut *mut raw::RedisModuleString,
            argc: c_int,
        ) -> c_int {
            command::run_command(ctx, argv, argc, $name, $handler)
        }
    };
}

entry!(c_policy_set, "RECLAIM.POLICY SET", policy::policy_set);
entry!(c_policy_get, "RECLAIM.POLICY GET", policy::policy_get);
entry!(c_policy_del, "RECLAIM.POLICY DEL", policy::policy_del);
entry!(c_policy_list, "RECLAIM.POLICY LIST", policy::policy_list);
entry!(
    c_policy_export,
    "RECLAIM.POLICY EXPORT",
    policy::policy_export
);
entry!(
    c_policy_import,
    "RECLAIM.POLICY IMPORT",
    policy::policy_import
);
entry!(c_policy_help, "RECLAIM.POLICY HELP", policy::policy_help);
entry!(c_sweep, "RECLAIM.SWEEP", sweep::sweep_cmd);
entry!(c_stats, "RECLAIM.STATS", sweep::stats);
entry!(c_simulate, "RECLAIM.SIMULATE", simulate::simulate_cmd);
entry!(c_health, "RECLAIM.HEALTH", health::health_cmd);
entry!(c_policy_pause, "RECLAIM.POLICY PAUSE", policy::policy_pause);
entry!(
    c_policy_resume,
    "RECLAIM.POLICY RESUME",
    policy::policy_resume
);
entry!(c_readgroup, "RECLAIM.READGROUP", readgroup::readgroup_cmd);
entry!(c_extend, "RECLAIM.EXTEND", verbs::extend_cmd);
entry!(c_nack, "RECLAIM.NACK", verbs::nack_cmd);
entry!(c_term, "RECLAIM.TERM", verbs::term_cmd);
entry!(c_redrive, "RECLAIM.REDRIVE", redrive::redrive_cmd);

/// Every command of the module, registered in this order (a container before its subcommands).
pub const COMMANDS: &[CommandSpec] = &[
    CommandSpec {
        parent: None,
        name: "reclaim.policy",
        func: None,
        flags: "",
        acl: "",
        first_key: 0,
        arity: -2,
        summary: "Manage reclaim policies",
        complexity: "O(1)",
        since: V010,
        args: &[],
        keys: &[],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "set",
        func: Some(c_policy_set),
        flags: "write deny-oom getkeys-api",
        acl: "write slow",
        first_key: 2,
        arity: -4,
        summary: "Set the reclaim policy of a stream's consumer group",
        complexity: "O(log N) with N policies of the stream",
        since: V010,
        args: d::POLICY_SET,
        keys: &[
            Spec::Index(2, KEY_RW | UPDATE),
            Spec::Callback(KEY_RW | INSERT),
        ],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "get",
        func: Some(c_policy_get),
        flags: "readonly",
        acl: "read slow",
        first_key: 2,
        arity: 4,
        summary: "Get a reclaim policy",
        complexity: "O(1)",
        since: V010,
        args: d::POLICY_GET,
        keys: &[Spec::Index(2, KEY_RO | ACCESS)],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "del",
        func: Some(c_policy_del),
        flags: "write",
        acl: "write slow",
        first_key: 2,
        arity: 4,
        summary: "Delete a reclaim policy",
        complexity: "O(1)",
        since: V010,
        args: d::POLICY_DEL,
        keys: &[Spec::Index(2, KEY_RW | DELETE)],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "pause",
        func: Some(c_policy_pause),
        flags: "write fast",
        acl: "write fast",
        first_key: 2,
        arity: -4,
        summary: "Pause a reclaim policy (or open its STORM breaker)",
        complexity: "O(1)",
        since: V020,
        args: d::POLICY_PAUSE,
        keys: &[Spec::Index(2, KEY_RW | UPDATE)],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "resume",
        func: Some(c_policy_resume),
        flags: "write fast",
        acl: "write fast",
        first_key: 2,
        arity: 4,
        summary: "Resume a paused reclaim policy, or close its STORM breaker",
        complexity: "O(1)",
        since: V020,
        args: d::POLICY_RESUME,
        keys: &[Spec::Index(2, KEY_RW | UPDATE)],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "list",
        func: Some(c_policy_list),
        flags: "readonly",
        acl: "read slow",
        first_key: 0,
        arity: -2,
        summary: "List the reclaim policies of the selected database, all or a page",
        complexity: "O(log M + P) with M the policies of all databases and P those of the selected one; with COUNT, O(log M + N) with N those passed over",
        since: V010,
        args: d::POLICY_LIST,
        keys: &[],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "export",
        func: Some(c_policy_export),
        flags: "readonly",
        acl: "read slow",
        first_key: 0,
        arity: 2,
        summary: "Export the reclaim policies of the selected database as one JSON document",
        complexity: "O(P) with P policies",
        since: V020,
        args: &[],
        keys: &[],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "import",
        func: Some(c_policy_import),
        flags: "write deny-oom",
        acl: "write slow",
        first_key: 0,
        arity: -3,
        summary: "Import reclaim policies from a JSON document (as EXPORT writes it), all or none",
        complexity: "O(N + P log M) with N the document's length, P its policies, M the policies of a stream",
        since: V020,
        args: d::POLICY_IMPORT,
        keys: &[],
    },
    CommandSpec {
        parent: Some("reclaim.policy"),
        name: "help",
        func: Some(c_policy_help),
        flags: "readonly fast",
        acl: "read fast",
        first_key: 0,
        arity: 2,
        summary: "Show helpful text about the different subcommands",
        complexity: "O(1)",
        since: V010,
        args: &[],
        keys: &[],
    },
    CommandSpec {
        parent: None,
        name: "reclaim.sweep",
        func: Some(c_sweep),
        flags: "write deny-oom",
        acl: "write slow",
        first_key: 1,
        arity: -3,
        summary: "Run one reclaim pass over a consumer group's PEL now",
        complexity: "O(N) with N pending entries of the group (or LIMIT)",
        since: V010,
        args: d::SWEEP,
        keys: &[Spec::Index(1, KEY_RW | UPDATE)],
    },
    CommandSpec {
        parent: None,
        name: "reclaim.stats",
        func: Some(c_stats),
        flags: "readonly",
        acl: "read slow",
        first_key: 1,
        arity: 3,
        summary: "Counters and status of a reclaim policy",
        complexity: "O(1)",
        since: V010,
        args: d::STATS,
        keys: &[Spec::Index(1, KEY_RO | ACCESS)],
    },
    CommandSpec {
        parent: None,
        name: "reclaim.simulate",
        func: Some(c_simulate),
        flags: "readonly",
        acl: "read slow",
        first_key: 1,
        arity: -3,
        summary: "Show what one reclaim pass would do now to the first pending entries of a consumer group, entry by entry, under its policy or a proposed one (writes nothing)",
        complexity: "O(L) with L = LIMIT (default COUNT) pending entries examined, plus O(consumers) with LIVENESS",
        since: V020,
        args: d::SIMULATE,
        keys: &[Spec::Index(1, KEY_RO | ACCESS)],
    },
    CommandSpec {
        parent: None,
        name: "reclaim.health",
        func: Some(c_health),
        flags: "readonly",
        acl: "read slow",
        first_key: 1,
        arity: 3,
        summary: "Health signals of a consumer group under a reclaim policy, each with the time it was taken",
        complexity: "O(C) with C consumers of the group",
        since: V020,
        args: d::HEALTH,
        keys: &[Spec::Index(1, KEY_RO | ACCESS)],
    },
    CommandSpec {
        parent: None,
        name: "reclaim.readgroup",
        func: Some(c_readgroup),
        flags: "write blocking getkeys-api",
        acl: "write stream slow blocking",
        first_key: 0,
        arity: -7,
        summary: "Read new and due entries from streams of a consumer group, with redelivery under the policies (a drop-in for XREADGROUP ... >)",
        complexity: "As XREADGROUP, plus O(log N + M) per stream with a policy for the M entries handed over again",
        since: V020,
        args: d::READGROUP,
        keys: &[Spec::HalfAfterKeyword("STREAMS", 4, READGROUP_KEY)],
    },
    CommandSpec {
        parent: None,
        name: "reclaim.extend",
        func: Some(c_extend),
        flags: "write fast",
        acl: "write stream fast",
        first_key: 1,
        arity: -5,
        summary: "Renew the lease of a consumer's own pending entries (idle reset, count unchanged)",
        complexity: "O(M log N) for M IDs",
        since: V020,
        args: d::EXTEND,
        keys: &[Spec::Index(1, KEY_RW | UPDATE)],
    },
    CommandSpec {
        parent: None,
        name: "reclaim.nack",
        func: Some(c_nack),
        flags: "write fast",
        acl: "write stream fast",
        first_key: 1,
        arity: -5,
        summary: "Give a consumer's own pending entries back for redelivery, now or after a delay (up to 30 days), with a reason",
        complexity: "O(M log N) for M IDs",
        since: V020,
        args: d::NACK,
        keys: &[Spec::Index(1, KEY_RW | UPDATE)],
    },
    CommandSpec {
        parent: None,
        name: "reclaim.term",
        func: Some(c_term),
        flags: "write deny-oom",
        acl: "write stream slow",
        first_key: 1,
        arity: -5,
        summary: "Dead-letter a consumer's own pending entries at once (never retried)",
        complexity: "O(M log N) for M IDs",
        since: V020,
        args: d::TERM,
        keys: &[Spec::Index(1, KEY_RW | UPDATE)],
    },
    CommandSpec {
        parent: None,
        name: "reclaim.redrive",
        func: Some(c_redrive),
        flags: "may-replicate getkeys-api",
        acl: "write slow",
        first_key: 1,
        arity: -2,
        summary: "Move a DLQ's entries back to the consumer groups they failed in, as a task (STATUS, CANCEL)",
        complexity: "O(1) to start, STATUS or CANCEL; the task moves each entry in O(log N)",
        since: V020,
        args: d::REDRIVE,
        keys: &[Spec::Callback(KEY_RW | UPDATE)],
    },
];

/// The module's own ACL category (`+@reclaim`), on servers that let a module add one (Redis
/// 7.4+, Valkey 8): every command is in it.
pub const CATEGORY: &str = "reclaim";

/// Registers every command of [`COMMANDS`], with its ACL categories where the server takes them
/// (Redis 7.2+, Valkey 8), and [`CATEGORY`] where the server adds it. `false` if Redis refused a
/// command.
pub fn register(ctx: &Context) -> bool {
    let own = command::add_acl_category(ctx, CATEGORY).then_some(CATEGORY);
    COMMANDS.iter().all(|c| command::register(ctx, c, own))
}
