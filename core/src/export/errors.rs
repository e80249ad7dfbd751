//! Errors of an import: a policy's errors name it (index, key, group, field: [`in_policy`]),
//! and parser messages are made safe for an error reply.

use crate::error::{InPolicy, ReclaimError};

/// Longest parser message quoted in an error (characters).
const MAX_MESSAGE: usize = 240;

/// A parser message made safe for an error reply: control characters as `?`, at most
/// [`MAX_MESSAGE`] characters (then `...`).
pub(super) fn message(s: &str) -> String {
    let mut out: String = s
        .chars()
        .take(MAX_MESSAGE)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if s.chars().count() > MAX_MESSAGE {
        out.push_str("...");
    }
    out
}

/// What JSON value `text` starts with, as serde names it, when it is not an object (serde's derive
/// would read an array as the fields in order, which a document must not rely on); `None` for an
/// object, or for text that is no JSON value (the parser's error then says where).
pub(super) fn not_an_object(text: &[u8]) -> Option<&'static str> {
    let first = text.iter().find(|b| !b.is_ascii_whitespace())?;
    Some(match first {
        b'{' => return None,
        b'[' => "sequence",
        b'"' => "string",
        b't' | b'f' => "boolean",
        b'n' => "null",
        b'-' | b'0'..=b'9' => "number",
        // Not JSON at all: the parser says where.
        _ => return None,
    })
}

/// A serde_json error without its position (which would count from the entry, not the document).
pub(super) fn without_position(e: &serde_json::Error) -> String {
    let s = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    s.strip_suffix(&suffix).unwrap_or(&s).to_string()
}

/// The error `error` of policy `index` of a document, naming it.
pub fn in_policy(
    index: usize,
    key: Option<&[u8]>,
    group: Option<&[u8]>,
    field: Option<&str>,
    error: ReclaimError,
) -> ReclaimError {
    ReclaimError::InPolicy(Box::new(InPolicy {
        index,
        key: key.map(<[u8]>::to_vec),
        group: group.map(<[u8]>::to_vec),
        field: field.map(str::to_string),
        error,
    }))
}

#[cfg(test)]
mod tests {
    use crate::export::tests::{doc, err};

    /// Each of `cases` (a policy object, the error of a document of it after a good one).
    fn second_policy_errors(cases: &[(&str, &str)]) {
        let ok = r#"{"key": "a", "group": "g"}"#;
        for (entry, want) in cases {
            assert_eq!(err(&doc(&[ok, entry])), *want, "{entry}");
        }
    }

    #[test]
    fn option_errors_name_the_policy_and_the_field() {
        // SET's own errors, with the field.
        second_policy_errors(&[
            (
                r#"{"key": "orders", "group": "workers", "min-idle": 0}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'min-idle': MIN-IDLE must be a positive integer (ms)",
            ),
            (
                r#"{"key": "orders", "group": "workers", "count": 10001}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'count': COUNT must be an integer from 1 to 10000",
            ),
            (
                r#"{"key": "orders", "group": "workers", "max-deliveries": 3}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'max-deliveries': MAX-DELIVERIES above 0 needs a DLQ key",
            ),
            (
                r#"{"key": "orders", "group": "workers", "dlq-maxlen": 10}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'dlq-maxlen': DLQ-MAXLEN above 0 needs a DLQ key",
            ),
            (
                r#"{"key": "orders", "group": "workers", "dlq": "d", "dlq-maxage": -1}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'dlq-maxage': DLQ-MAXAGE must be a non-negative integer (ms)",
            ),
            (
                r#"{"key": "orders", "group": "workers", "tombstones": true}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'tombstones': TOMBSTONES yes needs a DLQ key",
            ),
            (
                r#"{"key": "orders", "group": "workers", "dlq": "orders"}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'dlq': the DLQ key must differ from the stream key",
            ),
            (
                r#"{"key": "orders", "group": "workers", "dlq": "reclaim:policy:{x}:x"}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'dlq': the DLQ key is a key the module keeps for itself (reclaim:policy:..., reclaim:redrive:..., reclaim:redrive-moved:...)",
            ),
            (
                r#"{"key": "orders", "group": "workers", "min-idle": 1000, "backoff": {"exponential": 999}}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'backoff': BACKOFF EXPONENTIAL max-ms must be at least MIN-IDLE",
            ),
            (
                r#"{"key": "orders", "group": "workers", "backoff": {"list": []}}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'backoff': BACKOFF LIST takes 1 to 64 values (ms)",
            ),
            (
                r#"{"key": "orders", "group": "workers", "backoff": {"list": [1, 0]}}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'backoff': BACKOFF must be a list of positive integers (ms) after LIST",
            ),
            (
                r#"{"key": "orders", "group": "workers", "liveness": -1}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'liveness': LIVENESS must be a non-negative integer (ms)",
            ),
            (
                r#"{"key": "orders", "group": "workers", "storm": {"max": 0, "window": 1000}}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'storm': STORM must be two positive integers: the most dead-letters, then the window (ms)",
            ),
            (
                r#"{"key": "orders", "group": "workers", "storm": {"max": 5}}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'storm': missing field `window`",
            ),
            (
                r#"{"key": "orders", "group": "workers", "storm": {"max": 5, "window": 1, "state": "paused"}}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'storm': unknown field `state`, expected `max` or `window`",
            ),
            (
                r#"{"key": "orders", "group": "workers", "state": "paused"}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'state': unknown field `state`, expected one of `key`, `group`, `min-idle`, `max-deliveries`, `dlq`, `claimant`, `count`, `interval`, `backoff`, `liveness`, `storm`, `dlq-maxlen`, `dlq-maxage`, `tombstones`, `forget-idle`",
            ),
        ]);
    }

