/**
 * `Worker`: a consumer of one stream's group, BullMQ's ergonomics on Redis Streams, with the
 * contract of the Python Worker (clients/python): up to `concurrency` entries in flight, read with
 * `RECLAIM.READGROUP ... COUNT <free slots> BLOCK` on a connection of its own; a handler that
 * returns = XACK, `throw new Retry(ms)` = RECLAIM.NACK with DELAY, `throw new Permanent(reason)` =
 * RECLAIM.TERM with REASON, any other error = RECLAIM.NACK with the lease as the delay; leases
 * renewed with RECLAIM.EXTEND while handlers run; `close()` gives back what it has not finished.
 */
import { EventEmitter } from 'node:events';
import type { Adapter, Arg, Settled } from './adapter.js';
import { isTransient, Permanent, ReclaimError, Retry } from './errors.js';
import { batches, int, pairsOf, text, type Fields } from './normalize.js';
import { checkOptions, leaseOf, Reclaim, type Features, type Name, type Policy } from './reclaim.js';

/** What the handler gets. */
export interface Entry<V = string> {
  id: string;
  fields: Fields<V>;
  /** The delivery this is: 1 the first time. */
  attempt: number;
  stream: string;
}

export interface WorkerOptions<V = string> {
  stream: Name;
  group: Name;
  consumer: Name;
  handler: (entry: Entry<V>) => unknown;
  /** Entries in flight at once (default 1). */
  concurrency?: number;
  /** How long one read waits for entries, ms (default 1000): also how long `close()` may wait for a read to return. */
  block?: number;
  /** The delay (ms) of an entry whose handler threw an error other than Retry/Permanent: default (null) its lease. */
  failureDelay?: number | null;
  /** Lease renewal period, ms: default a third of the policy's MIN-IDLE. */
  heartbeat?: number;
  /** An entry held longer than this (ms) is no longer renewed (a hung handler loses it); default: renewed while it runs. */
  maxHold?: number | null;
  /** How long `close()` waits for running handlers before giving their entries back (default 30000 ms). */
  closeTimeout?: number;
  /** `run()` returns once nothing came for this long (ms): a batch job that drains a stream. */
  stopAfterIdle?: number | null;
  /** Field values as Buffers instead of strings. */
  buffers?: boolean;
  /** Start reading at once (default true); else call `run()`. */
  autorun?: boolean;
}

const OPTIONS = [
  'stream', 'group', 'consumer', 'handler', 'concurrency', 'block', 'failureDelay', 'heartbeat',
  'maxHold', 'closeTimeout', 'stopAfterIdle', 'buffers', 'autorun',
];

const FIRST_PAUSE_MS = 100;
const MAX_PAUSE_MS = 5000;
/** At most this many IDs per XACK / EXTEND / NACK. */
const CHUNK = 1000;
/** With a module whose NACK's DELAY is bounded by the lease: "as late as the lease allows". */
const LEASE_DELAY = '9223372036854775807';

type Counter = 'acked' | 'retried' | 'failed' | 'dead-lettered' | 'lost' | 'refused' | 'given-back';

interface Held {
  since: number;
  attempt: number;
  /** Settled or given back: its handler's outcome is no longer sent. */
  done: boolean;
}

type Outcome = { action: 'ack' } | { action: 'nack'; delay: number | null; reason: string; retry: boolean } | { action: 'term'; reason: string };

function positiveInt(what: string, v: unknown, min: number): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min) {
    throw new RangeError(`Worker: ${what} must be an integer >= ${min}, not ${String(v)}`);
  }
  return v;
}

function checkName(what: string, v: unknown): Name {
  if ((typeof v === 'string' && v.length > 0) || (Buffer.isBuffer(v) && v.length > 0)) return v;
  throw new TypeError(`Worker: ${what} must be a non-empty string or Buffer`);
}

/** Orders stream IDs (`ms-seq`) as the server does. */
export function compareIds(a: string, b: string): number {
  const [am = '0', as = '0'] = a.split('-');
  const [bm = '0', bs = '0'] = b.split('-');
  const d = BigInt(am) - BigInt(bm) || BigInt(as) - BigInt(bs);
  return d < 0n ? -1 : d > 0n ? 1 : 0;
}

