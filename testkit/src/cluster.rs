//! A real Redis Cluster for the tests: primaries and replicas, each a [`Server`] with the module
//! (free loopback ports, its own temporary directory, AOF on, killed on drop, also when a test
//! panics), joined by `redis-cli --cluster create`, and the topology changes an operator makes:
//! `redis-cli --cluster reshard`, `CLUSTER FAILOVER`, a primary killed with SIGKILL.
//!
//! Nodes are addressed by their index in [`Cluster::nodes`] (the order they were started in);
//! roles and slots change under a test, so they are always read back from the cluster
//! ([`Cluster::topology`]), never remembered.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use redis::{cmd, Connection, Value};

use crate::server::{cli_binary, free_port, Server};
use crate::wait::{slowdown, wait_for};

/// Hash slots of Redis Cluster.
pub const SLOTS: u16 = 16384;

/// CRC16 (XMODEM: polynomial 0x1021, initial value 0), the checksum Redis Cluster hashes keys
/// with (the `crc` crate's).
fn crc16(data: &[u8]) -> u16 {
    const XMODEM: crc::Crc<u16> = crc::Crc::<u16>::new(&crc::CRC_16_XMODEM);
    XMODEM.checksum(data)
}

/// The hash slot of `key`, as `CLUSTER KEYSLOT` computes it: the CRC16 of its hash tag (the bytes
/// between the first `{` and the next `}`, when not empty) or of the whole key, modulo 16384.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    crc16(tagged.unwrap_or(key)) % SLOTS
}

/// A hash tag `{<prefix>-<n>}` whose slot is `slot` (the smallest such `n`): name a stream
/// `{...}` to put it, its DLQ and its policy in that slot.
pub fn tag_for_slot(prefix: &str, slot: u16) -> String {
    (0u64..)
        .map(|n| format!("{{{prefix}-{n}}}"))
        .find(|t| key_slot(t.as_bytes()) == slot)
        .expect("every slot has a tag")
}

/// One node as `CLUSTER NODES` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    /// Node ID.
    pub id: String,
    /// Client port.
    pub port: u16,
    /// Whether it is a primary.
    pub primary: bool,
    /// The ID of its primary, for a replica.
    pub primary_id: Option<String>,
    /// Whether it is flagged `fail` (or `fail?`).
    pub failing: bool,
    /// The slot ranges it serves (inclusive), without the open (migrating/importing) ones.
    pub slots: Vec<(u16, u16)>,
}

impl NodeView {
    /// Whether it serves `slot`.
    pub fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(a, b)| a <= slot && slot <= b)
    }
}

/// Parses `CLUSTER NODES`.
pub fn parse_nodes(text: &str) -> Vec<NodeView> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            if f.len() < 8 {
                return None;
            }
            // ip:port@cport[,hostname]
            let port = f[1].split('@').next()?.rsplit(':').next()?.parse().ok()?;
            let flags: Vec<&str> = f[2].split(',').collect();
            let slots = f[8..]
                .iter()
                .filter(|s| !s.starts_with('['))
                .filter_map(|s| match s.split_once('-') {
                    Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                    None => {
                        let a = s.parse().ok()?;
                        Some((a, a))
                    }
                })
                .collect();
            Some(NodeView {
                id: f[0].to_string(),
                port,
                primary: flags.contains(&"master"),
                primary_id: (f[3] != "-").then(|| f[3].to_string()),
                failing: flags.iter().any(|x| *x == "fail" || *x == "fail?"),
                slots,
            })
        })
        .collect()
}

/// `CLUSTER INFO`'s field `name` on the node of `c` (empty when missing or on error).
pub fn cluster_info_field(c: &mut Connection, name: &str) -> String {
    let text: String = cmd("CLUSTER").arg("INFO").query(c).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}:")))
        .map(|v| v.trim().to_string())
        .unwrap_or_default()
}

/// A primary's ID and the slot ranges it serves.
type SlotOwner = (String, Vec<(u16, u16)>);

/// A Redis Cluster of servers with the module. Dropping it kills every node.
pub struct Cluster {
    /// The nodes, in the order they were started (index = node number in every method).
    pub nodes: Vec<Server>,
    /// `cluster-node-timeout`, ms.
    pub node_timeout_ms: u64,
    /// Each node's ID (node IDs never change).
    ids: Vec<String>,
    /// Whether each node was killed by [`Cluster::kill`] and not restarted.
    down: Vec<bool>,
}

