// The digit recognizer of www/digits.js (TF.js's tutorial CNN) learns the
// digits the `mnist` package ships (no download at run time) in the page,
// on a small budget: its loss falls and it recognizes held-out digits far
// better than chance. `npm run mnist` trains it to the end.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { inPage, launch, repo, serveFixture } from './browser.mjs';

let browser;
let server;
before(async () => {
  browser = await launch();
  server = await serveFixture({
    '/pkg/': join(repo, 'pkg'),
    '/www/': join(repo, 'www'),
    '/digits/': join(repo, 'node_modules/mnist/src/digits'),
    '/': join(repo, 'tests/page/fixture'),
  });
});
after(async () => {
  await browser?.close();
  server?.close();
});

test('the tutorial CNN learns the mnist digits in the page and recognizes held-out ones', async () => {
  const { result } = await inPage(browser, server, async (wf, { steps }) => {
    const { DigitModel, batchOf, mnistSets } = await import('/www/digits.js');
    const { training, held } = await mnistSets('/digits/');
    const gpu = await wf.Device.request();
    const model = new DigitModel(wf, gpu, { seed: 1, lr: 0.003 });
    const before = await model.accuracy(held, 500);
    const losses = [];
    const started = performance.now();
    let cost;
    for (let i = 0; i < steps; i += 1) {
      const { x, y } = batchOf(training, i * 64, 64);
      cost?.dispose();
      cost = model.step(x, y, 64);
      if (i % 10 === 9) losses.push((await cost.data())[0]);
    }
    const ms = performance.now() - started;
    return { n: training.n + held.n, before, after: await model.accuracy(held, 500), losses, ms, failures: gpu.stats().failuresHeld };
  }, { steps: 80 });
  console.log(`# ${result.n} digits; held-out accuracy ${result.before} -> ${result.after}; losses every 10 steps ${result.losses.map((l) => l.toFixed(2)).join(' ')}; ${(result.ms / 1000).toFixed(1)} s`);
  assert.equal(result.n, 10000);
  assert.ok(result.before < 0.3, `untrained, near chance: ${result.before}`);
  assert.ok(result.losses.at(-1) < result.losses[0] * 0.6, `the loss falls: ${result.losses}`);
  assert.ok(result.after > 0.8, `held-out accuracy after 80 steps: ${result.after}`);
  assert.equal(result.failures, 0);
});
