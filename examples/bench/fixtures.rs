//! Building streams and PELs server-side, in chunks of `CHUNK` entries per script call (the Lua
//! scripts are in `lua/`).

use super::*;

/// Appends ARGV[1] entries `n <ARGV[2]+i> body <ARGV[3]>` to KEYS[1].
const FILL: &str = include_str!("lua/fill.lua");
/// Delivers up to ARGV[3] new entries of KEYS[1] to consumer ARGV[2] of group ARGV[1].
const READ_ALL: &str = include_str!("lua/read_all.lua");
/// Sets the delivery count of up to ARGV[4] pending entries after ARGV[3] (`-` or `(id`) to
/// ARGV[5], owner unchanged; returns the last ID handled ('' when none).
const RAISE: &str = include_str!("lua/raise.lua");
/// Streams `pol:<i>` for i in [ARGV[1], ARGV[1]+ARGV[2]), each with ARGV[3] entries, group `g`
/// and every entry pending for `dead`.
pub const MANY: &str = include_str!("lua/many.lua");
/// Method (4): one batch of the dead-letter move as a Lua script. KEYS: stream, dlq. ARGV: group,
/// consumer, min-idle, cursor, count. Returns {next cursor, moved}.
pub const LUA_DLQ: &str = include_str!("lua/dlq_best.lua");

pub fn load_script(con: &mut Connection, body: &str) -> Res<String> {
    Ok(cmd("SCRIPT").arg("LOAD").arg(body).query(con)?)
}

pub fn build_stream(con: &mut Connection, key: &str, n: usize) -> Res<()> {
    let sha = load_script(con, FILL)?;
    in_chunks(n, CHUNK, |done, k| {
        let _: i64 = cmd("EVALSHA")
            .arg(&sha)
            .arg(1)
            .arg(key)
            .arg(&[k, done])
            .arg(BODY)
            .query(con)?;
        Ok(())
    })
}

/// A new group over the whole stream, every entry delivered once to `dead`.
pub fn build_pel(con: &mut Connection, key: &str, group: &str) -> Res<usize> {
    let _: () = cmd("XGROUP")
        .arg("CREATE")
        .arg(key)
        .arg(group)
        .arg("0")
        .query(con)?;
    let sha = load_script(con, READ_ALL)?;
    let mut total = 0usize;
    loop {
        let got: i64 = cmd("EVALSHA")
            .arg(&sha)
            .arg(1)
            .arg(key)
            .arg(group)
            .arg(DEAD)
            .arg(CHUNK)
            .query(con)?;
        total += got as usize;
        if (got as usize) < CHUNK {
            return Ok(total);
        }
    }
}

/// Sets every pending entry's delivery count to `count` (XCLAIM ... RETRYCOUNT count JUSTID).
pub fn raise_counts(con: &mut Connection, key: &str, group: &str, count: i64) -> Res<()> {
    let sha = load_script(con, RAISE)?;
    let mut start = "-".to_string();
    loop {
        let last: String = cmd("EVALSHA")
            .arg(&sha)
            .arg(1)
            .arg(key)
            .arg(group)
            .arg(DEAD)
            .arg(&start)
            .arg(1000)
            .arg(count)
            .query(con)?;
        if last.is_empty() {
            return Ok(());
        }
        start = format!("({last}");
    }
}
