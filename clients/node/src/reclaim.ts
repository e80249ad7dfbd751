/**
 * `Reclaim`: a method per RECLAIM.* command and subcommand, with typed options, replies in one
 * shape whatever the client library and protocol. Field names of map replies are the module's
 * (`stats(...)['dead-lettered']`, as docs/commands.md lists them); options are camelCase.
 */
import calculateSlot from 'cluster-key-slot';
import { adapt, type Adapter, type Arg } from './adapter.js';
import { isReplyError } from './errors.js';
import { batches, fieldsOf, int, optInt, optText, pairsOf, text, type StreamBatch } from './normalize.js';

/** A key, group or consumer name: a string, or a Buffer (names are binary-safe). */
export type Name = string | Buffer;

/** The options of `RECLAIM.POLICY SET` (and `RECLAIM.SIMULATE`'s what-if). */
export interface PolicyOptions {
  minIdle?: number;
  maxDeliveries?: number;
  /** The DLQ's key; null or left out: none. */
  dlq?: Name | null;
  claimant?: Name;
  count?: number;
  interval?: number;
  /** `'FIXED'`, `'EXPONENTIAL 60000'` or `'LIST 500 3000'`. */
  backoff?: string;
  liveness?: number;
  /** `[n, windowMs]`: the STORM breaker. */
  storm?: [number, number] | null;
  dlqMaxlen?: number;
  dlqMaxage?: number;
  tombstones?: boolean;
}

/** A policy as `RECLAIM.POLICY GET` (or `LIST`) shows it; spread it into `policySet` to change one option. */
export interface Policy extends Required<Omit<PolicyOptions, 'dlq' | 'storm'>> {
  stream: string;
  group: string;
  dlq: string | null;
  storm: [number, number] | null;
  /** `active`, `paused` or `storm`: how the policy runs now. */
  state: string;
  /** What the policy does now, checked live: `active`, `waiting: no group <group>`, `paused`... */
  status: string;
}

const POLICY_OPTIONS: Array<[keyof PolicyOptions, string]> = [
  ['minIdle', 'MIN-IDLE'],
  ['maxDeliveries', 'MAX-DELIVERIES'],
  ['dlq', 'DLQ'],
  ['claimant', 'CLAIMANT'],
  ['count', 'COUNT'],
  ['interval', 'INTERVAL'],
  ['backoff', 'BACKOFF'],
  ['liveness', 'LIVENESS'],
  ['storm', 'STORM'],
  ['dlqMaxlen', 'DLQ-MAXLEN'],
  ['dlqMaxage', 'DLQ-MAXAGE'],
  ['tombstones', 'TOMBSTONES'],
];
/** Fields of a Policy that are not options: accepted (and ignored) so a Policy can be spread into policySet. */
const POLICY_READ_ONLY = new Set(['stream', 'group', 'state', 'status']);

/** Throws a TypeError for an option that is not one of `known` (a typo must not pass silently). */
export function checkOptions(what: string, options: object | undefined, known: Iterable<string>): void {
  if (options === undefined) return;
  if (options === null || typeof options !== 'object') throw new TypeError(`${what}: options must be an object`);
  const ok = new Set(known);
  for (const k of Object.keys(options)) {
    if (!ok.has(k)) throw new TypeError(`${what}: unknown option ${JSON.stringify(k)} (known: ${[...ok].join(', ')})`);
  }
}

function nonNegative(what: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 0) {
    throw new RangeError(`${what} must be a non-negative integer, not ${String(v)}`);
  }
  return v;
}

/** The arguments of the policy options that are set (an option left out takes the module's default). */
export function policyArgs(what: string, options: PolicyOptions & Record<string, unknown>): Arg[] {
  checkOptions(what, options, [...POLICY_OPTIONS.map(([k]) => k), ...POLICY_READ_ONLY]);
  const out: Arg[] = [];
  for (const [key, word] of POLICY_OPTIONS) {
    const v = options[key];
    if (v === undefined || v === null) continue;
    if (key === 'backoff') out.push(word, ...String(v).trim().split(/\s+/));
    else if (key === 'storm') {
      const s = v as [number, number];
      if (!Array.isArray(s) || s.length !== 2) throw new TypeError(`${what}: storm must be [n, windowMs]`);
      out.push(word, nonNegative('storm n', s[0]), nonNegative('storm windowMs', s[1]));
    } else if (key === 'tombstones') out.push(word, v ? 'yes' : 'no');
    else if (key === 'dlq' || key === 'claimant') out.push(word, v as Name);
    else out.push(word, nonNegative(key, v));
  }
  return out;
}

