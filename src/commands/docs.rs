//! What `COMMAND DOCS` says of each command besides the [`super::COMMANDS`] table's summary and
//! complexity: the module version it appeared in and its arguments, as data. redis-cli shows them
//! as a hint while a command is typed; docs/commands.md has the same syntax (tests/introspection.rs
//! compares them).

use crate::ffi::args::{block, int, key, one_of, string, word, Arg};

/// The first version, the one that added the delivery model, steering and the DLQ tools, and
/// the next (delivery metadata on read, `FORGET-IDLE`).
pub const V010: &str = "0.1.0";
pub const V020: &str = "0.2.0";
pub const V030: &str = "0.3.0";

const BACKOFF: &[Arg] = &[
    word("FIXED"),
    int("max-ms").token("EXPONENTIAL"),
    int("ms").token("LIST").multiple(),
];
const STORM: &[Arg] = &[int("n"), int("window-ms")];
const YES_NO: &[Arg] = &[word("yes"), word("no")];

/// `args` followed by the options of `RECLAIM.POLICY SET`, each with the version it appeared
/// in (a command newer than an option shows its own version for it).
macro_rules! with_policy_options {
    ($($arg:expr),* $(,)?) => {
        &[
            $($arg,)*
            int("ms").token("MIN-IDLE").optional().since(V010),
            int("n").token("MAX-DELIVERIES").optional().since(V010),
            key("dlq-key", 1).token("DLQ").optional().since(V010),
            string("consumer").token("CLAIMANT").optional().since(V010),
            int("n").token("COUNT").optional().since(V010),
            int("ms").token("INTERVAL").optional().since(V010),
            one_of("backoff", BACKOFF).token("BACKOFF").optional().since(V020),
            int("ms").token("LIVENESS").optional().since(V020),
            block("storm", STORM).token("STORM").optional().since(V020),
            int("n").token("DLQ-MAXLEN").optional().since(V020),
            int("ms").token("DLQ-MAXAGE").optional().since(V020),
            one_of("tombstones", YES_NO).token("TOMBSTONES").optional().since(V020),
            int("ms").token("FORGET-IDLE").optional().since(V030),
        ]
    };
}

const KEY_GROUP: &[Arg] = &[key("key", 0), string("group")];

pub const POLICY_SET: &[Arg] = with_policy_options!(key("key", 0), string("group"));
pub const POLICY_GET: &[Arg] = KEY_GROUP;
pub const POLICY_DEL: &[Arg] = KEY_GROUP;
pub const POLICY_PAUSE: &[Arg] = &[key("key", 0), string("group"), word("STORM").optional()];
pub const POLICY_RESUME: &[Arg] = KEY_GROUP;
const AFTER: &[Arg] = &[string("stream"), string("group")];
pub const POLICY_LIST: &[Arg] = &[
    block("after", AFTER).token("AFTER").optional().since(V020),
    int("n").token("COUNT").optional().since(V020),
];
/// The options may come before the document too (docs/commands.md says so); the hint shows one order.
pub const POLICY_IMPORT: &[Arg] = &[
    string("json"),
    word("REPLACE").optional(),
    word("LOCAL").optional(),
];
pub const SWEEP: &[Arg] = &[
    key("key", 0),
    string("group"),
    int("n").token("LIMIT").optional(),
];
pub const STATS: &[Arg] = KEY_GROUP;
pub const HEALTH: &[Arg] = KEY_GROUP;
/// The DLQ of a what-if is no key of `SIMULATE` (it reads none): shown as a string.
pub const SIMULATE: &[Arg] = with_policy_options!(
    key("key", 0),
    string("group"),
    int("n").token("LIMIT").optional(),
);
pub const READGROUP: &[Arg] = &[
    block("group-consumer", &[string("group"), string("consumer")]).token("GROUP"),
    int("count").token("COUNT").optional(),
    int("milliseconds").token("BLOCK").optional(),
    word("DELIVERY-METADATA").optional().since(V030),
    block(
        "streams",
        &[key("key", 0).multiple(), word(">").multiple_token()],
    )
    .token("STREAMS"),
];
pub const EXTEND: &[Arg] = &[
    key("key", 0),
    string("group"),
    string("consumer"),
    string("id").multiple(),
];
pub const NACK: &[Arg] = &[
    key("key", 0),
    string("group"),
    string("consumer"),
    string("id").multiple(),
    int("ms").token("DELAY").optional(),
    string("text").token("REASON").optional(),
];
pub const TERM: &[Arg] = &[
    key("key", 0),
    string("group"),
    string("consumer"),
    string("id").multiple(),
    string("text").token("REASON").optional(),
];
/// Three forms: start a task, `STATUS`, `CANCEL` (one key spec, the getkeys callback's, covers
/// the DLQ and `SOURCE`'s key).
pub const REDRIVE: &[Arg] = &[one_of(
    "form",
    &[
        block(
            "start",
            &[
                key("dlq", 0),
                block("source", &[key("key", 0), string("group")])
                    .token("SOURCE")
                    .optional(),
                block("ids", &[int("n"), string("id").multiple()])
                    .token("IDS")
                    .optional(),
                int("n").token("COUNT").optional(),
                int("entries-per-s").token("RATE").optional(),
                block("canary", &[int("k"), int("ms").token("WINDOW")])
                    .token("CANARY")
                    .optional(),
            ],
        ),
        block("status", &[word("STATUS"), key("dlq", 0)]),
        block("cancel", &[word("CANCEL"), key("dlq", 0)]),
    ],
)];
