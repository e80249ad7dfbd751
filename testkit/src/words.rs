//! Commands given as words (`&["XADD", "s", "1-0", "f", "v"]`), for tests that read best as the
//! commands a person would type; binary-safe ones given as byte strings ([`bin_cmd`], [`args!`]).

use redis::{cmd, Connection, Value};

/// Runs a command given as words; panics with the command and the error on failure.
pub fn run(c: &mut Connection, args: &[&str]) -> Value {
    let mut k = cmd(args[0]);
    for a in &args[1..] {
        k.arg(*a);
    }
    k.query(c).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Runs a command given as words and converts its reply; panics with the command on error.
pub fn q<T: redis::FromRedisValue>(c: &mut Connection, args: &[&str]) -> T {
    let v = run(c, args);
    redis::from_redis_value(v.clone()).unwrap_or_else(|e| panic!("{args:?} -> {v:?}: {e}"))
}

/// `EXISTS k` is 1.
pub fn exists(c: &mut Connection, k: &str) -> bool {
    q::<i64>(c, &["EXISTS", k]) == 1
}

/// Appends `n` entries `n 0`, `n 1`, ... to `s`, one `XADD s * n <i>` each; returns their IDs.
pub fn add_numbered(c: &mut Connection, s: &str, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| q(c, &["XADD", s, "*", "n", &i.to_string()]))
        .collect()
}

/// `XREADGROUP GROUP g consumer [COUNT n] STREAMS s >`: delivers new entries to `consumer`.
pub fn deliver(c: &mut Connection, s: &str, g: &str, consumer: &str, count: Option<u64>) {
    let n = count.map(|n| n.to_string());
    let mut a = vec!["XREADGROUP", "GROUP", g, consumer];
    if let Some(n) = &n {
        a.push("COUNT");
        a.push(n);
    }
    a.extend_from_slice(&["STREAMS", s, ">"]);
    run(c, &a);
}

/// A `Vec<&[u8]>` of byte-string arguments of any lengths: `args![b"SET", key, b"COUNT", b"5"]`.
#[macro_export]
macro_rules! args {
    ($($x:expr),* $(,)?) => {
        vec![$(&$x[..] as &[u8]),*]
    };
}

/// The command `name args...`, from binary-safe arguments.
pub fn bin_cmd(name: &str, args: &[&[u8]]) -> redis::Cmd {
    let mut c = cmd(name);
    for a in args {
        c.arg(*a);
    }
    c
}

/// The words of `text` (split at spaces) as byte strings, for the binary-safe helpers:
/// `&words("MIN-IDLE 5 DLQ d")`. Arguments that are empty, hold a space or are not text are given
/// with [`args!`] instead.
pub fn words(text: &str) -> Vec<&[u8]> {
    text.split(' ').map(str::as_bytes).collect()
}