export function parsePolicy(reply: unknown, stream?: Name, group?: Name): Policy {
  const m = fieldsOf(reply);
  const storm = m['storm'] === null || m['storm'] === undefined ? null : text(m['storm']).split(/\s+/).map(Number);
  return {
    stream: text(m['key'] ?? stream ?? ''),
    group: text(m['group'] ?? group ?? ''),
    minIdle: int(m['min-idle']),
    maxDeliveries: int(m['max-deliveries']),
    dlq: optText(m['dlq']),
    claimant: text(m['claimant']),
    count: int(m['count']),
    interval: int(m['interval']),
    backoff: text(m['backoff']),
    liveness: int(m['liveness']),
    storm: storm ? [storm[0] ?? 0, storm[1] ?? 0] : null,
    dlqMaxlen: int(m['dlq-maxlen']),
    dlqMaxage: int(m['dlq-maxage']),
    tombstones: text(m['tombstones']) === 'yes',
    state: text(m['state']),
    status: m['status'] === undefined ? 'active' : text(m['status']),
  };
}

/**
 * The idle (ms) after which an entry delivered `deliveries` times is due under `policy`: its
 * lease (`MIN-IDLE`, or the `BACKOFF` step of its delivery count).
 */
export function leaseOf(policy: Pick<Policy, 'minIdle' | 'backoff'>, deliveries: number): number {
  const [kind, ...rest] = policy.backoff.trim().split(/\s+/);
  const values = rest.map(Number);
  const n = Math.max(1, deliveries);
  switch ((kind ?? '').toUpperCase()) {
    case 'EXPONENTIAL':
      return Math.min(policy.minIdle * 2 ** Math.min(n - 1, 52), values[0] ?? Infinity);
    case 'LIST':
      return values.length ? (values[Math.min(n, values.length) - 1] as number) : policy.minIdle;
    default:
      return policy.minIdle;
  }
}

export type Counts = Record<string, number>;

function counts(reply: unknown): Counts {
  const out: Counts = {};
  for (const [k, v] of Object.entries(fieldsOf(reply ?? []))) out[k] = int(v);
  return out;
}

const ok = (r: unknown): boolean => r === true || text(r) === 'OK';

/** An IMPORT reply; `index` maps the index of a policy in the document sent to the one given. */
function parseImported(reply: unknown, index: (i: number) => number): Imported {
  const m = fieldsOf(reply);
  const waiting = (Array.isArray(m['waiting']) ? m['waiting'] : []).map((w) => {
    const f = fieldsOf(w);
    return { index: index(int(f['index'])), key: text(f['key']), group: text(f['group']), status: text(f['status']) };
  });
  return { imported: int(m['imported']), waiting };
}

/** What `RECLAIM.POLICY IMPORT` did. */
export interface Imported {
  imported: number;
  /** Policies set whose stream or group does not exist (a typo shows here). */
  waiting: Array<{ index: number; key: string; group: string; status: string }>;
}

/** One entry of a simulation: what a pass would do with it. */
export interface SimulatedEntry {
  id: string;
  consumer: string;
  idle: number;
  deliveries: number;
  action: string;
  rule: string;
}

export interface Simulation {
  policy: Policy;
  halted: string | null;
  nowMs: number;
  entries: SimulatedEntry[];
  totals: Counts;
  more: boolean;
}

export interface Health {
  'now-ms': number;
  live: (Record<string, unknown> & { 'by-consumer': Array<[string, number]>; 'oldest-pending-age-ms': number | null }) | null;
  'last-pass': Counts;
  'pel-sizes': Array<[number, number]>;
  'pel-change': number | null;
  deliveries: Record<string, unknown> & { pass: string | null; buckets: Counts };
  'dead-letters': Record<string, number | null>;
  status: string;
}

