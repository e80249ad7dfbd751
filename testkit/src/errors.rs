//! Error replies the tests assert in more than one file, as the client reads them (`CODE message`,
//! see [`error_of`](crate::error_of)). The module keeps its own copy of each text (src/error.rs):
//! a test holds the wire text independently, so a changed message fails a test.

/// A command on a key and group that has no policy.
pub const NO_POLICY: &str = "ERR no reclaim policy for this key and group";
/// The stream key holds another type (Redis's own text).
pub const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
/// The policy's DLQ key holds another type.
pub const WRONGTYPE_DLQ: &str =
    "WRONGTYPE the DLQ key holds the wrong kind of value (it must be a stream)";
/// A write on a replica (Redis's own text).
pub const READONLY: &str = "READONLY You can't write against a read only replica.";
/// A DLQ (of a policy or a redrive) named after a key the module keeps for itself.
pub const DLQ_IS_MODULE_KEY: &str = "ERR the DLQ key is a key the module keeps for itself (reclaim:policy:..., reclaim:redrive:..., reclaim:redrive-moved:...)";
/// The stream's policy key holds a value that is not a policy.
pub const POLICY_KEY_TAKEN: &str =
    "ERR the policy key of this stream holds a value that is not a reclaim policy";
/// A sweep (or read, or TERM) whose user may not append to the policy's DLQ (`XADD`).
pub const NOPERM_DLQ: &str = "NOPERM this user has no permissions to run XADD on the DLQ key";
/// A policy stopped by `RECLAIM.POLICY PAUSE`.
pub const PAUSED: &str =
    "ERR the policy of this key and group is paused (RECLAIM.POLICY RESUME resumes it)";
/// `reclaim.enabled no`.
pub const DISABLED: &str =
    "ERR reclaim is disabled on this server (CONFIG SET reclaim.enabled yes enables it)";
/// The key-permission error as Redis 7.x and Valkey word it.
pub const NOPERM_KEYS: &str =
    "NOPERM this user has no permissions to access one of the keys used as arguments";
/// The key-permission error as Redis 8.x words it.
pub const NOPERM_KEYS_8: &str = "NOPERM No permissions to access a key";

/// Asserts a key-permission error in the wording of the server under test.
pub fn assert_noperm_keys(got: &str, ctx: &str) {
    assert!(
        got == NOPERM_KEYS || got == NOPERM_KEYS_8,
        "{ctx}: got {got:?}"
    );
}

/// `RECLAIM.POLICY PAUSE` with words it does not take.
pub const PAUSE_SYNTAX: &str = "ERR syntax error: RECLAIM.POLICY PAUSE key group [STORM]";
