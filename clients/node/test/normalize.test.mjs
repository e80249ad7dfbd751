// The pure parts: one shape from every reply shape, the lease of a delivery, the NACK error's due.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batches, fieldsOf } from '../dist/esm/normalize.js';
import { leaseOf } from '../dist/esm/reclaim.js';
import { compareIds, dueFromError } from '../dist/esm/worker.js';

const want = [{ stream: 'orders', entries: [{ id: '1-1', fields: { sku: 'a', n: '1' } }] }, { stream: 'b', entries: [{ id: '1-3', fields: { x: 'y' } }] }];

test('batches: RESP2 array, RESP3 map flattened (ioredis 6), object, Map, nil', () => {
  assert.deepEqual(batches([['orders', [['1-1', ['sku', 'a', 'n', '1']]]], ['b', [['1-3', ['x', 'y']]]]]), want);
  assert.deepEqual(batches(['orders', [['1-1', ['sku', 'a', 'n', '1']]], 'b', [['1-3', ['x', 'y']]]]), want);
  assert.deepEqual(batches({ orders: [['1-1', ['sku', 'a', 'n', '1']]], b: [['1-3', ['x', 'y']]] }), want);
  assert.deepEqual(batches(new Map([['orders', [['1-1', ['sku', 'a', 'n', '1']]]], ['b', [['1-3', ['x', 'y']]]]])), want);
  assert.deepEqual(batches(null), []);
  assert.deepEqual(batches([]), []);
  // A stream name that is a Buffer (ioredis callBuffer), values as Buffers when asked for.
  assert.deepEqual(batches([[Buffer.from('orders'), [[Buffer.from('1-1'), [Buffer.from('k'), Buffer.from([0xff])]]]]], true),
    [{ stream: 'orders', entries: [{ id: '1-1', fields: { k: Buffer.from([0xff]) } }] }]);
});

test('batches: an entry deleted since delivery (nil) is skipped; DELIVERY-METADATA adds idle and deliveries', () => {
  assert.deepEqual(batches([['s', [['1-1', null], null, ['1-2', ['a', 'b'], 1500, 3]]]]), [
    { stream: 's', entries: [{ id: '1-1', fields: {} }, { id: '1-2', fields: { a: 'b' }, idle: 1500, deliveries: 3 }] },
  ]);
});

test('fieldsOf: a field named __proto__ stays a field', () => {
  const f = fieldsOf(['__proto__', 'x', 'a', 1]);
  assert.equal(Object.getPrototypeOf(f), Object.prototype);
  assert.deepEqual(Object.keys(f), ['__proto__', 'a']);
  assert.throws(() => fieldsOf(['odd']), TypeError);
});

test('leaseOf: MIN-IDLE, or the BACKOFF step of the delivery count', () => {
  assert.equal(leaseOf({ minIdle: 1000, backoff: 'FIXED' }, 4), 1000);
  assert.deepEqual([1, 2, 3, 4, 5].map((d) => leaseOf({ minIdle: 1000, backoff: 'EXPONENTIAL 5000' }, d)), [1000, 2000, 4000, 5000, 5000]);
  assert.deepEqual([1, 2, 3, 4].map((d) => leaseOf({ minIdle: 1000, backoff: 'LIST 500 3000 9000' }, d)), [500, 3000, 9000, 9000]);
});

test('dueFromError and compareIds', () => {
  const msg = 'DELAY 20000 is longer than 10000, the idle (ms) after which the entry is due (MIN-IDLE or its BACKOFF step)';
  assert.equal(dueFromError(`ERR ${msg}`), 10000);
  assert.equal(dueFromError(msg), 10000);
  assert.equal(dueFromError('ERR no reclaim policy for this key and group'), null);
  assert.deepEqual(['10-0', '9-5', '9-10', '18446744073709551615-0'].sort(compareIds), ['9-5', '9-10', '10-0', '18446744073709551615-0']);
});
