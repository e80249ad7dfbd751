/**
 * One shape for every reply, whatever the client library and protocol. The adapters hand over
 * RESP3 maps as flat arrays `[field, value, ...]` (node-redis is asked for that; ioredis 6
 * flattens the maps of the commands it does not know by itself), which is also RESP2's shape.
 */

/** A reply as the adapters hand it over. */
export type Raw = null | number | bigint | string | Buffer | boolean | Raw[] | { [k: string]: Raw } | Map<Raw, Raw>;

/** A word of the module's (a state, an action, an ID) as a string. */
export function text(v: unknown): string {
  if (Buffer.isBuffer(v)) return v.toString('utf8');
  return String(v);
}

export function optText(v: unknown): string | null {
  return v === null || v === undefined ? null : text(v);
}

export function int(v: unknown): number {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  const n = Number(text(v));
  if (!Number.isFinite(n)) throw new TypeError(`expected an integer reply, got ${JSON.stringify(text(v))}`);
  return n;
}

export function optInt(v: unknown): number | null {
  return v === null || v === undefined ? null : int(v);
}

/** Sets obj[k] even when k is `__proto__` (a field name a client may write). */
export function put<T>(obj: Record<string, T>, k: string, v: T): void {
  if (k === '__proto__') Object.defineProperty(obj, k, { value: v, enumerable: true, writable: true, configurable: true });
  else obj[k] = v;
}

/** A map reply (a flat array of field, value, ...; a Map; an object) as an object with string keys. */
export function fieldsOf(reply: unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (Array.isArray(reply)) {
    if (reply.length % 2 !== 0) throw new TypeError('expected a map reply, got an array of odd length');
    for (let i = 0; i < reply.length; i += 2) put(out, text(reply[i]), reply[i + 1]);
    return out;
  }
  if (reply instanceof Map) {
    for (const [k, v] of reply) put(out, text(k), v);
    return out;
  }
  if (reply !== null && typeof reply === 'object' && !Buffer.isBuffer(reply)) {
    for (const [k, v] of Object.entries(reply)) put(out, k, v);
    return out;
  }
  throw new TypeError(`expected a map reply, got ${typeof reply}`);
}

/** Pairs of a map reply whose values are read as given: [[k, v], ...] (from a flat array or pairs). */
export function pairsOf(reply: unknown): Array<[unknown, unknown]> {
  if (reply === null || reply === undefined) return [];
  if (!Array.isArray(reply)) return Object.entries(fieldsOf(reply));
  if (reply.length > 0 && Array.isArray(reply[0])) return reply.map((p) => [p[0], p[1]] as [unknown, unknown]);
  const out: Array<[unknown, unknown]> = [];
  for (let i = 0; i + 1 < reply.length; i += 2) out.push([reply[i], reply[i + 1]]);
  return out;
}

/** An entry's fields: names as strings, values as strings (or Buffers when asked for). */
export type Fields<V = string> = Record<string, V>;

/** One entry a read handed over. */
export interface StreamEntry<V = string> {
  id: string;
  fields: Fields<V>;
  /** With DELIVERY-METADATA: ms since the entry's previous delivery (0 for a new one). */
  idle?: number;
  /** With DELIVERY-METADATA: how many times the entry was delivered before this read (0 for a new one, as Redis 8.4's XREADGROUP ... CLAIM). */
  deliveries?: number;
}

/** The entries of one stream in a read. */
export interface StreamBatch<V = string> {
  stream: string;
  entries: StreamEntry<V>[];
}

function value(v: unknown, buffers: boolean): string | Buffer {
  if (buffers) return Buffer.isBuffer(v) ? v : Buffer.from(text(v));
  return text(v);
}

function entryOf(e: unknown, buffers: boolean): StreamEntry<string | Buffer> | null {
  if (!Array.isArray(e) || e.length < 2) return null; // an entry deleted since it was delivered: nil
  const fields: Fields<string | Buffer> = {};
  const values = e[1];
  if (Array.isArray(values)) {
    for (let i = 0; i + 1 < values.length; i += 2) put(fields, text(values[i]), value(values[i + 1], buffers));
  } else if (values !== null && values !== undefined) {
    for (const [k, v] of Object.entries(fieldsOf(values))) put(fields, k, value(v, buffers));
  }
  const out: StreamEntry<string | Buffer> = { id: text(e[0]), fields };
  if (e.length >= 4) {
    out.idle = int(e[2]);
    out.deliveries = int(e[3]);
  }
  return out;
}

/**
 * The entries of a `RECLAIM.READGROUP` (or `XREADGROUP`) reply, from any shape it arrives in:
 * nil; RESP2's `[[stream, entries], ...]`; RESP3's map, flat (`[stream, entries, ...]`, as
 * ioredis 6 gives it), a Map or an object.
 */
export function batches(reply: unknown, buffers = false): StreamBatch<string | Buffer>[] {
  if (reply === null || reply === undefined) return [];
  let pairs: Array<[unknown, unknown]>;
  if (Array.isArray(reply)) {
    if (reply.length === 0) return [];
    pairs = Array.isArray(reply[0]) ? reply.map((p) => [p[0], p[1]] as [unknown, unknown]) : pairsOf(reply);
  } else {
    pairs = Object.entries(fieldsOf(reply));
  }
  return pairs.map(([stream, entries]) => ({
    stream: text(stream),
    entries: (Array.isArray(entries) ? entries : [])
      .map((e) => entryOf(e, buffers))
      .filter((e): e is StreamEntry<string | Buffer> => e !== null),
  }));
}
