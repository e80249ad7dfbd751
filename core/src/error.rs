//! Every client-facing error of redis-reclaim, in one place.
//!
//! Errors follow Redis conventions: a prefix word (`ERR`, `WRONGTYPE`, `NOPERM`) and a message.
//! Integration tests assert these exact strings (see `tests/commands.rs`), and `docs/commands.md`
//! lists them.

use std::fmt;

/// Standard Redis message for a key that holds another type (same text as `XADD` on a string key,
/// Redis 7.0 `shared.wrongtypeerr`).
pub const WRONGTYPE_STREAM: &str =
    "WRONGTYPE Operation against a key holding the wrong kind of value";
/// The DLQ key exists and is not a stream.
pub const WRONGTYPE_DLQ: &str =
    "WRONGTYPE the DLQ key holds the wrong kind of value (it must be a stream)";
/// `RECLAIM.SWEEP` / `RECLAIM.STATS` of a (key, group) that has no policy.
pub const NO_POLICY: &str = "ERR no reclaim policy for this key and group";
/// `MAX-DELIVERIES` above 0 without `DLQ`.
pub(crate) const MAX_DELIVERIES_NEEDS_DLQ: &str = "ERR MAX-DELIVERIES above 0 needs a DLQ key";
/// `DLQ-MAXLEN` above 0 without `DLQ`.
pub(crate) const DLQ_MAXLEN_NEEDS_DLQ: &str = "ERR DLQ-MAXLEN above 0 needs a DLQ key";
/// `DLQ-MAXAGE` above 0 without `DLQ`.
pub(crate) const DLQ_MAXAGE_NEEDS_DLQ: &str = "ERR DLQ-MAXAGE above 0 needs a DLQ key";
/// `TOMBSTONES yes` without `DLQ`.
pub(crate) const TOMBSTONES_NEEDS_DLQ: &str = "ERR TOMBSTONES yes needs a DLQ key";
/// `TOMBSTONES` with a value other than `yes` or `no`.
pub(crate) const TOMBSTONES_SYNTAX: &str = "ERR TOMBSTONES must be yes or no";
/// `DLQ` names the stream the policy watches.
pub(crate) const DLQ_IS_STREAM: &str = "ERR the DLQ key must differ from the stream key";
/// `DLQ` (of `RECLAIM.POLICY SET`/`IMPORT`/`SIMULATE`) or the DLQ of `RECLAIM.REDRIVE` names a
/// key in the module's own namespace ([`crate::keys::is_module_key`]).
pub const DLQ_IS_MODULE_KEY: &str = "ERR the DLQ key is a key the module keeps for itself (reclaim:policy:..., reclaim:redrive:..., reclaim:redrive-moved:...)";
/// `RECLAIM.REDRIVE ... SOURCE key group` with a key in the module's own namespace.
pub const SOURCE_IS_MODULE_KEY: &str = "ERR the SOURCE key is a key the module keeps for itself (reclaim:policy:..., reclaim:redrive:..., reclaim:redrive-moved:...)";
/// `RECLAIM.REDRIVE dlq SOURCE key group` with `key` equal to `dlq`: the task would delete the
/// stream's own entries.
pub const REDRIVE_DLQ_IS_SOURCE: &str = "ERR the DLQ key must differ from the SOURCE key";
/// `RECLAIM.REDRIVE dlq` where `dlq` is the stream of a reclaim policy (a work stream, not a DLQ).
pub const REDRIVE_DLQ_IS_WORK_STREAM: &str =
    "ERR the DLQ key is the stream of a reclaim policy (a work stream, not a DLQ)";
/// The policy key of the stream exists but holds something else (written by hand).
pub const POLICY_KEY_TAKEN: &str =
    "ERR the policy key of this stream holds a value that is not a reclaim policy";
/// An ID that is not a stream ID (Redis's own text).
pub const INVALID_ID: &str = "ERR Invalid stream ID specified as stream command argument";
/// `RECLAIM.NACK ... DELAY` that is not a non-negative integer.
pub const DELAY_RANGE: &str = "ERR DELAY must be an integer from 0 to 2592000000 (ms, 30 days)";
/// `RECLAIM.NACK ... DELAY d` longer than [`crate::policy::MAX_DELAY_MS`]: (d, the idle
/// that makes the first of the caller's entries due; a client may give that back instead).
pub fn delay_too_long(d: i64, due: i64) -> ReclaimError {
    ReclaimError::Redis(format!(
        "ERR DELAY {d} is longer than {due}, the idle (ms) after which the entry is due, and than 2592000000 (30 days), the longest delay"
    ))
}
/// `RECLAIM.NACK ... DELAY` that parks entries while the stream's delay key holds another type.
pub const WRONGTYPE_DELAY_KEY: &str =
    "WRONGTYPE the delay key of this stream (reclaim:delay:{...}) holds a value that is not a sorted set";