/** The delay in a NACK error of a module whose DELAY is bounded by the lease, or null. */
export function dueFromError(message: string): number | null {
  const m = /^(?:ERR )?DELAY \d+ is longer than (\d+),/.exec(message);
  return m ? Number(m[1]) : null;
}

export class Worker<V = string> extends EventEmitter {
  readonly stream: Name;
  readonly group: Name;
  readonly consumer: Name;
  /** What it did: `acked`, `retried`, `failed`, `dead-lettered`, `lost`, `refused`, `given-back`. */
  readonly counts: Record<Counter, number> = {
    acked: 0, retried: 0, failed: 0, 'dead-lettered': 0, lost: 0, refused: 0, 'given-back': 0,
  };
  /** The module's features this worker uses, known once `run()` started. */
  features: Features | null = null;

  private readonly reclaim: Reclaim;
  private readonly client: Adapter;
  private readonly opts: Required<Omit<WorkerOptions<V>, 'stream' | 'group' | 'consumer'>>;
  private readonly held = new Map<string, Held>();
  private running: Promise<void> | null = null;
  private closing = false;
  private closed = false;
  private wake: (() => void) | null = null;
  private reader: Adapter | null = null;
  private readerId: number | null = null;
  private policy: Policy | null = null;
  private timer: NodeJS.Timeout | null = null;
  private queue: Array<{ id: string; outcome: Outcome }> = [];
  private flushing: Promise<void> | null = null;
  private inFlight = new Set<Promise<void>>();

  constructor(client: unknown, options: WorkerOptions<V>) {
    super();
    if (options === null || typeof options !== 'object') throw new TypeError('Worker: options must be an object');
    checkOptions('Worker', options, OPTIONS);
    this.stream = checkName('stream', options.stream);
    this.group = checkName('group', options.group);
    this.consumer = checkName('consumer', options.consumer);
    if (typeof options.handler !== 'function') throw new TypeError('Worker: handler must be a function');
    this.opts = {
      handler: options.handler,
      concurrency: positiveInt('concurrency', options.concurrency ?? 1, 1),
      block: positiveInt('block', options.block ?? 1000, 1),
      failureDelay: options.failureDelay == null ? null : positiveInt('failureDelay', options.failureDelay, 0),
      heartbeat: options.heartbeat === undefined ? 0 : positiveInt('heartbeat', options.heartbeat, 10),
      maxHold: options.maxHold == null ? null : positiveInt('maxHold', options.maxHold, 1),
      closeTimeout: positiveInt('closeTimeout', options.closeTimeout ?? 30_000, 0),
      stopAfterIdle: options.stopAfterIdle == null ? null : positiveInt('stopAfterIdle', options.stopAfterIdle, 0),
      buffers: options.buffers === true,
      autorun: options.autorun !== false,
    };
    this.reclaim = new Reclaim(client);
    this.client = this.reclaim.adapter;
    if (!this.client.usable()) throw new Error('Worker: the client is not connected (connect it first)');
    if (this.opts.autorun) {
      this.run().catch(() => undefined); // reported through the 'error' event
    }
  }

  /** How many entries the worker holds now (read, not settled). */
  get holding(): number {
    return this.held.size;
  }

  /** Starts reading (once); resolves when the worker stopped, holding nothing. */
  run(): Promise<void> {
    if (!this.running) {
      this.running = this.loop().catch((e: unknown) => {
        this.report(e);
        throw e;
      });
    }
    return this.running;
  }

  private report(e: unknown): void {
    try {
      if (this.listenerCount('error') > 0) this.emit('error', e);
    } catch {
      // A listener that throws: nothing more to tell it.
    }
  }

