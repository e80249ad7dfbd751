/**
 * `Worker`: a consumer of one stream's group, BullMQ's ergonomics on Redis Streams, with the
 * contract of the Python Worker (clients/python): up to `concurrency` entries in flight, read with
 * `RECLAIM.READGROUP ... COUNT <free slots> BLOCK` on a connection of its own; a handler that
 * returns = XACK, `throw new Retry(ms)` = RECLAIM.NACK with DELAY, `throw new Permanent(reason)` =
 * RECLAIM.TERM with REASON, any other error = RECLAIM.NACK with the lease as the delay; leases
 * renewed with RECLAIM.EXTEND while handlers run; `close()` gives back what it has not finished.
 *
 * Round trips: the outcomes settled while the worker waits for a free slot go in the same write as
 * its next read, on the reading connection (XACK/NACK/TERM first, then RECLAIM.READGROUP: the
 * server acknowledges before it reads), so a job costs one round trip at concurrency 1, and a read
 * of n entries plus their settling one round trip at concurrency n. Outcomes settled while a read
 * waits (BLOCK) go at once on `client`, so nothing waits for a read to return.
 */
import { EventEmitter } from 'node:events';
import type { Adapter, Arg, Settled } from './adapter.js';
import { isTransient, Permanent, PolicyError, ReclaimError, Retry } from './errors.js';
import { int, put, text, type Fields } from './normalize.js';
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
  /** Without a running policy, wait for one (looking every second) instead of `run()` rejecting with a PolicyError. */
  waitForPolicy?: boolean;
}

const OPTIONS = [
  'stream', 'group', 'consumer', 'handler', 'concurrency', 'block', 'failureDelay', 'heartbeat',
  'maxHold', 'closeTimeout', 'stopAfterIdle', 'buffers', 'autorun', 'waitForPolicy',
];

const FIRST_PAUSE_MS = 100;
const MAX_PAUSE_MS = 5000;
/** How often a worker made with `waitForPolicy` looks for its policy again. */
const POLICY_POLL_MS = 1000;
/** At most this many IDs per XACK / EXTEND / NACK. */
const CHUNK = 1000;
/** `RECLAIM.NACK ... DELAY` with this asks for "as late as the lease allows": the module refuses it and says how long that is. */
const LEASE_DELAY = '9223372036854775807';
/** The statuses of a policy (`RECLAIM.POLICY GET`'s `status`) a worker starts with (as the Python Worker's). */
const RUNNING = ['active', 'storm', 'oom', 'cluster-down'];

type Counter = 'acked' | 'retried' | 'failed' | 'dead-lettered' | 'lost' | 'refused' | 'given-back';

interface Held {
  since: number;
  attempt: number;
  /** Settled or given back: its handler's outcome is no longer sent. */
  done: boolean;
}

type Outcome = { action: 'ack' } | { action: 'nack'; delay: number | null; reason: string; retry: boolean } | { action: 'term'; reason: string };

/** A handler's outcome, waiting to be sent. */
interface Settle<V> {
  entry: Entry<V>;
  outcome: Outcome;
  error: unknown;
}

/** What the loop does: waits for a slot (a handler that finishes wakes it), waits on the network or a pause (a flush on `client` soon), or runs on (it sends the queue with its next read). */
type Phase = 'slot' | 'net' | 'pause' | 'busy' | 'sync';

const ACK: Outcome = { action: 'ack' };

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

/** The delay in a NACK error of a module whose DELAY is bounded (by the lease, or 30 days): the lease, or null. */
export function dueFromError(message: string): number | null {
  const m = /^(?:ERR )?DELAY \d+ is longer than (\d+),/.exec(message);
  return m ? Number(m[1]) : null;
}

/** Why a worker does not start on `policy` (null: it runs), in the Python Worker's words. */
export function policyProblem(policy: Policy | null, stream: Name, group: Name): string | null {
  const where = `stream '${text(stream)}' group '${text(group)}'`;
  if (policy === null) return `no redis-reclaim policy for ${where} (RECLAIM.POLICY SET it first)`;
  if (policy.state === 'paused') return `the policy of ${where} is paused`;
  if (!RUNNING.some((s) => policy.status.startsWith(s))) return `the policy of ${where} does not run: ${policy.status}`;
  return null;
}