    #[test]
    fn policy_errors_name_the_policy_and_the_field() {
        second_policy_errors(&[
            // Types: the JSON parser's message, with the field.
            (
                r#"{"key": "orders", "group": "workers", "min-idle": 1.5}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'min-idle': invalid type: floating point `1.5`, expected i64",
            ),
            (
                r#"{"min-idle": "1000", "key": "orders", "group": "workers"}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'min-idle': invalid type: string \"1000\", expected i64",
            ),
            (
                r#"{"key": "orders", "group": "workers", "interval": 9223372036854775808}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'interval': invalid value: integer `9223372036854775808`, expected i64",
            ),
            (
                r#"{"key": "orders", "group": "workers", "backoff": "slow"}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'backoff': unknown variant `slow`, expected one of `fixed`, `exponential`, `list`",
            ),
            (
                r#"{"key": "orders", "group": "workers", "dlq": {"hex": "6"}}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'dlq': \"hex\" must hold two hexadecimal digits per byte",
            ),
            (
                r#"{"key": 5, "group": "workers"}"#,
                "ERR policies[1] (key ?, group 'workers'), field 'key': invalid type: integer `5`, expected a string or {\"hex\": \"...\"}",
            ),
            (
                r#"{"key": "orders"}"#,
                "ERR policies[1] (key 'orders', group ?): missing field `group`",
            ),
            (
                r#"{"key": "orders", "group": "workers", "min_idle": 5}"#,
                "ERR policies[1] (key 'orders', group 'workers'), field 'min_idle': unknown field `min_idle`, expected one of `key`, `group`, `min-idle`, `max-deliveries`, `dlq`, `claimant`, `count`, `interval`, `backoff`, `liveness`, `storm`, `dlq-maxlen`, `dlq-maxage`, `tombstones`, `forget-idle`",
            ),
            (
                r#"{"key": "orders", "group": "workers", "count": 1, "count": 2}"#,
                "ERR policies[1] (key 'orders', group 'workers'): duplicate field `count`",
            ),
            (
                r#"["a", "g"]"#,
                "ERR policies[1] (key ?, group ?): invalid type: sequence, expected a policy object",
            ),
            (
                "null",
                "ERR policies[1] (key ?, group ?): invalid type: null, expected a policy object",
            ),
            // Names are shown printable and bounded.
            (
                r#"{"key": {"hex": "ff0d0a"}, "group": "g", "count": 0}"#,
                "ERR policies[1] (key '???', group 'g'), field 'count': COUNT must be an integer from 1 to 10000",
            ),
            // Twice the same key and group.
            (
                r#"{"key": "a", "group": "g", "count": 5}"#,
                "ERR policies[1] (key 'a', group 'g'): the document has a policy for this key and group already, at policies[0]",
            ),
        ]);
        // A bad field's text never breaks the reply.
        let e = err(&doc(&[r#"{"key": "a", "group": "g", "a\r\nb": 1}"#]));
        assert!(!e.contains(['\r', '\n']), "{e}");
    }
}