export interface ReadOptions {
  count?: number;
  block?: number;
  /** Field values as Buffers instead of strings. */
  buffers?: boolean;
  /**
   * `DELIVERY-METADATA`: each entry comes with `idle` and `deliveries` (a module version that has
   * it: see `Reclaim.features()`).
   */
  deliveryMetadata?: boolean;
}

export interface RedriveOptions {
  source?: [Name, Name];
  count?: number;
  rate?: number;
  canary?: number;
  window?: number;
  /** Only these DLQ entries (their IDs in the DLQ, 1 to 1000 of them): `IDS n id ...`. */
  ids?: Name[];
}

/** Which of the module's newer arguments the server has (from COMMAND DOCS). */
export interface Features {
  /** `RECLAIM.READGROUP ... DELIVERY-METADATA`. */
  deliveryMetadata: boolean;
  /** `RECLAIM.NACK ... REASON`, and a DELAY not bounded by the lease. */
  nackReason: boolean;
}

/** Every string in a (nested) reply, lower-cased. */
function words(reply: unknown, out: Set<string> = new Set()): Set<string> {
  if (Array.isArray(reply)) for (const r of reply) words(r, out);
  else if (reply instanceof Map) for (const [k, v] of reply) (words(k, out), words(v, out));
  else if (typeof reply === 'string' || Buffer.isBuffer(reply)) out.add(text(reply).toLowerCase());
  else if (reply !== null && typeof reply === 'object') for (const [k, v] of Object.entries(reply)) (out.add(k.toLowerCase()), words(v, out));
  return out;
}

export class Reclaim {
  /** The adapter of the client (one per client library). */
  readonly adapter: Adapter;

  /** `client`: an ioredis `Redis` (RESP3 or RESP2) or a node-redis client (`createClient`, RESP2 or RESP3). */
  constructor(client: unknown) {
    this.adapter = adapt(client);
  }

  /** Sends a command; `key` routes it in a cluster (the stream, or the DLQ). */
  private call(args: Arg[], key?: Name): Promise<unknown> {
    return this.adapter.call(args, { key });
  }

  /** Sends a keyless command to every primary (one on a single server); the replies in order. */
  private async everyPrimary(args: Arg[]): Promise<unknown[]> {
    return Promise.all((await this.adapter.primaries()).map((p) => p.call(args)));
  }

  /** `RECLAIM.POLICY SET`: creates or replaces the policy (an option left out takes its default). */
  async policySet(stream: Name, group: Name, options: PolicyOptions & { minIdle: number }): Promise<true> {
    if (!options || options.minIdle === undefined) throw new TypeError('policySet: minIdle is required');
    const args = policyArgs('policySet', options as PolicyOptions & Record<string, unknown>);
    ok(await this.call(['RECLAIM.POLICY', 'SET', stream, group, ...args], stream));
    return true;
  }

  /** `RECLAIM.POLICY GET`: the policy, or null. */
  async policyGet(stream: Name, group: Name): Promise<Policy | null> {
    const r = await this.call(['RECLAIM.POLICY', 'GET', stream, group], stream);
    return r === null ? null : parsePolicy(r, stream, group);
  }

  /** `RECLAIM.POLICY DEL`: true when a policy was removed. */
  async policyDel(stream: Name, group: Name): Promise<boolean> {
    return int(await this.call(['RECLAIM.POLICY', 'DEL', stream, group], stream)) === 1;
  }

  /** `RECLAIM.POLICY PAUSE [STORM]`. */
  async policyPause(stream: Name, group: Name, options: { storm?: boolean } = {}): Promise<true> {
    checkOptions('policyPause', options, ['storm']);
    await this.call(['RECLAIM.POLICY', 'PAUSE', stream, group, ...(options.storm ? ['STORM'] : [])], stream);
    return true;
  }

  /** `RECLAIM.POLICY RESUME`. */
  async policyResume(stream: Name, group: Name): Promise<true> {
    await this.call(['RECLAIM.POLICY', 'RESUME', stream, group], stream);
    return true;
  }