/// `RECLAIM.NACK ... REASON` while the stream's NACK record key holds another type.
pub const WRONGTYPE_NACK_KEY: &str =
    "WRONGTYPE the NACK record key of this stream (reclaim:nack:{...}) holds a value that is not a hash";
/// `RECLAIM.NACK ... REASON` longer than [`crate::policy::MAX_REASON_BYTES`].
pub const REASON_TOO_LONG: &str = "ERR REASON is longer than 1024 bytes";
/// `RECLAIM.TERM` on a policy without a DLQ.
pub const TERM_NEEDS_DLQ: &str = "ERR the policy of this key and group has no DLQ";
/// A `BACKOFF` that is none of its three forms.
pub(crate) const BACKOFF_SYNTAX: &str =
    "ERR BACKOFF takes FIXED, EXPONENTIAL max-ms or LIST ms [ms ...]";
/// `BACKOFF LIST` with no value, or too many.
pub(crate) const BACKOFF_LIST_LENGTH: &str = "ERR BACKOFF LIST takes 1 to 64 values (ms)";
/// `BACKOFF EXPONENTIAL max-ms` below `MIN-IDLE`.
pub(crate) const BACKOFF_BELOW_MIN_IDLE: &str =
    "ERR BACKOFF EXPONENTIAL max-ms must be at least MIN-IDLE";
/// `RECLAIM.READGROUP` with an option it does not know, or without `STREAMS` (Redis's own text).
pub const SYNTAX: &str = "ERR syntax error";
/// `RECLAIM.READGROUP` without `GROUP group consumer`.
pub(crate) const READGROUP_NO_GROUP: &str = "ERR Missing GROUP option for RECLAIM.READGROUP";
/// `RECLAIM.READGROUP` with an odd number of arguments after `STREAMS`.
pub(crate) const READGROUP_UNBALANCED: &str = "ERR Unbalanced RECLAIM.READGROUP list of streams: for each stream key the ID '>' must be specified.";
/// `RECLAIM.READGROUP` with an ID other than `>`.
pub(crate) const READGROUP_ONLY_NEW: &str = "ERR RECLAIM.READGROUP reads with the ID '>' only: read a consumer's own history with XREADGROUP";
/// `RECLAIM.READGROUP ... NOACK`.
pub(crate) const READGROUP_NOACK: &str =
    "ERR RECLAIM.READGROUP does not take NOACK: entries read without a PEL entry cannot be redelivered (use XREADGROUP)";
/// `RECLAIM.READGROUP ... BLOCK` from a script (as XREADGROUP answers).
pub const READGROUP_BLOCK_IN_SCRIPT: &str =
    "ERR RECLAIM.READGROUP command is not allowed with BLOCK option from scripts";
/// `COUNT` that is not an integer (Redis's own text).
pub(crate) const NOT_AN_INTEGER: &str = "ERR value is not an integer or out of range";
/// `BLOCK` that is not an integer (Redis's own text).
pub(crate) const TIMEOUT_NOT_INTEGER: &str = "ERR timeout is not an integer or out of range";
/// `BLOCK` below 0 (Redis's own text).
pub(crate) const TIMEOUT_NEGATIVE: &str = "ERR timeout is negative";
/// A blocked `RECLAIM.READGROUP` whose stream was deleted meanwhile (XREADGROUP's text).
pub const UNBLOCKED_NO_STREAM: &str = "UNBLOCKED the stream key no longer exists";
/// A blocked `RECLAIM.READGROUP` whose group was destroyed meanwhile (XREADGROUP's text).
pub const UNBLOCKED_NO_GROUP: &str =
    "NOGROUP the consumer group this client was blocked on no longer exists";
/// How a blocked `RECLAIM.READGROUP` ends when `MIGRATE` moved its stream away while its slot
/// migrates to `to` (`ip:port`), as a blocked XREADGROUP does on Redis 7.2+ (the server's own
/// redirect: the client asks the node that now holds the key).
pub fn ask(slot: u16, to: &[u8]) -> String {
    format!("ASK {slot} {}", String::from_utf8_lossy(to))
}
/// `RECLAIM.POLICY IMPORT` of a document longer than [`crate::export::MAX_BYTES`].
pub(crate) const IMPORT_TOO_LARGE: &str =
    "ERR the policy document is longer than 16777216 bytes (16 MiB): split it";
