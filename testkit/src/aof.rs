//! Persistence: the AOF files of a server, their commands, waiting for a rewrite.

use redis::Connection;

use crate::replies::info;
use crate::server::Server;
use crate::wait::wait_for;

impl Server {
    /// The files of the server's `appendonlydir`, as (file name, contents), sorted by name.
    pub fn aof_files(&self) -> Vec<(String, Vec<u8>)> {
        let dir = self.dir.path().join("appendonlydir");
        let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
            .map(|e| {
                let e = e.expect("dir entry");
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).expect("read AOF file"),
                )
            })
            .collect();
        out.sort();
        out
    }

    /// The AOF files the manifest lists now, as (file name, type `b`/`h`/`i`, contents), in
    /// manifest order.
    pub fn aof_manifest_files(&self) -> Vec<(String, String, Vec<u8>)> {
        let dir = self.dir.path().join("appendonlydir");
        let files = self.aof_files();
        let manifest = files
            .iter()
            .find(|(n, _)| n.ends_with(".manifest"))
            .map(|(_, d)| String::from_utf8_lossy(d).into_owned())
            .unwrap_or_else(|| panic!("no AOF manifest in {}", dir.display()));
        manifest
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                let field = |k: &str| {
                    w.iter()
                        .position(|x| *x == k)
                        .and_then(|i| w.get(i + 1))
                        .unwrap_or_else(|| panic!("manifest line without {k}: {l}"))
                        .to_string()
                };
                let name = field("file");
                let ty = field("type");
                let data = std::fs::read(dir.join(&name)).expect("read AOF file");
                (name, ty, data)
            })
            .collect()
    }
}

/// Waits until no AOF rewrite is running or scheduled, and checks that the last one succeeded.
pub fn wait_aof_rewrite_done(con: &mut Connection) {
    wait_for(20, "AOF rewrite to finish", || {
        let i = info(con, "persistence");
        let f = |k: &str| i.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        (f("aof_rewrite_in_progress").as_deref() == Some("0")
            && f("aof_rewrite_scheduled").as_deref() == Some("0"))
        .then_some(())
    });
    let i = info(con, "persistence");
    let status = i
        .iter()
        .find(|(n, _)| n == "aof_last_bgrewrite_status")
        .map(|(_, v)| v.clone());
    assert_eq!(status.as_deref(), Some("ok"), "INFO persistence: {i:?}");
}

/// Splits the RESP commands of an AOF file (arrays of bulk strings; `#` annotation lines are
/// skipped). Panics on anything else, or on a truncated command.
pub fn parse_aof(data: &[u8]) -> Vec<Vec<Vec<u8>>> {
    fn line(data: &[u8], pos: &mut usize) -> Vec<u8> {
        let start = *pos;
        let end = data[start..]
            .windows(2)
            .position(|w| w == b"\r\n")
            .map(|i| start + i)
            .unwrap_or_else(|| panic!("unterminated line at byte {start}"));
        *pos = end + 2;
        data[start..end].to_vec()
    }
    fn number(l: &[u8]) -> usize {
        std::str::from_utf8(l)
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad length {:?}", String::from_utf8_lossy(l)))
    }
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let l = line(data, &mut pos);
        match l.first() {
            Some(b'#') => continue,
            Some(b'*') => {
                let n = number(&l[1..]);
                let mut args = Vec::with_capacity(n);
                for _ in 0..n {
                    let h = line(data, &mut pos);
                    assert_eq!(h.first(), Some(&b'$'), "expected a bulk string header");
                    let len = number(&h[1..]);
                    assert!(pos + len + 2 <= data.len(), "truncated bulk string");
                    args.push(data[pos..pos + len].to_vec());
                    assert_eq!(&data[pos + len..pos + len + 2], b"\r\n");
                    pos += len + 2;
                }
                out.push(args);
            }
            _ => panic!(
                "unexpected AOF line at byte {pos}: {:?}",
                String::from_utf8_lossy(&l)
            ),
        }
    }
    out
}

/// Whether AOF command `c` is `name` (case-insensitive).
pub fn is_cmd(c: &[Vec<u8>], name: &str) -> bool {
    c.first()
        .is_some_and(|n| n.eq_ignore_ascii_case(name.as_bytes()))
}
