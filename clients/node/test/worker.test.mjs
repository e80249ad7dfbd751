// The Worker against a real server: nothing lost, nothing acknowledged twice; poison entries
// dead-lettered after exactly MAX-DELIVERIES attempts; Retry and Permanent; close() and SIGTERM
// give back what is not done; a SIGKILLed worker's entries redelivered; a server restart waited
// out; bad options refused.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import Redis from 'ioredis';
import { createClient } from 'redis';
import { Permanent, PolicyError, Reclaim, Retry, Worker } from '../dist/esm/index.js';
import { close, connect, raw } from './clients.mjs';
import { PROJECT, Server, waitFor } from './servers.mjs';

const HERE = path.dirname(fileURLToPath(import.meta.url));

let server;
let client;
let reclaim;
before(async () => {
  server = await Server.start({ extra: ['--appendonly', 'yes'] });
  client = await connect('ioredis', 3, server.port);
  reclaim = new Reclaim(client);
});
after(async () => {
  if (client) await close(client);
  await server?.stop();
});

let n = 0;
/** A fresh stream with a group and a policy. */
async function setup(policy = {}) {
  const stream = `jobs-${++n}`;
  await raw(client, 'XGROUP', 'CREATE', stream, 'workers', '0', 'MKSTREAM');
  await reclaim.policySet(stream, 'workers', { minIdle: 300, maxDeliveries: 3, dlq: `${stream}:dlq`, ...policy });
  return stream;
}

async function add(stream, count, fields = (i) => ['n', String(i)]) {
  const p = client.pipeline();
  for (let i = 0; i < count; i++) p.xadd(stream, '*', ...fields(i));
  return (await p.exec()).map(([, id]) => id);
}

const pendingOf = async (stream, consumer) => Number((await raw(client, 'XPENDING', stream, 'workers', '-', '+', '1000', consumer)).length);
const pendingAll = async (stream) => Number((await raw(client, 'XPENDING', stream, 'workers'))[0]);
const dlqOf = (stream) => raw(client, 'XRANGE', `${stream}:dlq`, '-', '+');
const reasonOf = (dl) => dl[1][dl[1].indexOf('reclaim-reason') + 1];

