export { Reclaim, leaseOf } from './reclaim.js';
export type { Counts, Features, Health, Imported, Name, Policy, PolicyOptions, ReadOptions, RedriveOptions, SimulatedEntry, Simulation } from './reclaim.js';
export { Worker } from './worker.js';
export type { Entry, WorkerOptions } from './worker.js';
export { Permanent, PolicyError, ReclaimError, Retry } from './errors.js';
export type { Fields, StreamBatch, StreamEntry } from './normalize.js';
