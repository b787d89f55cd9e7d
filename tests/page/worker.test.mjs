// The package at home in a dedicated module Worker: it trains there, and a
// failure there reaches the worker's code as it does the page's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sharedPage } from './shared-page.mjs';

const { page } = sharedPage();

test('a module Worker trains, reads a failed step\'s chain and keeps its weights, and the next step runs', async () => {
  const reply = await page().evaluate(() => new Promise((resolve, reject) => {
    const worker = new Worker('/worker.js', { type: 'module' });
    worker.onmessage = ({ data }) => { worker.terminate(); resolve(data); };
    worker.onerror = (e) => { worker.terminate(); reject(new Error(`worker error: ${e.message}`)); };
    worker.postMessage('train');
  }));
  assert.equal(reply.ok, true, reply.error);
  const r = reply.result;
  assert.equal(r.inWorker, true, 'it ran in a worker, not on the page');
  assert.ok(r.losses[0] > 1, `the first loss is the untrained one: ${r.losses}`);
  assert.ok(r.losses.at(-1) < r.losses[0] / 50, `the loss fell: ${r.losses}`);
  assert.ok(Math.abs(r.before[0] - 3) < 0.3, `w approaches 3: ${r.before}`);
  assert.deepEqual(r.values, [9, 9.25, 9.5, 9.75, 10.25, 10.5, 10.75, 11], 'an independent read works');
  assert.equal(r.failure?.isTensorError, true, 'the failed step\'s cost rejects with a TensorError');
  assert.equal(r.failure.root.kind, 'injected');
  assert.equal(r.failure.root.op, 'matmul');
  assert.match(r.failure.firstLine, /^reading tensor #\d+/);
  assert.deepEqual(r.after, r.before, 'a failed step changes no weight');
  assert.ok(Number.isFinite(r.nextLoss) && r.nextLoss < r.losses[0], `the next step runs: ${r.nextLoss}`);
});
