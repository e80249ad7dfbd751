//! Ports of one's choosing: with `RECLAIM_PORT_BASE` the test kit's servers (and so the tests,
//! `make demo`, `make bench` and `make test-monitoring`'s exporter and Prometheus) listen on ports
//! from that base upward, skipping ports in use; the Makefile sets it from `BASE_PORT`, and for
//! `make demo` and `make test-monitoring` from `PORT` too.

use std::net::TcpListener;
use std::process::Command;

use reclaim_testkit::*;

/// Run by [`servers_listen_from_the_port_base_skipping_taken_ports`] in a process of its own
/// with `RECLAIM_PORT_BASE` set (a test cannot change the environment of its own process under
/// the other tests' feet): starts two servers and prints their ports.
#[test]
#[ignore = "run by servers_listen_from_the_port_base_skipping_taken_ports"]
fn child_two_servers_from_the_port_base() {
    if std::env::var("RECLAIM_PORT_BASE").is_err() {
        return;
    }
    let a = Server::new();
    let b = Server::new();
    let pong: String = cmd("PING").query(&mut b.conn()).unwrap();
    assert_eq!(pong, "PONG");
    println!("ports: {} {}", a.port, b.port);
}

#[test]
fn servers_listen_from_the_port_base_skipping_taken_ports() {
    // A port the OS just gave, kept taken: the base. The servers skip it and take the next free
    // ones above it.
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = taken.local_addr().unwrap().port();
    if base > 65000 {
        return; // too close to the end of the range for two more ports
    }
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_two_servers_from_the_port_base",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("RECLAIM_PORT_BASE", base.to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ports: Vec<u16> = stdout
        .lines()
        .find_map(|l| l.split_once("ports: ").map(|(_, p)| p))
        .unwrap_or_else(|| panic!("no ports in {stdout}"))
        .split(' ')
        .map(|p| p.parse().unwrap())
        .collect();
    assert!(
        base < ports[0] && ports[0] < ports[1] && ports[1] <= base + 50,
        "base {base} (taken), servers on {ports:?}"
    );
    drop(taken);
}

#[test]
fn port_base_must_be_a_port() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "child_two_servers_from_the_port_base",
        ])
        .env("RECLAIM_PORT_BASE", "70000")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("RECLAIM_PORT_BASE must be a port number (1 to 65535), not \"70000\""),
        "{stdout}"
    );
}

/// What `make` passes: `make -n` prints the commands of `demo` and `test-monitoring`; a makefile
/// of one target added with a second `-f` prints the variable the other targets' commands get.
#[test]
fn make_passes_port_and_base_port() {
    let root = env!("CARGO_MANIFEST_DIR");
    let make = |args: &[&str], env: &[(&str, &str)]| -> String {
        let mut c = Command::new("make");
        c.current_dir(root)
            .args(args)
            .env_remove("RECLAIM_PORT_BASE");
        c.env_remove("PORT").env_remove("BASE_PORT");
        for (k, v) in env {
            c.env(k, v);
        }
        let out = c.output().expect("make");
        assert!(out.status.success(), "{:?}", out);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let run_line = |out: &str, what: &str| -> String {
        out.lines()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no {what} in {out}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let demo = "cargo run --release --quiet --example demo";
    assert_eq!(
        run_line(
            &make(&["-n", "demo", "PORT=7000"], &[]),
            "run --release --quiet --example demo"
        ),
        format!("RECLAIM_PORT_BASE=7000 {demo}")
    );
    assert_eq!(
        run_line(
            &make(&["-n", "demo"], &[("PORT", "7010")]),
            "run --release --quiet --example demo"
        ),
        format!("RECLAIM_PORT_BASE=7010 {demo}")
    );
    assert_eq!(
        run_line(
            &make(&["-n", "demo", "BASE_PORT=7020"], &[]),
            "run --release --quiet --example demo"
        ),
        format!("RECLAIM_PORT_BASE=7020 {demo}")
    );
    // Without either: ports the OS picks, as before.
    let plain = make(&["-n", "demo"], &[]);
    assert!(!plain.contains("RECLAIM_PORT_BASE"), "{plain}");
    assert_eq!(
        run_line(
            &make(&["-n", "test-monitoring", "PORT=7030"], &[]),
            "--test monitoring"
        ),
        "RECLAIM_PORT_BASE=7030 cargo test --release --test monitoring -- --include-ignored \
         --test-threads=1"
    );
    let dir = tempfile::tempdir().unwrap();
    let show = dir.path().join("show.mk");
    std::fs::write(&show, "show-base:\n\t@echo \"base=$$RECLAIM_PORT_BASE\"\n").unwrap();
    let show = show.to_str().unwrap();
    let with = |extra: &[&str]| -> String {
        let mut a = vec!["-s", "-f", "Makefile", "-f", show, "show-base"];
        a.extend_from_slice(extra);
        make(&a, &[]).trim().to_string()
    };
    assert_eq!(with(&["BASE_PORT=7040"]), "base=7040");
    assert_eq!(with(&[]), "base=");
    // PORT alone is make run's port: it does not move the other targets' servers.
    assert_eq!(with(&["PORT=7050"]), "base=");
}