/// `RECLAIM.POLICY IMPORT` of a document with more than [`crate::export::MAX_POLICIES`] policies.
pub(crate) const IMPORT_TOO_MANY: &str =
    "ERR the policy document holds more than 10000 policies: split it";
/// `RECLAIM.POLICY IMPORT` without `REPLACE` of a policy whose (key, group) has one already
/// (said of one policy of the document, see [`ReclaimError::InPolicy`]).
pub const IMPORT_EXISTS: &str =
    "ERR this key and group have a policy already (IMPORT ... REPLACE replaces it)";
/// `RECLAIM.POLICY IMPORT` in Redis Cluster of a policy whose DLQ is in another slot than its
/// stream (what the server answers `RECLAIM.POLICY SET` with, as `CROSSSLOT`).
pub const IMPORT_CROSSSLOT: &str =
    "CROSSSLOT the DLQ key must hash to the stream key's slot (use a hash tag, e.g. {orders}:dlq)";
/// `RECLAIM.POLICY IMPORT` in Redis Cluster of a policy whose stream's slot this node does not
/// serve (or while the cluster is down).
pub const IMPORT_NOT_SERVED: &str =
    "ERR this node does not serve the stream key's hash slot (import each node's own policies there)";
/// The key a refused check names ([`ReclaimError::NoPerm`]): the stream of a policy (or of a read).
pub(crate) const KEY_STREAM: &str = "the stream key";
/// ... the stream's delay key (`RECLAIM.NACK ... DELAY` longer than an entry's due idle).
pub(crate) const KEY_DELAY: &str = "the delay key";
/// ... the stream's NACK records (`RECLAIM.NACK ... REASON`).
pub(crate) const KEY_NACK: &str = "the NACK record key";
/// ... the DLQ of a policy (or of `RECLAIM.REDRIVE`).
pub const KEY_DLQ: &str = "the DLQ key";
/// ... the `SOURCE` stream of `RECLAIM.REDRIVE`.
pub const KEY_SOURCE: &str = "the SOURCE key";
/// ... the streams of the policies whose DLQ a `RECLAIM.REDRIVE` without `SOURCE` moves back to.
pub const KEY_DLQ_STREAMS: &str =
    "the streams of the policies that use this DLQ (use SOURCE key group)";
/// `RECLAIM.POLICY IMPORT ... LOCAL` while the Redis Cluster is down (the server's own text).
pub const CLUSTERDOWN: &str = "CLUSTERDOWN The cluster is down";
/// A command that would move or dead-letter under a policy that `RECLAIM.POLICY PAUSE` paused.
pub(crate) const POLICY_PAUSED: &str =
    "ERR the policy of this key and group is paused (RECLAIM.POLICY RESUME resumes it)";
/// A dead-letter refused because the policy's `STORM` breaker is open (or this one would open it).
pub const STORM_OPEN: &str =
    "ERR the STORM breaker of this policy is open: no dead-letters until RECLAIM.POLICY RESUME";
/// A command that would move or dead-letter while `reclaim.enabled` is `no`.
pub(crate) const DISABLED: &str =
    "ERR reclaim is disabled on this server (CONFIG SET reclaim.enabled yes enables it)";
/// `RECLAIM.POLICY PAUSE key group <word>` with a word other than `STORM`.
pub const PAUSE_SYNTAX: &str = "ERR syntax error: RECLAIM.POLICY PAUSE key group [STORM]";
/// `RECLAIM.REDRIVE dlq` while a redrive of that DLQ runs (one task per DLQ at a time).
pub const REDRIVE_RUNNING: &str =
    "ERR a redrive of this DLQ is running already (RECLAIM.REDRIVE CANCEL dlq cancels it)";
/// `RECLAIM.REDRIVE dlq` of a key that does not exist.
pub const REDRIVE_NO_DLQ: &str = "ERR no such DLQ key";
/// `RECLAIM.REDRIVE ... IDS n` followed by fewer than `n` words.
pub const REDRIVE_IDS_SHORT: &str = "ERR IDS n needs n entry IDs";
/// `RECLAIM.REDRIVE ... CANARY k` without `WINDOW ms`, or `WINDOW` without `CANARY`.
pub(crate) const REDRIVE_CANARY_WINDOW: &str = "ERR CANARY k and WINDOW ms go together";
/// `RECLAIM.REDRIVE` whose task key (`reclaim:redrive:{TAG}:DLQ`) holds something else.
pub const REDRIVE_KEY_TAKEN: &str =
    "ERR the redrive key of this DLQ holds a value that is not a redrive task";
