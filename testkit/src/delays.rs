//! What a delayed `RECLAIM.NACK` leaves behind: the stream's delay key (a sorted set of
//! `<group>\0<id>` by due time), its NACK record key (a hash), and the fields of a DLQ entry.

use redis::{cmd, Connection};

/// The delay key of stream `s` (`reclaim:delay:{TAG}:STREAM`; with no hash tag in the name, the
/// whole name is the tag).
pub fn delay_key(s: &str) -> String {
    format!("reclaim:delay:{{{s}}}:{s}")
}

/// The NACK record key of stream `s` (`reclaim:nack:{TAG}:STREAM`, whole name as the tag).
pub fn nack_key(s: &str) -> String {
    format!("reclaim:nack:{{{s}}}:{s}")
}

/// The due time (server ms) of entry `id` of group `g` in the delay key of `s`, or `None` when it
/// holds no record of it.
pub fn delay_due(c: &mut Connection, s: &str, g: &str, id: &str) -> Option<i64> {
    let member = format!("{g}\0{id}");
    let due: Option<f64> = cmd("ZSCORE")
        .arg(delay_key(s))
        .arg(member.as_bytes())
        .query(c)
        .expect("ZSCORE of the delay key");
    due.map(|d| d as i64)
}

/// The value of field `name` among the flat `fields` of a stream entry (`None`: no such field).
pub fn flat_field<'a>(fields: &'a [Vec<u8>], name: &str) -> Option<&'a [u8]> {
    fields
        .chunks(2)
        .find(|kv| kv[0] == name.as_bytes())
        .map(|kv| kv[1].as_slice())
}