/** One entry of a read: `[id, fields]`, or `[id, fields, idle, deliveries]` with DELIVERY-METADATA; nil when deleted. */
function entryOf<V>(e: unknown, stream: string, buffers: boolean): Entry<V> | null {
  if (!Array.isArray(e) || e.length < 2) return null;
  const fields: Record<string, unknown> = {};
  const values: unknown = e[1];
  if (Array.isArray(values)) {
    for (let i = 0; i + 1 < values.length; i += 2) {
      const k = values[i];
      const v = values[i + 1];
      put(fields, typeof k === 'string' ? k : text(k), buffers ? (Buffer.isBuffer(v) ? v : Buffer.from(text(v))) : typeof v === 'string' ? v : text(v));
    }
  } else if (values instanceof Map) {
    for (const [k, v] of values) put(fields, text(k), buffers ? (Buffer.isBuffer(v) ? v : Buffer.from(text(v))) : text(v));
  }
  const id = typeof e[0] === 'string' ? e[0] : text(e[0]);
  return { id, fields: fields as Fields<V>, attempt: e.length >= 4 ? int(e[3]) + 1 : 1, stream };
}

/**
 * The entries of a `RECLAIM.READGROUP` reply, in any shape it arrives in (nil; RESP2's
 * `[[stream, entries]]`; a RESP3 map, flat as the adapters hand it over, or a Map).
 */
