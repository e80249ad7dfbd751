// Type-checked (tsc --noEmit, strict) by types.test.mjs: the declarations the package ships serve
// a TypeScript user as docs/node.md shows the API.
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { Permanent, PolicyError, Reclaim, ReclaimError, Retry, Worker, type Entry, type Policy } from '../../dist/esm/index.js';

async function main(): Promise<void> {
  const redis = new Redis();
  const reclaim = new Reclaim(redis);
  await reclaim.policySet('orders', 'workers', { minIdle: 1000, maxDeliveries: 3, dlq: 'orders:dlq', backoff: 'EXPONENTIAL 8000', storm: [100, 60_000] });
  const policy: Policy | null = await reclaim.policyGet('orders', 'workers');
  if (policy) await reclaim.policySet('orders', 'workers', { ...policy, maxDeliveries: 5 });
  const stats = await reclaim.stats('orders', 'workers');
  const deadLettered: number | string | undefined = stats['dead-lettered'];
  const [batch] = await reclaim.readgroup('workers', 'alice', 'orders', { count: 10 });
  const sku: string | undefined = batch?.entries[0]?.fields['sku'];
  const raw = await reclaim.readgroup('workers', 'alice', ['orders'], { buffers: true });
  const bytes: Buffer | undefined = raw[0]?.entries[0]?.fields['blob'];
  const worker = new Worker(redis, {
    stream: 'orders', group: 'workers', consumer: 'w', concurrency: 10, waitForPolicy: false,
    handler: async (entry: Entry) => {
      if (entry.attempt > 2) throw new Permanent('too many');
      if (!entry.fields['sku']) throw new Retry(5000);
    },
  });
  worker.on('failed', (entry: Entry, err: unknown) => console.log(entry.id, err));
  const acked: number = worker.counts.acked;
  await worker.run().catch((e: unknown) => e instanceof PolicyError && e.message);
  await worker.close();
  const client = await createClient().connect();
  await new Reclaim(client).stats('orders', 'workers').catch((e: unknown) => e instanceof ReclaimError && e.code);
  console.log(deadLettered, sku, bytes, acked);
}
void main;
