// The demo's text mode (`npm start`, /text.html), as a person uses it: the
// character transformer trains live on the sonnets, its loss falls, samples
// of the characters it learned appear, and its four heads' attention is
// drawn, causal (nothing attends to a later character). No error is shown
// and none is left unhandled.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { assertNoPageErrors, launch, pageErrors, urlOf } from './browser.mjs';
import { serve } from '../../scripts/serve.mjs';

let browser;
let server;

before(async () => {
  browser = await launch();
  server = await serve({ port: 0 });
});
after(async () => {
  await browser?.close();
  server?.close();
});

test('the text mode trains the transformer, samples from it and draws its causal attention', async () => {
  const page = await browser.newPage();
  const errors = pageErrors(page);
  await page.goto(`${urlOf(server)}text.html?paused`);
  await page.waitForSelector('body[data-state]', { timeout: 120_000 });
  assert.equal(await page.evaluate(() => document.body.dataset.state), 'ready', await page.textContent('#error'));
  // The first sample and maps are drawn at step 0, before any training.
  assert.equal(await page.getAttribute('#samples', 'data-count'), '1');
  assert.equal(await page.getAttribute('#attention', 'data-causal'), 'true');
  assert.equal(await page.locator('#heads canvas').count(), 4);

  await page.evaluate(() => window.textDemo.train(40));
  await page.evaluate(() => window.textDemo.observe());
  const got = await page.evaluate(() => {
    const { state } = window.textDemo;
    return {
      step: state.step,
      losses: state.history.loss,
      bigram: state.bigram,
      vocab: state.vocab.chars.length,
      samples: state.samples.map((s) => s.text),
      chars: state.vocab.chars,
      failures: state.gpu.stats().failuresHeld,
      shownStep: document.body.dataset.step,
      attentionStep: document.getElementById('attention').dataset.step,
      causal: document.getElementById('attention').dataset.causal,
      listed: document.querySelectorAll('#sample-list li').length,
      chartPoints: state.history.step.length,
    };
  });
  console.log(`# losses ${got.losses.map((l) => l.toFixed(2)).join(' ')} (bigram ${got.bigram.toFixed(2)}); last sample ${JSON.stringify(got.samples.at(-1))}`);
  assert.equal(got.step, 40);
  assert.equal(got.shownStep, '40');
  assert.equal(got.chartPoints, 8, 'a point on the curve per read of the cost');
  assert.ok(got.losses[0] < Math.log(got.vocab) + 0.5, `it starts near a uniform guess: ${got.losses[0]}`);
  assert.ok(got.losses.at(-1) < got.losses[0] - 0.3, `the loss falls: ${got.losses}`);
  assert.equal(got.samples.length, 2);
  assert.equal(got.listed, 2);
  for (const s of got.samples) {
    assert.equal([...s].length, 40);
    assert.ok([...s].every((c) => got.chars.includes(c)), `the sample ${JSON.stringify(s)} is of the text's characters`);
  }
  assert.equal(got.attentionStep, '40');
  assert.equal(got.causal, 'true');
  assert.equal(got.failures, 0);
  assert.equal(await page.locator('#error').isHidden(), true);

  // Play trains on by itself; Pause stops it.
  await page.click('#play');
  await page.waitForFunction(() => window.textDemo.state.step >= 42, null, { timeout: 120_000 });
  await page.click('#play');
  await page.waitForFunction(() => window.textDemo.state.loops === 0, null, { timeout: 120_000 });
  const paused = await page.evaluate(() => window.textDemo.state.step);
  await page.evaluate(() => new Promise((done) => setTimeout(done, 1500)));
  assert.equal(await page.evaluate(() => window.textDemo.state.step), paused, 'paused, it trains no more');
  assertNoPageErrors(await errors.take(), 'the text mode');
  await page.close();
});