export function entriesOf<V>(reply: unknown, buffers: boolean): Entry<V>[] {
  const out: Entry<V>[] = [];
  const add = (stream: unknown, entries: unknown): void => {
    if (!Array.isArray(entries)) return;
    const name = typeof stream === 'string' ? stream : text(stream);
    for (const e of entries) {
      const entry = entryOf<V>(e, name, buffers);
      if (entry) out.push(entry);
    }
  };
  if (Array.isArray(reply)) {
    if (reply.length > 0 && Array.isArray(reply[0])) for (const p of reply) add(p[0], p[1]);
    else for (let i = 0; i + 1 < reply.length; i += 2) add(reply[i], reply[i + 1]);
  } else if (reply instanceof Map) {
    for (const [k, v] of reply) add(k, v);
  } else if (reply !== null && typeof reply === 'object' && !Buffer.isBuffer(reply)) {
    for (const [k, v] of Object.entries(reply)) add(k, v);
  }
  return out;
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
  private policyChecked = false;
  /** Everything `start()` learns is known. */
  private ready = false;
  private timer: NodeJS.Timeout | null = null;
  private queue: Settle<V>[] = [];
  private flushing: Promise<void> | null = null;
  private flushSoon = false;
  /** Handlers running now. */
  private busy = 0;
  private idle: (() => void) | null = null;
  private phase: Phase = 'busy';

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
      waitForPolicy: options.waitForPolicy === true,
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

  /** Emits an event when listened to; a listener that throws is reported on `error`, never thrown into the worker. */
  private tell(event: string, ...args: unknown[]): void {
    if (this.listenerCount(event) === 0) return;
    try {
      this.emit(event, ...args);
    } catch (e) {
      this.report(e);
    }
  }

  /** What the worker learns once before reading (again after a transient error: each step once). */
  private async start(): Promise<void> {
    if (!this.policyChecked) {
      await this.checkPolicy();
      this.policyChecked = true;
    }
    this.features ??= await this.reclaim.features();
    if (!this.timer) {
      const beat = this.opts.heartbeat || (this.policy ? Math.max(10, Math.floor(this.policy.minIdle / 3)) : 1000);
      this.timer = setInterval(() => void this.renew(), beat);
      this.timer.unref();
    }
    if (!this.reader) {
      this.reader = await this.client.duplicate((e) => this.report(e));
      this.readerId = this.client.cluster ? null : await this.reader.call(['CLIENT', 'ID']).then(int, () => null);
    }
    this.ready = true;
  }

  /**
   * The policy of the stream and group (`RECLAIM.POLICY GET`): none, paused or not running ->
   * PolicyError, or waited for with `waitForPolicy`. A user that may not run it (NOPERM: the
   * worker role without `+reclaim.policy|get`) starts without the check, reported on `error`.
   */
  private async checkPolicy(): Promise<void> {
    let told = false;
    while (!this.closing) {
      let policy: Policy | null;
      try {
        policy = await this.reclaim.policyGet(this.stream, this.group);
      } catch (e) {
        if (!(e instanceof ReclaimError && e.code === 'NOPERM')) throw e;
        this.report(e); // started without the check (grant +reclaim.policy|get for it)
        return;
      }
      const problem = policyProblem(policy, this.stream, this.group);
      if (problem === null) {
        this.policy = policy;
        return;
      }
      if (!this.opts.waitForPolicy) throw new PolicyError(`${problem} (new Worker(..., { waitForPolicy: true }) waits for it)`);
      if (!told) this.report(new PolicyError(`${problem}: waiting for it`));
      told = true;
      await this.sleep(POLICY_POLL_MS);
    }
  }

  private async loop(): Promise<void> {
    let pause = FIRST_PAUSE_MS;
    let lastSeen = Date.now();
    try {
      while (!this.closing) {
        const free = this.opts.concurrency - this.busy;
        if (free <= 0) {
          this.phase = 'slot';
          this.scheduleFlush(); // outcomes queued while the loop ran on: not held back by long handlers
          await this.sleep(null);
          this.phase = 'busy';
          continue;
        }
        let got: number;
        try {
          if (!this.ready) await this.start();
          if (this.closing) break;
          got = await this.readOnce(free);
          pause = FIRST_PAUSE_MS;
        } catch (e) {
          if (this.closing) break;
          if (!isTransient(e)) throw e;
          this.report(e);
          this.phase = 'pause';
          this.scheduleFlush();
          await this.sleep(pause);
          this.phase = 'busy';
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

  private readArgs(free: number): Arg[] {
    const args: Arg[] = ['RECLAIM.READGROUP', 'GROUP', this.group, this.consumer, 'COUNT', free, 'BLOCK', this.opts.block];
    if (this.features?.deliveryMetadata === true) args.push('DELIVERY-METADATA');
    args.push('STREAMS', this.stream, '>');
    return args;
  }

  /**
   * One read of up to `free` entries, after the outcomes settled so far (in the same write, on the
   * reading connection); starts their handlers. Returns how many came.
   */
  private async readOnce(free: number): Promise<number> {
    const reader = this.reader as Adapter;
    const batch = this.queue;
    this.queue = [];
    const settling = batch.length > 0 ? this.send(reader, batch) : null;
    this.phase = 'net';
    let reply: unknown;
    try {
      reply = await reader.call(this.readArgs(free), { buffers: this.opts.buffers, key: this.stream });
    } finally {
      this.phase = 'busy';
      if (settling) await settling;
    }
    const entries = entriesOf<V>(reply, this.opts.buffers);
    if (entries.length === 0) return 0;
    const now = Date.now();
    for (const e of entries) this.held.set(e.id, { since: now, attempt: e.attempt, done: false });
    if (this.closing) {
      await this.giveBack(entries.map((e) => e.id));
      return entries.length;
    }
    if (this.features?.deliveryMetadata !== true) await this.attempts(entries);
    this.phase = 'sync';
    for (const e of entries) this.begin(e);
    this.phase = 'busy';
    return entries.length;
  }

  /** The delivery counts of the entries just read (a module without DELIVERY-METADATA): one XPENDING over their range. */
  private async attempts(entries: Entry<V>[]): Promise<void> {
    try {
      const sorted = entries.map((e) => e.id).sort(compareIds);
      const first = sorted[0] as string;
      const last = sorted[sorted.length - 1] as string;
      const r = await this.client.call(['XPENDING', this.stream, this.group, first, last, this.held.size + entries.length, this.consumer], { key: this.stream });
      for (const row of Array.isArray(r) ? r : []) {
        if (!Array.isArray(row)) continue;
        const h = this.held.get(text(row[0]));
        if (h) h.attempt = Math.max(1, int(row[3]));
      }
      for (const e of entries) e.attempt = this.held.get(e.id)?.attempt ?? 1;
    } catch (e) {
      this.report(e); // attempt numbers stay 1: the entries are handled all the same
    }
  }

  /** Starts an entry's handler; no promise of its own unless the handler returns one. */
  private begin(entry: Entry<V>): void {
    this.busy += 1;
    let r: unknown;
    try {
      r = this.opts.handler(entry);
    } catch (e) {
      this.finish(entry, e, true);
      return;
    }
    if (r instanceof Promise || (r !== null && typeof r === 'object' && typeof (r as PromiseLike<unknown>).then === 'function')) {
      const p = r instanceof Promise ? r : Promise.resolve(r);
      p.then(() => this.finish(entry, null, false), (e: unknown) => this.finish(entry, e, true));
    } else {
      this.finish(entry, null, false);
    }
  }

  /** A handler is done: its outcome queued; the loop told (it sends the queue with its next read), or a flush on `client` soon. */
  private finish(entry: Entry<V>, error: unknown, threw: boolean): void {
    this.busy -= 1;
    if (this.busy === 0) this.idle?.();
    const h = this.held.get(entry.id);
    if (!h || h.done) return; // given back at close meanwhile
    h.done = true;
    this.queue.push({ entry, outcome: threw ? this.outcomeOf(error) : ACK, error });
    if (this.phase === 'slot') this.kick();
    else if (this.phase !== 'sync' && this.phase !== 'busy') this.scheduleFlush();
  }

  private outcomeOf(e: unknown): Outcome {
    if (e instanceof Retry) return { action: 'nack', delay: e.delayMs, reason: e.message, retry: true };
    if (e instanceof Permanent) return { action: 'term', reason: e.reason };
    return { action: 'nack', delay: this.opts.failureDelay, reason: e instanceof Error ? e.message : String(e), retry: false };
  }

  /** A flush on `client` once the handlers finishing now are done (one batch for all of them). */
  private scheduleFlush(): void {
    if (this.flushSoon || this.queue.length === 0) return;
    this.flushSoon = true;
    setImmediate(() => {
      this.flushSoon = false;
      void this.flush();
    });
  }

  /** Sends the settled outcomes on `client`: one XACK for all the acks, NACKs and TERMs, pipelined; one flush at a time. */
  private async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.queue.length === 0) return;
    const batch = this.queue;
    this.queue = [];
    this.flushing = this.send(this.client, batch).finally(() => {
      this.flushing = null;
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

  /** The commands of a batch: one XACK per CHUNK acks, then a NACK or TERM each; `what` says which entries each settles. */
  private commandsOf(batch: Settle<V>[]): { cmds: Arg[][]; what: Array<Settle<V>[]> } {
    const cmds: Arg[][] = [];
    const what: Array<Settle<V>[]> = [];
    const acks = batch.filter((b) => b.outcome.action === 'ack');
    for (let i = 0; i < acks.length; i += CHUNK) {
      const part = acks.slice(i, i + CHUNK);
      cmds.push(['XACK', this.stream, this.group, ...part.map((b) => b.entry.id)]);
      what.push(part);
    }
    for (const b of batch) {
      const o = b.outcome;
      if (o.action === 'term') cmds.push(['RECLAIM.TERM', this.stream, this.group, this.consumer, b.entry.id, 'REASON', o.reason || 'term']);
      else if (o.action === 'nack') cmds.push(this.nackArgs(b.entry.id, o.delay, o.reason));
      else continue;
      what.push([b]);
    }
    return { cmds, what };
  }

  /** Sends a batch on `on` (pipelined, written at once: one command alone as a plain call); counts, tells, and lets its entries go. Never rejects. */
  private async send(on: Adapter, batch: Settle<V>[]): Promise<void> {
    const { cmds, what } = this.commandsOf(batch);
    let results: Settled[] | null = null;
    try {
      if (cmds.length === 1) {
        results = [await on.call(cmds[0] as Arg[], { key: this.stream }).then((value): Settled => ({ ok: true, value }), (error: unknown): Settled => ({ ok: false, error }))];
      } else {
        results = await on.pipeline(cmds, this.stream);
      }
    } catch (e) {
      this.report(e); // they stay pending and come back when their lease ends
    }
    for (const b of batch) this.held.delete(b.entry.id);
    if (results === null) return;
    for (let i = 0; i < results.length; i++) {
      const r = results[i] as Settled;
      const w = what[i] as Settle<V>[];
      try {
        if (r.ok) this.settled(w, r.value);
        else await this.refused(w[0] as Settle<V>, r.error);
      } catch (e) {
        this.report(e);
      }
    }
  }

  /** Counts and tells what a command that settled `w` did (its reply: how many it settled). */
  private settled(w: Settle<V>[], reply: unknown): void {
    const first = w[0] as Settle<V>;
    const o = first.outcome;
    const n = int(reply);
    if (o.action === 'ack') {
      this.counts.acked += n;
      this.counts.lost += w.length - n;
      if (this.listenerCount('completed') > 0) for (const b of w) this.tell('completed', b.entry);
    } else if (!n) {
      this.counts.lost += 1;
    } else if (o.action === 'term') {
      this.counts['dead-lettered'] += 1;
      this.tell('deadLettered', first.entry, o.reason);
    } else if (o.retry) {
      this.counts.retried += 1;
      this.tell('retried', first.entry, o.delay);
    } else {
      this.counts.failed += 1;
      this.tell('failed', first.entry, first.error);
    }
  }

  /**
   * An outcome the server refused (as the Python Worker): a TERM (no DLQ, a paused policy, an
   * open breaker) -> given back as after any other error; a failure's NACK of a module whose delay
   * is bounded -> sent again with the longest; a Retry whose delay it refuses -> counted
   * `refused`, never cut short, pending until its lease ends.
   */
  private async refused(s: Settle<V>, error: unknown): Promise<void> {
    this.report(error);
    if (!(error instanceof ReclaimError)) return; // not sent: it stays pending, its lease brings it back
    const o = s.outcome;
    if (o.action === 'term') {
      this.counts.refused += 1;
      await this.nackOne(s, this.opts.failureDelay, o.reason, false);
    } else if (o.action === 'nack') {
      const due = o.retry ? null : dueFromError(error.message);
      if (due === null) this.counts.refused += 1;
      else await this.nackOne(s, due, o.reason, true);
    } else {
      this.counts.refused += 1;
    }
  }

  /** One more NACK (after a refused TERM, or with the delay the module said is the longest). */
  private async nackOne(s: Settle<V>, delay: number | null, reason: string | null, counted: boolean): Promise<void> {
    try {
      const n = int(await this.client.call(this.nackArgs(s.entry.id, delay, reason), { key: this.stream }));
      if (!n) this.counts.lost += 1;
      else if (counted) {
        this.counts.failed += 1;
        this.tell('failed', s.entry, s.error);
      }
    } catch (e) {
      if (e instanceof ReclaimError) this.counts.refused += 1;
      this.report(e); // it stays pending
    }
  }

  /** Renews the leases of the entries held (one EXTEND per CHUNK); a refused EXTEND is counted in `refused`. */
  private async renew(): Promise<void> {
    if (!this.policy || this.held.size === 0) return;
    const now = Date.now();
    const ids: string[] = [];
    for (const [id, h] of this.held) if (!h.done && (this.opts.maxHold === null || now - h.since < this.opts.maxHold)) ids.push(id);
    for (let i = 0; i < ids.length; i += CHUNK) {
      try {
        await this.client.call(['RECLAIM.EXTEND', this.stream, this.group, this.consumer, ...ids.slice(i, i + CHUNK)], { key: this.stream });
      } catch (e) {
        if (e instanceof ReclaimError && !isTransient(e)) this.counts.refused += 1;
        this.report(e);
        return;
      }
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

  /** Waits for the running handlers, up to `ms`. */
  private async drain(ms: number): Promise<void> {
    if (this.busy === 0) return;
    let t: NodeJS.Timeout | null = null;
    await new Promise<void>((resolve) => {
      this.idle = resolve;
      t = setTimeout(resolve, ms);
    });
    this.idle = null;
    if (t) clearTimeout(t);
  }

  private async shutdown(): Promise<void> {
    this.closing = true;
    this.phase = 'pause'; // from now on outcomes are flushed on `client`
    await this.drain(this.opts.closeTimeout);
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
