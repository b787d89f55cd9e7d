// `npm run bench`: serves the built package with the peers' packages, runs
// bench/ in headless Chromium (WebGPU on), prints the table and writes
// bench-results.json. Ratios are what to read: this machine is shared and
// noisy, so absolute times vary run to run.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { launch, repo, serveFixture, urlOf } from '../tests/page/browser.mjs';

const only = process.argv.slice(2);
const server = await serveFixture({
  '/pkg/': join(repo, 'pkg'),
  '/node_modules/': join(repo, 'node_modules'),
  '/': join(repo, 'bench'),
});
const browser = await launch();
try {
  const page = await browser.newPage();
  page.on('console', (m) => { if (m.type() === 'error') console.error(`[page] ${m.text()}`); });
  page.on('console', (m) => { if (m.type() === 'log') console.log(`[bench] ${m.text()}`); });
  await page.goto(urlOf(server));
  await page.waitForSelector('body[data-ready]', { state: 'attached', timeout: 60_000 });
  const { results, registration } = await page.evaluate((ids) => window.runBench(ids.length ? ids : null), only);

  const fmt = (v) => (v == null ? '-' : v >= 100 ? v.toFixed(0) : v.toFixed(2));
  const ratio = (a, b) => (a == null || b == null ? '-' : `${(b / a).toFixed(2)}x`);
  const pct = (f) => `${(f * 100).toFixed(1)}%`;
  const rows = results.map((r) => [
    r.id, fmt(r.webfusion.ms), fmt(r.tfjs), fmt(r.ort),
    ratio(r.webfusion.ms, r.tfjs), ratio(r.webfusion.ms, r.ort),
    r.tfjsGpu == null ? '-' : `${fmt(r.tfjsGpu)} (${ratio(r.webfusionBesideTfjsGpu, r.tfjsGpu)})`,
    String(r.webfusion.kernels), String(r.webfusion.bytes),
    pct(r.stacksCost), pct(r.scopesCost), String(r.rounds),
  ]);
  const head = ['workload', 'webfusion ms', 'tfjs ms', 'ort ms', 'tfjs/wf', 'ort/wf', 'tfjs gpu-path ms', 'kernels/iter', 'bytes alloc/iter', 'stacks cost', 'scopes cost', 'rounds'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells) => cells.map((c, i) => c.padStart(widths[i])).join('  ');
  console.log(`\n${line(head)}\n${rows.map(line).join('\n')}`);
  console.log('\nratios > 1x: webfusion faster. Every contender of a row is timed side by side, round by round (median of the rounds).');
  console.log('stacks cost: captureStacks on vs default; scopes cost: default vs error scopes off; each the median of the per-round ratios.');
  console.log('tfjs gpu-path: TF.js with CPU forwarding off, timed beside webfusion.');
  for (const r of results) if (r.ortError) console.log(`ort ${r.id}: ${r.ortError}`);
  console.log(`registration: ${registration.opsPerSecond} ops/s (${registration.ops} ops in ${registration.ms.toFixed(1)} ms)`);
  writeFileSync(join(repo, 'bench-results.json'), `${JSON.stringify({ date: new Date().toISOString(), results, registration }, null, 2)}\n`);
  console.log('wrote bench-results.json');
} finally {
  await browser.close();
  server.close();
}
