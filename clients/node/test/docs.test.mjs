// Every JavaScript block of docs/node.md (```js run-by=clients/node), in order, and the README's,
// against a real server, each as a reader would paste it into a file and run it with node: the
// doc cannot drift from the library. The blocks connect as written (`new Redis()`,
// `createClient()`): a resolve hook (docs/register.mjs) points those at the test's server. A block
// that runs a worker (`handleSignals()`) is sent SIGTERM once the group has nothing pending and
// nothing unread, and must exit with status 0.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { close, connect, raw } from './clients.mjs';
import { PROJECT, Server, waitFor } from './servers.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const BLOCKS_DIR = path.join(HERE, '..', '.doc-blocks');

export function jsBlocks(file) {
  const text = readFileSync(path.join(PROJECT, file), 'utf8');
  return [...text.matchAll(/^```js run-by=clients\/node\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

let server;
let client;
before(async () => {
  server = await Server.start();
  client = await connect('ioredis', 2, server.port);
  rmSync(BLOCKS_DIR, { recursive: true, force: true });
  mkdirSync(BLOCKS_DIR, { recursive: true });
});
after(async () => {
  if (client) await close(client);
  await server?.stop();
  rmSync(BLOCKS_DIR, { recursive: true, force: true });
});

async function drained() {
  const groups = await raw(client, 'XINFO', 'GROUPS', 'orders');
  for (const g of groups) {
    const f = Object.fromEntries(g.reduce((acc, v, i) => (i % 2 ? acc : [...acc, [v, g[i + 1]]]), []));
    if (f.name === 'workers') return f.pending === 0 && (f.lag ?? 0) === 0;
  }
  return false;
}

let seq = 0;
async function run(block) {
  const file = path.join(BLOCKS_DIR, `doc-block-${++seq}.mjs`);
  writeFileSync(file, block);
  const child = spawn(process.execPath, ['--import', path.join(HERE, 'docs/register.mjs'), file], {
    env: { ...process.env, DOC_PORT: String(server.port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { out += d; });
  const exited = once(child, 'exit');
  if (block.includes('handleSignals()')) {
    await waitFor('the worker to drain the group', async () => (await drained()) && /shipping/.test(out), 30_000);
    child.kill('SIGTERM');
  }
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  const [code] = await exited;
  clearTimeout(timer);
  assert.equal(code, 0, `block ${seq} exited with ${code}:\n${block}\n---\n${out}`);
  return out;
}

test('docs/node.md has its blocks', () => {
  assert.equal(jsBlocks('docs/node.md').length, 4);
  assert.equal(jsBlocks('README.md').length, 1);
});

test('docs/node.md blocks run, in order', async () => {
  const [setup, worker, commands, shapes] = jsBlocks('docs/node.md');
  await run(setup);
  assert.equal(await raw(client, 'XLEN', 'orders'), 1);
  const out = await run(worker);
  assert.match(out, /^shipping book-1 \d+-\d+ 1$/m);
  const printed = await run(commands);
  assert.match(printed, /^EXPONENTIAL 8000 active$/m);
  assert.equal((await raw(client, 'RECLAIM.POLICY', 'GET', 'orders', 'workers'))[5], 5);
  const lines = (await run(shapes)).trim().split('\n');
  assert.deepEqual(lines, ['string', 'orders book-3']);
});

test('the README\'s Node.js block runs', async () => {
  await raw(client, 'XADD', 'orders', '*', 'sku', 'book-9');
  await raw(client, 'XADD', 'orders', '*', 'nosku', 'x');
  const out = await run(jsBlocks('README.md')[0]);
  assert.match(out, /^shipping book-9$/m);
  const dlq = await raw(client, 'XRANGE', 'orders:dlq', '-', '+');
  assert.ok(dlq.some(([, f]) => f[f.indexOf('reclaim-reason') + 1] === 'no sku'), JSON.stringify(dlq));
});
