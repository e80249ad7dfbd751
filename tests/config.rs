//! Module configs and start-up: `CONFIG GET/SET reclaim.*` with their ranges, the same configs
//! as `loadmodule` arguments and on the command line, out-of-range values refused at start-up, and
//! a clean start that logs no warning.

use reclaim_testkit::*;

#[test]
fn config_get_and_set() {
    let s = Server::new();
    let mut c = s.conn();
    assert_eq!(config_get(&mut c, "reclaim.tick-interval-ms"), "10");
    assert_eq!(config_get(&mut c, "reclaim.tick-budget-us"), "500");
    let all: Vec<String> = cmd("CONFIG")
        .arg("GET")
        .arg("reclaim.*")
        .query(&mut c)
        .unwrap();
    let mut names: Vec<&String> = all.iter().step_by(2).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "reclaim.enabled",
            "reclaim.tick-budget-us",
            "reclaim.tick-interval-ms"
        ]
    );
    assert_eq!(config_get(&mut c, "reclaim.enabled"), "yes");

    let cases: &[(&str, &[&str], &[&str], &str)] = &[
        (
            "reclaim.tick-interval-ms",
            &["1", "1000", "25"],
            &["0", "1001", "-1"],
            "argument must be between 1 and 1000 inclusive",
        ),
        (
            "reclaim.tick-budget-us",
            &["50", "100000", "700"],
            &["49", "100001", "0"],
            "argument must be between 50 and 100000 inclusive",
        ),
    ];
    for (name, good, bad, range) in cases {
        for v in *good {
            let r: Value = cmd("CONFIG")
                .arg("SET")
                .arg(*name)
                .arg(*v)
                .query(&mut c)
                .unwrap();
            assert!(is_ok(&r), "{r:?}");
            assert_eq!(config_get(&mut c, name), *v);
        }
        let last = good.last().unwrap();
        for v in *bad {
            assert_eq!(
                error_of(&mut c, cmd("CONFIG").arg("SET").arg(*name).arg(*v)),
                format!("ERR CONFIG SET failed (possibly related to argument '{name}') - {range}")
            );
            assert_eq!(config_get(&mut c, name), *last, "after {v}");
        }
        assert_eq!(
            error_of(&mut c, cmd("CONFIG").arg("SET").arg(*name).arg("abc")),
            format!(
                "ERR CONFIG SET failed (possibly related to argument '{name}') - argument couldn't be parsed into an integer"
            )
        );
        assert_eq!(config_get(&mut c, name), *last);
    }

    // The sweeper keeps working at the new settings.
    create_group(&mut c, b"s", b"g");
    add_entries(&mut c, b"s", "n", 2);
    read_group(&mut c, b"s", b"g", b"c1");
    set_policy_args(&mut c, b"s", b"g", &words("MIN-IDLE 1 INTERVAL 50"));
    wait_for(10, "claims at tick-interval 25 ms", || {
        let p = pending_raw(&mut c, b"s", b"g");
        (p.len() == 2 && p.iter().all(|e| e.1 == b"reclaim")).then_some(())
    });
}

