//! `DUMP` payloads taken apart and put back together: a payload with one byte string replaced
//! and its CRC-64 written again, as a client could craft it for `RESTORE` (Redis `cluster.c`'s
//! `verifyDumpPayload`: the body, the RDB version in 2 bytes, the CRC-64 Jones of both in 8 bytes,
//! little endian).

/// CRC-64 as Redis checks `DUMP` payloads with (Jones, the `crc` crate's `CRC_64_REDIS`).
pub fn crc64(data: &[u8]) -> u64 {
    const JONES: crc::Crc<u64> = crc::Crc::<u64>::new(&crc::CRC_64_REDIS);
    JONES.checksum(data)
}

/// `payload` with the first occurrence of `from` in its body replaced by `to` (panics when
/// there is none), its CRC-64 computed again: a payload `RESTORE` accepts, with content of the
/// test's choosing.
pub fn patch_dump(payload: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let signed = &payload[..payload.len() - 8];
    let at = signed
        .windows(from.len())
        .position(|w| w == from)
        .unwrap_or_else(|| panic!("{from:?} not in the payload {payload:?}"));
    let mut out = signed[..at].to_vec();
    out.extend_from_slice(to);
    out.extend_from_slice(&signed[at + from.len()..]);
    let crc = crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn crc64_is_redis_jones() {
        // Redis src/crc64.c's test vector.
        assert_eq!(super::crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }
}