  /** What the worker learns once before reading (again after a transient error: each step once). */
  private async start(): Promise<void> {
    this.features ??= await this.reclaim.features();
    if (!this.timer) {
      this.policy = await this.reclaim.policyGet(this.stream, this.group);
      const beat = this.opts.heartbeat || (this.policy ? Math.max(10, Math.floor(this.policy.minIdle / 3)) : 1000);
      this.timer = setInterval(() => void this.renew().catch((e: unknown) => this.report(e)), beat);
      this.timer.unref();
    }
    if (!this.reader) {
      this.reader = await this.client.duplicate((e) => this.report(e));
      this.readerId = this.client.cluster ? null : await this.reader.call(['CLIENT', 'ID']).then(int, () => null);
    }
  }

  /** Emits an event; a listener that throws is reported on `error`, never thrown into the worker. */
  private tell(event: string, ...args: unknown[]): void {
    try {
      this.emit(event, ...args);
    } catch (e) {
      this.report(e);
    }
  }

  private async loop(): Promise<void> {
    let pause = FIRST_PAUSE_MS;
    let lastSeen = Date.now();
    try {
      while (!this.closing) {
        const free = this.opts.concurrency - this.held.size;
        if (free <= 0) {
          await this.sleep(null);
          continue;
        }
        let got: number;
        try {
          await this.start();
          got = await this.readOnce(free);
          pause = FIRST_PAUSE_MS;
        } catch (e) {
          if (this.closing) break;
          if (!isTransient(e)) throw e;
          this.report(e);
          await this.sleep(pause);
          pause = Math.min(pause * 2, MAX_PAUSE_MS);
          continue;
        }
        if (got > 0) lastSeen = Date.now();
        else if (this.opts.stopAfterIdle !== null && Date.now() - lastSeen >= this.opts.stopAfterIdle) break;
      }
    } finally {
      await this.shutdown();
    }
  }

  /** One read of up to `free` entries; starts their handlers. Returns how many came. */
  private async readOnce(free: number): Promise<number> {
    const reader = this.reader as Adapter;
    const meta = this.features?.deliveryMetadata === true;
    const args: Arg[] = ['RECLAIM.READGROUP', 'GROUP', this.group, this.consumer, 'COUNT', free, 'BLOCK', this.opts.block];
    if (meta) args.push('DELIVERY-METADATA');
    args.push('STREAMS', this.stream, '>');
    const reply = await reader.call(args, { buffers: this.opts.buffers, key: this.stream });
    const entries = batches(reply, this.opts.buffers).flatMap((b) => b.entries.map((e) => ({ ...e, stream: b.stream })));
    if (entries.length === 0) return 0;
    const now = Date.now();
    for (const e of entries) this.held.set(e.id, { since: now, attempt: 1, done: false });
    if (this.closing) {
      await this.giveBack(entries.map((e) => e.id));
      return entries.length;
    }
    if (meta) {
      // DELIVERY-METADATA gives the deliveries before this one (Redis 8.4's XREADGROUP ... CLAIM: 0 for a new entry).
      for (const e of entries) (this.held.get(e.id) as Held).attempt = (e.deliveries ?? 0) + 1;
    } else {
      await this.attempts(entries.map((e) => e.id));
    }
    for (const e of entries) {
      const entry: Entry<V> = { id: e.id, fields: e.fields as Fields<V>, attempt: this.held.get(e.id)?.attempt ?? 1, stream: e.stream };
      const p = this.handle(entry);
      this.inFlight.add(p);
      void p.catch((e: unknown) => this.report(e)).finally(() => this.inFlight.delete(p));
    }
    return entries.length;
  }

  /** The delivery counts of the entries just read: one XPENDING over their range. */
  private async attempts(ids: string[]): Promise<void> {
    try {
      const sorted = [...ids].sort(compareIds);
      const first = sorted[0] as string;
      const last = sorted[sorted.length - 1] as string;
      const r = await this.client.call(['XPENDING', this.stream, this.group, first, last, this.held.size + ids.length, this.consumer], { key: this.stream });
      for (const row of Array.isArray(r) ? r : []) {
        if (!Array.isArray(row)) continue;
        const h = this.held.get(text(row[0]));
        if (h) h.attempt = Math.max(1, int(row[3]));
      }
    } catch (e) {
      this.report(e); // attempt numbers stay 1: the entries are handled all the same
    }
  }

