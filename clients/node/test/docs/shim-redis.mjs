// node-redis for a doc block: `createClient()` connects to the test's server (DOC_PORT).
import * as real from 'redis';

export * from 'redis';
export function createClient(options = {}) {
  return real.createClient({ ...options, url: undefined, socket: { ...(options.socket ?? {}), host: '127.0.0.1', port: Number(process.env.DOC_PORT) } });
}
