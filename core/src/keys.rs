//! Where a stream's policies live in the keyspace (pure; unit-tested without a server).
//!
//! All policies of one stream live in one key of the module's own data type, named
//! `reclaim:policy:{TAG}:STREAM`, where TAG makes the key hash to the same Redis Cluster slot as
//! the stream, so the policies migrate with their stream:
//! - the stream's own hash tag when it has one (`{orders}:in` -> `orders`);
//! - otherwise the whole stream name, when it contains no `}` and is not empty (`orders`);
//! - otherwise (rare: names like `a}b` or the empty name) the first short string, in a fixed
//!   enumeration, with the same slot as the stream (from a table built once).
//!
//! The key name is unique per stream: TAG never contains `}`, so the stream name is whatever follows
//! the first `}:`. The cluster slot rule (CRC16 of the tag modulo 16384) is Redis's `keyHashSlot`
//! (Redis 3.0+ cluster.c).

/// Prefix of every policy key.
pub const POLICY_KEY_PREFIX: &[u8] = b"reclaim:policy:";

/// CRC16-CCITT (XMODEM), the checksum Redis Cluster uses for key slots (the `crc` crate's table).
fn crc16(data: &[u8]) -> u16 {
    const XMODEM: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);
    XMODEM.checksum(data)
}

/// The hash tag of a key as Redis Cluster defines it: the bytes between the first `{` and the
/// next `}`, when that is not empty.
fn hash_tag(key: &[u8]) -> Option<&[u8]> {
    let open = key.iter().position(|&b| b == b'{')?;
    let close = key[open + 1..].iter().position(|&b| b == b'}')?;
    if close == 0 {
        None
    } else {
        Some(&key[open + 1..open + 1 + close])
    }
}

/// The Redis Cluster slot (0..16383) of a key.
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key).unwrap_or(key)) & 0x3fff
}

/// The tag used in the policy key of `stream` (see the module docs).
fn policy_tag(stream: &[u8]) -> Vec<u8> {
    if let Some(t) = hash_tag(stream) {
        return t.to_vec();
    }
    if !stream.is_empty() && !stream.contains(&b'}') {
        return stream.to_vec();
    }
    SLOT_TAGS[key_slot(stream) as usize].clone()
}

lazy_static::lazy_static! {
    /// For each slot, the first string of the enumeration `#0`, `#1`, ... `#z`, `#00`, ... (base 36,
    /// least significant digit first) that hashes to it. Built once, on first use (about 160k CRC16
    /// computations of 2 to 5 bytes).
    static ref SLOT_TAGS: Vec<Vec<u8>> = {
        const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
        let mut table: Vec<Vec<u8>> = vec![Vec::new(); 16384];
        let mut left = 16384;
        for n in 0u32..36 * 36 * 36 * 36 {
            let mut s = Vec::with_capacity(5);
            let mut m = n;
            s.push(b'#');
            loop {
                s.push(DIGITS[(m % 36) as usize]);
                m /= 36;
                if m == 0 {
                    break;
                }
            }
            let slot = (crc16(&s) & 0x3fff) as usize;
            if table[slot].is_empty() {
                table[slot] = s;
                left -= 1;
                if left == 0 {
                    break;
                }
            }
        }
        table
    };
}

/// The name of the key that holds `stream`'s policies: `reclaim:policy:{TAG}:STREAM`.
pub fn policy_key(stream: &[u8]) -> Vec<u8> {
    let tag = policy_tag(stream);
    let mut k = Vec::with_capacity(POLICY_KEY_PREFIX.len() + tag.len() + stream.len() + 3);
    k.extend_from_slice(POLICY_KEY_PREFIX);
    k.push(b'{');
    k.extend_from_slice(&tag);
    k.extend_from_slice(b"}:");
    k.extend_from_slice(stream);
    k
}

/// Prefix of the key that holds a stream's parked entries (a sorted set): `RECLAIM.NACK ...
/// DELAY` longer than an idle time can express.
const DELAY_KEY_PREFIX: &[u8] = b"reclaim:delay:";

/// The key of `stream`'s parked entries (a sorted set: member [`delay_member`], score the
/// wall-clock ms they are due): `reclaim:delay:{TAG}:STREAM`, in the stream's slot.
pub fn delay_key(stream: &[u8]) -> Vec<u8> {
    tagged(DELAY_KEY_PREFIX, stream)
}

/// A parked entry's member in [`delay_key`]: the group's name, a NUL byte, the entry ID (IDs
/// hold no NUL, so [`split_delay_member`] splits at the last one, whatever the group holds).
pub fn delay_member(group: &[u8], id: &[u8]) -> Vec<u8> {
    [group, b"\0", id].concat()
}