  private async handle(entry: Entry<V>): Promise<void> {
    let outcome: Outcome;
    let error: unknown = null;
    try {
      await this.opts.handler(entry);
      outcome = { action: 'ack' };
    } catch (e) {
      error = e;
      if (e instanceof Retry) outcome = { action: 'nack', delay: e.delayMs, reason: e.message, retry: true };
      else if (e instanceof Permanent) outcome = { action: 'term', reason: e.reason };
      else outcome = { action: 'nack', delay: this.opts.failureDelay, reason: e instanceof Error ? e.message : String(e), retry: false };
    }
    const h = this.held.get(entry.id);
    if (!h || h.done) return; // given back at close meanwhile
    h.done = true;
    this.queue.push({ id: entry.id, outcome });
    await this.flush();
    if (outcome.action === 'ack') this.tell('completed', entry);
    else if (outcome.action === 'term') this.tell('deadLettered', entry, outcome.reason);
    else if (outcome.retry) this.tell('retried', entry, outcome.delay);
    else this.tell('failed', entry, error);
  }

  /** Sends the settled outcomes: one XACK for all the acks, NACKs and TERMs, pipelined; one flush at a time. */
  private async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.queue.length === 0) return;
    const batch = this.queue;
    this.queue = [];
    this.flushing = this.send(batch).finally(() => {
      this.flushing = null;
      for (const b of batch) this.held.delete(b.id);
      this.kick();
    });
    await this.flushing;
  }

  private nackArgs(id: string, delay: number | null, reason: string | null): Arg[] {
    const args: Arg[] = ['RECLAIM.NACK', this.stream, this.group, this.consumer, id];
    let d: Arg | null = delay;
    if (d === null) d = this.policy ? leaseOf(this.policy, this.held.get(id)?.attempt ?? 1) : LEASE_DELAY;
    args.push('DELAY', d);
    if (reason !== null && this.features?.nackReason) args.push('REASON', reason || 'failed');
    return args;
  }

  private async send(batch: Array<{ id: string; outcome: Outcome }>): Promise<void> {
    const acks = batch.filter((b) => b.outcome.action === 'ack').map((b) => b.id);
    const cmds: Arg[][] = [];
    const what: Array<{ ids: string[]; outcome: Outcome | null }> = [];
    for (let i = 0; i < acks.length; i += CHUNK) {
      const ids = acks.slice(i, i + CHUNK);
      cmds.push(['XACK', this.stream, this.group, ...ids]);
      what.push({ ids, outcome: null });
    }
    for (const b of batch) {
      const o = b.outcome;
      if (o.action === 'term') cmds.push(['RECLAIM.TERM', this.stream, this.group, this.consumer, b.id, 'REASON', o.reason || 'term']);
      else if (o.action === 'nack') cmds.push(this.nackArgs(b.id, o.delay, o.reason));
      else continue;
      what.push({ ids: [b.id], outcome: o });
    }
    let results: Settled[];
    try {
      results = await this.client.pipeline(cmds, this.stream);
    } catch (e) {
      this.report(e); // they stay pending and come back when their lease ends
      return;
    }
    for (let i = 0; i < results.length; i++) {
      await this.settled(what[i] as { ids: string[]; outcome: Outcome | null }, results[i] as Settled);
    }
  }

  private async settled(w: { ids: string[]; outcome: Outcome | null }, r: Settled): Promise<void> {
    const o = w.outcome;
    if (!r.ok) {
      if (o?.action === 'term' && r.error instanceof ReclaimError) {
        // No DLQ, a paused policy, an open breaker: given back as after any other error.
        this.counts.refused += 1;
        this.report(r.error);
        return this.nackOne(w.ids[0] as string, this.opts.failureDelay, o.reason);
      }
      if (o?.action === 'nack' && r.error instanceof ReclaimError) {
        o.retry ? (this.counts.retried += 1) : (this.counts.failed += 1);
        const due = dueFromError(r.error.message);
        if (due !== null) return this.nackOne(w.ids[0] as string, due, null);
        this.counts.refused += 1; // no policy: it stays pending
      }
      this.report(r.error);
      return;
    }
    const n = int(r.ok ? r.value : 0);
    if (o === null) {
      this.counts.acked += n;
      this.counts.lost += w.ids.length - n;
    } else if (o.action === 'term') {
      n ? (this.counts['dead-lettered'] += 1) : (this.counts.lost += 1);
    } else if (o.action === 'nack') {
      o.retry ? (this.counts.retried += 1) : (this.counts.failed += 1);
      if (!n) this.counts.lost += 1;
    }
  }

  /** One more NACK (after a refused TERM, or with the delay the module said is the longest). */
  private async nackOne(id: string, delay: number | null, reason: string | null): Promise<void> {
    try {
      const n = int(await this.client.call(this.nackArgs(id, delay, reason), { key: this.stream }));
      if (!n) this.counts.lost += 1;
    } catch (e) {
      this.report(e); // it stays pending
    }
  }

  /** Renews the leases of the entries held (one EXTEND per CHUNK); those it did not renew are lost. */
  private async renew(): Promise<void> {
    if (!this.policy || this.held.size === 0) return;
    const now = Date.now();
    const ids = [...this.held].filter(([, h]) => !h.done && (this.opts.maxHold === null || now - h.since < this.opts.maxHold)).map(([id]) => id);
    for (let i = 0; i < ids.length; i += CHUNK) {
      await this.client.call(['RECLAIM.EXTEND', this.stream, this.group, this.consumer, ...ids.slice(i, i + CHUNK)], { key: this.stream });
    }
  }

  /** Gives back at once entries held and not handled. */
  private async giveBack(ids: string[]): Promise<void> {
    for (const id of ids) {
      const h = this.held.get(id);
      if (h) h.done = true;
    }
    for (let i = 0; i < ids.length; i += CHUNK) {
      const part = ids.slice(i, i + CHUNK);
      try {
        await this.client.call(['RECLAIM.NACK', this.stream, this.group, this.consumer, ...part], { key: this.stream });
        this.counts['given-back'] += part.length;
      } catch (e) {
        this.report(e); // they stay pending: their lease brings them back
      }
    }
    for (const id of ids) this.held.delete(id);
  }

  private sleep(ms: number | null): Promise<void> {
    return new Promise((resolve) => {
      const t = ms === null ? null : setTimeout(() => done(), ms);
      const done = () => {
        if (t) clearTimeout(t);
        this.wake = null;
        resolve();
      };
      this.wake = done;
    });
  }

  private kick(): void {
    this.wake?.();
  }

  private async shutdown(): Promise<void> {
    this.closing = true;
    const deadline = Date.now() + this.opts.closeTimeout;
    while (this.inFlight.size > 0 && Date.now() < deadline) {
      await Promise.race([Promise.allSettled([...this.inFlight]), new Promise((r) => setTimeout(r, Math.max(0, deadline - Date.now())).unref())]);
    }
    await this.flush();
    await this.giveBack([...this.held].filter(([, h]) => !h.done).map(([id]) => id));
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.reader?.close();
    this.reader = null;
    this.closed = true;
    this.tell('closed');
  }

  /**
   * Stops reading, lets running handlers finish (up to `closeTimeout` ms), gives back the rest
   * (`RECLAIM.NACK`), resolves holding nothing.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closing = true;
    this.kick();
    if (this.readerId !== null) {
      // A read blocked in BLOCK returns now where the server supports it; else within `block` ms.
      await this.client.call(['CLIENT', 'UNBLOCK', this.readerId]).catch(() => undefined);
    }
    if (!this.running) {
      this.closed = true;
      return;
    }
    await this.running.catch(() => undefined);
  }

  /**
   * Opt-in: on SIGTERM or SIGINT, `close()` and then exit the process (status 0, or 1 when
   * closing failed). A second signal acts as without the worker.
   */
  handleSignals(signals: NodeJS.Signals[] = ['SIGTERM', 'SIGINT'], exit = true): this {
    const onSignal = (): void => {
      for (const s of signals) process.removeListener(s, onSignal);
      this.close().then(
        () => exit && process.exit(0),
        () => exit && process.exit(1),
      );
    };
    for (const s of signals) process.once(s, onSignal);
    return this;
  }
}