/// `RECLAIM.REDRIVE` whose moved-set key (`reclaim:redrive-moved:{TAG}:DLQ`) holds something else.
pub const REDRIVE_MOVED_KEY_TAKEN: &str =
    "ERR the redrive-moved key of this DLQ holds a value that is not a set of redriven entries";
/// `RECLAIM.REDRIVE` (start or `CANCEL`) on a replica (the text Redis gives a write there).
pub const READONLY: &str = "READONLY You can't write against a read only replica.";
/// Any panic caught at the FFI boundary (a bug: the server keeps running, the log has details).
pub const INTERNAL: &str = "ERR internal error in the reclaim module (see the server log)";

/// Everything a command can answer with instead of a result: the one error type of every command
/// handler. `Display` gives the exact wire text; `ffi::command::run_command` sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReclaimError {
    /// An option name that is not known for this command. Carries the option as typed.
    UnknownOption(String),
    /// An option given twice. Carries the canonical (upper-case) option name.
    RepeatedOption(&'static str),
    /// An option given as the last argument, without its value.
    MissingValue(&'static str),
    /// A numeric option whose value is not an integer in range. Carries the option name and the
    /// human-readable range, e.g. `("COUNT", "an integer from 1 to 10000")`.
    BadNumber(&'static str, &'static str),
    /// A fixed message from the constants above.
    Static(&'static str),
    /// An error reply of a command the module ran for the caller, passed on as Redis wrote it
    /// (printable): `WRONGTYPE ...`, `NOGROUP ...`.
    Redis(String),
    /// `RECLAIM.READGROUP` on a stream key that does not exist or has no such group; carries the
    /// key and the group (printable). Same text as XREADGROUP's.
    NoGroup(String, String),
    /// A `RECLAIM.POLICY IMPORT` document that is not JSON or not shaped as a policy document;
    /// carries the JSON parser's message (printable, bounded), with its line and column.
    Document(String),
    /// A `RECLAIM.POLICY IMPORT` document of a version this module does not read: (its version,
    /// the one this module reads).
    DocumentVersion(u64, u64),
    /// A message of the JSON parser about one value (printable, bounded), e.g. `invalid type:
    /// string "x", expected i64`: said of one policy (see [`ReclaimError::InPolicy`]).
    Json(String),
    /// `RECLAIM.POLICY IMPORT` of a document that holds (key, group) twice: the index of the first.
    Duplicate(usize),
    /// An error of one policy of a `RECLAIM.POLICY IMPORT` document, naming it.
    InPolicy(Box<InPolicy>),
    /// The caller's ACL does not allow what the module would do for it, checked as the Redis
    /// command that would do the same ([`crate::access`]): (that command, the key it acts
    /// on: [`KEY_STREAM`], [`KEY_DLQ`], [`KEY_SOURCE`], [`KEY_DLQ_STREAMS`]).
    NoPerm(&'static str, &'static str),
    /// A command that would act under a stored policy that cannot run where it is: carries why
    /// (the error `RECLAIM.POLICY SET` would answer for its options there, see
    /// `Policy::fault_at`).
    Invalid(Box<ReclaimError>),
}

/// Most bytes of an error reply's text ([`wire`]): a longer one is cut at a character boundary
/// and ends with `...`.
const MAX_WIRE_BYTES: usize = 4096;

/// The exact text an error reply carries for `text` (what follows `-` on the wire): the text as
/// it is, UTF-8 included, but for the three bytes neither a C string (`RM_ReplyWithError` takes
/// one) nor a RESP error line may hold, written as two characters each: NUL as `\0`, CR as
/// `\r`, LF as `\n`. At most [`MAX_WIRE_BYTES`]; an empty text becomes `ERR`. Every error of
/// every command goes through here (`ffi::command::reply_error`), so no byte a client sent, in
/// any name, can break the reply or the server.
pub fn wire(text: &str) -> Vec<u8> {
    if text.is_empty() {
        return b"ERR".to_vec();
    }
    let mut out = Vec::with_capacity(text.len().min(MAX_WIRE_BYTES));
    for c in text.chars() {
        let mut buf = [0u8; 4];
        let enc: &[u8] = match c {
            '\0' => b"\\0",
            '\r' => b"\\r",
            '\n' => b"\\n",
            _ => c.encode_utf8(&mut buf).as_bytes(),
        };
        if out.len() + enc.len() > MAX_WIRE_BYTES - 3 {
            out.extend_from_slice(b"...");
            break;
        }
        out.extend_from_slice(enc);
    }
    out
}

/// The message of an error without its code word (`ERR`, `CROSSSLOT`, ...): why a stored policy
/// is invalid, as `RECLAIM.STATS` (`invalid: <reason>`), `RECLAIM.POLICY GET`, `RECLAIM.HEALTH`
/// and the log show it.
pub fn reason(e: &ReclaimError) -> String {
    let text = e.to_string();
    match text.split_once(' ') {
        Some((_, msg)) => msg.to_string(),
        None => text,
    }
}

/// Where in a `RECLAIM.POLICY IMPORT` document an error is, and the error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InPolicy {
    /// Index of the policy in the document's `policies` array (from 0, as `jq .policies[i]`).
    pub(crate) index: usize,
    /// Its key and group, when they could be read.
    pub(crate) key: Option<Vec<u8>>,
    pub(crate) group: Option<Vec<u8>>,
    /// The field the error is about (`min-idle`, `dlq`...), when it is about one.
    pub(crate) field: Option<String>,
    /// The error, with its own prefix (`ERR`, `WRONGTYPE`, `NOPERM`, `CROSSSLOT`), which the
    /// message keeps in front.
    pub(crate) error: ReclaimError,
}

impl fmt::Display for InPolicy {
    /// `<PREFIX> policies[<index>] (key '<key>', group '<group>'), field '<field>': <message>`,
    /// without the field part when the error is about no one field; a key or group that could
    /// not be read shows as `?`. Names are [`crate::text::printable`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = self.error.to_string();
        let (code, msg) = inner.split_once(' ').unwrap_or(("ERR", inner.as_str()));
        let name = |n: &Option<Vec<u8>>| match n {
            Some(b) => format!("'{}'", crate::text::printable(b)),
            None => "?".to_string(),
        };
        write!(
            f,
            "{code} policies[{}] (key {}, group {})",
            self.index,
            name(&self.key),
            name(&self.group)
        )?;
        if let Some(field) = &self.field {
            write!(f, ", field '{field}'")?;
        }
        write!(f, ": {msg}")
    }
}

