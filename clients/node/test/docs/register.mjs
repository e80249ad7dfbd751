// Preloaded (node --import) by the doc test for each block it runs: the blocks' `ioredis` and
// `redis` imports get the shims of this folder, which point the clients at the test's server.
import { register } from 'node:module';

register('./hooks.mjs', import.meta.url);
