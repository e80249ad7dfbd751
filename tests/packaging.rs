//! The packages' versions have one source: Cargo.toml's `[package] version`. The core crate's
//! (core/Cargo.toml), the Python client's
//! (clients/python/pyproject.toml), the Node.js client's (clients/node/package.json and its lock
//! file), the Debian changelog's newest entry (debian/changelog, which
//! cargo-deb puts in the package) and the package name docs/loading.md tells operators to install
//! must all follow it. (`make deb`, `make test-deb` and `make py-dist` check the built packages.)

use std::path::Path;

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The `version = "..."` of the `[section]` table of a TOML file (the first such line in it).
fn toml_version(text: &str, section: &str) -> Option<String> {
    let mut inside = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == format!("[{section}]");
        } else if inside {
            if let Some(v) = line.strip_prefix("version = \"") {
                return v.strip_suffix('"').map(str::to_string);
            }
        }
    }
    None
}

fn module_version() -> String {
    toml_version(&read("Cargo.toml"), "package").expect("Cargo.toml: [package] version")
}

#[test]
fn the_module_version_is_the_cargo_package_version() {
    assert_eq!(module_version(), env!("CARGO_PKG_VERSION"));
    let v = module_version();
    let parts: Vec<&str> = v.split('.').collect();
    assert_eq!(parts.len(), 3, "{v}");
    assert!(parts.iter().all(|p| p.parse::<u32>().is_ok()), "{v}");
}

#[test]
fn the_core_crate_has_the_module_version() {
    let core = read("core/Cargo.toml");
    assert_eq!(toml_version(&core, "package"), Some(module_version()));
}

#[test]
fn the_python_client_has_the_module_version() {
    let py = read("clients/python/pyproject.toml");
    assert_eq!(toml_version(&py, "project"), Some(module_version()));
}

#[test]
fn the_node_client_has_the_module_version() {
    for file in [
        "clients/node/package.json",
        "clients/node/package-lock.json",
    ] {
        let text = read(file);
        // The package's own `"version"` is the first one in both files.
        let line = text
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with("\"version\": "))
            .unwrap_or_else(|| panic!("{file}: no version"));
        assert_eq!(
            line,
            format!("\"version\": \"{}\",", module_version()),
            "{file}"
        );
    }
}

#[test]
fn the_debian_changelog_starts_at_the_module_version() {
    let changelog = read("debian/changelog");
    let first = changelog.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        format!(
            "redis-reclaim ({}-1) unstable; urgency=medium",
            module_version()
        )
    );
}

#[test]
fn the_operator_page_installs_this_version() {
    let page = read("docs/loading.md");
    let install = format!(
        "apt-get install -y ./redis-reclaim_{}-1_amd64.deb",
        module_version()
    );
    assert!(
        page.lines().any(|l| l == install),
        "docs/loading.md has no line {install:?}"
    );
}
