//! Commands given as words (`&["XADD", "s", "1-0", "f", "v"]`), for tests that read best as the
//! commands a person would type.

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