describe('Worker', () => {
  test('nothing lost, nothing acknowledged twice: two workers, two client libraries, failures', async () => {
    // Leases long enough that a loaded machine's stalls do not hand a running entry to the other worker.
    const stream = await setup({ minIdle: 3000, maxDeliveries: 5 });
    const ids = await add(stream, 300);
    const done = new Map();
    const failedOnce = new Set();
    const handler = async (entry) => {
      assert.equal(entry.stream, stream);
      if (Number(entry.fields.n) % 10 === 0 && !failedOnce.has(entry.id)) {
        failedOnce.add(entry.id);
        assert.equal(entry.attempt, 1);
        throw new Error('first attempt fails');
      }
      if (failedOnce.has(entry.id)) assert.equal(entry.attempt, 2);
      await new Promise((r) => setTimeout(r, Number(entry.fields.n) % 3)); // the scenario: 0-2 ms of work
    };
    const nr = await connect('node-redis', 2, server.port);
    const workers = [
      new Worker(client, { stream, group: 'workers', consumer: 'a', handler, concurrency: 10, block: 100, failureDelay: 50 }),
      new Worker(nr, { stream, group: 'workers', consumer: 'b', handler, concurrency: 7, block: 100, failureDelay: 50 }),
    ];
    for (const w of workers) {
      w.on('completed', (e) => done.set(e.id, (done.get(e.id) ?? 0) + 1));
      w.on('error', () => {});
    }
    await waitFor('every entry acknowledged', () => done.size === ids.length, 60_000);
    await Promise.all(workers.map((w) => w.close()));
    await close(nr);
    assert.deepEqual([...done.keys()].sort(), [...ids].sort());
    assert.ok([...done.values()].every((c) => c === 1), 'an entry completed twice');
    assert.equal(workers[0].counts.acked + workers[1].counts.acked, 300);
    assert.equal(workers[0].counts.failed + workers[1].counts.failed, 30);
    assert.equal(workers[0].counts.lost + workers[1].counts.lost, 0);
    assert.equal(await pendingAll(stream), 0);
    assert.deepEqual(await dlqOf(stream), []);
  });

  test('settling is batched: at concurrency 100, one XACK for the entries of a read, sent with the next read', async () => {
    const stream = await setup({ minIdle: 30_000 });
    await add(stream, 500);
    const calls = async () => {
      const text = await raw(client, 'INFO', 'commandstats');
      const of = (cmd) => Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(text)?.[1] ?? 0);
      return { xack: of('xack'), reads: of('reclaim\\.readgroup') };
    };
    const before = await calls();
    const w = new Worker(client, { stream, group: 'workers', consumer: 'batch', concurrency: 100, block: 1000, handler: async () => {} });
    await waitFor('all 500 acknowledged', () => w.counts.acked === 500, 20_000);
    const after = await calls();
    await w.close();
    // 5 reads of 100, each read's entries acknowledged by one XACK written with the next read
    // (the 6th waits in BLOCK: counted once it returns on Redis 8, when it starts on 7.0; a 7th
    // if the machine stalls for the BLOCK's second).
    assert.equal(after.xack - before.xack, 5);
    assert.ok([5, 6, 7].includes(after.reads - before.reads), `RECLAIM.READGROUP sent ${after.reads - before.reads} times for 500 entries`);
    assert.equal(await pendingAll(stream), 0);
  });

  test('a poison entry runs exactly MAX-DELIVERIES times, then one DLQ entry', async () => {
    const stream = await setup({ minIdle: 100, maxDeliveries: 3 });
    const [id] = await add(stream, 1);
    const attempts = [];
    const w = new Worker(client, {
      stream, group: 'workers', consumer: 'p', block: 50,
      handler: (e) => { attempts.push(e.attempt); throw new Error('poison'); },
    });
    w.on('error', () => {});
    const dl = await waitFor('the DLQ entry', async () => ((await dlqOf(stream)).length ? dlqOf(stream) : null), 30_000);
    await w.close();
    assert.deepEqual(attempts, [1, 2, 3]);
    assert.equal(dl.length, 1);
    assert.equal(reasonOf(dl[0]), 'max-deliveries');
    assert.equal(dl[0][1][dl[0][1].indexOf('reclaim-id') + 1], id);
    assert.equal(w.counts.failed, 3);
    assert.equal(await pendingAll(stream), 0);
  });

  test('Retry(ms) delivers again after ms; Permanent(reason) dead-letters at once', async () => {
    const stream = await setup({ minIdle: 2000 });
    const [retryId, permId] = await add(stream, 2, (i) => (i === 0 ? ['kind', 'retry'] : ['kind', 'perm']));
    const seen = [];
    const events = [];
    const w = new Worker(client, {
      stream, group: 'workers', consumer: 'r', concurrency: 2, block: 50,
      handler: (e) => {
        seen.push([e.id, e.attempt, Date.now()]);
        if (e.fields.kind === 'perm') throw new Permanent('no sku');
        if (e.attempt === 1) throw new Retry(150);
      },
    });
    for (const ev of ['completed', 'retried', 'deadLettered', 'failed']) w.on(ev, (e) => events.push([ev, e.id]));
    await waitFor('the retried entry acknowledged', () => w.counts.acked === 1, 20_000);
    await w.close();
    const tries = seen.filter(([id]) => id === retryId);
    assert.deepEqual(tries.map(([, a]) => a), [1, 2]);
    assert.ok(tries[1][2] - tries[0][2] >= 140, `redelivered after ${tries[1][2] - tries[0][2]} ms`);
    const dl = await dlqOf(stream);
    assert.equal(dl.length, 1);
    assert.equal(reasonOf(dl[0]), 'no sku');
    assert.deepEqual(events.sort(), [['completed', retryId], ['deadLettered', permId], ['retried', retryId]].sort());
    assert.deepEqual({ ...w.counts }, { acked: 1, retried: 1, failed: 0, 'dead-lettered': 1, lost: 0, refused: 0, 'given-back': 0 });
  });

  test('Permanent without a DLQ is refused and given back', async () => {
    const stream = `nodlq-${++n}`;
    await raw(client, 'XGROUP', 'CREATE', stream, 'workers', '0', 'MKSTREAM');
    await reclaim.policySet(stream, 'workers', { minIdle: 100 });
    await add(stream, 1);
    let calls = 0;
    const w = new Worker(client, {
      stream, group: 'workers', consumer: 'x', block: 50,
      handler: () => { calls += 1; if (calls === 1) throw new Permanent('nope'); },
    });
    w.on('error', () => {});
    await waitFor('acknowledged on the second attempt', () => w.counts.acked === 1, 20_000);
    await w.close();
    assert.equal(calls, 2);
    assert.equal(w.counts.refused, 1);
    assert.equal(await pendingAll(stream), 0);
  });

  test('long handlers keep their leases (EXTEND): no other worker gets their entries', async () => {
    const stream = await setup({ minIdle: 1000, interval: 100 });
    await add(stream, 3);
    const byWorker = { slow: 0, other: 0 };
    const slow = new Worker(client, {
      stream, group: 'workers', consumer: 'slow', concurrency: 3, block: 50,
      // The scenario: handlers that run three times the lease.
      handler: async () => { byWorker.slow += 1; await new Promise((r) => setTimeout(r, 3000)); },
    });
    await waitFor('the slow worker holding 3', () => slow.holding === 3, 10_000);
    const other = new Worker(client, {
      stream, group: 'workers', consumer: 'other', block: 50,
      handler: () => { byWorker.other += 1; },
    });
    await waitFor('the slow worker done', () => slow.counts.acked === 3, 20_000);
    await Promise.all([slow.close(), other.close()]);
    assert.deepEqual(byWorker, { slow: 3, other: 0 });
  });

  test('close() lets running handlers finish, gives back the rest after closeTimeout, resolves holding nothing', async () => {
    const stream = await setup({ minIdle: 60_000 });
    await add(stream, 5);
    let release;
    const gate = new Promise((r) => { release = r; });
    let quick = 0;
    let finished = 0;
    const w = new Worker(client, {
      stream, group: 'workers', consumer: 'c', concurrency: 3, block: 50, closeTimeout: 200,
      handler: async (e) => { if (e.fields.n === '0') { quick += 1; return; } await gate; finished += 1; },
    });
    await waitFor('one acknowledged, then 3 entries held', () => w.counts.acked === 1 && w.holding === 3, 10_000);
    await w.close();
    assert.equal(w.holding, 0);
    assert.equal(await pendingOf(stream, 'c'), 0);
    assert.equal(w.counts.acked, 1);
    assert.equal(w.counts['given-back'], 3);
    release();
    // The held handlers finish; then a round trip on the worker's connection: an XACK they caused
    // would have been answered before it.
    await waitFor('the 3 held handlers to finish', () => finished === 3, 10_000);
    await raw(client, 'PING');
    assert.equal(w.counts.acked, 1, 'a handler that finished after close() must not acknowledge');
    // The given-back entries go to the next reader at once.
    const next = await reclaim.readgroup('workers', 'd', stream, { count: 10 });
    assert.equal(next[0].entries.length, 4);
  });

  test('a server down for a second, then restarted, is waited out; the worker goes on', async () => {
    const stream = await setup({ minIdle: 500 });
    await add(stream, 5);
    const handled = new Set();
    const errors = [];
    const w = new Worker(client, { stream, group: 'workers', consumer: 'rs', block: 50, handler: (e) => { handled.add(e.fields.n); } });
    w.on('error', (e) => errors.push(e));
    await waitFor('the first 5', () => handled.size === 5, 10_000);
    await waitFor('acknowledged', () => w.counts.acked === 5, 10_000);
    await raw(client, 'BGREWRITEAOF');
    await waitFor('the AOF rewritten', async () => /aof_rewrite_in_progress:0/.test(await raw(client, 'INFO', 'persistence')) && /aof_rewrite_scheduled:0/.test(await raw(client, 'INFO', 'persistence')));
    await server.restart(1000);
    await waitFor('the client back', () => raw(client, 'PING').then((r) => r === 'PONG', () => false), 20_000);
    await add(stream, 5, (i) => ['n', String(100 + i)]);
    await waitFor('the next 5 after the restart', () => handled.size === 10, 30_000);
    await w.close();
    assert.equal(w.counts.acked, 10);
    assert.equal(await pendingAll(stream), 0);
    assert.ok(errors.every((e) => !(e instanceof TypeError)), String(errors));
  });

  test('a worker started while the server is down starts reading once it is up', async () => {
    const stream = await setup({ minIdle: 2000 });
    await add(stream, 3);
    const c = new Redis({ port: server.port, host: '127.0.0.1', maxRetriesPerRequest: 1, retryStrategy: () => 100 });
    c.on('error', () => {});
    await c.ping();
    await server.kill();
    await waitFor('the client to see the drop', () => c.status !== 'ready');
    const w = new Worker(c, { stream, group: 'workers', consumer: 'late', block: 50, handler: () => {} });
    const errors = [];
    w.on('error', (e) => errors.push(e));
    await waitFor('the worker to report the server down', () => errors.length > 0, 10_000);
    assert.equal(await server.spawn(), true);
    await waitFor('the 3 entries acknowledged', () => w.counts.acked === 3, 30_000);
    await w.close();
    c.disconnect();
    assert.ok(errors.length > 0, 'the drop was reported on the error event');
  });

  test('a listener that throws is reported on error, the worker goes on', async () => {
    const stream = await setup({ minIdle: 2000 });
    await add(stream, 3);
    const errors = [];
    const w = new Worker(client, { stream, group: 'workers', consumer: 'l', block: 50, handler: () => {} });
    w.on('completed', () => { throw new Error('listener bug'); });
    w.on('error', (e) => errors.push(e.message));
    await waitFor('the 3 entries acknowledged', () => w.counts.acked === 3, 10_000);
    await w.close();
    assert.deepEqual(errors, ['listener bug', 'listener bug', 'listener bug']);
  });

  test('no running policy: run() rejects with PolicyError before reading; waitForPolicy waits for it', async () => {
    const stream = `nopolicy-${++n}`;
    await raw(client, 'XGROUP', 'CREATE', stream, 'workers', '0', 'MKSTREAM');
    await add(stream, 1);
    const w = new Worker(client, { stream, group: 'workers', consumer: 'x', block: 50, handler: () => {}, autorun: false });
    await assert.rejects(w.run(), {
      name: 'PolicyError',
      message: `no redis-reclaim policy for stream '${stream}' group 'workers' (RECLAIM.POLICY SET it first) (new Worker(..., { waitForPolicy: true }) waits for it)`,
    });
    assert.equal(w.holding, 0);
    assert.equal(await pendingAll(stream), 0, 'nothing read');
    // A typo'd group: the policy waits for it, and so does not run.
    await reclaim.policySet(stream, 'wrokers', { minIdle: 1000 });
    const typo = new Worker(client, { stream, group: 'wrokers', consumer: 'x', block: 50, handler: () => {}, autorun: false });
    await assert.rejects(typo.run(), (e) => e instanceof PolicyError && /^the policy of stream '.+' group 'wrokers' does not run: waiting/.test(e.message));
    // waitForPolicy: told once on `error`, then starts when the policy is set.
    const told = [];
    const waiting = new Worker(client, { stream, group: 'workers', consumer: 'y', block: 50, handler: () => {}, waitForPolicy: true });
    waiting.on('error', (e) => told.push(e));
    await waitFor('told it waits', () => told.length === 1, 10_000);
    assert.equal(told[0].name, 'PolicyError');
    assert.match(told[0].message, /: waiting for it$/);
    await reclaim.policySet(stream, 'workers', { minIdle: 1000 });
    await reclaim.policyPause(stream, 'workers');
    const paused = new Worker(client, { stream, group: 'workers', consumer: 'x', block: 50, handler: () => {}, autorun: false });
    await assert.rejects(paused.run(), { name: 'PolicyError', message: `the policy of stream '${stream}' group 'workers' is paused (new Worker(..., { waitForPolicy: true }) waits for it)` });
    await reclaim.policyResume(stream, 'workers');
    await waitFor('the entry acknowledged', () => waiting.counts.acked === 1, 10_000);
    await waiting.close();
    assert.equal(told.length, 1);
  });

  test('NOGROUP stops the worker: run() rejects with the server\'s error, holding nothing', async () => {
    const stream = await setup();
    await add(stream, 1);
    const w = new Worker(client, { stream, group: 'workers', consumer: 'x', block: 50, handler: () => {}, autorun: false });
    const running = w.run();
    running.catch(() => {}); // it rejects while the test destroys the group
    await waitFor('the worker reading', () => w.counts.acked === 1, 10_000);
    await raw(client, 'XGROUP', 'DESTROY', stream, 'workers');
    await assert.rejects(running, (e) => e.code === 'NOGROUP' && /^NOGROUP /.test(e.message));
    assert.equal(w.holding, 0);
  });

  test('a Retry the server refuses (over 30 days) is counted refused, never cut short: pending until its lease ends', async () => {
    const stream = await setup({ minIdle: 60_000 });
    const [id] = await add(stream, 1);
    const errors = [];
    const w = new Worker(client, {
      stream, group: 'workers', consumer: 'long', block: 50,
      handler: () => { throw new Retry(2_592_000_001); },
    });
    w.on('error', (e) => errors.push(e));
    await waitFor('the Retry refused', () => w.counts.refused === 1, 10_000);
    await w.close();
    assert.deepEqual({ ...w.counts }, { acked: 0, retried: 0, failed: 0, 'dead-lettered': 0, lost: 0, refused: 1, 'given-back': 0 });
    assert.equal(errors[0].code, 'ERR');
    assert.match(errors[0].message, /^ERR DELAY 2592000001 is longer than 60000, .* \(30 days\), the longest delay$/);
    // Still this consumer's, due when its 60 s lease ends (not cut to it by a NACK).
    const [row] = await raw(client, 'XPENDING', stream, 'workers', '-', '+', '10', 'long');
    assert.equal(row[0], id);
    assert.equal(Number(row[3]), 1);
  });

  test('a worker user without RECLAIM.POLICY GET starts without the check, told on error', async () => {
    const stream = await setup({ minIdle: 2000 });
    await add(stream, 2);
    await raw(client, 'ACL', 'SETUSER', `w-${stream}`, 'on', '>pw', `~${stream}`, `~${stream}:dlq`, '+@stream', '+reclaim.readgroup', '+reclaim.extend', '+reclaim.nack', '+reclaim.term', '+command|docs', '+client|id', '+ping');
    const c = new Redis({ port: server.port, host: '127.0.0.1', username: `w-${stream}`, password: 'pw', enableReadyCheck: false });
    await c.ping();
    const errors = [];
    const w = new Worker(c, { stream, group: 'workers', consumer: 'acl', block: 50, handler: () => {} });
    w.on('error', (e) => errors.push(e));
    await waitFor('both acknowledged', () => w.counts.acked === 2, 10_000);
    await w.close();
    c.disconnect();
    assert.equal(errors.length, 1);
    assert.equal(errors[0].code, 'NOPERM');
    assert.equal(errors[0].command, 'RECLAIM.POLICY GET');
  });

  test('the worker role of docs/security.md checks the policy: PolicyError without one, works with one', async () => {
    const doc = readFileSync(path.join(PROJECT, 'docs/security.md'), 'utf8');
    const role = /^127\.0\.0\.1:6379> ACL SETUSER worker (.+)$/m.exec(doc)[1].split(' ');
    const stream = `role-${++n}`;
    const user = `worker-${stream}`;
    const rules = role.map((r) => r.replace(/^~orders$/, `~${stream}`).replace(/^~orders:dlq$/, `~${stream}:dlq`));
    assert.ok(rules.includes(`~${stream}`) && rules.includes('+reclaim.policy|get'), rules.join(' '));
    await raw(client, 'ACL', 'SETUSER', user, ...rules);
    await raw(client, 'XGROUP', 'CREATE', stream, 'workers', '0', 'MKSTREAM');
    await add(stream, 2);
    const c = new Redis({ port: server.port, host: '127.0.0.1', username: user, password: 'secret', enableReadyCheck: false });
    try {
      const w = new Worker(c, { stream, group: 'workers', consumer: 'r', block: 50, handler: () => {}, autorun: false });
      await assert.rejects(w.run(), { name: 'PolicyError' });
      await reclaim.policySet(stream, 'workers', { minIdle: 2000, dlq: `${stream}:dlq` });
      const errors = [];
      const ok = new Worker(c, { stream, group: 'workers', consumer: 'r', block: 50, handler: () => {}, stopAfterIdle: 300 });
      ok.on('error', (e) => errors.push(e));
      await ok.run();
      assert.equal(ok.counts.acked, 2);
      assert.deepEqual(errors.filter((e) => e.code === 'NOPERM' && e.command === 'RECLAIM.POLICY GET'), []);
    } finally {
      c.disconnect();
      await raw(client, 'ACL', 'DELUSER', user);
    }
  });

  test('bad options: TypeError / RangeError / Error before anything is sent', async () => {
    const stream = 'never-used';
    const base = { stream, group: 'g', consumer: 'c', handler: () => {} };
    assert.throws(() => new Worker(client, { ...base, concurency: 2 }), { name: 'TypeError', message: /unknown option "concurency"/ });
    assert.throws(() => new Worker(client, { ...base, concurrency: -1 }), RangeError);
    assert.throws(() => new Worker(client, { ...base, concurrency: 1.5 }), RangeError);
    assert.throws(() => new Worker(client, { ...base, failureDelay: -5 }), RangeError);
    assert.throws(() => new Worker(client, { ...base, handler: 'nope' }), { name: 'TypeError', message: 'Worker: handler must be a function' });
    assert.throws(() => new Worker(client, { ...base, stream: '' }), TypeError);
    assert.throws(() => new Retry(-1), RangeError);
    const lazy = new Redis({ port: server.port, lazyConnect: true });
    assert.throws(() => new Worker(lazy, base), { message: 'Worker: the client is not connected (connect it first)' });
    const nr = createClient({ socket: { port: server.port } });
    assert.throws(() => new Worker(nr, base), { message: 'Worker: the client is not connected (connect it first)' });
    assert.throws(() => new Worker({}, base), TypeError);
    assert.equal(await raw(client, 'EXISTS', stream), 0);
  });
});

