/**
 * A thin adapter per client library: ioredis (6: RESP3 by default, or RESP2) and node-redis
 * (`redis` 5: RESP2 or RESP3). Each sends a command and hands its reply over with RESP3 maps as
 * flat arrays (RESP2's shape), so normalize.ts reads one shape. Nothing else knows which library
 * it talks to.
 */
import { asReclaimError } from './errors.js';

/** An argument of a command: strings, Buffers (binary-safe names) and numbers. */
export type Arg = string | Buffer | number;

export interface CallOptions {
  /** Bulk strings as Buffers (entry field values, binary names) instead of strings. */
  buffers?: boolean;
}

/** One command of a pipeline: its reply, or the error it got. */
export type Settled = { ok: true; value: unknown } | { ok: false; error: unknown };

export interface Adapter {
  /** Which library: `ioredis` or `node-redis`. */
  readonly kind: 'ioredis' | 'node-redis';
  call(args: readonly Arg[], options?: CallOptions): Promise<unknown>;
  /** Sends the commands in one round trip (pipelined); one result each, in order. */
  pipeline(commands: readonly (readonly Arg[])[]): Promise<Settled[]>;
  /** Whether the client is connected, or connecting on its own (not closed, not a lazy client never connected). */
  usable(): boolean;
  /** A new connection of the same client's settings, connected (for a blocking read). */
  duplicate(onError: (e: unknown) => void): Promise<Adapter>;
  /** Closes a connection made by `duplicate` (never the user's own client). */
  close(): Promise<void>;
}

/** What an ioredis client (Redis, not Cluster) offers that the adapter uses. */
interface IORedisLike {
  status: string;
  call(...args: unknown[]): Promise<unknown>;
  callBuffer(...args: unknown[]): Promise<unknown>;
  pipeline(): { call(...args: unknown[]): unknown; exec(): Promise<Array<[Error | null, unknown]> | null> };
  duplicate(): IORedisLike;
  on(event: string, fn: (...a: unknown[]) => void): unknown;
  disconnect(): void;
  quit(): Promise<unknown>;
}

/** What a node-redis client offers that the adapter uses. */
interface NodeRedisLike {
  isOpen: boolean;
  isReady: boolean;
  sendCommand(args: Array<string | Buffer>, options?: unknown): Promise<unknown>;
  duplicate(): NodeRedisLike;
  connect(): Promise<unknown>;
  on(event: string, fn: (...a: unknown[]) => void): unknown;
  close?(): Promise<unknown>;
  quit?(): Promise<unknown>;
  destroy?(): void;
}

const commandName = (args: readonly Arg[]): string => {
  const name = String(args[0]);
  const sub = args[1];
  return /^RECLAIM\.POLICY$|^RECLAIM\.REDRIVE$|^COMMAND$/i.test(name) && typeof sub === 'string' ? `${name} ${sub}` : name;
};

// node-redis' RESP type codes (RESP_TYPES): '%' map, '$' blob string, '=' verbatim string.
const MAP = 37;
const BLOB_STRING = 36;
const VERBATIM_STRING = 61;
const FLAT_MAPS = { [MAP]: Array };
const FLAT_MAPS_BUFFERS = { [MAP]: Array, [BLOB_STRING]: Buffer, [VERBATIM_STRING]: Buffer };

class IORedisAdapter implements Adapter {
  readonly kind = 'ioredis';
  constructor(private readonly client: IORedisLike, private readonly own = false) {}

  async call(args: readonly Arg[], options: CallOptions = {}): Promise<unknown> {
    try {
      return await (options.buffers ? this.client.callBuffer(...args) : this.client.call(...args));
    } catch (e) {
      throw asReclaimError(e, commandName(args));
    }
  }

  async pipeline(commands: readonly (readonly Arg[])[]): Promise<Settled[]> {
    const p = this.client.pipeline();
    for (const c of commands) p.call(...c);
    const results = (await p.exec()) ?? [];
    return commands.map((c, i) => {
      const [err, value] = results[i] ?? [new Error('no reply'), null];
      return err ? { ok: false, error: asReclaimError(err, commandName(c)) } : { ok: true, value };
    });
  }

  usable(): boolean {
    return !['wait', 'end', 'close'].includes(this.client.status);
  }

  async duplicate(onError: (e: unknown) => void): Promise<Adapter> {
    const dup = this.client.duplicate();
    dup.on('error', onError);
    return new IORedisAdapter(dup, true);
  }

  async close(): Promise<void> {
    if (!this.own) return;
    this.client.disconnect();
  }
}

class NodeRedisAdapter implements Adapter {
  readonly kind = 'node-redis';
  constructor(private readonly client: NodeRedisLike, private readonly own = false) {}

  async call(args: readonly Arg[], options: CallOptions = {}): Promise<unknown> {
    const strs = args.map((a) => (typeof a === 'number' ? String(a) : a));
    try {
      return await this.client.sendCommand(strs, { typeMapping: options.buffers ? FLAT_MAPS_BUFFERS : FLAT_MAPS });
    } catch (e) {
      throw asReclaimError(e, commandName(args));
    }
  }

  async pipeline(commands: readonly (readonly Arg[])[]): Promise<Settled[]> {
    // node-redis writes the commands sent in one tick together: a pipeline.
    const results = await Promise.allSettled(commands.map((c) => this.call(c)));
    return results.map((r) => (r.status === 'fulfilled' ? { ok: true, value: r.value } : { ok: false, error: r.reason }));
  }

  usable(): boolean {
    return this.client.isOpen;
  }

  async duplicate(onError: (e: unknown) => void): Promise<Adapter> {
    const dup = this.client.duplicate();
    dup.on('error', onError); // without a listener, node-redis' 'error' event would end the process
    await dup.connect();
    return new NodeRedisAdapter(dup, true);
  }

  async close(): Promise<void> {
    if (!this.own) return;
    if (this.client.destroy) this.client.destroy();
    else await (this.client.close ?? this.client.quit)?.call(this.client);
  }
}

/** The adapter of a client: an ioredis `Redis` or a node-redis client (`createClient`). */
export function adapt(client: unknown): Adapter {
  const c = client as Record<string, unknown> | null;
  if (c && typeof c === 'object') {
    if (typeof c.callBuffer === 'function' && typeof c.call === 'function' && typeof c.status === 'string') {
      if (typeof c.nodes === 'function') throw new TypeError('redis-reclaim: ioredis Cluster is not supported yet: pass a Redis client');
      return new IORedisAdapter(client as IORedisLike);
    }
    if (typeof c.sendCommand === 'function' && 'isOpen' in c) return new NodeRedisAdapter(client as NodeRedisLike);
  }
  throw new TypeError('redis-reclaim: the client must be an ioredis Redis or a node-redis client (createClient)');
}