/// The (group, entry ID) of a [`delay_member`]; `None` for a member of another shape.
pub fn split_delay_member(member: &[u8]) -> Option<(&[u8], &[u8])> {
    let nul = member.iter().rposition(|&b| b == 0)?;
    let (group, id) = (&member[..nul], &member[nul + 1..]);
    (!id.is_empty() && id.iter().all(|&b| b.is_ascii_digit() || b == b'-')).then_some((group, id))
}

/// Prefix of the key that holds the last `RECLAIM.NACK ... REASON` of a stream's entries (a hash).
const NACK_KEY_PREFIX: &[u8] = b"reclaim:nack:";

/// The key of `stream`'s NACK records (a hash: field [`delay_member`] of the entry, value
/// [`nack_record`]): `reclaim:nack:{TAG}:STREAM`, in the stream's slot.
pub fn nack_key(stream: &[u8]) -> Vec<u8> {
    tagged(NACK_KEY_PREFIX, stream)
}

/// A NACK record: the entry's delivery count when it was given back, the consumer that gave it
/// back and its reason: `<count>:<consumer length>:<consumer><reason>` (binary-safe).
pub fn nack_record(count: i64, consumer: &[u8], reason: &[u8]) -> Vec<u8> {
    let head = format!("{count}:{}:", consumer.len());
    [head.as_bytes(), consumer, reason].concat()
}

/// The (count, consumer, reason) of a [`nack_record`]; `None` for a value of another shape.
pub fn parse_nack_record(v: &[u8]) -> Option<(i64, &[u8], &[u8])> {
    let c1 = v.iter().position(|&b| b == b':')?;
    let count = crate::text::parse_i64(&v[..c1])?;
    let rest = &v[c1 + 1..];
    let c2 = rest.iter().position(|&b| b == b':')?;
    let len: usize = std::str::from_utf8(&rest[..c2]).ok()?.parse().ok()?;
    let body = &rest[c2 + 1..];
    (len <= body.len()).then(|| (count, &body[..len], &body[len..]))
}

/// Prefix of the key that holds a DLQ's `RECLAIM.REDRIVE` task (a hash).
pub const REDRIVE_KEY_PREFIX: &[u8] = b"reclaim:redrive:";
/// Prefix of the key that holds the entries a running redrive task moved (a set).
pub const REDRIVE_MOVED_PREFIX: &[u8] = b"reclaim:redrive-moved:";

/// `prefix{TAG}:NAME`, with TAG as in [`policy_tag`]: the key shares `name`'s slot.
fn tagged(prefix: &[u8], name: &[u8]) -> Vec<u8> {
    let tag = policy_tag(name);
    let mut k = Vec::with_capacity(prefix.len() + tag.len() + name.len() + 3);
    k.extend_from_slice(prefix);
    k.push(b'{');
    k.extend_from_slice(&tag);
    k.extend_from_slice(b"}:");
    k.extend_from_slice(name);
    k
}

/// The key of `dlq`'s redrive task (a hash): `reclaim:redrive:{TAG}:DLQ`, in the DLQ's slot.
pub fn redrive_key(dlq: &[u8]) -> Vec<u8> {
    tagged(REDRIVE_KEY_PREFIX, dlq)
}

/// The key of the set of entries `dlq`'s running redrive task moved back:
/// `reclaim:redrive-moved:{TAG}:DLQ`, in the DLQ's slot.
pub fn redrive_moved_key(dlq: &[u8]) -> Vec<u8> {
    tagged(REDRIVE_MOVED_PREFIX, dlq)
}

/// Whether `name` is in the module's own key namespace: a policy key (`reclaim:policy:...`), a
/// redrive task key (`reclaim:redrive:...`), a redrive moved-set key
/// (`reclaim:redrive-moved:...`) or a stream's parked entries (`reclaim:delay:...`). By prefix, so that no such name can be a DLQ, a redrive's DLQ or
/// its `SOURCE` key, whether or not the module made that key yet (a name of another shape under
/// these prefixes is refused too: the namespace is the module's).
pub fn is_module_key(name: &[u8]) -> bool {
    [
        POLICY_KEY_PREFIX,
        REDRIVE_KEY_PREFIX,
        REDRIVE_MOVED_PREFIX,
        DELAY_KEY_PREFIX,
        NACK_KEY_PREFIX,
    ]
    .iter()
    .any(|p| name.starts_with(p))
}