impl Cluster {
    /// Starts `primaries` primaries with `replicas` replicas each (`cluster-node-timeout`
    /// `node_timeout_ms`, AOF on, `extra` arguments on every node), joins them with `redis-cli
    /// --cluster create ... --cluster-replicas <replicas> --cluster-yes`, and waits until every
    /// node agrees on the slot map, the cluster is `ok` and every replica's link is up.
    pub fn start(
        primaries: usize,
        replicas: usize,
        node_timeout_ms: u64,
        extra: &[&str],
    ) -> Cluster {
        let n = primaries * (replicas + 1);
        let timeout = node_timeout_ms.to_string();
        let nodes: Vec<Server> = (0..n)
            .map(|_| {
                // The bus port is a free port of its own (port + 10000 may not exist).
                let bus = free_port().to_string();
                let mut args = vec![
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    &timeout,
                    "--cluster-port",
                    &bus,
                    "--appendonly",
                    "yes",
                ];
                args.extend_from_slice(extra);
                Server::start(&args)
            })
            .collect();
        let mut cluster = Cluster {
            ids: nodes.iter().map(|s| my_id(&mut s.conn())).collect(),
            down: vec![false; n],
            nodes,
            node_timeout_ms,
        };
        let mut args: Vec<String> = vec!["--cluster".into(), "create".into()];
        args.extend(cluster.addrs());
        args.extend([
            "--cluster-replicas".into(),
            replicas.to_string(),
            "--cluster-yes".into(),
        ]);
        let out = cluster.cli(&args, 60);
        assert!(out.ok, "redis-cli --cluster create failed:\n{}", out.text);
        cluster.wait_ok(30);
        cluster.wait_replicas_synced(30);
        cluster.ids = cluster.nodes.iter().map(|s| my_id(&mut s.conn())).collect();
        cluster
    }

    /// `127.0.0.1:<port>` of node `i`.
    pub fn addr(&self, i: usize) -> String {
        format!("127.0.0.1:{}", self.nodes[i].port)
    }

    /// Every node's address (seeds for a cluster client).
    pub fn addrs(&self) -> Vec<String> {
        (0..self.nodes.len()).map(|i| self.addr(i)).collect()
    }

    /// The addresses of the nodes that are running.
    pub fn live_addrs(&self) -> Vec<String> {
        self.live().map(|i| self.addr(i)).collect()
    }

