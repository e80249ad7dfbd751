//! The documentation's examples as tests (tests/docs.rs): the fenced blocks of README.md and
//! docs/*.md, read from the markdown, run against a real server with the module, and their
//! replies compared with what the page prints.
//!
//! The convention (docs/README.md, "How the examples are tested", says it for writers):
//!
//! - A block whose info string starts with `redis-cli` is run. Its lines are commands and, after
//!   each, what it prints:
//!   - `127.0.0.1:6379> COMMAND ...`: typed at the redis-cli prompt (`127.0.0.1:6379[1]>` selects
//!     database 1). The test pipes the line into `redis-cli --no-raw` (`-3` with the attribute
//!     `resp3`), which splits it as its prompt does, and compares what redis-cli prints.
//!   - `$ SHELL LINE`: run with `sh -c` in the session's directory, with `redis-cli` on PATH
//!     pointing at the session's server and printing as on a terminal (`FAKETTY`).
//! - The expected output is compared line by line, trailing blanks ignored, except that:
//!   - a stream ID (`1796113960759-0`: ten digits or more, `-`, digits) stands for the ID of the
//!     same place in the real reply, and keeps standing for it: the first time it is seen it is
//!     bound to the real ID, and later replies must show that same ID there, and later commands
//!     are sent with the real ID in its place;
//!   - a number of ten digits or more (a time in ms since the epoch) matches any such number;
//!   - `<name>` (lower case, digits, `-`) matches any word (a duration, a count that varies);
//!   - a line `...` matches any number of lines.
//! - Attributes after `redis-cli`: `session=NAME` (blocks of one page share a server per session
//!   name, in page order; default `main`), `resp3`, `wait=SECS` (the reader types the block at
//!   least SECS seconds after the previous one: the test sleeps SECS, then retries the block's
//!   first command, which must only read, until its reply matches or a deadline passes).
//! - A hidden setup, not rendered, runs in its session where it stands:
//!   `<!-- doc-test setup [session=NAME]` then one command a line (redis-cli syntax; `sleep SECS`;
//!   `wait-stats KEY GROUP FIELD VALUE`, which polls `RECLAIM.STATS` until FIELD is VALUE),
//!   then `-->`. A command that answers an error fails the test.
//! - Every other block must say why it is not run: the attribute `syntax` (a command's syntax),
//!   `not-run` (a config file, output shown for its shape, a command that needs a setup the test
//!   cannot give), or `run-by=WHO` (another suite runs it, e.g. `run-by=clients/python`).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::server::{cli_binary, Server};
use crate::wait::slowdown;

/// One fenced block of a page (or a hidden setup comment).
#[derive(Clone, Debug)]
pub struct Block {
    /// The page, as given to [`parse_blocks`].
    pub path: String,
    /// The line of the opening fence, from 1.
    pub line: usize,
    /// The first word of the info string (`redis-cli`, `text`, `python`, ...); `setup` for a
    /// hidden setup.
    pub kind: String,
    /// The other words of the info string: `name` or `name=value`.
    pub attrs: Vec<(String, Option<String>)>,
    /// The lines inside the fence, without the fence's indentation.
    pub lines: Vec<String>,
}

impl Block {
    /// The value of attribute `name` (`Some("")` for a bare word).
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_deref().unwrap_or(""))
    }

    /// Where the block is, for messages: `README.md:42`.
    pub fn at(&self) -> String {
        format!("{}:{}", self.path, self.line)
    }

    /// The session the block runs in.
    pub fn session(&self) -> String {
        self.attr("session").unwrap_or("main").to_string()
    }
}

/// What the test does with a block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Disposition {
    /// Run against a server (`redis-cli`).
    Run,
    /// A hidden setup, run without comparing.
    Setup,
    /// Not run, and the block says why: `syntax`, `not-run` or `run-by=WHO`.
    NotRun(String),
    /// Neither run nor marked: a fault of the page.
    Unmarked,
}

