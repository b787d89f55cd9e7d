// `npm run bench`: serves the built package with the peers' packages, runs
// bench/ in headless Chromium (WebGPU on), prints the table and writes
// bench-results.json. Ratios are what to read: this machine is shared and
// noisy, so absolute times vary run to run.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { repo } from '../tests/page/browser.mjs';
import { openBenchPage } from './bench-page.mjs';

const only = process.argv.slice(2);
const { page, close } = await openBenchPage();
try {
  // The rows the page logs (JSON); not TF.js's own log of each kernel in its DEBUG mode.
  page.on('console', (m) => { if (m.type() === 'log' && m.text().startsWith('{')) console.log(`[bench] ${m.text()}`); });
  const { results, registration } = await page.evaluate((ids) => window.runBench(ids.length ? ids : null), only);

  const fmt = (v) => (v == null ? '-' : v >= 100 ? v.toFixed(0) : v.toFixed(2));
  const ratio = (a, b) => (a == null || b == null ? '-' : `${(b / a).toFixed(2)}x`);
  const pct = (f) => `${(f * 100).toFixed(1)}%`;
  const rows = results.map((r) => [
    r.id, fmt(r.webfusion.ms), fmt(r.asWritten.ms), pct(r.asWrittenCost), fmt(r.tfjs), fmt(r.tfjsOnWebfusion), fmt(r.ort),
    ratio(r.webfusion.ms, r.tfjs), ratio(r.asWritten.ms, r.tfjs), ratio(r.tfjsOnWebfusion, r.tfjs), ratio(r.webfusion.ms, r.ort),
    r.tfjsGpu == null ? '-' : `${fmt(r.tfjsGpu)} (${ratio(r.webfusionBesideTfjsGpu, r.tfjsGpu)})`,
    `${r.webfusion.kernels}/${r.asWritten.kernels}`, `${r.webfusion.bytes}/${r.asWritten.bytes}`,
    pct(r.stacksCost), pct(r.scopesCost), pct(r.numericsCost), pct(r.tfjsDebugCost), String(r.rounds),
  ]);
  const head = ['workload', 'tidy ms', 'as written ms', 'written vs tidy', 'tfjs ms', 'tfjs on wf ms', 'ort ms', 'tfjs/tidy', 'tfjs/written', 'tfjs/tfjs on wf', 'ort/tidy', 'tfjs gpu-path ms', 'kernels/iter', 'bytes alloc/iter', 'stacks cost', 'scopes cost', 'checks cost', 'tfjs debug cost', 'rounds'];
  const table = (head, rows) => {
    const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
    const line = (cells) => cells.map((c, i) => c.padStart(widths[i])).join('  ');
    return `${line(head)}\n${rows.map(line).join('\n')}`;
  };
  console.log(`\n${table(head, rows)}`);
  console.log('\nratios > 1x: webfusion faster. Every contender of a row is timed side by side, round by round (median of the rounds).');
  console.log('tidy: intermediates disposed as built (TF.js tidy); as written: every intermediate kept in a variable, disposed after the read.');
  console.log('written vs tidy: as-written time over tidy time, minus 1 (median of the per-round ratios). kernels and bytes: tidy/as written.');
  console.log('stacks cost: captureStacks on vs default; scopes cost: default vs error scopes off; each the median of the per-round ratios.');
  console.log("checks cost: checkNumerics on vs default; tfjs debug cost: TF.js with env DEBUG on vs off, timed side by side.");
  console.log('tfjs gpu-path: TF.js with CPU forwarding off, timed beside webfusion.');
  console.log("tfjs on wf: TF.js's code for the workload, unchanged, on setBackend('webfusion') (webfusion/tfjs), timed in the same rounds as 'webgpu'.");
  const coldHead = ['workload', 'cold tidy ms', 'cold as written ms', 'cold tfjs ms', 'cold tfjs on wf ms', 'cold ort ms', 'tfjs/written', 'tfjs/tfjs on wf'];
  const coldRows = results.map((r) => [
    r.id, fmt(r.cold.webfusion), fmt(r.cold.asWritten), fmt(r.cold.tfjs), fmt(r.cold.tfjsOnWebfusion), fmt(r.cold.ort),
    ratio(r.cold.asWritten, r.cold.tfjs), ratio(r.cold.tfjsOnWebfusion, r.cold.tfjs),
  ]);
  console.log(`\nfirst (cold) iteration of each workload, each on its own device (ort: after its session was created):\n${table(coldHead, coldRows)}`);
  for (const r of results) {
    if (!r.firstLoss) continue;
    const { float64, ...got } = r.firstLoss;
    const errors = Object.entries(got).map(([name, v]) => `${name} ${v.toFixed(6)} (${(Math.abs(v - float64) / float64).toExponential(1)})`);
    console.log(`${r.id} first-step loss: float64 ${float64.toFixed(6)}; ${errors.join(', ')} (relative error)`);
  }
  for (const r of results) if (r.ortError) console.log(`ort ${r.id}: ${r.ortError}`);
  console.log(`registration: ${registration.opsPerSecond} ops/s (${registration.ops} ops in ${registration.ms.toFixed(1)} ms)`);
  writeFileSync(join(repo, 'bench-results.json'), `${JSON.stringify({ date: new Date().toISOString(), results, registration }, null, 2)}\n`);
  console.log('wrote bench-results.json');
} finally {
  await close();
}
