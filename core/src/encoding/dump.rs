//! The `DUMP` payload of a policy value, as the server writes it (`RM_Save*` into a module value,
//! Redis `rdb.c`/`cluster.c`), built without the server: the module writes it in the AOF
//! rewrite's child, where no command can run ([`payload`]); and read back ([`read`]: what
//! `RESTORE` checks and loads, for tests and tools).
//!
//! The layout: the type byte `RDB_TYPE_MODULE_2` (7), the module type's 64-bit id (the type
//! name's nine characters, six bits each, then the encoding version in ten bits) as an RDB length,
//! the value (each field an opcode, `UINT` 2 or `STRING` 5, then an RDB length, and a string's
//! bytes; a signed field is written as the unsigned of its bits, as `RM_SaveSigned` does), `EOF`
//! (0); then the RDB version (2 bytes, little endian) and the CRC-64 (Jones) of everything before
//! it (8 bytes, little endian).

use super::{load_set, save_set, PolicySet, Sink, Source, ENCODING_VERSION, TYPE_NAME};

/// The RDB version written in the payloads of [`payload`]: Redis 7.0's (10), the oldest server
/// the module runs on; every later server (and Valkey) restores payloads of older versions.
pub const DUMP_RDB_VERSION: u16 = 10;

/// `RDB_TYPE_MODULE_2`: a module value whose fields carry their opcodes.
const RDB_TYPE_MODULE_2: u8 = 7;
/// Module value opcodes (Redis `RDB_MODULE_OPCODE_*`).
const OPCODE_EOF: u8 = 0;
const OPCODE_UINT: u8 = 2;
const OPCODE_STRING: u8 = 5;

/// Why [`read`] refused a payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DumpError {
    /// Shorter than its footer, or its CRC-64 does not match.
    Checksum,
    /// Not a module value of the `reclaimpl` type.
    NotAPolicy,
    /// A `reclaimpl` value of an encoding version this module does not read.
    EncodingVersion(u64),
    /// The value's fields end early, hold a field of another kind, or a value no version writes.
    Garbled,
    /// Bytes after the value's `EOF`, or no `EOF`.
    Trailing,
}

/// The `DUMP` payload of `set`, with `rdb_version` in its footer.
pub fn payload(set: &PolicySet, rdb_version: u16) -> Vec<u8> {
    let mut d = Writer(vec![RDB_TYPE_MODULE_2]);
    rdb_len(&mut d.0, module_type_id(TYPE_NAME, ENCODING_VERSION));
    save_set(&mut d, set);
    d.0.push(OPCODE_EOF);
    d.0.extend_from_slice(&rdb_version.to_le_bytes());
    let crc = crc64(&d.0);
    d.0.extend_from_slice(&crc.to_le_bytes());
    d.0
}

/// The policy value a `DUMP` payload holds, checked as `RESTORE` checks it (footer, CRC-64, type,
/// encoding version, every field, `EOF` at the end; the RDB version in the footer is the
/// server's to judge). Strings as [`payload`] writes them, and
/// the integer encodings a server uses for short numeric strings; never a panic.
pub fn read(payload: &[u8]) -> Result<PolicySet, DumpError> {
    let Some(body_len) = payload.len().checked_sub(10) else {
        return Err(DumpError::Checksum);
    };
    let (body, footer) = payload.split_at(body_len);
    if crc64(&payload[..body_len + 2]).to_le_bytes() != footer[2..] {
        return Err(DumpError::Checksum);
    }
    let mut r = Reader(body);
    if r.byte() != Some(RDB_TYPE_MODULE_2) {
        return Err(DumpError::NotAPolicy);
    }
    let id = r.len().ok_or(DumpError::NotAPolicy)?;
    if id >> 10 != module_type_id(TYPE_NAME, 0) >> 10 {
        return Err(DumpError::NotAPolicy);
    }
    let encver = id & 1023;
    if !(1..=ENCODING_VERSION as u64).contains(&encver) {
        return Err(DumpError::EncodingVersion(encver));
    }
    let set = load_set(&mut r, encver as i32).ok_or(DumpError::Garbled)?;
    match r.0 {
        [OPCODE_EOF] => Ok(set),
        _ => Err(DumpError::Trailing),
    }
}