impl fmt::Display for ReclaimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReclaimError::UnknownOption(o) => write!(f, "ERR unknown option '{o}'"),
            ReclaimError::RepeatedOption(o) => write!(f, "ERR option {o} given more than once"),
            ReclaimError::MissingValue(o) => write!(f, "ERR option {o} needs a value"),
            ReclaimError::BadNumber(o, range) => write!(f, "ERR {o} must be {range}"),
            ReclaimError::Static(s) => f.write_str(s),
            ReclaimError::Redis(e) => f.write_str(e),
            ReclaimError::NoGroup(k, g) => write!(
                f,
                "NOGROUP No such key '{k}' or consumer group '{g}' in XREADGROUP with GROUP option"
            ),
            ReclaimError::Document(m) => write!(f, "ERR the policy document is not valid: {m}"),
            ReclaimError::DocumentVersion(v, reads) => write!(
                f,
                "ERR the policy document has version {v}: this module reads version {reads}"
            ),
            ReclaimError::Json(m) => write!(f, "ERR {m}"),
            ReclaimError::Duplicate(first) => write!(
                f,
                "ERR the document has a policy for this key and group already, at policies[{first}]"
            ),
            ReclaimError::InPolicy(p) => p.fmt(f),
            ReclaimError::NoPerm(command, key) => write!(
                f,
                "NOPERM this user has no permissions to run {command} on {key}"
            ),
            ReclaimError::Invalid(why) => write!(
                f,
                "ERR the policy of this key and group is invalid where it is ({}): RECLAIM.POLICY SET replaces it",
                reason(why)
            ),
        }
    }
}