/// What the test does with `b`.
pub fn disposition(b: &Block) -> Disposition {
    if b.kind == "setup" {
        return Disposition::Setup;
    }
    // A redis-cli block another suite runs (e.g. against the Debian package's server) says so.
    if b.kind == "redis-cli" && b.attr("run-by").is_none() {
        return Disposition::Run;
    }
    for mark in ["syntax", "not-run"] {
        if b.attr(mark).is_some() {
            return Disposition::NotRun(mark.to_string());
        }
    }
    if let Some(who) = b.attr("run-by").filter(|w| !w.is_empty()) {
        return Disposition::NotRun(format!("run-by={who}"));
    }
    Disposition::Unmarked
}

/// The fenced blocks of a markdown page, in order, and its hidden setups
/// (`<!-- doc-test setup ... -->`).
pub fn parse_blocks(path: &str, text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if let Some(rest) = trimmed.strip_prefix("<!-- doc-test") {
            let mut words = rest.split_whitespace();
            let what = words.next().unwrap_or("");
            assert_eq!(
                what,
                "setup",
                "{path}:{}: `<!-- doc-test` takes `setup`",
                i + 1
            );
            let attrs = words.map(attr).collect();
            let start = i;
            let mut body = Vec::new();
            i += 1;
            while i < lines.len() && lines[i].trim() != "-->" {
                body.push(lines[i].trim().to_string());
                i += 1;
            }
            assert!(i < lines.len(), "{path}:{}: setup without `-->`", start + 1);
            out.push(Block {
                path: path.to_string(),
                line: start + 1,
                kind: "setup".to_string(),
                attrs,
                lines: body.into_iter().filter(|l| !l.is_empty()).collect(),
            });
            i += 1;
            continue;
        }
        let fence = if trimmed.starts_with("```") {
            "```"
        } else if trimmed.starts_with("~~~") {
            "~~~"
        } else {
            i += 1;
            continue;
        };
        let info = trimmed.trim_start_matches(fence.chars().next().unwrap_or('`'));
        let mut words = info.split_whitespace();
        let kind = words.next().unwrap_or("").to_string();
        let attrs = words.map(attr).collect();
        let start = i;
        let mut body = Vec::new();
        i += 1;
        while i < lines.len() && !lines[i].trim_start().starts_with(fence) {
            let l = lines[i];
            let cut = l.len() - l.trim_start().len();
            body.push(l[cut.min(indent)..].to_string());
            i += 1;
        }
        assert!(i < lines.len(), "{path}:{}: unclosed fence", start + 1);
        out.push(Block {
            path: path.to_string(),
            line: start + 1,
            kind,
            attrs,
            lines: body,
        });
        i += 1;
    }
    out
}

fn attr(w: &str) -> (String, Option<String>) {
    match w.split_once('=') {
        Some((k, v)) => (k.to_string(), Some(v.to_string())),
        None => (w.to_string(), None),
    }
}

/// One command of a `redis-cli` block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Typed at the prompt, in database `db`.
    Prompt { line: String, db: u32 },
    /// A shell line.
    Shell(String),
}

/// The commands of a `redis-cli` block, each with the lines it is expected to print.
pub fn steps(b: &Block) -> Vec<(Step, Vec<String>)> {
    let mut out: Vec<(Step, Vec<String>)> = Vec::new();
    for l in &b.lines {
        if let Some(step) = command_of(l) {
            out.push((step, Vec::new()));
        } else if let Some(last) = out.last_mut() {
            last.1.push(l.clone());
        } else {
            panic!("{}: output before the first command: {l:?}", b.at());
        }
    }
    for (_, exp) in out.iter_mut() {
        while exp.last().is_some_and(|l| l.trim().is_empty()) {
            exp.pop();
        }
    }
    out
}

/// `127.0.0.1:6379> CMD` or `127.0.0.1:6379[2]> CMD` or `$ LINE`.
fn command_of(l: &str) -> Option<Step> {
    if let Some(rest) = l.strip_prefix("$ ") {
        return Some(Step::Shell(rest.to_string()));
    }
    let rest = l.strip_prefix("127.0.0.1:")?;
    let digits = rest.bytes().take_while(|c| c.is_ascii_digit()).count();
    if digits == 0 {
        return None;
    }
    let rest = &rest[digits..];
    let (db, rest) = match rest.strip_prefix('[') {
        Some(r) => {
            let (n, r) = r.split_once(']')?;
            (n.parse().ok()?, r)
        }
        None => (0, rest),
    };
    let line = rest.strip_prefix("> ")?;
    Some(Step::Prompt {
        line: line.to_string(),
        db,
    })
}