describe('Worker processes', () => {
  function start(stream, consumer, ms, concurrency) {
    const child = spawn(process.execPath, [path.join(HERE, 'worker_process.mjs'), String(server.port), stream, 'workers', consumer, String(ms), String(concurrency)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { out += d; });
    return { child, output: () => out };
  }

  test('a SIGKILLed worker\'s entries are redelivered to another', async () => {
    const stream = await setup({ minIdle: 1000, interval: 100 });
    const ids = await add(stream, 4);
    const { child, output } = start(stream, 'doomed', 60_000, 4);
    await waitFor('the child holding entries', () => /holding 4/.test(output()), 20_000);
    const exited = once(child, 'exit');
    child.kill('SIGKILL');
    await exited;
    assert.equal(await pendingOf(stream, 'doomed'), 4);
    const got = new Map();
    const w = new Worker(client, { stream, group: 'workers', consumer: 'heir', concurrency: 4, block: 50, handler: (e) => { got.set(e.id, e.attempt); } });
    await waitFor('all 4 redelivered and acknowledged', () => w.counts.acked === 4, 20_000);
    await w.close();
    assert.deepEqual([...got.keys()].sort(), [...ids].sort());
    assert.ok([...got.values()].every((a) => a === 2), `attempts ${[...got.values()]}`);
    assert.equal(await pendingAll(stream), 0);
  });

  test('SIGTERM: the process finishes what runs, gives back the rest, exits 0 holding nothing', async () => {
    const stream = await setup({ minIdle: 60_000 });
    await add(stream, 6);
    const { child, output } = start(stream, 'term', 300, 2);
    await waitFor('the child holding entries', () => /holding 2/.test(output()), 20_000);
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const [code] = await exited;
    assert.equal(code, 0, output());
    assert.equal(await pendingOf(stream, 'term'), 0);
    const counts = JSON.parse(/closed (.*)/.exec(output())[1]);
    assert.equal(counts.acked, 2, output());
    // Finished entries acknowledged; nothing else pending anywhere; the other 4 still to read.
    assert.equal(await pendingAll(stream), 0);
    const rest = await reclaim.readgroup('workers', 'next', stream, { count: 10 });
    assert.equal(rest[0].entries.length, 4);
  });
});
