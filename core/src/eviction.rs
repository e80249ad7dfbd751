//! Whether the server's `maxmemory` settings let it evict the module's keys (policy keys, streams
//! under a policy, DLQs, redrive task keys), and the words the module says it in: the value of
//! `eviction-risk` in `RECLAIM.HEALTH` and `RECLAIM.POLICY GET`, and the one warning of the log.
//! Pure: the settings and what passes saw of TTLs come in as values.
//!
//! - `noeviction`, or `maxmemory` 0: no risk;
//! - `allkeys-*` with `maxmemory` above 0: any key can go, always a risk;
//! - `volatile-*` with `maxmemory` above 0: only keys with a TTL can go, a risk while one of the
//!   module's keys has one (`ttl_key`: the first such key the module knows of).

use crate::text::printable;

/// The eviction risk to the module's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Risk {
    /// The server cannot evict them.
    None,
    /// `allkeys-*`: the server may evict any key, the module's included.
    AllKeys,
    /// `volatile-*`, and one of the module's keys has a TTL: that key may be evicted.
    Volatile,
}

/// The server's memory settings as the module last read them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// `maxmemory-policy` (ASCII, as `CONFIG GET` answers it; empty: not read yet).
    pub policy: String,
    /// `maxmemory` in bytes (0: no limit).
    pub maxmemory: u64,
}

impl Settings {
    /// The risk under these settings, `ttl_key` being one of the module's keys with a TTL, if any.
    pub fn risk(&self, ttl_key: Option<&(i32, Vec<u8>)>) -> Risk {
        if self.maxmemory == 0 {
            Risk::None
        } else if self.policy.starts_with("allkeys-") {
            Risk::AllKeys
        } else if self.policy.starts_with("volatile-") && ttl_key.is_some() {
            Risk::Volatile
        } else {
            Risk::None
        }
    }

    /// The value of `eviction-risk` (`RECLAIM.HEALTH`, `RECLAIM.POLICY GET`): `no`, or `yes: `
    /// and why.
    pub fn reason(&self, ttl_key: Option<&(i32, Vec<u8>)>) -> String {
        match (self.risk(ttl_key), ttl_key) {
            (Risk::AllKeys, _) => format!(
                "yes: maxmemory-policy {} with maxmemory {} can evict policy keys, streams under a policy, DLQs and redrive keys",
                self.policy, self.maxmemory
            ),
            (Risk::Volatile, Some((db, key))) => format!(
                "yes: maxmemory-policy {} with maxmemory {} can evict '{}' (db {db}), which has a TTL",
                self.policy,
                self.maxmemory,
                printable(key)
            ),
            _ => "no".to_string(),
        }
    }

    /// The log line when the risk becomes `risk` (logged once per change): what may be lost
    /// and what to set instead; when it ends, that it did.
    pub fn warning(&self, risk: Risk, ttl_key: Option<&(i32, Vec<u8>)>) -> String {
        const LOST: &str = "policy keys (their policies are lost), streams under a policy (with their groups and PELs), DLQs (their dead letters) and redrive task keys";
        const INSTEAD: &str = "set maxmemory-policy noeviction, or a volatile-* policy with no TTL on these keys (docs/configuration.md, Memory and eviction)";
        match (risk, ttl_key) {
            (Risk::AllKeys, _) => format!(
                "reclaim: eviction risk: maxmemory-policy {} with maxmemory {} lets the server evict {LOST} when memory runs out; {INSTEAD}",
                self.policy, self.maxmemory
            ),
            (Risk::Volatile, Some((db, key))) => format!(
                "reclaim: eviction risk: maxmemory-policy {} with maxmemory {} lets the server evict keys with a TTL, and the module's key '{}' (db {db}) has one: {LOST} with a TTL can be lost when memory runs out; PERSIST them, or {INSTEAD}",
                self.policy,
                self.maxmemory,
                printable(key)
            ),
            _ => format!(
                "reclaim: eviction risk gone: maxmemory-policy {} with maxmemory {} cannot evict the module's keys",
                self.policy, self.maxmemory
            ),
        }
    }
}

