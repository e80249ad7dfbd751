/**
 * A thin adapter per client library: ioredis (6: RESP3 by default, or RESP2) and node-redis
 * (`redis` 5: RESP2 or RESP3). Each sends a command and hands its reply over with RESP3 maps as
 * flat arrays (RESP2's shape), so normalize.ts reads one shape. Nothing else knows which library
 * it talks to.
 */
import calculateSlot from 'cluster-key-slot';
import { asReclaimError, ReclaimError } from './errors.js';

/** An argument of a command: strings, Buffers (binary-safe names) and numbers. */
export type Arg = string | Buffer | number;

export interface CallOptions {
  /** Bulk strings as Buffers (entry field values, binary names) instead of strings. */
  buffers?: boolean;
  /** The key that routes the command in a cluster (the stream; the DLQ for REDRIVE). */
  key?: string | Buffer;
}

/** One command of a pipeline: its reply, or the error it got. */
export type Settled = { ok: true; value: unknown } | { ok: false; error: unknown };

export interface Adapter {
  /** Which library: `ioredis` or `node-redis`. */
  readonly kind: 'ioredis' | 'node-redis';
  call(args: readonly Arg[], options?: CallOptions): Promise<unknown>;
  /** Sends the commands in one round trip (pipelined); one result each, in order. `key` routes them all. */
  pipeline(commands: readonly (readonly Arg[])[], key?: string | Buffer): Promise<Settled[]>;
  /** The primaries: [this] on a single server, a connection to each primary in a cluster. */
  primaries(): Promise<Adapter[]>;
  /** Whether this is a cluster client (then keyless commands go to one primary, and CLIENT UNBLOCK is not used). */
  readonly cluster: boolean;
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
  readonly cluster = false;
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

  async primaries(): Promise<Adapter[]> {
    return [this];
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
  readonly cluster = false;
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

  async primaries(): Promise<Adapter[]> {
    return [this];
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

/** What an ioredis Cluster offers that the adapter uses. */
interface IORedisClusterLike {
  status: string;
  slots: string[][];
  nodes(role?: 'master' | 'slave' | 'all'): Array<IORedisLike & { options: { host?: string; port?: number } }>;
  refreshSlotsCache(callback?: (err?: Error | null) => void): void;
  duplicate(): IORedisClusterLike;
  on(event: string, fn: (...a: unknown[]) => void): unknown;
  once(event: string, fn: (...a: unknown[]) => void): unknown;
  disconnect(): void;
}

/** Replies that say the slot map changed (a reshard, a failover): read it again and resend. */
const REROUTE = new Set(['MOVED', 'ASK', 'CLUSTERDOWN', 'TRYAGAIN', 'UNBLOCKED']);
const REROUTE_TRIES = 5;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * ioredis Cluster: it does not know the module's commands' keys (it would send them to any
 * node), so the adapter sends each command to the primary that serves its key's slot, from the
 * client's slot map; on MOVED or ASK it has the map read again and sends the command again.
 */
class IORedisClusterAdapter implements Adapter {
  readonly kind = 'ioredis';
  readonly cluster = true;
  constructor(private readonly client: IORedisClusterLike, private readonly own = false) {}

  private node(key: string | Buffer | undefined): IORedisAdapter {
    const masters = this.client.nodes('master');
    let node = masters[0];
    if (key !== undefined) {
      const owner = this.client.slots[calculateSlot(key)]?.[0];
      node = masters.find((n) => `${n.options.host}:${n.options.port}` === owner);
    }
    if (!node) throw new ReclaimError('CLUSTERDOWN no primary known for the key\'s slot yet', 'routing');
    return new IORedisAdapter(node);
  }

  private refresh(): Promise<void> {
    return new Promise((resolve) => this.client.refreshSlotsCache(() => resolve()));
  }

  private async routed<T>(key: string | Buffer | undefined, send: (node: IORedisAdapter) => Promise<T>, rerouteOn: (r: T) => unknown): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      let error: unknown;
      try {
        const r = await send(this.node(key));
        error = rerouteOn(r);
        if (!error) return r;
      } catch (e) {
        error = e;
      }
      if (!(error instanceof ReclaimError && REROUTE.has(error.code)) || attempt >= REROUTE_TRIES) throw error;
      await this.refresh();
      await sleep(50 * (attempt + 1));
    }
  }

  call(args: readonly Arg[], options: CallOptions = {}): Promise<unknown> {
    return this.routed(options.key, (n) => n.call(args, options), () => null);
  }

  pipeline(commands: readonly (readonly Arg[])[], key?: string | Buffer): Promise<Settled[]> {
    // The first reply that says the slot moved (its error, not the whole result): all of a
    // pipeline's commands share `key`'s slot, so they are all sent again to the new owner.
    return this.routed(key, (n) => n.pipeline(commands), (rs) => {
      const moved = rs.find((r) => !r.ok && r.error instanceof ReclaimError && REROUTE.has(r.error.code));
      return moved && !moved.ok ? moved.error : null;
    });
  }

  usable(): boolean {
    return !['wait', 'end', 'close'].includes(this.client.status);
  }

  async primaries(): Promise<Adapter[]> {
    return this.client.nodes('master').map((n) => new IORedisAdapter(n));
  }

  async duplicate(onError: (e: unknown) => void): Promise<Adapter> {
    const dup = this.client.duplicate();
    dup.on('error', onError);
    if (dup.status !== 'ready') await new Promise((resolve) => dup.once('ready', resolve));
    return new IORedisClusterAdapter(dup, true);
  }

  async close(): Promise<void> {
    if (this.own) this.client.disconnect();
  }
}

/** What a node-redis cluster (createCluster) offers that the adapter uses. */
interface NodeRedisClusterLike {
  isOpen: boolean;
  masters: unknown[];
  sendCommand(firstKey: string | Buffer | undefined, isReadonly: boolean | undefined, args: Array<string | Buffer>, options?: unknown): Promise<unknown>;
  nodeClient(node: unknown): Promise<NodeRedisLike>;
  duplicate(): NodeRedisClusterLike;
  connect(): Promise<unknown>;
  on(event: string, fn: (...a: unknown[]) => void): unknown;
  destroy?(): void;
  close?(): Promise<unknown>;
}

/** node-redis createCluster: it routes by the key it is given, and follows MOVED and ASK itself. */
class NodeRedisClusterAdapter implements Adapter {
  readonly kind = 'node-redis';
  readonly cluster = true;
  constructor(private readonly client: NodeRedisClusterLike, private readonly own = false) {}

