//! `scripts/deps.sh`'s decisions (what `make run` / `make test` install, and the `LIBCLANG_PATH` the
//! Makefile gives cargo), against directory trees that stand in for `/` (`DEPS_ROOT`) and hold the
//! files Debian's packages ship, with stub commands on a `PATH` of their own: independent of what is
//! installed on this machine, and nothing is ever installed (`--dry-run`, `--env`).
//!
//! The libraries are stand-ins: an ELF header (what bindgen's libclang search checks) and no code.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The ELF class of this machine's libraries (bindgen's build script runs here): 1 for 32-bit,
/// 2 for 64-bit.
const HOST_CLASS: u8 = if cfg!(target_pointer_width = "64") {
    2
} else {
    1
};

/// The multiarch library directory of this machine, as Debian names it.
const MULTIARCH: &str = if cfg!(target_arch = "aarch64") {
    "aarch64-linux-gnu"
} else {
    "x86_64-linux-gnu"
};

/// A machine: `root` stands in for `/`, `bin` is the whole `PATH`.
struct Machine {
    dir: tempfile::TempDir,
}

impl Machine {
    /// A machine with the Rust toolchain and redis-server (stubs), and no LLVM.
    fn new() -> Machine {
        let m = Machine {
            dir: tempfile::tempdir().expect("tempdir"),
        };
        fs::create_dir_all(m.root()).unwrap();
        fs::create_dir_all(m.bin()).unwrap();
        m.command("cargo", "exit 0");
        m.command("redis-server", "exit 0");
        m
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    fn bin(&self) -> PathBuf {
        self.dir.path().join("bin")
    }

    /// `path` (absolute, as on the machine) in the tree.
    fn path(&self, path: &str) -> PathBuf {
        self.root().join(path.trim_start_matches('/'))
    }

    /// A `/bin/sh` script `name` on the machine's PATH.
    fn command(&self, name: &str, body: &str) {
        let p = self.bin().join(name);
        fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn remove_command(&self, name: &str) {
        fs::remove_file(self.bin().join(name)).unwrap();
    }

    /// A shared library at `path` of ELF class `class`.
    fn library(&self, path: &str, class: u8) {
        let p = self.path(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        let mut bytes = vec![0x7f, b'E', b'L', b'F', class, 1, 1];
        bytes.resize(64, 0);
        fs::write(p, bytes).unwrap();
    }

    /// A symbolic link at `path` to `target` (relative to the link's directory, as packages ship them).
    fn link(&self, path: &str, target: &str) {
        let p = self.path(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        symlink(target, p).unwrap();
    }

    /// Clang's builtin headers in `dir` (the part of them bindgen trips over first).
    fn headers(&self, dir: &str) {
        let p = self.path(dir).join("include");
        fs::create_dir_all(&p).unwrap();
        fs::write(p.join("stddef.h"), "/* stand-in */\n").unwrap();
    }

    /// Debian's `libclang-cpp{major}` (Clang's C++ library: not what bindgen loads).
    fn libclang_cpp(&self, major: u32) {
        self.library(
            &format!("/usr/lib/llvm-{major}/lib/libclang-cpp.so.{major}"),
            HOST_CLASS,
        );
        self.link(
            &format!("/usr/lib/{MULTIARCH}/libclang-cpp.so.{major}"),
            &format!("../llvm-{major}/lib/libclang-cpp.so.{major}"),
        );
    }

    /// Debian's `libclang1-{major}` (libclang itself, versioned names only) for a machine whose
    /// libraries have ELF class `class` in directory `/usr/lib/{arch}`.
    fn libclang1_arch(&self, major: u32, arch: &str, class: u8) {
        let full = format!("libclang-{major}.so.{major}.0.6");
        self.library(&format!("/usr/lib/{arch}/{full}"), class);
        self.link(&format!("/usr/lib/{arch}/libclang-{major}.so.13"), &full);
        self.link(
            &format!("/usr/lib/{arch}/libclang-{major}.so.1"),
            &format!("libclang-{major}.so.13"),
        );
        self.link(
            &format!("/usr/lib/llvm-{major}/lib/libclang-{major}.so.1"),
            &format!("../../{arch}/libclang-{major}.so.1"),
        );
        self.link(
            &format!("/usr/lib/llvm-{major}/lib/libclang.so.1"),
            &format!("libclang-{major}.so.1"),
        );
    }

    /// Debian's `libclang1-{major}` for this machine.
    fn libclang1(&self, major: u32) {
        self.libclang1_arch(major, MULTIARCH, HOST_CLASS);
    }

    /// Debian's `libclang-common-{major}-dev` (clang's builtin headers).
    fn libclang_common(&self, major: u32) {
        self.headers(&format!("/usr/lib/llvm-{major}/lib/clang/{major}.0.6"));
    }

    /// What `apt-get install libclang-dev` brings on Debian 12: `libclang-14-dev` (unversioned
    /// `libclang.so` links), `libclang1-14` and `libclang-common-14-dev`.
    fn libclang_dev(&self) {
        self.libclang1(14);
        self.libclang_common(14);
        let so1 = format!("../../{MULTIARCH}/libclang-14.so.1");
        self.link("/usr/lib/llvm-14/lib/libclang.so", &so1);
        self.link("/usr/lib/llvm-14/lib/libclang-14.so", &so1);
        self.link("/usr/lib/llvm-14/lib/libclang-14.0.6.so", "libclang-14.so");
        self.link(
            &format!("/usr/lib/{MULTIARCH}/libclang-14.so"),
            "libclang-14.so.1",
        );
    }

    /// Runs `scripts/deps.sh args` on the machine, with `env` added to its environment.
    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/deps.sh");
        Command::new(bash())
            .arg(script)
            .args(args)
            .env_clear()
            .env("PATH", self.bin())
            .env("DEPS_ROOT", self.root())
            .envs(env.iter().copied())
            .output()
            .expect("run scripts/deps.sh")
    }

    /// The output of a successful `deps.sh args` (stderr must be empty).
    fn stdout(&self, args: &[&str], env: &[(&str, &str)]) -> String {
        let out = self.run(args, env);
        let (stdout, stderr) = texts(&out);
        assert!(
            out.status.success() && stderr.is_empty(),
            "deps.sh {args:?}: {}\nstdout: {stdout}\nstderr: {stderr}",
            out.status
        );
        stdout
    }

    /// What `make run` / `make test` would install (`missing: ...`, or nothing).
    fn missing(&self) -> String {
        self.stdout(&["--dry-run"], &[])
    }

    /// The environment the Makefile gives cargo (`LIBCLANG_PATH=...`, or nothing).
    fn cargo_env(&self) -> String {
        self.stdout(&["--env"], &[])
    }
}

fn texts(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// This machine's bash, found on the test's own PATH (the script's PATH is the stub directory).
fn bash() -> PathBuf {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("bash"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("/bin/bash"))
}

#[test]
fn libclang_cpp_alone_is_not_libclang() {
    // The machine of issue 7: libclang-cpp14 installed, no libclang. The ld.so cache lists only
    // libclang-cpp (bindgen never asks it, and neither does the script).
    let m = Machine::new();
    m.libclang_cpp(14);
    m.command(
        "ldconfig",
        &format!(
            "echo '\tlibclang-cpp.so.14 (libc6,x86-64) => /usr/lib/{MULTIARCH}/libclang-cpp.so.14'"
        ),
    );
    assert_eq!(m.missing(), "missing: libclang-dev\n");
    // Not even next to clang's headers.
    m.libclang_common(14);
    assert_eq!(m.missing(), "missing: libclang-dev\n");
}

#[test]
fn libclang1_with_its_headers_is_enough() {
    // libclang-14.so.1 (no unversioned libclang.so: bindgen loads versioned names at run time)
    // and clang's headers: nothing to install, nothing to set.
    let m = Machine::new();
    m.libclang_cpp(14);
    m.libclang1(14);
    m.libclang_common(14);
    assert_eq!(m.missing(), "");
    assert_eq!(m.cargo_env(), "");
}

#[test]
fn libclang1_without_headers_is_not_enough() {
    // libclang1-14 alone: bindgen loads it, then fails with "'stddef.h' file not found".
    let m = Machine::new();
    m.libclang1(14);
    assert_eq!(m.missing(), "missing: libclang-dev\n");
}

#[test]
fn libclang_dev_installed() {
    let m = Machine::new();
    m.libclang_cpp(14);
    m.libclang_dev();
    assert_eq!(m.missing(), "");
    assert_eq!(m.cargo_env(), "");
}

#[test]
fn several_versions_use_one_with_headers() {
    // libclang-dev (14) plus libclang1-15 without its headers: bindgen's own pick is the highest
    // version, 15, which cannot build; the Makefile names a libclang 14 file in LIBCLANG_PATH.
    let m = Machine::new();
    m.libclang_dev();
    m.libclang1(15);
    m.libclang_cpp(15);
    assert_eq!(m.missing(), "");
    let lib = m.path(&format!("/usr/lib/{MULTIARCH}/libclang-14.so.14.0.6"));
    assert_eq!(m.cargo_env(), format!("LIBCLANG_PATH={}\n", lib.display()));

    // With libclang-common-15-dev too, bindgen's own pick works: nothing to set.
    m.libclang_common(15);
    assert_eq!(m.missing(), "");
    assert_eq!(m.cargo_env(), "");
}

#[test]
fn several_versions_without_any_headers() {
    let m = Machine::new();
    m.libclang1(14);
    m.libclang1(15);
    assert_eq!(m.missing(), "missing: libclang-dev\n");
}

#[test]
fn libclang_of_another_elf_class_does_not_count() {
    // A libclang bindgen's build script cannot load (another ELF class), with headers.
    let m = Machine::new();
    let (arch, class) = if HOST_CLASS == 2 {
        ("i386-linux-gnu", 1)
    } else {
        ("x86_64-linux-gnu", 2)
    };
    m.libclang1_arch(14, arch, class);
    m.libclang_common(14);
    assert_eq!(m.missing(), "missing: libclang-dev\n");
}

#[test]
fn redis_server_missing() {
    let m = Machine::new();
    m.remove_command("redis-server");
    assert_eq!(m.missing(), "missing: redis-server libclang-dev\n");
    m.libclang_dev();
    assert_eq!(m.missing(), "missing: redis-server\n");
}

#[test]
fn llvm_config_prefix_is_searched() {
    // An LLVM outside the system directories, found the way bindgen finds it: `llvm-config --prefix`.
    let m = Machine::new();
    m.library("/opt/llvm-17/lib/libclang.so", HOST_CLASS);
    m.headers("/opt/llvm-17/lib/clang/17");
    m.command(
        "llvm-config",
        &format!("echo '{}'", m.path("/opt/llvm-17").display()),
    );
    assert_eq!(m.missing(), "");
    assert_eq!(m.cargo_env(), "");
}

#[test]
fn libclang_path_is_the_only_place_searched() {
    let m = Machine::new();
    m.libclang_dev();
    let empty = m.path("/opt/empty");
    fs::create_dir_all(&empty).unwrap();
    let out = m.run(
        &["--dry-run"],
        &[("LIBCLANG_PATH", empty.to_str().unwrap())],
    );
    let (stdout, stderr) = texts(&out);
    assert!(!out.status.success(), "stdout: {stdout}");
    assert!(stderr.contains("LIBCLANG_PATH="), "stderr: {stderr}");

    // A directory or the file itself: the user's choice stands, the Makefile adds nothing.
    for p in [
        m.path("/usr/lib/llvm-14/lib"),
        m.path("/usr/lib/llvm-14/lib/libclang.so.1"),
    ] {
        let env = [("LIBCLANG_PATH", p.to_str().unwrap())];
        assert_eq!(m.stdout(&["--dry-run"], &env), "");
        assert_eq!(m.stdout(&["--env"], &env), "");
    }
}

#[test]
fn deps_root_never_installs() {
    // With DEPS_ROOT set the script only reports: a plain run (which would call apt-get as root)
    // is refused.
    let m = Machine::new();
    m.command("apt-get", "echo apt-get ran; exit 1");
    let out = m.run(&[], &[]);
    let (stdout, stderr) = texts(&out);
    assert_eq!(
        out.status.code(),
        Some(2),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert!(!stdout.contains("apt-get ran"));
}
