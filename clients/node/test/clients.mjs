// The client libraries and protocols every reply shape is checked with.
import Redis from 'ioredis';
import { createClient } from 'redis';

export const CLIENTS = [
  ['ioredis', 3],
  ['ioredis', 2],
  ['node-redis', 2],
  ['node-redis', 3],
];

/** A connected client of `kind` speaking `protocol` to 127.0.0.1:port; `close(client)` ends it. */
export async function connect(kind, protocol, port) {
  if (kind === 'ioredis') {
    const c = new Redis({ port, host: '127.0.0.1', protocol, maxRetriesPerRequest: null });
    c.on('error', () => {});
    await c.ping();
    return c;
  }
  const c = createClient({ socket: { port, host: '127.0.0.1' }, RESP: protocol });
  c.on('error', () => {});
  await c.connect();
  return c;
}

export async function close(client) {
  if (typeof client.disconnect === 'function' && typeof client.callBuffer === 'function') client.disconnect();
  else client.destroy();
}

/** Runs a raw command on any of the clients (for test setup and checks), RESP2-shaped strings. */
export function raw(client, ...args) {
  const strs = args.map(String);
  if (typeof client.callBuffer === 'function') return client.call(...strs);
  return client.sendCommand(strs, { typeMapping: { 37: Array } });
}
