// Redis Cluster with a replica per primary: a Worker (ioredis Cluster, then node-redis
// createCluster) goes on through a CLUSTER FAILOVER of its stream's primary: its blocked read ends
// (UNBLOCKED, MOVED), it reads again at the new primary; nothing lost, nothing acknowledged twice.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import calculateSlot from 'cluster-key-slot';
import Redis from 'ioredis';
import { createCluster } from 'redis';
import { Reclaim, Worker } from '../dist/esm/index.js';
import { Cluster, RANGES, waitFor } from './servers.mjs';

let cluster;
before(async () => { cluster = await Cluster.start({ replicas: true }); });
after(async () => { await cluster?.stop(); });

async function connectCluster(kind) {
  const port = cluster.nodes[0].port;
  if (kind === 'ioredis') {
    const c = new Redis.Cluster([{ host: '127.0.0.1', port }]);
    c.on('error', () => {});
    await new Promise((r) => (c.status === 'ready' ? r() : c.once('ready', r)));
    return { c, close: () => c.disconnect() };
  }
  const c = createCluster({ rootNodes: [{ socket: { host: '127.0.0.1', port } }], RESP: 3 });
  c.on('error', () => {});
  await c.connect();
  return { c, close: () => c.destroy() };
}

test('a Worker goes on through a failover of its stream\'s primary', async () => {
  // Node 1's stream fails over to node 4 (ioredis), then back to node 1 (node-redis).
  let tag = 0;
  while (!(RANGES[1][0] <= calculateSlot(`f${tag}`) && calculateSlot(`f${tag}`) <= RANGES[1][1])) tag++;
  for (const [kind, to] of [['ioredis', 4], ['node-redis', 1]]) {
    const { c, close } = await connectCluster(kind);
    const stream = `{f${tag}}jobs-${kind}`;
    const slot = calculateSlot(stream);
    const owner = async () => cluster.admin(await cluster.ownerOf(slot));
    await (await owner()).call('XGROUP', 'CREATE', stream, 'workers', '0', 'MKSTREAM');
    await new Reclaim(c).policySet(stream, 'workers', { minIdle: 5000, maxDeliveries: 5, dlq: `{f${tag}}dlq-${kind}` });
    const add = async (from, n) => { for (let i = from; i < from + n; i++) await (await owner()).call('XADD', stream, '*', 'n', String(i)); };
    const seen = new Map();
    const w = new Worker(c, { stream, group: 'workers', consumer: 'w', concurrency: 5, block: 50,
      handler: (e) => { seen.set(e.fields.n, (seen.get(e.fields.n) ?? 0) + 1); } });
    const errors = [];
    w.on('error', (e) => errors.push(String(e)));
    await add(0, 30);
    await waitFor('the first 30', () => w.counts.acked === 30, 30_000);
    await cluster.failover(to, slot);
    await add(30, 30);
    await waitFor(`the next 30 after the failover (${kind})`, () => w.counts.acked === 60, 60_000)
      .catch((e) => { throw new Error(`${e.message}: ${JSON.stringify(w.counts)} ${errors.join('; ')}`); });
    await w.close();
    close();
    assert.equal(seen.size, 60);
    assert.ok([...seen.values()].every((n) => n === 1));
    assert.equal(w.counts.lost, 0);
    assert.equal((await cluster.admin(to).call('XPENDING', stream, 'workers'))[0], 0);
  }
});
