//! Policies as code: the JSON document of `RECLAIM.POLICY EXPORT` and `RECLAIM.POLICY IMPORT`
//! (pure: no Redis calls, unit-tested without a server).
//!
//! ```json
//! {
//!   "version": 1,
//!   "policies": [
//!     {
//!       "key": "orders",
//!       "group": "workers",
//!       "min-idle": 1000,
//!       "max-deliveries": 2,
//!       "dlq": "orders:dlq",
//!       "claimant": "reclaim",
//!       "count": 100,
//!       "interval": 10000,
//!       "backoff": { "exponential": 60000 },
//!       "liveness": 0,
//!       "storm": { "max": 50, "window": 60000 },
//!       "dlq-maxlen": 10000,
//!       "dlq-maxage": 604800000,
//!       "tombstones": true
//!     }
//!   ]
//! }
//! ```
//!
//! One [`PolicyDoc`](doc::PolicyDoc) per policy: its key and group, then one field per option of
//! `RECLAIM.POLICY SET`, named after the option in lower case. A field left out (or `null`) takes
//! the option's default, as an option left out of SET. Names (key, group, `dlq`, `claimant`) are
//! [`Name`](doc::Name)s: a JSON string when the bytes are UTF-8, else `{"hex": "..."}`.
//!
//! The policy's state (`active`, `paused`, `storm`: `RECLAIM.POLICY PAUSE`/`RESUME` and the
//! `STORM` breaker) is operational, not configuration: it is not exported, and a policy that
//! IMPORT replaces keeps its state (as `RECLAIM.POLICY SET` keeps it); a new one starts active.
//!
//! Import checks everything before anything is applied: the document's size, its JSON, its
//! version and its number of policies ([`parse_document`]), then each policy in order through
//! `RECLAIM.POLICY SET`'s own parser ([`PolicyDoc::to_policy`](doc::PolicyDoc::to_policy) builds SET's words and calls
//! [`policy::parse_set_options`](crate::policy::parse_set_options)), then that no (key, group) comes twice. Errors of one policy
//! name it: its index, key and group, and the field ([`ReclaimError::InPolicy`](crate::error::ReclaimError::InPolicy)). What needs the
//! keyspace (types, ACL, cluster slots, existing policies) is checked by the command handler.
//!
//! **A new option** is one `Option<...>` field of [`PolicyDoc`](doc::PolicyDoc) (named after the option), a line
//! in [`PolicyDoc::from_policy`](doc::PolicyDoc::from_policy) and one in [`PolicyDoc::set_words`](doc::PolicyDoc::set_words) (an option of several values
//! is a small object, as `storm`). Operational state is not configuration and gets no field. New optional
//! fields keep [`VERSION`]: old documents still import, and an older module refuses a document
//! that uses them (`unknown field`), which is right, since it could not honour them.
//!
//! Memory: a document is at most [`MAX_BYTES`] long and holds at most [`MAX_POLICIES`]
//! policies; each policy stays raw JSON text (borrowed from the argument) until it is checked,
//! and every value is read into its own type, so nothing grows beyond a small factor of the text.
//!
//! Where things are: `doc` holds the document's types ([`PolicyDoc`](doc::PolicyDoc), [`Name`](doc::Name), [`BackoffDoc`](doc::BackoffDoc),
//! [`StormDoc`](doc::StormDoc)) and writes a document ([`to_json`]); `parse` reads and checks one
//! ([`parse_document`], [`import_args`]); `errors` makes the errors of a policy name it
//! ([`in_policy`]) and parser messages safe for a reply.

mod doc;
mod errors;
mod parse;

pub use doc::to_json;
pub use errors::in_policy;
pub use parse::{import_args, parse_document, ImportArgs, Imported};

/// The version of the document this module writes and reads.
pub(crate) const VERSION: u64 = 1;
/// Most policies one `RECLAIM.POLICY IMPORT` takes.
pub(crate) const MAX_POLICIES: usize = 10_000;
/// Longest document `RECLAIM.POLICY IMPORT` takes, in bytes (16 MiB).
pub(crate) const MAX_BYTES: usize = 16 << 20;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{self, Policy};

    pub(super) fn pol(opts: &[&str]) -> Policy {
        let o: Vec<&[u8]> = opts.iter().map(|s| s.as_bytes()).collect();
        policy::parse_set_options(b"s", &o).unwrap()
    }

    pub(super) fn err(doc: &str) -> String {
        parse_document(doc.as_bytes()).unwrap_err().to_string()
    }

    /// A document of the given policy objects (JSON text each).
    pub(super) fn doc(entries: &[&str]) -> String {
        format!(r#"{{"version": 1, "policies": [{}]}}"#, entries.join(","))
    }
}
