//! The documentation's links, followed: every relative link of README.md, CHANGELOG.md and
//! docs/*.md names a file of the repository that exists, and its `#anchor`, when it has one, a
//! heading of that page (as GitHub makes anchors of headings). A page renamed, a heading reworded
//! or a section removed breaks the links to it; this says which. No server: plain files.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md, CHANGELOG.md and every page of docs/.
fn pages() -> Vec<String> {
    let mut out = vec!["README.md".to_string(), "CHANGELOG.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md"))
        .map(|n| format!("docs/{n}"))
        .collect();
    docs.sort();
    out.extend(docs);
    out
}

/// The page's lines outside fenced code blocks (```` ``` ````, indented or not), with their
/// numbers (1-based).
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

/// A line without its inline code spans (`` `...` ``), whose brackets are not links.
fn without_code(line: &str) -> String {
    let mut out = String::new();
    for (i, part) in line.split('`').enumerate() {
        if i % 2 == 0 {
            out.push_str(part);
        }
    }
    out
}

/// The targets of the inline links `[text](target)` of a line (code spans left out).
fn link_targets(line: &str) -> Vec<String> {
    let line = without_code(line);
    let mut out = Vec::new();
    let mut rest = line.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after.find(')').unwrap_or(after.len());
        let target = after[..end].split_whitespace().next().unwrap_or("");
        out.push(target.to_string());
        rest = &after[end..];
    }
    out
}

/// GitHub's anchor of a heading: lower case, every character but letters, digits, `_`, `-` and
/// spaces removed (the backticks of inline code too), spaces made `-`. (No heading of ours holds a
/// link, whose target GitHub would drop.)
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '_' || *c == '-' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a page's headings, a repeated one numbered as GitHub does (`x`, `x-1`, ...).
fn anchors(text: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    for (_, line) in prose_lines(text) {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..]);
        let mut anchor = base.clone();
        let mut n = 0;
        while out.contains(&anchor) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
        out.insert(anchor);
    }
    out
}

/// What is wrong with one link of `page`, if anything.
fn check(page: &str, target: &str) -> Option<String> {
    if target.is_empty() || target.contains(':') {
        return None; // https:, mailto: ...: not ours to follow
    }
    let (path, anchor) = match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    };
    let dir = Path::new(page).parent().unwrap_or(Path::new(""));
    let file = if path.is_empty() {
        PathBuf::from(page)
    } else {
        dir.join(path)
    };
    let full = root().join(&file);
    if !full.exists() {
        return Some(format!("no file {}", file.display()));
    }
    let anchor = anchor?;
    if !path.is_empty() && !path.ends_with(".md") {
        return None;
    }
    let text = std::fs::read_to_string(&full).expect("linked page");
    (!anchors(&text).contains(anchor))
        .then(|| format!("no heading #{anchor} in {}", file.display()))
}

#[test]
fn every_relative_link_names_a_file_and_a_heading_that_exist() {
    let mut faults = Vec::new();
    let mut followed = 0;
    for page in pages() {
        let text = std::fs::read_to_string(root().join(&page)).expect("page");
        for (n, line) in prose_lines(&text) {
            for target in link_targets(line) {
                followed += 1;
                if let Some(fault) = check(&page, &target) {
                    faults.push(format!("{page}:{n}: ({target}): {fault}"));
                }
            }
        }
    }
    assert!(faults.is_empty(), "{}", faults.join("\n"));
    assert!(
        followed > 100,
        "only {followed} links found: the parser lost them"
    );
}

#[test]
fn the_checker_tells_a_broken_link_from_a_good_one() {
    let page = "# The web dashboard\n\n## Install and start\n\n## `RECLAIM.POLICY SET`\n\n## Install and start\n\n```sh\n# not a heading\n```\n";
    let found = anchors(page);
    let want: HashSet<String> = [
        "the-web-dashboard",
        "install-and-start",
        "reclaimpolicy-set",
        "install-and-start-1",
    ]
    .map(String::from)
    .into();
    assert_eq!(found, want);
    assert_eq!(
        link_targets("see [a](docs/a.md#x), `[b](not-a-link)` and [c](https://x.y) (plain)"),
        vec!["docs/a.md#x".to_string(), "https://x.y".to_string()]
    );
    assert_eq!(check("README.md", "docs/dlq.md"), None);
    assert_eq!(check("docs/python.md", "python.md#install"), None);
    assert_eq!(check("docs/python.md", "#install"), None);
    assert_eq!(
        check("docs/python.md", "nowhere.md"),
        Some("no file docs/nowhere.md".to_string())
    );
    assert_eq!(
        check("docs/python.md", "#not-a-heading"),
        Some("no heading #not-a-heading in docs/python.md".to_string())
    );
    assert_eq!(check("README.md", "redis.conf.example"), None);
}
