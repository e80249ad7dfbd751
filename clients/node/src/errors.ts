/** Errors: the server's error replies, and what a handler throws to settle an entry. */

/**
 * An error reply of the server (`ERR ...`, `NOGROUP ...`, `NOPERM ...`, `WRONGTYPE ...`), with the
 * server's text as `message` and its first word as `code`, whatever the client library.
 */
export class ReclaimError extends Error {
  /** The error's code: the first word of the server's text (`ERR`, `NOGROUP`, `NOPERM`...). */
  readonly code: string;
  /** The command that got it (its name and subcommand). */
  readonly command: string;

  constructor(message: string, command: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ReclaimError';
    this.code = /^[A-Z]+(?= |$)/.exec(message)?.[0] ?? 'ERR';
    this.command = command;
  }
}

/**
 * Throw it from a handler to give the entry back (`RECLAIM.NACK ... DELAY delayMs`): it is
 * delivered again `delayMs` from now (0: at once), to this worker or another. The attempt counts
 * as a delivery. A delay the server cannot keep (over 30 days; over the entry's lease on a module
 * without long delays) is refused: reported on `error`, counted as `refused`, never cut short;
 * the entry comes back when its lease ends.
 */
export class Retry extends Error {
  readonly delayMs: number;

  constructor(delayMs = 0, reason = '') {
    if (!Number.isSafeInteger(delayMs) || delayMs < 0) {
      throw new RangeError(`Retry: the delay must be a non-negative integer (ms), not ${String(delayMs)}`);
    }
    super(reason || `retry in ${delayMs} ms`);
    this.name = 'Retry';
    this.delayMs = delayMs;
  }
}

/**
 * Throw it from a handler to dead-letter the entry at once (`RECLAIM.TERM ... REASON reason`):
 * never retried, whatever its delivery count. Needs a policy with a DLQ; without one the entry is
 * given back instead, as after any other error (counted in `refused`).
 */
export class Permanent extends Error {
  readonly reason: string;

  constructor(reason = '') {
    super(reason || 'permanent failure');
    this.name = 'Permanent';
    this.reason = reason;
  }
}

/**
 * The worker's stream and group have no running policy (none, paused, or waiting for its stream
 * or group: a typo): `run()` rejects with it at start, before reading anything, unless the
 * worker was made with `waitForPolicy: true`. The same as the Python Worker's `PolicyError`.
 */
export class PolicyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PolicyError';
  }
}

/** Whether an error is an error reply of the server (as opposed to a connection error). */
export function isReplyError(e: unknown): boolean {
  if (e instanceof ReclaimError) return true;
  for (let p = e; p !== null && typeof p === 'object'; p = Object.getPrototypeOf(p)) {
    const name = (p as { constructor?: { name?: string } }).constructor?.name;
    // ioredis: ReplyError (and its SimpleError subclass); node-redis: ErrorReply, SimpleError, BlobError.
    if (name === 'ReplyError' || name === 'ErrorReply' || name === 'SimpleError' || name === 'BlobError') return true;
  }
  return false;
}

/** Error replies a worker waits out as it waits out a dropped connection: a failover, a restart, a reshard (UNBLOCKED: a blocked read whose stream left the node). */
const TRANSIENT_CODES = new Set(['LOADING', 'READONLY', 'CLUSTERDOWN', 'TRYAGAIN', 'MASTERDOWN', 'BUSY', 'MOVED', 'ASK', 'UNBLOCKED']);

/** Whether a worker should retry after this error (a connection drop, a failover) rather than stop. */
export function isTransient(e: unknown): boolean {
  if (e instanceof ReclaimError) return TRANSIENT_CODES.has(e.code);
  if (e instanceof PolicyError) return false;
  return !isReplyError(e);
}

/** The error a client library threw, as a ReclaimError when it is the server's error reply. */
export function asReclaimError(e: unknown, command: string): unknown {
  if (e instanceof ReclaimError || !isReplyError(e)) return e;
  return new ReclaimError(String((e as Error).message), command, { cause: e });
}
