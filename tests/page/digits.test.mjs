// The digit recognizer of www/cnn.js (TF.js's tutorial CNN) learns the
// digits the `mnist` package ships (no download at run time) in the page,
// on a small budget: its loss falls and it recognizes held-out digits far
// better than chance. `npm run mnist` trains it to the end. And the demo's
// digits mode (`npm start`, /digits.html), as a person uses it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { assertNoPageErrors, inPage, launch, pageErrors, repo, serveFixture, urlOf } from './browser.mjs';
import { serve } from '../../scripts/serve.mjs';

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
    const { DigitModel, batchOf, mnistSets } = await import('/www/cnn.js');
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

test('the digits mode trains the CNN live, reads a drawn digit, draws its filters and explains a broken step', async () => {
  const demo = await serve({ port: 0 });
  const page = await browser.newPage();
  const errors = pageErrors(page);
  try {
    await page.goto(`${urlOf(demo)}digits.html?paused`);
    await page.waitForSelector('body[data-state]', { timeout: 120_000 });
    assert.equal(await page.evaluate(() => document.body.dataset.state), 'ready', await page.textContent('#error'));
    assert.equal(await page.locator('#filters canvas').count(), 8, 'the first layer\'s eight filters are drawn');
    const untrained = await page.evaluate(() => window.digitsDemo.state.accuracy);
    await page.evaluate(() => window.digitsDemo.train(50, 10));
    await page.evaluate(() => window.digitsDemo.measure());
    const trained = await page.evaluate(() => {
      const { state } = window.digitsDemo;
      return { step: state.step, accuracy: state.accuracy, losses: state.history.loss.filter((l) => l !== null) };
    });
    console.log(`# digits mode: held-out accuracy ${untrained} -> ${trained.accuracy} after ${trained.step} steps`);
    assert.equal(trained.step, 50);
    assert.ok(trained.losses.at(-1) < trained.losses[0], `the loss falls: ${trained.losses}`);
    assert.ok(trained.accuracy > untrained + 0.3, `held-out accuracy ${untrained} -> ${trained.accuracy}`);
    assert.equal(await page.getAttribute('#filters', 'data-step'), '50', 'the filters are drawn again as it learns');

    // A '1' drawn with the mouse: one stroke down the middle of the pad.
    const box = await page.locator('#pad').boundingBox();
    await page.mouse.move(box.x + box.width / 2, box.y + box.height * 0.15);
    await page.mouse.down();
    for (let k = 1; k <= 10; k += 1) await page.mouse.move(box.x + box.width / 2, box.y + box.height * (0.15 + 0.07 * k));
    await page.mouse.up();
    await page.waitForSelector('#prediction[data-digit]');
    const reading = await page.evaluate(() => window.digitsDemo.state.prediction);
    assert.equal(reading.p.length, 10);
    assert.ok(Math.abs(reading.p.reduce((a, b) => a + b, 0) - 1) < 1e-4, 'the probabilities sum to 1');
    assert.equal(await page.locator('#prediction li').count(), 10);

    // A fault in the first convolution: the step fails whole and says where.
    await page.selectOption('#fault-op', 'forward: first conv2d');
    await page.click('#break-fault');
    await page.waitForSelector('#outcome[data-state=done]', { timeout: 120_000 });
    const outcome = await page.evaluate(() => ({ ...document.getElementById('outcome').dataset }));
    assert.equal(outcome.kind, 'injected');
    assert.equal(outcome.rootOp, 'conv2d');
    assert.equal(outcome.unchanged, 'true', 'no variable changed');
    assert.ok(Number.isFinite(Number(outcome.lossAfter)), 'training went on');
    assert.ok(await page.locator('#chain li.root').count() === 1);
    assert.equal(await page.locator('#tensors tbody tr').count(), 7, 'the cost and the six variables');
    assert.equal(await page.isHidden('#error'), true, await page.textContent('#error'));
    assertNoPageErrors(await errors.take(), 'the digits mode');
  } finally {
    await page.close();
    demo.close();
  }
});