impl From<&'static str> for ReclaimError {
    /// One of the fixed messages above.
    fn from(s: &'static str) -> Self {
        ReclaimError::Static(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_texts() {
        assert_eq!(
            ReclaimError::UnknownOption("FOO".into()).to_string(),
            "ERR unknown option 'FOO'"
        );
        assert_eq!(
            ReclaimError::RepeatedOption("COUNT").to_string(),
            "ERR option COUNT given more than once"
        );
        assert_eq!(
            ReclaimError::MissingValue("DLQ").to_string(),
            "ERR option DLQ needs a value"
        );
        assert_eq!(
            ReclaimError::BadNumber("COUNT", "an integer from 1 to 10000").to_string(),
            "ERR COUNT must be an integer from 1 to 10000"
        );
        assert_eq!(
            ReclaimError::NoPerm("XADD", KEY_DLQ).to_string(),
            "NOPERM this user has no permissions to run XADD on the DLQ key"
        );
    }

    #[test]
    fn wire_texts_keep_utf8_and_escape_line_breaks() {
        assert_eq!(
            wire("ERR unknown field `Ā`"),
            "ERR unknown field `Ā`".as_bytes()
        );
        assert_eq!(wire("ERR a\r\nb\0c"), b"ERR a\\r\\nb\\0c");
        assert_eq!(wire(""), b"ERR");
        let long = format!("ERR {}", "é".repeat(5000));
        let w = wire(&long);
        assert!(w.len() <= MAX_WIRE_BYTES && w.ends_with(b"..."));
        assert!(std::str::from_utf8(&w).is_ok());
    }

    /// Every error that carries a name or a text from the client, with that name or text made
    /// of `b` (as the handlers build them: names through `printable`, JSON and server messages
    /// as text).
    fn errors_naming(b: &[u8]) -> Vec<ReclaimError> {
        let name = crate::text::printable(b);
        let text = String::from_utf8_lossy(b).into_owned();
        let in_policy = |error| {
            ReclaimError::InPolicy(Box::new(InPolicy {
                index: 7,
                key: Some(b.to_vec()),
                group: Some(b.to_vec()),
                field: Some(text.clone()),
                error,
            }))
        };
        vec![
            ReclaimError::UnknownOption(name.clone()),
            ReclaimError::Redis(text.clone()),
            ReclaimError::NoGroup(name.clone(), name.clone()),
            ReclaimError::Document(text.clone()),
            ReclaimError::Json(text.clone()),
            in_policy(ReclaimError::Json(text.clone())),
            in_policy(WRONGTYPE_DLQ.into()),
            ReclaimError::Invalid(Box::new(ReclaimError::Redis(text.clone()))),
        ]
    }

    proptest::proptest! {
        /// Whatever bytes a client puts in a name, the reply text of every error is a valid C
        /// string and a valid RESP error line, UTF-8, bounded.
        #[test]
        fn every_error_reply_is_well_formed(b in proptest::collection::vec(proptest::num::u8::ANY, 0..300), s in ".{0,200}") {
            let mut all = errors_naming(&b);
            all.extend(errors_naming(s.as_bytes()));
            for e in all {
                let w = wire(&e.to_string());
                proptest::prop_assert!(!w.is_empty() && w.len() <= MAX_WIRE_BYTES);
                proptest::prop_assert!(!w.iter().any(|c| matches!(c, 0 | b'\r' | b'\n')));
                proptest::prop_assert!(std::str::from_utf8(&w).is_ok());
                proptest::prop_assert!(std::ffi::CString::new(w).is_ok());
            }
        }

        /// Text short enough comes back whole: each escape reads back as its byte.
        #[test]
        fn wire_is_lossless_below_the_bound(s in ".{0,500}") {
            proptest::prop_assume!(!s.is_empty());
            let w = String::from_utf8(wire(&s)).unwrap();
            let back = w.replace("\\0", "\0").replace("\\r", "\r").replace("\\n", "\n");
            let plain = !s.contains('\\');
            if plain {
                proptest::prop_assert_eq!(back, s);
            }
        }
    }

    #[test]
    fn in_policy_keeps_the_prefix_in_front() {
        let e = |field: Option<&str>, error: ReclaimError| {
            ReclaimError::InPolicy(Box::new(InPolicy {
                index: 3,
                key: Some(b"orders\r\n".to_vec()),
                group: None,
                field: field.map(String::from),
                error,
            }))
            .to_string()
        };
        assert_eq!(
            e(Some("dlq"), WRONGTYPE_DLQ.into()),
            "WRONGTYPE policies[3] (key 'orders??', group ?), field 'dlq': the DLQ key holds the wrong kind of value (it must be a stream)"
        );
        assert_eq!(
            e(None, ReclaimError::Duplicate(1)),
            "ERR policies[3] (key 'orders??', group ?): the document has a policy for this key and group already, at policies[1]"
        );
    }
}