  /**
   * `RECLAIM.POLICY LIST [AFTER stream group] [COUNT n]`: by stream, then group; in a cluster,
   * every primary's, merged in that order.
   */
  async policyList(options: { after?: [Name, Name]; count?: number } = {}): Promise<Policy[]> {
    checkOptions('policyList', options, ['after', 'count']);
    const args: Arg[] = ['RECLAIM.POLICY', 'LIST'];
    if (options.after) args.push('AFTER', options.after[0], options.after[1]);
    if (options.count !== undefined) args.push('COUNT', nonNegative('count', options.count));
    const all = (await this.everyPrimary(args)).flatMap((r) => (Array.isArray(r) ? r : []).map((p) => parsePolicy(p)));
    all.sort((a, b) => Buffer.compare(Buffer.from(a.stream), Buffer.from(b.stream)) || Buffer.compare(Buffer.from(a.group), Buffer.from(b.group)));
    return options.count === undefined ? all : all.slice(0, options.count);
  }

  /** `RECLAIM.POLICY EXPORT`: the JSON document; in a cluster, every primary's policies in one. */
  async policyExport(): Promise<string> {
    const docs = (await this.everyPrimary(['RECLAIM.POLICY', 'EXPORT'])).map(text);
    if (docs.length === 1) return docs[0] as string;
    const parsed = docs.map((d) => JSON.parse(d) as { version: number; policies: Array<{ key: string; group: string }> });
    const policies = parsed.flatMap((d) => d.policies);
    policies.sort((a, b) => Buffer.compare(Buffer.from(a.key), Buffer.from(b.key)) || Buffer.compare(Buffer.from(a.group), Buffer.from(b.group)));
    return JSON.stringify({ version: parsed[0]?.version ?? 1, policies }, null, 2);
  }

  /**
   * `RECLAIM.POLICY IMPORT [REPLACE]`: `document` as text or as the parsed object. In a cluster
   * the policies of each slot go to its primary (all or none per slot, not across slots).
   */
  async policyImport(document: string | Buffer | object, options: { replace?: boolean } = {}): Promise<Imported> {
    checkOptions('policyImport', options, ['replace']);
    const extra = options.replace ? ['REPLACE'] : [];
    if (!this.adapter.cluster) {
      const doc = typeof document === 'string' || Buffer.isBuffer(document) ? document : JSON.stringify(document);
      return parseImported(await this.call(['RECLAIM.POLICY', 'IMPORT', doc, ...extra]), (i) => i);
    }
    const parsed = (typeof document === 'string' || Buffer.isBuffer(document) ? JSON.parse(text(document)) : document) as { version?: number; policies?: Array<{ key?: string }> };
    const bySlot = new Map<number, number[]>();
    (parsed.policies ?? []).forEach((p, i) => {
      const slot = calculateSlot(String(p.key ?? ''));
      bySlot.set(slot, [...(bySlot.get(slot) ?? []), i]);
    });
    const out: Imported = { imported: 0, waiting: [] };
    for (const indexes of bySlot.values()) {
      const part = { ...parsed, policies: indexes.map((i) => (parsed.policies ?? [])[i]) };
      const key = String((parsed.policies ?? [])[indexes[0] as number]?.key ?? '');
      const r = parseImported(await this.call(['RECLAIM.POLICY', 'IMPORT', JSON.stringify(part), ...extra], key), (i) => indexes[i] ?? i);
      out.imported += r.imported;
      out.waiting.push(...r.waiting);
    }
    out.waiting.sort((a, b) => a.index - b.index);
    return out;
  }

  /** `RECLAIM.SWEEP [LIMIT n]`: `{claimed, dead-lettered, deleted, dlq-trimmed, tombstones}`. */
  async sweep(stream: Name, group: Name, options: { limit?: number } = {}): Promise<Counts> {
    checkOptions('sweep', options, ['limit']);
    const extra = options.limit === undefined ? [] : ['LIMIT', nonNegative('limit', options.limit)];
    return counts(await this.call(['RECLAIM.SWEEP', stream, group, ...extra], stream));
  }

