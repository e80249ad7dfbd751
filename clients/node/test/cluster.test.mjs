// Redis Cluster: ioredis Cluster and node-redis createCluster, both protocols, on three real
// primaries. Every command goes to the primary of its stream's slot; LIST and EXPORT merge every
// primary's policies, IMPORT sends each slot's to its primary; a Worker on a stream whose slot
// moves to another node (a reshard) goes on, nothing lost, nothing acknowledged twice.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import calculateSlot from 'cluster-key-slot';
import Redis from 'ioredis';
import { createCluster } from 'redis';
import { Reclaim, Worker } from '../dist/esm/index.js';
import { Cluster, RANGES, waitFor } from './servers.mjs';

let cluster;
before(async () => { cluster = await Cluster.start(); });
after(async () => { await cluster?.stop(); });

const nodeOfSlot = (slot) => RANGES.findIndex(([lo, hi]) => lo <= slot && slot <= hi);
/** Three hash tags, one on each node. */
function tagsOnEachNode() {
  const tags = [];
  for (let i = 0; tags.length < 3; i++) {
    const node = nodeOfSlot(calculateSlot(`t${i}`));
    if (!tags.some((t) => nodeOfSlot(calculateSlot(t)) === node)) tags.push(`t${i}`);
  }
  return tags.sort((a, b) => nodeOfSlot(calculateSlot(a)) - nodeOfSlot(calculateSlot(b)));
}

const CLIENTS = [['ioredis', 3], ['ioredis', 2], ['node-redis', 2], ['node-redis', 3]];

async function connectCluster(kind, protocol) {
  const [first] = cluster.nodes;
  if (kind === 'ioredis') {
    const c = new Redis.Cluster([{ host: '127.0.0.1', port: first.port }], { redisOptions: { protocol } });
    c.on('error', () => {});
    await new Promise((r) => (c.status === 'ready' ? r() : c.once('ready', r)));
    return { c, close: () => c.disconnect() };
  }
  const c = createCluster({ rootNodes: [{ socket: { host: '127.0.0.1', port: first.port } }], RESP: protocol });
  c.on('error', () => {});
  await c.connect();
  return { c, close: () => c.destroy() };
}

for (const [kind, protocol] of CLIENTS) {
  describe(`cluster, ${kind} RESP${protocol}`, () => {
    let client;
    let done;
    const tags = tagsOnEachNode();
    const streams = tags.map((t) => `{${t}}orders-${kind}-${protocol}`);
    before(async () => {
      ({ c: client, close: done } = await connectCluster(kind, protocol));
      for (const [i, s] of streams.entries()) await cluster.admin(i).call('XGROUP', 'CREATE', s, 'workers', '0', 'MKSTREAM');
    });
    after(() => done?.());

    test('each command at its stream\'s primary; LIST, EXPORT merged; IMPORT per slot', async () => {
      const reclaim = new Reclaim(client);
      for (const [i, s] of streams.entries()) {
        await reclaim.policySet(s, 'workers', { minIdle: 1000 + i, dlq: `${s.replace(/-.*/, '')}:dlq-${kind}-${protocol}` });
        assert.equal(await cluster.admin(i).call('EXISTS', s), 1);
        assert.equal((await reclaim.policyGet(s, 'workers')).minIdle, 1000 + i);
        // STATS answered at the stream's primary (its status is checked live: 'cluster-down' until
        // that node's view of the new cluster settles).
        await waitFor('the policy active', async () => (await reclaim.stats(s, 'workers')).status === 'active', 20_000);
        await cluster.admin(i).call('XADD', s, '*', 'n', String(i));
        const read = await reclaim.readgroup('workers', 'alice', s, { count: 5 });
        assert.deepEqual(read.map((b) => [b.stream, b.entries.map((e) => e.fields.n)]), [[s, [String(i)]]]);
      }
      const listed = (await reclaim.policyList()).filter((p) => streams.includes(p.stream));
      assert.deepEqual(listed.map((p) => p.stream), [...streams].sort());
      const page = await reclaim.policyList({ count: 1 });
      assert.equal(page.length, 1);
      const doc = JSON.parse(await reclaim.policyExport());
      const mine = doc.policies.filter((p) => streams.includes(p.key));
      assert.equal(mine.length, 3);
      for (const s of streams) assert.equal(await reclaim.policyDel(s, 'workers'), true);
      const imported = await reclaim.policyImport({ version: doc.version, policies: [...mine, { ...mine[1], group: 'typo' }] });
      assert.equal(imported.imported, 4);
      assert.deepEqual(imported.waiting.map((w) => [w.index, w.group]), [[3, 'typo']]);
      for (const [i, s] of streams.entries()) assert.equal((await reclaim.policyGet(s, 'workers')).minIdle, 1000 + i);
      await reclaim.policyDel(mine[1].key, 'typo');
    });
  });
}

test('a Worker on a cluster: its stream\'s slot moves to another primary mid-run; nothing lost, nothing acknowledged twice', async () => {
  for (const kind of ['ioredis', 'node-redis']) {
    const { c, close } = await connectCluster(kind, 3);
    const [tag] = tagsOnEachNode().slice(1); // a stream on node 1, not the seed node
    const stream = `{${tag}}jobs-${kind}`;
    const slot = calculateSlot(stream);
    const src = await cluster.ownerOf(slot);
    await cluster.admin(src).call('XGROUP', 'CREATE', stream, 'workers', '0', 'MKSTREAM');
    const reclaim = new Reclaim(c);
    await reclaim.policySet(stream, 'workers', { minIdle: 5000, maxDeliveries: 5, dlq: `{${tag}}dlq-${kind}` });
    const add = async (from, n) => { for (let i = from; i < from + n; i++) await cluster.admin(await cluster.ownerOf(slot)).call('XADD', stream, '*', 'n', String(i)); };
    const seen = new Map();
    const w = new Worker(c, { stream, group: 'workers', consumer: 'w', concurrency: 5, block: 50,
      handler: (e) => { seen.set(e.fields.n, (seen.get(e.fields.n) ?? 0) + 1); } });
    const errors = [];
    w.on('error', (e) => errors.push(e));
    await add(0, 50);
    await waitFor('the first 50', () => w.counts.acked === 50, 30_000);
    const to = (src + 1) % 3;
    await cluster.moveSlot(slot, src, to);
    await add(50, 50);
    await waitFor(`the next 50 after the reshard (${kind})`, () => w.counts.acked === 100, 30_000).catch((e) => { throw new Error(`${e.message}: ${JSON.stringify(w.counts)} ${errors.map((e) => (e && (e.stack || e.message)) || JSON.stringify(e)).join('; ')}`); });
    await w.close();
    assert.equal(seen.size, 100);
    assert.ok([...seen.values()].every((n) => n === 1));
    assert.equal(w.counts.lost, 0);
    assert.equal((await cluster.admin(to).call('XPENDING', stream, 'workers'))[0], 0);
    assert.equal(await cluster.admin(to).call('EXISTS', stream), 1);
    close();
  }
});