  async call(args: readonly Arg[], options: CallOptions = {}): Promise<unknown> {
    const strs = args.map((a) => (typeof a === 'number' ? String(a) : a));
    try {
      return await this.client.sendCommand(options.key, false, strs, { typeMapping: options.buffers ? FLAT_MAPS_BUFFERS : FLAT_MAPS });
    } catch (e) {
      throw asReclaimError(e, commandName(args));
    }
  }

  async pipeline(commands: readonly (readonly Arg[])[], key?: string | Buffer): Promise<Settled[]> {
    const results = await Promise.allSettled(commands.map((c) => this.call(c, { key })));
    return results.map((r) => (r.status === 'fulfilled' ? { ok: true, value: r.value } : { ok: false, error: r.reason }));
  }

  usable(): boolean {
    return this.client.isOpen;
  }

  async primaries(): Promise<Adapter[]> {
    return Promise.all(this.client.masters.map(async (m) => new NodeRedisAdapter(await this.client.nodeClient(m))));
  }

  async duplicate(onError: (e: unknown) => void): Promise<Adapter> {
    const dup = this.client.duplicate();
    dup.on('error', onError);
    await dup.connect();
    return new NodeRedisClusterAdapter(dup, true);
  }

  async close(): Promise<void> {
    if (!this.own) return;
    if (this.client.destroy) this.client.destroy();
    else await this.client.close?.();
  }
}

/** The adapter of a client: an ioredis `Redis` or `Cluster`, or a node-redis client (`createClient`, `createCluster`). */
export function adapt(client: unknown): Adapter {
  const c = client as Record<string, unknown> | null;
  if (c && typeof c === 'object') {
    if (typeof c.callBuffer === 'function' && typeof c.call === 'function' && typeof c.status === 'string') {
      if (typeof c.nodes === 'function' && 'slots' in c) return new IORedisClusterAdapter(client as unknown as IORedisClusterLike);
      return new IORedisAdapter(client as IORedisLike);
    }
    if (typeof c.sendCommand === 'function' && 'isOpen' in c) {
      if ('masters' in c && typeof c.nodeClient === 'function') return new NodeRedisClusterAdapter(client as unknown as NodeRedisClusterLike);
      return new NodeRedisAdapter(client as NodeRedisLike);
    }
  }
  throw new TypeError('redis-reclaim: the client must be an ioredis Redis or Cluster, or a node-redis client (createClient or createCluster)');
}