/// Stream IDs of the page bound to the real ones (see the module's doc).
#[derive(Clone, Debug, Default)]
pub struct Ids {
    doc_to_real: HashMap<String, String>,
    real_to_doc: HashMap<String, String>,
}

impl Ids {
    fn bind(&mut self, doc: &str, real: &str) -> bool {
        match (self.doc_to_real.get(doc), self.real_to_doc.get(real)) {
            (Some(r), _) => r == real,
            (None, Some(_)) => false,
            (None, None) => {
                self.doc_to_real.insert(doc.to_string(), real.to_string());
                self.real_to_doc.insert(real.to_string(), doc.to_string());
                true
            }
        }
    }

    /// `line` with every bound ID of the page replaced by the real one.
    pub fn substitute(&self, line: &str) -> String {
        let mut out = String::new();
        let mut rest = line;
        while !rest.is_empty() {
            if let Some((tok, len)) = id_at(rest) {
                out.push_str(self.doc_to_real.get(tok).map(|s| s.as_str()).unwrap_or(tok));
                rest = &rest[len..];
            } else {
                let c = rest.chars().next().unwrap_or(' ');
                out.push(c);
                rest = &rest[c.len_utf8()..];
                // Copy the rest of a word of digits as it is, so that an ID is found only at
                // the start of a number.
                if c.is_ascii_digit() {
                    let n = rest.bytes().take_while(|b| b.is_ascii_digit()).count();
                    out.push_str(&rest[..n]);
                    rest = &rest[n..];
                }
            }
        }
        out
    }
}

/// A stream ID at the start of `s` (ten digits or more, `-`, digits): the ID and its length.
fn id_at(s: &str) -> Option<(&str, usize)> {
    let ms = s.bytes().take_while(|b| b.is_ascii_digit()).count();
    if ms < 10 || s.as_bytes().get(ms) != Some(&b'-') {
        return None;
    }
    let seq = s[ms + 1..]
        .bytes()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if seq == 0 {
        return None;
    }
    Some((&s[..ms + 1 + seq], ms + 1 + seq))
}

/// A number of ten digits or more at the start of `s` (a time in ms): its length.
fn time_at(s: &str) -> Option<usize> {
    let n = s.bytes().take_while(|b| b.is_ascii_digit()).count();
    (n >= 10).then_some(n)
}

