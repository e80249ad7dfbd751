// A worker in a process of its own, for the crash and signal tests:
//   node worker_process.mjs <port> <stream> <group> <consumer> <handler-ms> <concurrency>
// Each handler waits <handler-ms> ms and returns. It prints "holding <n>" once it holds entries,
// and handles SIGTERM with worker.handleSignals() (close, then exit 0).
import Redis from 'ioredis';
import { Worker } from '../dist/esm/index.js';

const [port, stream, group, consumer, ms, concurrency] = process.argv.slice(2);
const client = new Redis({ port: Number(port), host: '127.0.0.1' });
let told = false;
const worker = new Worker(client, {
  stream, group, consumer, concurrency: Number(concurrency), block: 100,
  handler: async () => {
    if (!told) {
      told = true;
      setImmediate(() => console.log(`holding ${worker.holding}`));
    }
    await new Promise((r) => setTimeout(r, Number(ms)));
  },
});
worker.on('error', (e) => console.error('worker error:', e.message));
worker.on('closed', () => {
  console.log(`closed ${JSON.stringify(worker.counts)}`);
  client.disconnect();
});
worker.handleSignals();
