// Reclaim's methods on both client libraries and both protocols: the same values whatever the
// client, from a real server with the module.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Reclaim, ReclaimError } from '../dist/esm/index.js';
import { CLIENTS, close, connect, raw } from './clients.mjs';
import { Server } from './servers.mjs';

let server;
before(async () => { server = await Server.start(); });
after(async () => { await server?.stop(); });

for (const [kind, protocol] of CLIENTS) {
  describe(`${kind} RESP${protocol}`, () => {
    let client;
    let reclaim;
    const s = `orders-${kind}-${protocol}`;
    before(async () => {
      client = await connect(kind, protocol, server.port);
      reclaim = new Reclaim(client);
      await raw(client, 'XGROUP', 'CREATE', s, 'workers', '0', 'MKSTREAM');
    });
    after(async () => { await close(client); });

    test('policy SET, GET, LIST, PAUSE, RESUME, EXPORT, IMPORT, DEL', async () => {
      assert.equal(await reclaim.policySet(s, 'workers', { minIdle: 1000, maxDeliveries: 3, dlq: `${s}:dlq`, backoff: 'EXPONENTIAL 8000', storm: [100, 60000], tombstones: true }), true);
      const p = await reclaim.policyGet(s, 'workers');
      assert.deepEqual(p, {
        stream: s, group: 'workers', minIdle: 1000, maxDeliveries: 3, dlq: `${s}:dlq`, claimant: 'reclaim',
        count: 100, interval: 10000, backoff: 'EXPONENTIAL 8000', liveness: 0, storm: [100, 60000],
        dlqMaxlen: 0, dlqMaxage: 0, tombstones: true, state: 'active', status: 'active',
      });
      // A Policy spreads into policySet: change one option, keep the rest.
      await reclaim.policySet(s, 'workers', { ...p, maxDeliveries: 5 });
      assert.deepEqual(await reclaim.policyGet(s, 'workers'), { ...p, maxDeliveries: 5 });
      assert.equal(await reclaim.policyGet(s, 'nogroup'), null);
      assert.equal(await reclaim.policyPause(s, 'workers'), true);
      assert.equal((await reclaim.policyGet(s, 'workers')).state, 'paused');
      assert.equal(await reclaim.policyResume(s, 'workers'), true);
      const listed = (await reclaim.policyList()).filter((x) => x.stream === s);
      assert.deepEqual(listed, [{ ...p, maxDeliveries: 5 }]);
      const doc = JSON.parse(await reclaim.policyExport());
      assert.equal(doc.version, 1);
      const mine = doc.policies.filter((x) => x.key === s);
      assert.equal(mine.length, 1);
      assert.equal(await reclaim.policyDel(s, 'workers'), true);
      assert.equal(await reclaim.policyDel(s, 'workers'), false);
      const imported = await reclaim.policyImport({ version: 1, policies: [...mine, { ...mine[0], group: 'typo' }] });
      assert.deepEqual(imported, { imported: 2, waiting: [{ index: 1, key: s, group: 'typo', status: 'waiting: no group typo' }] });
      await reclaim.policyDel(s, 'typo');
      assert.deepEqual(await reclaim.policyGet(s, 'workers'), { ...p, maxDeliveries: 5 });
    });

    test('readgroup, EXTEND, NACK, TERM, SWEEP, SIMULATE, STATS, HEALTH', async () => {
      await reclaim.policySet(s, 'workers', { minIdle: 60000, maxDeliveries: 3, dlq: `${s}:dlq` });
      assert.deepEqual(await reclaim.readgroup('workers', 'alice', s, { count: 10 }), []);
      const binary = Buffer.from([0xff, 0x00, 0x80, 0x41]);
      const ids = [];
      ids.push(await raw(client, 'XADD', s, '*', 'sku', 'book-1', 'qty', '2'));
      const bin = typeof client.callBuffer === 'function'
        ? await client.call('XADD', s, '*', 'blob', binary)
        : await client.sendCommand(['XADD', s, '*', 'blob', binary]);
      ids.push(bin);
      ids.push(await raw(client, 'XADD', s, '*', 'sku', 'book-3'));
      const read = await reclaim.readgroup('workers', 'alice', [s], { count: 2 });
      assert.deepEqual(read, [{ stream: s, entries: [
        { id: ids[0], fields: { sku: 'book-1', qty: '2' } },
        { id: ids[1], fields: { blob: binary.toString('utf8') } },
      ] }]);
      const asBuffers = await reclaim.readgroup('workers', 'bob', s, { count: 5, block: 10, buffers: true });
      assert.deepEqual(asBuffers, [{ stream: s, entries: [{ id: ids[2], fields: { sku: Buffer.from('book-3') } }] }]);
      assert.deepEqual(await reclaim.extend(s, 'workers', 'alice', ids[0], ids[2]), [ids[0]]);
      assert.equal(await reclaim.nack(s, 'workers', 'alice', ids[0], { delay: 0 }), 1);
      assert.equal(await reclaim.term(s, 'workers', 'alice', [ids[1]], { reason: 'bad blob' }), 1);
      const dlq = await raw(client, 'XRANGE', `${s}:dlq`, '-', '+');
      assert.equal(dlq.length, 1);
      const dl = dlq[0][1];
      assert.equal(dl[dl.indexOf('reclaim-reason') + 1], 'bad blob');
      // A delay longer than the lease parks the entry; longer than 30 days is refused.
      await assert.rejects(reclaim.nack(s, 'workers', 'bob', ids[2], { delay: 2592000001 }), (e) => {
        assert.ok(e instanceof ReclaimError);
        assert.equal(e.code, 'ERR');
        assert.equal(e.message, 'ERR DELAY 2592000001 is longer than 60000, the idle (ms) after which the entry is due, and than 2592000000 (30 days), the longest delay');
        return true;
      });
      const swept = await reclaim.sweep(s, 'workers');
      assert.deepEqual(Object.keys(swept).sort(), ['claimed', 'dead-lettered', 'deleted', 'dlq-trimmed', 'tombstones']);
      const sim = await reclaim.simulate(s, 'workers', { minIdle: 1, limit: 10 });
      assert.equal(sim.policy.minIdle, 1);
      assert.equal(sim.policy.maxDeliveries, 3);
      assert.equal(sim.more, false);
      assert.equal(sim.halted, null);
      assert.equal(typeof sim.nowMs, 'number');
      assert.deepEqual(sim.entries.map((e) => [e.id, e.consumer, e.deliveries]).sort(), [[ids[0], 'reclaim', 1], [ids[2], 'bob', 1]].sort());
      assert.deepEqual(Object.keys(sim.totals).sort(), ['dead-letter', 'move', 'none', 'purge']);
      const stats = await reclaim.stats(s, 'workers');
      assert.equal(stats['dead-lettered'], 1);
      assert.equal(stats.status, 'active');
      assert.equal(typeof stats.cursor, 'string');
      assert.equal(stats.inbox, 1);
      const health = await reclaim.health(s, 'workers');
      assert.equal(health.status, 'active');
      assert.deepEqual(health.live['by-consumer'].sort(), [['bob', 1], ['reclaim', 1]]);
      assert.equal(health.live.pending, 2);
      assert.equal(health['dead-letters'].total, 1);
      assert.ok(Array.isArray(health['pel-sizes']));
      // The entry given back comes first, to any consumer.
      assert.deepEqual(await reclaim.readgroup('workers', 'carol', s), [{ stream: s, entries: [{ id: ids[0], fields: { sku: 'book-1', qty: '2' } }] }]);
    });

    test('REDRIVE, STATUS, CANCEL', async () => {
      assert.equal(await reclaim.redriveStatus(`${s}:nodlq`), null);
      const id = await reclaim.redrive(`${s}:dlq`, { source: [s, 'workers'], count: 10 });
      assert.equal(typeof id, 'number');
      const st = await reclaim.redriveStatus(`${s}:dlq`);
      assert.equal(st.id, id);
      assert.deepEqual(st.source, [s, 'workers']);
      assert.equal(typeof st.state, 'string');
      assert.equal(typeof (await reclaim.redriveCancel(`${s}:dlq`)), 'boolean');
    });

    test('REDRIVE of selected IDS', async () => {
      const dlq = `${s}:idsdlq`;
      await reclaim.policySet(`${s}:ids`, 'workers', { minIdle: 60000, dlq });
      await raw(client, 'XGROUP', 'CREATE', `${s}:ids`, 'workers', '$', 'MKSTREAM');
      const ids = [];
      for (let i = 0; i < 3; i++) ids.push(await raw(client, 'XADD', `${s}:ids`, '*', 'n', String(i)));
      await raw(client, 'XREADGROUP', 'GROUP', 'workers', 'alice', 'COUNT', '3', 'STREAMS', `${s}:ids`, '>');
      await reclaim.term(`${s}:ids`, 'workers', 'alice', ids);
      const dead = (await raw(client, 'XRANGE', dlq, '-', '+')).map((e) => String(e[0]));
      assert.equal(dead.length, 3);
      const task = await reclaim.redrive(dlq, { ids: [dead[1], '1-1'] });
      assert.equal(task, 1);
      let st;
      for (const until = Date.now() + 10000; Date.now() < until; await new Promise((r) => setTimeout(r, 20))) {
        st = await reclaim.redriveStatus(dlq);
        if (st.state === 'done') break;
      }
      assert.deepEqual([st.state, st.ids, st.moved, st.skipped], ['done', 2, 1, 1]);
      assert.equal(Number(await raw(client, 'XLEN', dlq)), 2);
      const pel = await raw(client, 'XPENDING', `${s}:ids`, 'workers', '-', '+', '10');
      assert.deepEqual(pel.map((p) => String(p[0])), [ids[1]]);
      await assert.rejects(reclaim.redrive(dlq, { ids: 'x' }), TypeError);
      await reclaim.policyDel(`${s}:ids`, 'workers');
    });

    test('errors are the server\'s, in ReclaimError', async () => {
      await assert.rejects(reclaim.stats(s, 'nope'), (e) => e instanceof ReclaimError && e.code === 'ERR' && e.message === 'ERR no reclaim policy for this key and group' && e.command === 'RECLAIM.STATS');
      await reclaim.policySet(`${s}:x`, 'workers', { minIdle: 1000 });
      await assert.rejects(reclaim.nack(`${s}:x`, 'workers', 'alice', '1-1'), (e) => e instanceof ReclaimError && e.code === 'NOGROUP' && e.message === `NOGROUP No such key '${s}:x' or consumer group 'workers'`);
      await reclaim.policyDel(`${s}:x`, 'workers');
    });

    test('bad options are refused before anything is sent', async () => {
      await assert.rejects(reclaim.policySet(s, 'workers', { minIdle: 1000, maxDelivery: 3 }), { name: 'TypeError', message: /unknown option "maxDelivery"/ });
      await assert.rejects(reclaim.policySet(s, 'workers', {}), TypeError);
      await assert.rejects(reclaim.nack(s, 'workers', 'alice', '1-1', { delay: -1 }), RangeError);
      await assert.rejects(reclaim.readgroup('workers', 'alice', s, { count: 1, timeout: 5 }), TypeError);
      assert.throws(() => new Reclaim({}), TypeError);
    });
  });
}

test('CommonJS: require() loads the same package', async () => {
  const { createRequire } = await import('node:module');
  const cjs = createRequire(import.meta.url)('../dist/cjs/index.js');
  assert.equal(typeof cjs.Reclaim, 'function');
  assert.equal(typeof cjs.Worker, 'function');
  assert.equal(new cjs.Retry(5).delayMs, 5);
});
