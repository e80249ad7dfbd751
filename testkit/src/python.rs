//! Python for the tests that run Python code (the worker examples, redis-py workers of the
//! cluster scenario): `python3` with the project's `.cache/py` (redis-py, `make py-deps`) in front
//! of PYTHONPATH.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The project's root directory (the module's crate, above the test kit).
pub fn project_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the test kit lives in the project")
        .to_path_buf()
}

/// `python3` with `.cache/py` (where `make py-deps`, and `make test-python`, install redis-py) in
/// front of PYTHONPATH; panics with what to do, and what `import redis` said, when redis-py 5 or
/// later cannot be imported.
pub fn python() -> Command {
    // RECLAIM_PY_DEPS: another folder of Python packages in its place (make test-cluster's
    // .cache/py-cluster, with a redis-py whose RedisCluster follows a failover at once).
    let deps = std::env::var_os("RECLAIM_PY_DEPS")
        .map(PathBuf::from)
        .unwrap_or_else(|| project_dir().join(".cache/py"));
    let path = match std::env::var_os("PYTHONPATH") {
        Some(p) => std::env::join_paths(std::iter::once(deps).chain(std::env::split_paths(&p)))
            .expect("PYTHONPATH"),
        None => deps.into_os_string(),
    };
    let check = Command::new("python3")
        .env("PYTHONPATH", &path)
        .args([
            "-c",
            "import redis, sys; print(redis.__version__); sys.exit(int(redis.__version__.split('.')[0]) < 5)",
        ])
        .output();
    let problem = match check {
        Ok(out) if out.status.success() => {
            let mut c = Command::new("python3");
            c.env("PYTHONPATH", path);
            return c;
        }
        Ok(out) => format!(
            "{}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => format!("python3 did not start: {e}"),
    };
    panic!(
        "python3 with redis-py 5 or later is needed for this test: `make py-deps` (or `make \
         test-python`) installs redis-py into .cache/py (python3 -m pip install --target .cache/py \
         'redis>=5,<9'); the check `import redis` said {problem}"
    );
}
