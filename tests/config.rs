//! Module configs and start-up: `CONFIG GET/SET reclaim.*` with their ranges, the same configs
//! as `loadmodule` arguments, on the command line, in a redis.conf (and `CONFIG REWRITE`) and with
//! `MODULE LOADEX ... CONFIG/ARGS`; a value refused at load fails the load with the log lines
//! operators see; a clean start that logs no warning.

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

/// `Ok(log)` when redis-server, started with the module and `args` right after the module path
/// (so arguments before the first `--option` are `loadmodule` arguments), exits during start-up;
/// `Err` with the reclaim configs it reports when it starts serving instead.
fn start_refused(args: &[&str]) -> Result<String, String> {
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
            Ok(std::fs::read_to_string(dir.path().join("server.log")).unwrap_or_default())
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

/// The line the module logs when the server refused a configured value (the server's own line,
/// just before it, names the config and the reason).
const REFUSED_AT_LOAD: &str =
    "<reclaim> reclaim: the server refused a reclaim.* config given at load (the line above says which); not loaded";

#[test]
fn out_of_range_configs_at_startup_are_refused() {
    // Each case: the arguments after the module path, and the lines its log must have.
    let numeric = |name: &str, range: &str| {
        format!("Issue during loading of configuration reclaim.{name} : argument must be between {range} inclusive")
    };
    let yes_no =
        "Issue during loading of configuration reclaim.enabled : argument must be 'yes' or 'no'";
    let cases: Vec<(&[&str], Vec<String>)> = vec![
        // Command-line configs (validated by Redis; redis.conf lines are the same to it).
        (&["--reclaim.tick-interval-ms", "0"], vec![numeric("tick-interval-ms", "1 and 1000"), REFUSED_AT_LOAD.into()]),
        (&["--reclaim.tick-interval-ms", "1001"], vec![numeric("tick-interval-ms", "1 and 1000"), REFUSED_AT_LOAD.into()]),
        (&["--reclaim.tick-budget-us", "49"], vec![numeric("tick-budget-us", "50 and 100000"), REFUSED_AT_LOAD.into()]),
        (&["--reclaim.tick-budget-us", "100001"], vec![numeric("tick-budget-us", "50 and 100000"), REFUSED_AT_LOAD.into()]),
        (&["--reclaim.enabled", "maybe"], vec![yes_no.into(), REFUSED_AT_LOAD.into()]),
        // loadmodule arguments (checked by the module).
        (&["tick-interval-ms", "abc"], vec!["<reclaim> reclaim: module argument tick-interval-ms must be an integer (invalid digit found in string)".into()]),
        (&["tick-interval-ms", "0"], vec!["<reclaim> reclaim: tick-interval-ms 0 is out of range (1..1000)".into()]),
        (&["tick-interval-ms", "1001"], vec!["<reclaim> reclaim: tick-interval-ms 1001 is out of range (1..1000)".into()]),
        (&["tick-budget-us", "49"], vec!["<reclaim> reclaim: tick-budget-us 49 is out of range (50..100000)".into()]),
        (&["tick-budget-us", "100001"], vec!["<reclaim> reclaim: tick-budget-us 100001 is out of range (50..100000)".into()]),
        (&["enabled", "maybe"], vec!["<reclaim> reclaim: module argument enabled must be yes or no".into()]),
        (&["bogus", "1"], vec!["<reclaim> reclaim: unknown module argument 'bogus' (known: tick-interval-ms, tick-budget-us, enabled)".into()]),
        (&["tick-budget-us"], vec!["<reclaim> reclaim: module argument 'tick-budget-us' needs a value".into()]),
    ];
    let mut failures = Vec::new();
    for (args, lines) in &cases {
        match start_refused(args) {
            Err(e) => failures.push(e),
            Ok(log) => {
                for line in lines {
                    if !log.lines().any(|l| l.ends_with(line.as_str())) {
                        failures.push(format!(
                            "redis-server {args:?}: no log line ending {line:?}; log:\n{log}"
                        ));
                    }
                }
                // Refused, never loaded and then unloaded (Valkey 8.1 crashed unloading it).
                if log.contains("Unloading the module") || log.contains("crashed by signal") {
                    failures.push(format!(
                        "redis-server {args:?}: the module was loaded, then unloaded; log:\n{log}"
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn module_loadex_with_configs_and_args() {
    let s = Server::start_without_module(&["--enable-module-command", "yes"]);
    let mut c = s.conn();
    let path = module_path().to_string_lossy().into_owned();
    let has_module = |c: &mut Connection| {
        let list: Value = cmd("MODULE").arg("LIST").query(c).unwrap();
        let Value::Array(mods) = &list else {
            panic!("{list:?}")
        };
        mods.iter().any(|m| {
            pairs(m)
                .into_iter()
                .any(|(k, v)| k == "name" && string_of(&v) == "reclaim")
        })
    };
    // A value the server refuses: the load fails, the server goes on without the module.
    let loadex = |c: &mut Connection, how: &str, name: &str, value: &str| {
        error_of(
            c,
            cmd("MODULE")
                .arg("LOADEX")
                .arg(&path)
                .arg(&[how, name, value]),
        )
    };
    let refused = "ERR Error loading the extension. Please check the server logs.";
    assert_eq!(
        loadex(&mut c, "CONFIG", "reclaim.tick-interval-ms", "0"),
        refused
    );
    assert!(!has_module(&mut c));
    let log = s.log();
    assert!(log.contains("Issue during loading of configuration reclaim.tick-interval-ms : argument must be between 1 and 1000 inclusive"), "{log}");
    assert!(log.contains(REFUSED_AT_LOAD), "{log}");
    // A module argument out of range: the same.
    assert_eq!(loadex(&mut c, "ARGS", "tick-budget-us", "10"), refused);
    assert!(!has_module(&mut c));
    assert!(s
        .log()
        .contains("<reclaim> reclaim: tick-budget-us 10 is out of range (50..100000)"));

    // Then with good values: CONFIG and ARGS (a module argument is the config's default).
    let r: Value = cmd("MODULE")
        .arg("LOADEX")
        .arg(&path)
        .arg("CONFIG")
        .arg("reclaim.tick-interval-ms")
        .arg("20")
        .arg("CONFIG")
        .arg("reclaim.enabled")
        .arg("no")
        .arg("ARGS")
        .arg("tick-budget-us")
        .arg("1000")
        .query(&mut c)
        .unwrap();
    assert!(is_ok(&r), "{r:?}");
    assert!(has_module(&mut c));
    assert_eq!(config_get(&mut c, "reclaim.tick-interval-ms"), "20");
    assert_eq!(config_get(&mut c, "reclaim.tick-budget-us"), "1000");
    assert_eq!(config_get(&mut c, "reclaim.enabled"), "no");
    // It works: a policy is set and, once enabled, claims a stale entry.
    create_group(&mut c, b"s", b"g");
    add_entries(&mut c, b"s", "n", 1);
    read_group(&mut c, b"s", b"g", b"c1");
    set_policy_args(&mut c, b"s", b"g", &words("MIN-IDLE 1 INTERVAL 50"));
    let r: Value = cmd("CONFIG")
        .arg("SET")
        .arg("reclaim.enabled")
        .arg("yes")
        .query(&mut c)
        .unwrap();
    assert!(is_ok(&r), "{r:?}");
    wait_for(10, "a claim after MODULE LOADEX", || {
        let p = pending_raw(&mut c, b"s", b"g");
        (p.len() == 1 && p[0].1 == b"reclaim").then_some(())
    });
}

/// A redis-server started with the config file `conf` (and the test's port, dir and log); stopped
/// when dropped.
struct WithConfigFile {
    child: std::process::Child,
    port: u16,
}

impl WithConfigFile {
    fn start(conf: &std::path::Path, dir: &std::path::Path) -> WithConfigFile {
        let port = free_port();
        let child = std::process::Command::new(server_binary())
            .arg(conf)
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .arg("--dir")
            .arg(dir)
            .arg("--logfile")
            .arg(dir.join("server.log"))
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start redis-server");
        let mut s = WithConfigFile { child, port };
        let pid = s.child.id();
        wait_for(20, "redis-server with a config file to answer", || {
            if let Ok(Some(status)) = s.child.try_wait() {
                let log = std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
                panic!("redis-server exited with {status}; log:\n{log}");
            }
            let mut con = s.conn_opt()?;
            let info: String = cmd("INFO").arg("server").query(&mut con).ok()?;
            info.lines()
                .any(|l| l.trim() == format!("process_id:{pid}"))
                .then_some(())
        });
        s
    }

    fn conn_opt(&self) -> Option<Connection> {
        let client = redis::Client::open(format!("redis://127.0.0.1:{}/", self.port)).ok()?;
        client.get_connection().ok()
    }
}

impl Drop for WithConfigFile {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn redis_conf_lines_and_config_rewrite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let conf = dir.path().join("redis.conf");
    std::fs::write(
        &conf,
        format!(
            "loadmodule {}\nreclaim.tick-interval-ms 7\nreclaim.enabled no\n",
            module_path().display()
        ),
    )
    .unwrap();
    let s = WithConfigFile::start(&conf, dir.path());
    let mut c = s.conn_opt().expect("connect");
    assert_eq!(config_get(&mut c, "reclaim.tick-interval-ms"), "7");
    assert_eq!(config_get(&mut c, "reclaim.tick-budget-us"), "500");
    assert_eq!(config_get(&mut c, "reclaim.enabled"), "no");

    // CONFIG SET, then CONFIG REWRITE: the file keeps the loadmodule line and gets the values.
    for (name, v) in [
        ("reclaim.tick-budget-us", "2000"),
        ("reclaim.enabled", "yes"),
    ] {
        let r: Value = cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(v)
            .query(&mut c)
            .unwrap();
        assert!(is_ok(&r), "{r:?}");
    }
    let r: Value = cmd("CONFIG").arg("REWRITE").query(&mut c).unwrap();
    assert!(is_ok(&r), "{r:?}");
    let text = std::fs::read_to_string(&conf).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let loadmodule = format!("loadmodule {}", module_path().display());
    for want in [
        loadmodule.as_str(),
        "reclaim.tick-interval-ms 7",
        "reclaim.tick-budget-us 2000",
    ] {
        assert!(lines.contains(&want), "no line {want:?} in:\n{text}");
    }
    // A line already in the file gets the current value, even the default.
    assert!(lines.contains(&"reclaim.enabled yes"), "{text}");
    assert!(!lines.contains(&"reclaim.enabled no"), "{text}");
    drop(c);
    drop(s);

    // A restart reads them back.
    let s = WithConfigFile::start(&conf, dir.path());
    let mut c = s.conn_opt().expect("connect");
    assert_eq!(config_get(&mut c, "reclaim.tick-interval-ms"), "7");
    assert_eq!(config_get(&mut c, "reclaim.tick-budget-us"), "2000");
    assert_eq!(config_get(&mut c, "reclaim.enabled"), "yes");
}