    /// The indices of the nodes that are running.
    pub fn live(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.nodes.len()).filter(|&i| !self.down[i])
    }

    /// A connection to node `i`.
    pub fn conn(&self, i: usize) -> Connection {
        self.nodes[i].conn()
    }

    /// Node `i`'s ID.
    pub fn id(&self, i: usize) -> &str {
        &self.ids[i]
    }

    /// The index of the node with ID `id`.
    pub fn index_of(&self, id: &str) -> usize {
        self.ids
            .iter()
            .position(|x| x == id)
            .unwrap_or_else(|| panic!("no node {id}"))
    }

    /// The cluster as node `i` sees it.
    pub fn topology_seen_by(&self, i: usize) -> Vec<NodeView> {
        let text: String = cmd("CLUSTER")
            .arg("NODES")
            .query(&mut self.conn(i))
            .expect("CLUSTER NODES");
        parse_nodes(&text)
    }

    /// The cluster as the first running node sees it.
    pub fn topology(&self) -> Vec<NodeView> {
        let i = self.live().next().expect("a running node");
        self.topology_seen_by(i)
    }

    /// The index of the primary serving `slot` (as the first running node sees it).
    pub fn owner(&self, slot: u16) -> usize {
        let t = self.topology();
        let n = t
            .iter()
            .find(|n| n.primary && n.serves(slot))
            .unwrap_or_else(|| panic!("no node serves slot {slot}: {t:?}"));
        self.index_of(&n.id)
    }

    /// The primaries (indices), in node order.
    pub fn primaries(&self) -> Vec<usize> {
        let t = self.topology();
        self.live()
            .filter(|&i| {
                t.iter()
                    .any(|n| n.id == self.ids[i] && n.primary && !n.failing)
            })
            .collect()
    }

    /// The running replicas of primary `p` (indices).
    pub fn replicas_of(&self, p: usize) -> Vec<usize> {
        let t = self.topology();
        self.live()
            .filter(|&i| {
                t.iter()
                    .any(|n| n.id == self.ids[i] && n.primary_id.as_deref() == Some(&self.ids[p]))
            })
            .collect()
    }

    /// The lowest slot primary `p` serves (the first one `redis-cli --cluster reshard
    /// --cluster-from <p>` moves).
    pub fn lowest_slot(&self, p: usize) -> u16 {
        let t = self.topology();
        t.iter()
            .find(|n| n.id == self.ids[p])
            .and_then(|n| n.slots.iter().map(|r| r.0).min())
            .unwrap_or_else(|| panic!("node {p} serves no slot"))
    }

    /// Whether every running node says `cluster_state:ok`, has no open (migrating or importing)
    /// slot, and all of them see the same primaries serving the same slots: what `redis-cli
    /// --cluster check` requires before a reshard.
    pub fn is_ok(&self) -> bool {
        let mut seen: Option<Vec<SlotOwner>> = None;
        for i in self.live() {
            let mut c = match redis::Client::open(format!("redis://{}/", self.addr(i)))
                .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            {
                Ok(c) => c,
                Err(_) => return false,
            };
            if cluster_info_field(&mut c, "cluster_state") != "ok" {
                return false;
            }
            let Ok(text) = cmd("CLUSTER").arg("NODES").query::<String>(&mut c) else {
                return false;
            };
            if text.contains("->-") || text.contains("-<-") {
                return false;
            }
            let mut view: Vec<SlotOwner> = parse_nodes(&text)
                .into_iter()
                .filter(|n| n.primary && !n.slots.is_empty())
                .map(|n| (n.id, n.slots))
                .collect();
            view.sort();
            if seen.as_ref().is_some_and(|s| *s != view) {
                return false;
            }
            seen = Some(view);
        }
        seen.is_some_and(|s| {
            let covered: u32 = s
                .iter()
                .flat_map(|(_, r)| r)
                .map(|&(a, b)| (b - a) as u32 + 1)
                .sum();
            covered == SLOTS as u32
        })
    }

    /// Waits until [`Cluster::is_ok`] (up to `secs`, times the slowdown).
    pub fn wait_ok(&self, secs: u64) {
        wait_for(secs, "the cluster to be ok and agreed on its slots", || {
            self.is_ok().then_some(())
        });
    }

    /// Waits until every running replica's link to its primary is up.
    pub fn wait_replicas_synced(&self, secs: u64) {
        wait_for(secs, "every replica's link up", || {
            self.live()
                .all(|i| {
                    let info: String = cmd("INFO")
                        .arg("replication")
                        .query(&mut self.conn(i))
                        .unwrap_or_default();
                    info.contains("role:master") || info.contains("master_link_status:up")
                })
                .then_some(())
        });
    }

    /// Runs the command-line client (`redis-cli`, or the server's own; see [`cli_binary`]) with
    /// `args`, killed after `secs` seconds (times the slowdown).
    pub fn cli(&self, args: &[String], secs: u64) -> CliOutput {
        run_cli(args, secs)
    }

    /// `redis-cli --cluster reshard <node> --cluster-from <from> --cluster-to <to>
    /// --cluster-slots <n> --cluster-yes`: moves the `n` lowest slots of primary `from` (with their
    /// keys, `MIGRATE` in batches) to primary `to`. Panics when redis-cli fails; returns how long
    /// it took.
    pub fn reshard(&self, from: usize, to: usize, n: u16) -> Duration {
        let t0 = Instant::now();
        let args: Vec<String> = [
            "--cluster",
            "reshard",
            &self.addr(to),
            "--cluster-from",
            &self.ids[from],
            "--cluster-to",
            &self.ids[to],
            "--cluster-slots",
            &n.to_string(),
            "--cluster-yes",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let out = self.cli(&args, 120);
        assert!(out.ok, "redis-cli --cluster reshard failed:\n{}", out.text);
        t0.elapsed()
    }

    /// `CLUSTER FAILOVER` on replica `r`, then waits until it is a primary in every running
    /// node's view and the cluster is ok. Returns how long that took.
    pub fn failover(&self, r: usize) -> Duration {
        let t0 = Instant::now();
        let _: () = cmd("CLUSTER")
            .arg("FAILOVER")
            .query(&mut self.conn(r))
            .expect("CLUSTER FAILOVER");
        self.wait_primary(r, 30);
        t0.elapsed()
    }

    /// Waits until node `r` is a primary in every running node's view and the cluster is ok.
    pub fn wait_primary(&self, r: usize, secs: u64) {
        wait_for(
            secs,
            &format!("node {r} to be a primary everywhere"),
            || {
                let everywhere = self.live().all(|i| {
                    self.topology_seen_by(i)
                        .iter()
                        .any(|n| n.id == self.ids[r] && n.primary)
                });
                (everywhere && self.is_ok()).then_some(())
            },
        );
    }

    /// Waits until node `r` says it is a primary (`ROLE`), the moment a replica takes over its
    /// primary's slots (the other nodes learn it from its next messages).
    pub fn wait_promoted(&self, r: usize, secs: u64) {
        let mut c = self.conn(r);
        wait_for(secs, &format!("node {r} to be promoted"), || {
            let role: Vec<Value> = cmd("ROLE").query(&mut c).ok()?;
            matches!(role.first(), Some(Value::BulkString(b)) if b == b"master").then_some(())
        });
    }

    /// Kills node `i` with SIGKILL (no save, no goodbye to the cluster).
    pub fn kill(&mut self, i: usize) {
        self.nodes[i].kill();
        self.down[i] = true;
    }

    /// Starts a killed node again (same port, directory, `nodes.conf` and AOF): it rejoins the
    /// cluster, as a replica when another node took its slots.
    pub fn restart(&mut self, i: usize) {
        self.nodes[i].restart();
        self.down[i] = false;
    }

    /// The end of every node's log, for a failing test's message.
    pub fn logs_tail(&self, n: usize) -> String {
        (0..self.nodes.len())
            .map(|i| {
                format!(
                    "--- node {i} ({}):\n{}",
                    self.addr(i),
                    self.nodes[i].log_tail(n)
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// `CLUSTER MYID` of the node of `c`.
pub fn my_id(c: &mut Connection) -> String {
    cmd("CLUSTER").arg("MYID").query(c).expect("CLUSTER MYID")
}

/// `CLUSTER KEYSLOT key`, as the node of `c` computes it.
pub fn keyslot(c: &mut Connection, key: &[u8]) -> i64 {
    cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(c)
        .expect("CLUSTER KEYSLOT")
}

/// A lone cluster node with the module (`cluster-enabled`, its `nodes.conf` in its own temporary
/// directory, `cluster-node-timeout` 5 s), serving no slot: a test gives it slots or joins it to
/// others itself ([`own_all_slots`], [`TwoNodes`]).
pub fn cluster_node() -> Server {
    Server::start(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        "5000",
    ])
}

/// Waits (up to `secs`) until the node of `c` says `cluster_state:ok`.
pub fn wait_cluster_ok(c: &mut Connection, secs: u64) {
    wait_for(secs, "cluster_state:ok", || {
        (cluster_info_field(c, "cluster_state") == "ok").then_some(())
    });
}

/// Gives `c`'s node every slot (`CLUSTER ADDSLOTSRANGE 0 16383`) and waits until its cluster is up.
pub fn own_all_slots(c: &mut Connection) {
    let _: () = cmd("CLUSTER")
        .arg("ADDSLOTSRANGE")
        .arg(0)
        .arg(SLOTS - 1)
        .query(c)
        .expect("CLUSTER ADDSLOTSRANGE");
    wait_cluster_ok(c, 20);
}

/// `CLUSTER SETSLOT <slot> <how> <id>` on the node of `c` (`IMPORTING`, `MIGRATING`, `NODE`).
pub fn set_slot(c: &mut Connection, slot: i64, how: &str, id: &str) {
    let _: () = cmd("CLUSTER")
        .arg("SETSLOT")
        .arg(slot)
        .arg(how)
        .arg(id)
        .query(c)
        .unwrap_or_else(|e| panic!("SETSLOT {slot} {how} {id}: {e}"));
}

/// `CLUSTER GETKEYSINSLOT <slot> 100` on the node of `c`.
pub fn keys_in_slot(c: &mut Connection, slot: i64) -> Vec<Vec<u8>> {
    cmd("CLUSTER")
        .arg("GETKEYSINSLOT")
        .arg(slot)
        .arg(100)
        .query(c)
        .expect("GETKEYSINSLOT")
}

/// Two cluster nodes with the module ([`cluster_node`]) in one cluster: A serves every slot, B
/// none; each knows the other and B says the cluster is ok. Tests move slots between them as
/// `redis-cli --cluster reshard` does ([`set_slot`], [`TwoNodes::migrate`]), or make B A's replica.
pub struct TwoNodes {
    /// The node that serves every slot.
    pub a: Server,
    /// The node that serves none.
    pub b: Server,
    /// A's node ID.
    pub ida: String,
    /// B's node ID.
    pub idb: String,
}

impl TwoNodes {
    /// Starts A and B, gives A every slot, `CLUSTER MEET`s B from A and waits until both know two
    /// nodes and B's cluster is ok.
    pub fn start() -> TwoNodes {
        let (a, b) = (cluster_node(), cluster_node());
        let (mut ca, mut cb) = (a.conn(), b.conn());
        own_all_slots(&mut ca);
        let _: () = cmd("CLUSTER")
            .arg("MEET")
            .arg("127.0.0.1")
            .arg(b.port)
            .query(&mut ca)
            .expect("CLUSTER MEET");
        wait_for(20, "both nodes in one cluster, state ok", || {
            (cluster_info_field(&mut ca, "cluster_known_nodes") == "2"
                && cluster_info_field(&mut cb, "cluster_known_nodes") == "2"
                && cluster_info_field(&mut cb, "cluster_state") == "ok")
                .then_some(())
        });
        let (ida, idb) = (my_id(&mut ca), my_id(&mut cb));
        TwoNodes { a, b, ida, idb }
    }

    /// `MIGRATE 127.0.0.1 <B's port> "" 0 5000 KEYS <keys>` on A (through `ca`): the keys move to B.
    pub fn migrate(&self, ca: &mut Connection, keys: &[Vec<u8>]) {
        let _: () = cmd("MIGRATE")
            .arg("127.0.0.1")
            .arg(self.b.port)
            .arg("")
            .arg(0)
            .arg(5000)
            .arg("KEYS")
            .arg(keys)
            .query(ca)
            .expect("MIGRATE");
    }
}

/// What the command-line client printed (stdout and stderr) and whether it exited with 0.
#[derive(Debug, Clone)]
pub struct CliOutput {
    /// Exit status 0.
    pub ok: bool,
    /// Its output, stdout then stderr.
    pub text: String,
}

/// Runs the command-line client with `args`; killed after `secs` seconds (times the slowdown).
pub fn run_cli(args: &[String], secs: u64) -> CliOutput {
    let mut child = Command::new(cli_binary())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start redis-cli");
    // Read both pipes on threads, so a full pipe never stalls the child.
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let o = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let e = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    let deadline = Instant::now() + Duration::from_secs(secs * slowdown());
    let status = loop {
        if let Ok(Some(s)) = child.try_wait() {
            break Some(s);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut text = String::from_utf8_lossy(&o.join().unwrap_or_default()).into_owned();
    text.push_str(&String::from_utf8_lossy(&e.join().unwrap_or_default()));
    if status.is_none() {
        text.push_str(&format!("\n(killed after {secs}s)"));
    }
    CliOutput {
        ok: status.is_some_and(|s| s.success()),
        text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_slots_are_redis_clusters() {
        // Values from the Redis Cluster specification and CLUSTER KEYSLOT.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), crc16(b"foo{}{bar}") % SLOTS);
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"bar"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
        for slot in [0, 5461, 10923, 16383] {
            assert_eq!(key_slot(tag_for_slot("s", slot).as_bytes()), slot);
        }
    }

    #[test]
    fn parses_cluster_nodes() {
        let text = "\
a1 127.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460 [5461->-b2]\n\
b2 127.0.0.1:7001@17001 master - 0 0 2 connected 5461-10922 16000\n\
c3 127.0.0.1:7002@17002 slave,fail a1 0 0 1 disconnected\n";
        let n = parse_nodes(text);
        assert_eq!(n.len(), 3);
        assert_eq!((n[0].port, n[0].primary), (7000, true));
        assert_eq!(n[0].slots, [(0, 5460)]);
        assert_eq!(n[1].slots, [(5461, 10922), (16000, 16000)]);
        assert!(n[1].serves(16000) && !n[1].serves(16001));
        assert_eq!(n[2].primary_id.as_deref(), Some("a1"));
        assert!(n[2].failing && !n[2].primary);
    }
}