  /** `RECLAIM.SIMULATE`: what a pass would do now; policy options make it a what-if. */
  async simulate(stream: Name, group: Name, options: PolicyOptions & { limit?: number } = {}): Promise<Simulation> {
    const { limit, ...policy } = options;
    const extra = limit === undefined ? [] : ['LIMIT', nonNegative('limit', limit)];
    const args = policyArgs('simulate', policy as PolicyOptions & Record<string, unknown>);
    const m = fieldsOf(await this.call(['RECLAIM.SIMULATE', stream, group, ...extra, ...args], stream));
    return {
      policy: parsePolicy(m['policy'], stream, group),
      halted: optText(m['halted']),
      nowMs: int(m['now-ms']),
      entries: (Array.isArray(m['entries']) ? m['entries'] : []).map((e) => {
        const f = fieldsOf(e);
        return {
          id: text(f['id']),
          consumer: text(f['consumer']),
          idle: int(f['idle']),
          deliveries: int(f['deliveries']),
          action: text(f['action']),
          rule: text(f['rule']),
        };
      }),
      totals: counts(m['totals']),
      more: int(m['more']) === 1,
    };
  }

  /** `RECLAIM.STATS`: the counters (numbers), `cursor` and `status` (strings). */
  async stats(stream: Name, group: Name): Promise<Record<string, number | string>> {
    const out: Record<string, number | string> = {};
    for (const [k, v] of Object.entries(fieldsOf(await this.call(['RECLAIM.STATS', stream, group], stream)))) {
      out[k] = k === 'cursor' || k === 'status' ? text(v) : int(v);
    }
    return out;
  }

  /** `RECLAIM.HEALTH`: the group's signals; `by-consumer` and `pel-sizes` as lists of pairs. */
  async health(stream: Name, group: Name): Promise<Health> {
    const m = fieldsOf(await this.call(['RECLAIM.HEALTH', stream, group], stream));
    let live: Health['live'] = null;
    if (m['live'] !== null && m['live'] !== undefined) {
      const l = fieldsOf(m['live']);
      for (const [k, v] of Object.entries(l)) if (typeof v === 'number' || typeof v === 'bigint') l[k] = int(v);
      live = {
        ...l,
        'oldest-pending-age-ms': optInt(l['oldest-pending-age-ms']),
        'by-consumer': pairsOf(l['by-consumer']).map(([c, n]) => [text(c), int(n)] as [string, number]),
      };
    }
    const d = fieldsOf(m['deliveries']);
    const deadLetters: Record<string, number | null> = {};
    for (const [k, v] of Object.entries(fieldsOf(m['dead-letters']))) deadLetters[k] = optInt(v);
    return {
      'now-ms': int(m['now-ms']),
      live,
      'last-pass': counts(m['last-pass']),
      'pel-sizes': pairsOf(m['pel-sizes']).map(([t, n]) => [int(t), int(n)] as [number, number]),
      'pel-change': optInt(m['pel-change']),
      deliveries: { ...d, pass: optText(d['pass']), buckets: counts(d['buckets']) },
      'dead-letters': deadLetters,
      status: text(m['status']),
    };
  }

  /**
   * `RECLAIM.READGROUP GROUP group consumer [COUNT n] [BLOCK ms] [DELIVERY-METADATA] STREAMS ... >`:
   * `[{stream, entries: [{id, fields}]}]`, `[]` when nothing came.
   */
  async readgroup(group: Name, consumer: Name, streams: Name | Name[], options: ReadOptions & { buffers: true }): Promise<StreamBatch<Buffer>[]>;
  async readgroup(group: Name, consumer: Name, streams: Name | Name[], options?: ReadOptions): Promise<StreamBatch<string>[]>;
  async readgroup(group: Name, consumer: Name, streams: Name | Name[], options: ReadOptions = {}): Promise<StreamBatch<string | Buffer>[]> {
    checkOptions('readgroup', options, ['count', 'block', 'buffers', 'deliveryMetadata']);
    const keys = Array.isArray(streams) ? streams : [streams];
    if (keys.length === 0) throw new TypeError('readgroup: at least one stream');
    const args: Arg[] = ['RECLAIM.READGROUP', 'GROUP', group, consumer];
    if (options.count !== undefined) args.push('COUNT', nonNegative('count', options.count));
    if (options.block !== undefined) args.push('BLOCK', nonNegative('block', options.block));
    if (options.deliveryMetadata) args.push('DELIVERY-METADATA');
    args.push('STREAMS', ...keys, ...keys.map(() => '>'));
    const buffers = options.buffers === true;
    return batches(await this.adapter.call(args, { buffers, key: keys[0] }), buffers);
  }