/// A payload being written.
struct Writer(Vec<u8>);

impl Sink for Writer {
    fn unsigned(&mut self, v: u64) {
        self.0.push(OPCODE_UINT);
        rdb_len(&mut self.0, v);
    }
    fn signed(&mut self, v: i64) {
        self.unsigned(v as u64);
    }
    fn bytes(&mut self, b: &[u8]) {
        self.0.push(OPCODE_STRING);
        rdb_len(&mut self.0, b.len() as u64);
        self.0.extend_from_slice(b);
    }
}

/// The rest of a payload being read.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn byte(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.0.len() {
            return None;
        }
        let (a, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(a)
    }

    fn be(&mut self, n: usize) -> Option<u64> {
        Some(
            self.take(n)?
                .iter()
                .fold(0, |a, &b| (a << 8) | u64::from(b)),
        )
    }

    /// An RDB length (Redis `rdbLoadLen`); `None` for a special encoding.
    fn len(&mut self) -> Option<u64> {
        let first = self.byte()?;
        match first >> 6 {
            0 => Some(u64::from(first & 0x3f)),
            1 => Some((u64::from(first & 0x3f) << 8) | u64::from(self.byte()?)),
            2 if first == 0x80 => self.be(4),
            2 if first == 0x81 => self.be(8),
            _ => None,
        }
    }

    /// A string whose length byte is a special encoding: an integer of 1, 2 or 4 bytes (little
    /// endian) as its decimal text (Redis `RDB_ENC_INT*`). Compressed strings (`RDB_ENC_LZF`)
    /// are not read.
    fn encoded_string(&mut self, first: u8) -> Option<Vec<u8>> {
        let v = match first & 0x3f {
            0 => i64::from(self.take(1)?[0] as i8),
            1 => i64::from(i16::from_le_bytes(self.take(2)?.try_into().ok()?)),
            2 => i64::from(i32::from_le_bytes(self.take(4)?.try_into().ok()?)),
            _ => return None,
        };
        Some(v.to_string().into_bytes())
    }
}

impl Source for Reader<'_> {
    fn unsigned(&mut self) -> Option<u64> {
        (self.byte()? == OPCODE_UINT).then_some(())?;
        self.len()
    }
    fn signed(&mut self) -> Option<i64> {
        self.unsigned().map(|v| v as i64)
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        (self.byte()? == OPCODE_STRING).then_some(())?;
        match self.0.first() {
            Some(&first) if first >> 6 == 3 => {
                self.0 = &self.0[1..];
                self.encoded_string(first)
            }
            _ => {
                let n = usize::try_from(self.len()?).ok()?;
                Some(self.take(n)?.to_vec())
            }
        }
    }
}

