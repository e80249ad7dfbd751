// ioredis for a doc block: `new Redis()` connects to the test's server (DOC_PORT).
import Real from 'ioredis';

export * from 'ioredis';
export default class Redis extends Real {
  constructor(options = {}) {
    super({ ...(typeof options === 'object' ? options : {}), host: '127.0.0.1', port: Number(process.env.DOC_PORT) });
  }
}