/// Reads `CONFIG GET maxmemory maxmemory-policy`'s pairs (name, value; in any order) into
/// settings; `None` when either is missing or `maxmemory` is not a number. The policy name is
/// kept only when short and printable ASCII.
pub fn settings_of<'a>(pairs: impl IntoIterator<Item = (&'a [u8], &'a [u8])>) -> Option<Settings> {
    let (mut policy, mut maxmemory) = (None, None);
    for (name, value) in pairs {
        match name {
            b"maxmemory" => maxmemory = std::str::from_utf8(value).ok()?.parse::<u64>().ok(),
            b"maxmemory-policy"
                if value.len() <= 32 && value.iter().all(|b| b.is_ascii_graphic()) =>
            {
                policy = Some(String::from_utf8_lossy(value).into_owned())
            }
            _ => {}
        }
    }
    Some(Settings {
        policy: policy?,
        maxmemory: maxmemory?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(policy: &str, maxmemory: u64) -> Settings {
        Settings {
            policy: policy.into(),
            maxmemory,
        }
    }

    #[test]
    fn the_risk_follows_the_policy_the_limit_and_ttls() {
        let ttl = (0, b"orders:dlq".to_vec());
        assert_eq!(s("allkeys-lru", 1 << 20).risk(None), Risk::AllKeys);
        assert_eq!(s("allkeys-random", 1).risk(Some(&ttl)), Risk::AllKeys);
        assert_eq!(s("allkeys-lru", 0).risk(Some(&ttl)), Risk::None);
        assert_eq!(s("noeviction", 1 << 20).risk(Some(&ttl)), Risk::None);
        assert_eq!(s("volatile-lru", 1 << 20).risk(None), Risk::None);
        assert_eq!(s("volatile-ttl", 1 << 20).risk(Some(&ttl)), Risk::Volatile);
        assert_eq!(s("volatile-lfu", 0).risk(Some(&ttl)), Risk::None);
    }

    #[test]
    fn the_reason_and_the_warning_say_what_and_why() {
        let ttl = (2, b"a\nb".to_vec());
        assert_eq!(s("noeviction", 5).reason(None), "no");
        assert_eq!(
            s("allkeys-lru", 5).reason(None),
            "yes: maxmemory-policy allkeys-lru with maxmemory 5 can evict policy keys, streams under a policy, DLQs and redrive keys"
        );
        assert_eq!(
            s("volatile-lru", 5).reason(Some(&ttl)),
            "yes: maxmemory-policy volatile-lru with maxmemory 5 can evict 'a?b' (db 2), which has a TTL"
        );
        let w = s("allkeys-lfu", 7).warning(Risk::AllKeys, None);
        assert!(
            w.starts_with("reclaim: eviction risk: maxmemory-policy allkeys-lfu with maxmemory 7")
        );
        assert!(w.contains("set maxmemory-policy noeviction"), "{w}");
        let w = s("volatile-lru", 7).warning(Risk::Volatile, Some(&ttl));
        assert!(w.contains("'a?b' (db 2) has one"), "{w}");
        assert_eq!(
            s("noeviction", 7).warning(Risk::None, None),
            "reclaim: eviction risk gone: maxmemory-policy noeviction with maxmemory 7 cannot evict the module's keys"
        );
    }

    #[test]
    fn settings_come_from_config_get_pairs() {
        let got = settings_of([
            (&b"maxmemory-policy"[..], &b"allkeys-lru"[..]),
            (b"maxmemory", b"20971520"),
        ]);
        assert_eq!(got, Some(s("allkeys-lru", 20971520)));
        assert_eq!(settings_of([(&b"maxmemory"[..], &b"x"[..])]), None);
        assert_eq!(settings_of([(&b"maxmemory"[..], &b"1"[..])]), None);
        let long = [b'a'; 40];
        assert_eq!(
            settings_of([
                (&b"maxmemory"[..], &b"1"[..]),
                (b"maxmemory-policy", &long[..])
            ]),
            None
        );
    }
}