#[test]
fn configs_from_the_command_line_and_loadmodule_args() {
    // `--reclaim.<name> value` after the module is loaded.
    let s = Server::start(&["--reclaim.tick-interval-ms", "5"]);
    let mut c = s.conn();
    assert_eq!(config_get(&mut c, "reclaim.tick-interval-ms"), "5");
    assert_eq!(config_get(&mut c, "reclaim.tick-budget-us"), "500");
    drop(c);
    drop(s);

    // Module arguments: the harness puts `extra` right after the module path, so arguments before
    // the first `--option` belong to the `loadmodule` line.
    let s = Server::start(&["tick-interval-ms", "5", "tick-budget-us", "200"]);
    let mut c = s.conn();
    assert_eq!(config_get(&mut c, "reclaim.tick-interval-ms"), "5");
    assert_eq!(config_get(&mut c, "reclaim.tick-budget-us"), "200");
    let ml: Value = cmd("MODULE").arg("LIST").query(&mut c).unwrap();
    let Value::Array(mods) = &ml else {
        panic!("{ml:?}")
    };
    // Redis 8 lists its built-in modules too (vectorset), in no set order.
    let names: Vec<String> = mods
        .iter()
        .map(|m| string_of(&pairs(m).into_iter().find(|(k, _)| k == "name").unwrap().1))
        .collect();
    assert!(names.iter().any(|n| n == "reclaim"), "{names:?}");
    drop(c);
    drop(s);

    // A yes/no config, as a module argument and on the command line.
    let s = Server::start(&["enabled", "no"]);
    assert_eq!(config_get(&mut s.conn(), "reclaim.enabled"), "no");
    drop(s);
    let s = Server::start(&["--reclaim.enabled", "no"]);
    assert_eq!(config_get(&mut s.conn(), "reclaim.enabled"), "no");
    drop(s);

    // Both: the command-line config wins over the module argument.
    let s = Server::start(&["tick-interval-ms", "5", "--reclaim.tick-interval-ms", "7"]);
    let mut c = s.conn();
    assert_eq!(config_get(&mut c, "reclaim.tick-interval-ms"), "7");
}

/// `Ok` when redis-server, started with the module and `args` right after the module path (so
/// arguments before the first `--option` are `loadmodule` arguments), exits during start-up;
/// `Err` with the reclaim configs it reports when it starts serving instead.
fn start_refused(args: &[&str]) -> Result<(), String> {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = free_port();
    let mut child = std::process::Command::new(server_binary())
        .arg("--port")
        .arg(port.to_string())
        .arg("--bind")
        .arg("127.0.0.1")
        .arg("--dir")
        .arg(dir.path())
        .arg("--logfile")
        .arg(dir.path().join("server.log"))
        .arg("--save")
        .arg("")
        .arg("--loadmodule")
        .arg(module_path())
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start redis-server");
    let outcome = wait_for(
        20,
        &format!("redis-server {args:?} to exit or serve"),
        || {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(Ok(status));
            }
            let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).ok()?;
            let mut con = client.get_connection().ok()?;
            // Only our server counts (not another one that got the port after ours exited).
            let server: String = cmd("INFO").arg("server").query(&mut con).ok()?;
            let ours = format!("process_id:{}", child.id());
            if !server.lines().any(|l| l.trim() == ours) {
                return None;
            }
            let v: Vec<String> = cmd("CONFIG")
                .arg("GET")
                .arg("reclaim.*")
                .query(&mut con)
                .ok()?;
            Some(Err(v))
        },
    );
    let _ = child.kill();
    let _ = child.wait();
    match outcome {
        Ok(status) => {
            assert!(
                !status.success(),
                "redis-server {args:?} exited with {status}"
            );
            Ok(())
        }
        Err(v) => Err(format!(
            "redis-server {args:?} started; CONFIG GET reclaim.* = {v:?}"
        )),
    }
}

#[test]
fn a_clean_start_logs_no_module_warning() {
    // Warning-level lines are marked `#` in the log; the module's are prefixed `<reclaim>`.
    let s = Server::new();
    let log = s.log();
    assert!(log.contains("<reclaim> Created new data type"), "{log}");
    let warnings: Vec<&str> = log.lines().filter(|l| l.contains(" # <reclaim>")).collect();
    assert_eq!(warnings, Vec::<&str>::new());
}

#[test]
fn out_of_range_configs_at_startup_are_refused() {
    let cases: &[&[&str]] = &[
        // Command-line configs (validated by Redis).
        &["--reclaim.tick-interval-ms", "0"],
        &["--reclaim.tick-interval-ms", "1001"],
        &["--reclaim.tick-budget-us", "49"],
        &["--reclaim.tick-budget-us", "100001"],
        // loadmodule arguments.
        &["tick-interval-ms", "abc"],
        &["tick-interval-ms", "0"],
        &["tick-interval-ms", "1001"],
        &["tick-budget-us", "49"],
        &["tick-budget-us", "100001"],
        &["enabled", "maybe"],
        &["--reclaim.enabled", "maybe"],
    ];
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|a| start_refused(a).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