  /** `RECLAIM.EXTEND`: renews the consumer's leases; returns the IDs renewed (a missing one was lost). */
  async extend(stream: Name, group: Name, consumer: Name, ...ids: Name[]): Promise<string[]> {
    const r = await this.call(['RECLAIM.EXTEND', stream, group, consumer, ...ids], stream);
    return (Array.isArray(r) ? r : []).map(text);
  }

  /** `RECLAIM.NACK [DELAY ms] [REASON text]`: entries released (REASON: a module version that has it). */
  async nack(stream: Name, group: Name, consumer: Name, ids: Name | Name[], options: { delay?: number; reason?: Name } = {}): Promise<number> {
    checkOptions('nack', options, ['delay', 'reason']);
    const args: Arg[] = ['RECLAIM.NACK', stream, group, consumer, ...(Array.isArray(ids) ? ids : [ids])];
    if (options.delay !== undefined) args.push('DELAY', nonNegative('delay', options.delay));
    if (options.reason !== undefined) args.push('REASON', options.reason);
    return int(await this.call(args, stream));
  }

  /** `RECLAIM.TERM [REASON text]`: entries dead-lettered. */
  async term(stream: Name, group: Name, consumer: Name, ids: Name | Name[], options: { reason?: Name } = {}): Promise<number> {
    checkOptions('term', options, ['reason']);
    const args: Arg[] = ['RECLAIM.TERM', stream, group, consumer, ...(Array.isArray(ids) ? ids : [ids])];
    if (options.reason !== undefined) args.push('REASON', options.reason);
    return int(await this.call(args, stream));
  }

  /** `RECLAIM.REDRIVE dlq [SOURCE stream group] [COUNT n] [RATE n] [CANARY n WINDOW ms]`: the task's id. */
  async redrive(dlq: Name, options: RedriveOptions = {}): Promise<number> {
    checkOptions('redrive', options, ['source', 'count', 'rate', 'canary', 'window', 'ids']);
    const args: Arg[] = ['RECLAIM.REDRIVE', dlq];
    if (options.source) args.push('SOURCE', options.source[0], options.source[1]);
    if (options.ids !== undefined) {
      if (!Array.isArray(options.ids)) throw new TypeError('redrive: ids must be an array of entry IDs');
      args.push('IDS', String(options.ids.length), ...options.ids);
    }
    for (const [k, word] of [['count', 'COUNT'], ['rate', 'RATE'], ['canary', 'CANARY'], ['window', 'WINDOW']] as const) {
      if (options[k] !== undefined) args.push(word, nonNegative(k, options[k]));
    }
    return int(await this.call(args, dlq));
  }

  /** `RECLAIM.REDRIVE STATUS`: the DLQ's last task, or null. */
  async redriveStatus(dlq: Name): Promise<Record<string, unknown> | null> {
    const r = await this.call(['RECLAIM.REDRIVE', 'STATUS', dlq], dlq);
    if (r === null) return null;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(fieldsOf(r))) {
      if (k === 'source') out[k] = Array.isArray(v) ? [text(v[0]), text(v[1])] : null;
      else if (v === null || v === undefined) out[k] = null;
      else if (k === 'state' || k === 'end-id' || k === 'cursor' || k === 'user') out[k] = text(v);
      else out[k] = int(v);
    }
    return out;
  }

  /** `RECLAIM.REDRIVE CANCEL`: true when a running task was canceled. */
  async redriveCancel(dlq: Name): Promise<boolean> {
    return int(await this.call(['RECLAIM.REDRIVE', 'CANCEL', dlq], dlq)) === 1;
  }

  /** Which newer arguments the module has, from `COMMAND DOCS` (asked each call). */
  async features(): Promise<Features> {
    // A server without COMMAND DOCS answers with an error: no feature; a connection error is thrown.
    const noDocs = (e: unknown): null => {
      if (isReplyError(e)) return null;
      throw e;
    };
    const [rg, nack] = await Promise.all([
      this.call(['COMMAND', 'DOCS', 'RECLAIM.READGROUP']).catch(noDocs),
      this.call(['COMMAND', 'DOCS', 'RECLAIM.NACK']).catch(noDocs),
    ]);
    return { deliveryMetadata: words(rg).has('delivery-metadata'), nackReason: words(nack).has('reason') };
  }
}