/// A placeholder `<name>` at the start of `s`: its length.
fn placeholder_at(s: &str) -> Option<usize> {
    let rest = s.strip_prefix('<')?;
    let n = rest
        .bytes()
        .take_while(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        .count();
    (n > 0 && rest.as_bytes().get(n) == Some(&b'>')).then_some(n + 2)
}

/// Whether the real line `act` is what the page's line `exp` shows, binding new IDs in `ids`.
fn match_line(exp: &str, act: &str, ids: &mut Ids) -> bool {
    let (mut e, mut a) = (exp, act);
    let mut prev_digit = false;
    loop {
        if e.is_empty() {
            return a.is_empty();
        }
        if !prev_digit {
            if let Some((doc, len)) = id_at(e) {
                let Some((real, rlen)) = id_at(a) else {
                    return false;
                };
                if !ids.bind(doc, real) {
                    return false;
                }
                (e, a) = (&e[len..], &a[rlen..]);
                prev_digit = true;
                continue;
            }
            if let Some(len) = time_at(e) {
                let Some(rlen) = time_at(a) else {
                    return false;
                };
                (e, a) = (&e[len..], &a[rlen..]);
                prev_digit = true;
                continue;
            }
        }
        if let Some(len) = placeholder_at(e) {
            // A word: up to a blank, a quote, a comma, or the character the page shows next.
            let stop = e[len..].chars().next();
            let n = a
                .chars()
                .take_while(|c| !c.is_whitespace() && *c != '"' && *c != ',' && Some(*c) != stop)
                .map(char::len_utf8)
                .sum::<usize>();
            if n == 0 {
                return false;
            }
            (e, a) = (&e[len..], &a[n..]);
            prev_digit = false;
            continue;
        }
        let (Some(ce), Some(ca)) = (e.chars().next(), a.chars().next()) else {
            return false;
        };
        if ce != ca {
            return false;
        }
        prev_digit = ce.is_ascii_digit();
        (e, a) = (&e[ce.len_utf8()..], &a[ca.len_utf8()..]);
    }
}

/// Whether the real output `act` is what the page shows as `exp` (see the module's doc). On a
/// match, the IDs it bound are added to `ids`; otherwise `ids` is left as it was.
pub fn match_output(exp: &[String], act: &[String], ids: &mut Ids) -> bool {
    fn go(exp: &[String], act: &[String], ids: &Ids) -> Option<Ids> {
        let Some(first) = exp.first() else {
            return act.is_empty().then(|| ids.clone());
        };
        if first.trim() == "..." {
            for skip in 0..=act.len() {
                if let Some(ok) = go(&exp[1..], &act[skip..], ids) {
                    return Some(ok);
                }
            }
            return None;
        }
        let a = act.first()?;
        let mut tried = ids.clone();
        if !match_line(first.trim_end(), a.trim_end(), &mut tried) {
            return None;
        }
        go(&exp[1..], &act[1..], &tried)
    }
    match go(exp, act, ids) {
        Some(bound) => {
            *ids = bound;
            true
        }
        None => false,
    }
}

/// A server and a directory for the blocks of one session of a page.
pub struct Session {
    pub server: Server,
    dir: tempfile::TempDir,
    cli: PathBuf,
    pub ids: Ids,
}

/// `redis-cli` (or what [`cli_binary`] names) as an absolute path.
fn resolve_cli() -> PathBuf {
    let cli = cli_binary();
    if cli.components().count() > 1 {
        // The shell lines run in the session's directory: an absolute path.
        return std::fs::canonicalize(&cli).unwrap_or(cli);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(&cli))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{} not found on PATH", cli.display()))
}

impl Session {
    pub fn start() -> Session {
        // MODULE commands answer as on a server that allows them (docs/loading.md).
        let server = Server::start(&["--enable-module-command", "yes"]);
        let dir = tempfile::tempdir().expect("tempdir");
        let cli = resolve_cli();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).expect("bin");
        let wrapper = bin.join("redis-cli");
        std::fs::write(
            &wrapper,
            format!(
                "#!/bin/sh\nexec '{}' -p {} \"$@\"\n",
                cli.display(),
                server.port
            ),
        )
        .expect("wrapper");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
        }
        Session {
            server,
            dir,
            cli,
            ids: Ids::default(),
        }
    }

    /// The session's working directory (shell lines run there).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Runs one step; returns what it printed, as lines.
    pub fn run(&self, step: &Step, resp3: bool) -> Vec<String> {
        let out = match step {
            Step::Prompt { line, db } => {
                let mut c = Command::new(&self.cli);
                c.arg("-p")
                    .arg(self.server.port.to_string())
                    .arg("--no-raw")
                    .arg("-n")
                    .arg(db.to_string());
                if resp3 {
                    c.arg("-3");
                }
                let mut child = c
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("redis-cli");
                let line = self.ids.substitute(line);
                child
                    .stdin
                    .take()
                    .expect("stdin")
                    .write_all(format!("{line}\n").as_bytes())
                    .expect("write to redis-cli");
                child.wait_with_output().expect("redis-cli")
            }
            Step::Shell(line) => {
                let path = std::env::var_os("PATH").unwrap_or_default();
                let mut dirs = vec![self.dir.path().join("bin")];
                dirs.extend(std::env::split_paths(&path));
                let line = self.ids.substitute(line);
                Command::new("sh")
                    .arg("-c")
                    .arg(format!("exec 2>&1\n{line}"))
                    .current_dir(self.dir.path())
                    .env("PATH", std::env::join_paths(dirs).expect("PATH"))
                    .env("FAKETTY", "1")
                    .stdin(Stdio::null())
                    .output()
                    .expect("sh")
            }
        };
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        let mut lines: Vec<String> = text.lines().map(|l| l.trim_end().to_string()).collect();
        while lines.last().is_some_and(|l| l.is_empty()) {
            lines.pop();
        }
        lines
    }

    /// Runs a hidden setup's lines.
    pub fn setup(&mut self, b: &Block) -> Result<(), String> {
        for l in &b.lines {
            let words: Vec<&str> = l.split_whitespace().collect();
            match words.as_slice() {
                ["sleep", secs] => {
                    let s: f64 = secs.parse().map_err(|_| format!("{}: {l}", b.at()))?;
                    std::thread::sleep(Duration::from_secs_f64(s));
                }
                ["wait-stats", key, group, field, value] => {
                    let deadline = Instant::now() + Duration::from_secs(60 * slowdown());
                    let want = [
                        format!("\"{field}\" => {value}"),
                        format!("\"{field}\" => (integer) {value}"),
                        format!("\"{field}\" => \"{value}\""),
                    ];
                    loop {
                        let out = self.run(
                            &Step::Prompt {
                                line: format!("RECLAIM.STATS {key} {group}"),
                                db: 0,
                            },
                            true,
                        );
                        if out
                            .iter()
                            .any(|o| want.iter().any(|w| o.ends_with(w.as_str())))
                        {
                            break;
                        }
                        if Instant::now() > deadline {
                            return Err(format!(
                                "{}: timed out: {l}; RECLAIM.STATS:\n{}",
                                b.at(),
                                out.join("\n")
                            ));
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                }
                _ => {
                    let out = self.run(
                        &Step::Prompt {
                            line: l.clone(),
                            db: 0,
                        },
                        false,
                    );
                    if out.iter().any(|o| o.starts_with("(error)")) {
                        return Err(format!(
                            "{}: setup `{l}` failed: {}",
                            b.at(),
                            out.join("\n")
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// Runs a `redis-cli` block and compares each command's output with the page.
    pub fn run_block(&mut self, b: &Block) -> Result<usize, String> {
        let resp3 = b.attr("resp3").is_some();
        let wait: f64 = match b.attr("wait") {
            Some(s) => s
                .trim_end_matches('s')
                .parse()
                .map_err(|_| format!("{}: wait={s}: seconds expected", b.at()))?,
            None => 0.0,
        };
        let typing: u64 = std::env::var("DOCS_TYPING_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let steps = steps(b);
        for (n, (step, exp)) in steps.iter().enumerate() {
            std::thread::sleep(Duration::from_millis(typing));
            let retry = n == 0 && b.attr("wait").is_some();
            if retry {
                std::thread::sleep(Duration::from_secs_f64(wait));
            }
            let deadline = Instant::now() + Duration::from_secs(60 * slowdown());
            loop {
                let act = self.run(step, resp3);
                if match_output(exp, &act, &mut self.ids) {
                    break;
                }
                if !retry || Instant::now() > deadline {
                    return Err(format!(
                        "{}: {:?}{}\n--- the page shows:\n{}\n--- it printed:\n{}\n---",
                        b.at(),
                        step,
                        if retry { " (retried for 60 s)" } else { "" },
                        exp.join("\n"),
                        act.join("\n")
                    ));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(steps.len())
    }
}

/// What running a page's blocks gave: blocks and commands run, blocks not run (with why).
#[derive(Debug, Default)]
pub struct PageRun {
    pub blocks_run: usize,
    pub commands_run: usize,
    pub setups_run: usize,
    pub not_run: Vec<(String, String)>,
}

/// Runs every runnable block and hidden setup of the page at `path` (relative to `root`), one
/// server per session, in page order. Stops at the first failure.
pub fn run_page(root: &Path, path: &str) -> Result<PageRun, String> {
    let text = std::fs::read_to_string(root.join(path)).map_err(|e| format!("{path}: {e}"))?;
    let mut sessions: HashMap<String, Session> = HashMap::new();
    let mut run = PageRun::default();
    for b in parse_blocks(path, &text) {
        match disposition(&b) {
            Disposition::Unmarked => {
                return Err(format!(
                    "{}: a ```{} block that is neither run (```redis-cli) nor marked \
                     (syntax, not-run, run-by=...)",
                    b.at(),
                    b.kind
                ))
            }
            Disposition::NotRun(why) => run.not_run.push((b.at(), why)),
            Disposition::Setup => {
                let s = sessions.entry(b.session()).or_insert_with(Session::start);
                s.setup(&b)?;
                run.setups_run += 1;
            }
            Disposition::Run => {
                let s = sessions.entry(b.session()).or_insert_with(Session::start);
                run.commands_run += s.run_block(&b)?;
                run.blocks_run += 1;
            }
        }
    }
    Ok(run)
}
