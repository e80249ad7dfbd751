//! What every section uses: a server (the test kit's launcher, with the bench's settings) and
//! readings of the server's state (`RECLAIM.STATS`, `INFO`, `CONFIG GET`, `LATENCY LATEST`, the
//! PEL summary) with the checks that label a run "ok".

use super::*;

// ---------------------------------------------------------------------------------------------
// Server

/// A server for one section: the test kit's launcher (free port, temporary directory, `--save ""`,
/// killed on drop) with `--appendonly no`, and `latency-monitor-threshold 1` for the report's
/// `LATENCY LATEST`.
pub fn start_server() -> Res<Server> {
    let s = Server::start(&["--appendonly", "no"]);
    let mut c = bench_conn(&s)?;
    let _: () = cmd("CONFIG")
        .arg("SET")
        .arg("latency-monitor-threshold")
        .arg(1)
        .query(&mut c)?;
    Ok(s)
}

/// A connection whose replies may take 300 s (a client loop or script over 1,000,000 entries).
pub fn bench_conn(s: &Server) -> Res<Connection> {
    Ok(s.conn_with_read_timeout(Duration::from_secs(300)))
}

/// `RECLAIM.POLICY SET key group <options...>` (one round trip).
pub fn bench_policy_set(con: &mut Connection, key: &str, group: &str, options: &[&str]) -> Res<()> {
    let _: () = cmd("RECLAIM.POLICY")
        .arg("SET")
        .arg(key)
        .arg(group)
        .arg(options)
        .query(con)?;
    Ok(())
}

/// `RECLAIM.POLICY DEL key group`: 1 when the policy was there.
pub fn bench_policy_del(con: &mut Connection, key: &str, group: &str) -> Res<i64> {
    Ok(cmd("RECLAIM.POLICY")
        .arg("DEL")
        .arg(key)
        .arg(group)
        .query(con)?)
}

/// Runs `step(done, k)` for `total` items in chunks of at most `chunk` (`k` of them each time,
/// `done` handled before).
pub fn in_chunks(
    total: usize,
    chunk: usize,
    mut step: impl FnMut(usize, usize) -> Res<()>,
) -> Res<()> {
    let mut done = 0;
    while done < total {
        let k = chunk.min(total - done);
        step(done, k)?;
        done += k;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Readings

/// The server's CPU time so far (used_cpu_user + used_cpu_sys), in seconds.
pub fn server_cpu(con: &mut Connection) -> Res<f64> {
    let i: HashMap<String, String> = info(con, "cpu").into_iter().collect();
    let f = |k: &str| -> f64 { i.get(k).and_then(|v| v.parse().ok()).unwrap_or(0.0) };
    Ok(f("used_cpu_user") + f("used_cpu_sys"))
}

/// `RECLAIM.STATS key group` as name -> value (None when the policy does not exist).
pub fn stats_fields(
    con: &mut Connection,
    key: &str,
    group: &str,
) -> Option<HashMap<String, Value>> {
    let v: Value = cmd("RECLAIM.STATS").arg(key).arg(group).query(con).ok()?;
    Some(pairs(&v).into_iter().collect())
}

/// One integer field of [`stats_fields`] (0 when missing).
pub fn field_int(s: &HashMap<String, Value>, name: &str) -> i64 {
    s.get(name).map(int_of).unwrap_or(0)
}

/// `LATENCY LATEST` as printable lines.
pub fn latency_latest(con: &mut Connection) -> Vec<String> {
    let v: Value = cmd("LATENCY")
        .arg("LATEST")
        .query(con)
        .unwrap_or(Value::Nil);
    items(&v)
        .iter()
        .map(|e| {
            let f: Vec<String> = items(e)
                .iter()
                .map(|x| text(x).unwrap_or_default())
                .collect();
            match f.as_slice() {
                [ev, at, last, max, ..] => {
                    format!("{ev}: latest {last} ms (at unix {at}), max {max} ms")
                }
                _ => f.join(" "),
            }
        })
        .collect()
}

/// `XPENDING key group` (summary): (total, [(consumer, count)]).
pub fn pel_summary(con: &mut Connection, key: &str, group: &str) -> Res<(i64, Vec<(String, i64)>)> {
    let v: Value = cmd("XPENDING").arg(key).arg(group).query(con)?;
    let a = items(&v);
    let total = a.first().map(int_of).unwrap_or(0);
    let owners = a
        .get(3)
        .map(|o| {
            items(o)
                .iter()
                .map(|p| {
                    let p = items(p);
                    (text(&p[0]).unwrap_or_default(), int_of(&p[1]))
                })
                .collect()
        })
        .unwrap_or_default();
    Ok((total, owners))
}

/// "ok" when the group's PEL holds `n` entries, all owned by `owner`; else what it holds.
pub fn check_claimed(
    con: &mut Connection,
    key: &str,
    group: &str,
    owner: &str,
    n: usize,
) -> String {
    match pel_summary(con, key, group) {
        Ok((total, owners)) => {
            let mine = owners
                .iter()
                .find(|(o, _)| o == owner)
                .map(|x| x.1)
                .unwrap_or(0);
            if total == n as i64 && mine == n as i64 {
                "ok".into()
            } else {
                format!("MISMATCH: {total} pending, {mine} owned by {owner}")
            }
        }
        Err(e) => format!("MISMATCH: {e}"),
    }
}

/// "ok" when the group's PEL is empty and the DLQ holds `n` entries.
pub fn check_dead_lettered(
    con: &mut Connection,
    key: &str,
    group: &str,
    dlq: &str,
    n: usize,
) -> String {
    let pending = pel_summary(con, key, group).map(|p| p.0).unwrap_or(-1);
    let len = xlen(con, dlq);
    if pending == 0 && len == n as i64 {
        "ok".into()
    } else {
        format!("MISMATCH: {pending} still pending, DLQ holds {len}")
    }
}