/// The stream whose policies a key named `name` holds, when `name` is a well-formed policy key
/// (exactly [`policy_key`] of that stream); `None` otherwise.
pub fn stream_of_policy_key(name: &[u8]) -> Option<Vec<u8>> {
    let rest = name.strip_prefix(POLICY_KEY_PREFIX)?.strip_prefix(b"{")?;
    let close = rest.iter().position(|&b| b == b'}')?;
    let stream = rest[close + 1..].strip_prefix(b":")?;
    (policy_key(stream) == name).then(|| stream.to_vec())
}

/// Where this node is migrating `slot` to, from its `CLUSTER NODES` text: the `ip:port` of the
/// node named in the `[<slot>->-<node-id>]` of the `myself` line (what a client's `ASK` names),
/// or `None` when the slot is not migrating.
pub fn migrating_target(nodes: &[u8], slot: u16) -> Option<Vec<u8>> {
    let lines = || nodes.split(|&b| b == b'\n').map(|l| l.trim_ascii());
    let fields =
        |l: &[u8]| -> Vec<Vec<u8>> { l.split(|&b| b == b' ').map(<[u8]>::to_vec).collect() };
    let me = lines().map(fields).find(|f| {
        f.get(2)
            .is_some_and(|fl| fl.split(|&b| b == b',').any(|x| x == b"myself"))
    })?;
    let open = format!("[{slot}->-").into_bytes();
    let target = me.iter().skip(8).find_map(|f| {
        let id = f.strip_prefix(open.as_slice())?.strip_suffix(b"]")?;
        Some(id.to_vec())
    })?;
    let node = lines().map(fields).find(|f| f.first() == Some(&target))?;
    // `ip:port@cport[,hostname]`
    let addr = node.get(1)?;
    let end = addr.iter().position(|&b| b == b'@').unwrap_or(addr.len());
    Some(addr[..end].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_keys_and_members() {
        assert_eq!(delay_key(b"orders"), b"reclaim:delay:{orders}:orders");
        assert_eq!(delay_key(b"{app}:in"), b"reclaim:delay:{app}:{app}:in");
        assert_eq!(key_slot(&delay_key(b"a}b")), key_slot(b"a}b"));
        assert!(is_module_key(&delay_key(b"x")));
        let m = delay_member(b"g\0with nul", b"1-2");
        assert_eq!(
            split_delay_member(&m),
            Some((&b"g\0with nul"[..], &b"1-2"[..]))
        );
        assert_eq!(split_delay_member(b"no separator"), None);
        assert_eq!(split_delay_member(b"g\0"), None);
        assert_eq!(split_delay_member(b"g\0x-1"), None);
        assert_eq!(nack_key(b"orders"), b"reclaim:nack:{orders}:orders");
        let r = nack_record(3, b"w:1", b"timed out: 5 s\0\xff");
        assert_eq!(
            parse_nack_record(&r),
            Some((3, &b"w:1"[..], &b"timed out: 5 s\0\xff"[..]))
        );
        assert_eq!(parse_nack_record(b"3:9:w"), None);
        assert_eq!(parse_nack_record(b"x:1:w"), None);
        assert_eq!(parse_nack_record(b"garbage"), None);
    }

    #[test]
    fn migrating_targets_come_from_cluster_nodes() {
        let text = b"\
a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460 [15->-b2] [16-<-c3]\r\n\
b2 127.0.0.1:7001@17001,host-b master - 0 0 2 connected 5461-10922\r\n\
c3 127.0.0.1:7002@17002 master - 0 0 3 connected 10923-16383\r\n";
        assert_eq!(migrating_target(text, 15), Some(b"127.0.0.1:7001".to_vec()));
        // Importing, or not open at all: no target.
        assert_eq!(migrating_target(text, 16), None);
        assert_eq!(migrating_target(text, 1), None);
        assert_eq!(migrating_target(b"", 15), None);
    }

    #[test]
    fn known_slots() {
        // Values from `CLUSTER KEYSLOT` on Redis 7.0.
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") & 0x3fff);
    }

    #[test]
    fn policy_key_shapes() {
        assert_eq!(
            policy_key(b"orders"),
            b"reclaim:policy:{orders}:orders".to_vec()
        );
        assert_eq!(
            policy_key(b"{app}:in"),
            b"reclaim:policy:{app}:{app}:in".to_vec()
        );
    }

    #[test]
    fn same_slot_as_stream_for_odd_names() {
        for s in [
            &b"orders"[..],
            b"{a}b",
            b"a}b",
            b"",
            b"}",
            b"{}x",
            b"x{y",
            b"\xff\x00{",
            b"{{a}}",
        ] {
            assert_eq!(key_slot(&policy_key(s)), key_slot(s), "stream {s:?}");
        }
    }

    #[test]
    fn stream_from_policy_key() {
        for st in [&b"orders"[..], b"{app}:in", b"a}b", b"", b"x:y}"] {
            assert_eq!(stream_of_policy_key(&policy_key(st)).as_deref(), Some(st));
        }
        assert_eq!(stream_of_policy_key(b"reclaim:policy:{a}:b"), None); // b's key has tag b
        assert_eq!(stream_of_policy_key(b"orders"), None);
    }

    #[test]
    fn redrive_keys_share_the_dlq_slot() {
        assert_eq!(
            redrive_key(b"orders:dlq"),
            b"reclaim:redrive:{orders:dlq}:orders:dlq".to_vec()
        );
        assert_eq!(
            redrive_moved_key(b"{o}:dlq"),
            b"reclaim:redrive-moved:{o}:{o}:dlq".to_vec()
        );
        for d in [&b"{o}:dlq"[..], b"a}b", b"", b"dlq"] {
            assert_eq!(key_slot(&redrive_key(d)), key_slot(d));
            assert_eq!(key_slot(&redrive_moved_key(d)), key_slot(d));
        }
    }

    #[test]
    fn module_namespace() {
        for d in [&b"orders"[..], b"{o}:dlq", b"", b"a}b"] {
            assert!(is_module_key(&policy_key(d)));
            assert!(is_module_key(&redrive_key(d)));
            assert!(is_module_key(&redrive_moved_key(d)));
        }
        assert!(is_module_key(b"reclaim:redrive-moved:{x}:x"));
        assert!(is_module_key(b"reclaim:policy:junk"));
        for d in [
            &b"orders:dlq"[..],
            b"reclaim:",
            b"reclaim:redrive",
            b"Reclaim:policy:x",
            b"",
        ] {
            assert!(!is_module_key(d), "{d:?}");
        }
    }

    #[test]
    fn every_slot_has_a_tag() {
        assert!(SLOT_TAGS
            .iter()
            .enumerate()
            .all(|(slot, t)| !t.is_empty() && key_slot(t) as usize == slot));
    }

    proptest::proptest! {
        #[test]
        fn policy_key_always_shares_the_slot(s in proptest::collection::vec(proptest::num::u8::ANY, 0..20)) {
            proptest::prop_assert_eq!(key_slot(&policy_key(&s)), key_slot(&s));
        }
    }

    proptest::proptest! {
        /// Every key the module makes for a stream or a DLQ is in that key's slot and in the
        /// module's own namespace; a policy key reads back as its stream.
        #[test]
        fn module_keys_share_the_slot_and_read_back(s in proptest::collection::vec(proptest::num::u8::ANY, 0..24)) {
            let slot = key_slot(&s);
            for k in [policy_key(&s), delay_key(&s), nack_key(&s), redrive_key(&s), redrive_moved_key(&s)] {
                proptest::prop_assert_eq!(key_slot(&k), slot);
                proptest::prop_assert!(is_module_key(&k));
            }
            proptest::prop_assert_eq!(stream_of_policy_key(&policy_key(&s)), Some(s.clone()));
            // A stream's name is never taken for a policy key unless it is one.
            if !s.starts_with(POLICY_KEY_PREFIX) {
                proptest::prop_assert_eq!(stream_of_policy_key(&s), None);
            }
        }

        /// A hash tag decides the slot: `{tag}` anywhere after text without `{`.
        #[test]
        fn a_hash_tag_decides_the_slot(pre in "[^{]{0,6}", tag in "[^}]{1,8}", post in ".{0,8}") {
            let key = format!("{pre}{{{tag}}}{post}");
            proptest::prop_assert_eq!(key_slot(key.as_bytes()), key_slot(tag.as_bytes()));
        }

        /// A delay member splits back into its group and ID, whatever bytes the group holds.
        #[test]
        fn delay_members_round_trip(group in proptest::collection::vec(proptest::num::u8::ANY, 0..16), ms in proptest::num::u64::ANY, seq in proptest::num::u64::ANY) {
            let id = format!("{ms}-{seq}");
            let m = delay_member(&group, id.as_bytes());
            proptest::prop_assert_eq!(split_delay_member(&m), Some((&group[..], id.as_bytes())));
        }

        /// A NACK record reads back as written, whatever the consumer and the reason hold.
        #[test]
        fn nack_records_round_trip(count in proptest::num::i64::ANY, consumer in proptest::collection::vec(proptest::num::u8::ANY, 0..16), reason in proptest::collection::vec(proptest::num::u8::ANY, 0..32)) {
            let r = nack_record(count, &consumer, &reason);
            proptest::prop_assert_eq!(parse_nack_record(&r), Some((count, &consumer[..], &reason[..])));
        }
    }
}