/// An RDB length (Redis `rdbSaveLen`): 6 bits, 14 bits, or a marker byte and 32 or 64 bits big
/// endian.
fn rdb_len(out: &mut Vec<u8>, n: u64) {
    if n < 1 << 6 {
        out.push(n as u8);
    } else if n < 1 << 14 {
        out.push(0x40 | (n >> 8) as u8);
        out.push(n as u8);
    } else if n <= u64::from(u32::MAX) {
        out.push(0x80);
        out.extend_from_slice(&(n as u32).to_be_bytes());
    } else {
        out.push(0x81);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// The 64-bit id of a module data type (Redis `moduleTypeEncodeId`).
fn module_type_id(name: &[u8; 9], encver: i32) -> u64 {
    const CHARSET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut id = 0u64;
    for c in name {
        let pos = CHARSET.iter().position(|x| x == c).unwrap_or(0) as u64;
        id = (id << 6) | pos;
    }
    (id << 10) | (encver as u64 & 1023)
}

/// CRC-64 as Redis checks `DUMP` payloads with (Jones, the `crc` crate's `CRC_64_REDIS`).
fn crc64(data: &[u8]) -> u64 {
    const JONES: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);
    JONES.checksum(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_is_redis_jones() {
        // Redis src/crc64.c's test vector.
        assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn rdb_lengths_both_ways() {
        let enc = |n: u64| {
            let mut v = Vec::new();
            rdb_len(&mut v, n);
            v
        };
        assert_eq!(enc(0), [0]);
        assert_eq!(enc(63), [63]);
        assert_eq!(enc(64), [0x40, 64]);
        assert_eq!(enc(16383), [0x7f, 0xff]);
        assert_eq!(enc(16384), [0x80, 0, 0, 0x40, 0]);
        assert_eq!(enc(1 << 32), [0x81, 0, 0, 0, 1, 0, 0, 0, 0]);
        for n in [
            0,
            63,
            64,
            16383,
            16384,
            u64::from(u32::MAX),
            1 << 32,
            u64::MAX,
        ] {
            let bytes = enc(n);
            let mut r = Reader(&bytes);
            assert_eq!(r.len(), Some(n));
            assert!(r.0.is_empty());
        }
    }

    #[test]
    fn integer_encoded_strings_read_as_their_text() {
        // RDB_ENC_INT8 -5, RDB_ENC_INT16 300, RDB_ENC_INT32 -70000, then LZF (refused).
        let mut r = Reader(&[
            5, 0xc0, 0xfb, 5, 0xc1, 0x2c, 0x01, 5, 0xc2, 0x90, 0xee, 0xfe, 0xff,
        ]);
        assert_eq!(r.bytes().as_deref(), Some(&b"-5"[..]));
        assert_eq!(r.bytes().as_deref(), Some(&b"300"[..]));
        assert_eq!(r.bytes().as_deref(), Some(&b"-70000"[..]));
        assert_eq!(Reader(&[5, 0xc3, 1, 1, 0]).bytes(), None);
    }

    #[test]
    fn a_payload_of_version_1_reads_with_the_defaults() {
        // What 0.1.0 wrote: stream, one group, MIN-IDLE, MAX-DELIVERIES, no DLQ, CLAIMANT,
        // COUNT, INTERVAL; nothing after.
        let mut w = Writer(vec![RDB_TYPE_MODULE_2]);
        rdb_len(&mut w.0, module_type_id(TYPE_NAME, 1));
        w.bytes(b"s");
        w.unsigned(1);
        w.bytes(b"g");
        w.signed(60_000);
        w.signed(0);
        w.unsigned(0);
        w.bytes(b"reclaimer");
        w.signed(100);
        w.signed(1000);
        w.0.push(OPCODE_EOF);
        w.0.extend_from_slice(&DUMP_RDB_VERSION.to_le_bytes());
        let crc = crc64(&w.0);
        w.0.extend_from_slice(&crc.to_le_bytes());
        let set = read(&w.0).unwrap();
        let p = &set.groups[&b"g"[..]];
        assert_eq!(set.stream, b"s");
        assert_eq!((p.min_idle_ms, p.count, p.interval_ms), (60_000, 100, 1000));
        assert_eq!(p.claimant, b"reclaimer");
        assert_eq!((p.dlq.as_ref(), p.storm, p.forget_idle_ms), (None, None, 0));
        assert_eq!(p.state, crate::policy::State::Active);
    }

    #[test]
    fn the_type_id_names_reclaimpl() {
        // What Redis 7.0.15 wrote for encoding version 5 (the SERVER_DUMP test's second to
        // ninth bytes): 0x81, then the id big endian.
        let mut v = Vec::new();
        rdb_len(&mut v, module_type_id(TYPE_NAME, 5));
        assert_eq!(v, [129, 173, 231, 37, 106, 41, 169, 148, 5]);
    }
}
