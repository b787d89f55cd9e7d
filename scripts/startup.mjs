// `npm run startup`: the first steps of W4 and W8 (or the workloads named
// on the command line) in headless Chromium, webfusion's as written beside
// TF.js's WebGPU backend: each step's time, and the longest task it held
// the page's thread for (the browser reports tasks over 50 ms).
import { join } from 'node:path';
import { launch, repo, serveFixture, urlOf } from '../tests/page/browser.mjs';

const ids = process.argv.slice(2).length ? process.argv.slice(2) : ['W4', 'W8'];
const server = await serveFixture({
  '/pkg/': join(repo, 'pkg'),
  '/node_modules/': join(repo, 'node_modules'),
  '/www/': join(repo, 'www'),
  '/': join(repo, 'bench'),
});
const browser = await launch();
try {
  const page = await browser.newPage();
  page.on('console', (m) => { if (m.type() === 'error') console.error(`[page] ${m.text()}`); });
  await page.goto(urlOf(server));
  await page.waitForSelector('body[data-ready]', { state: 'attached', timeout: 60_000 });
  const rows = await page.evaluate(async (ids) => (await import('/startup.js')).firstSteps(ids), ids);
  const fmt = (v) => v.toFixed(0);
  const head = ['workload', 'library', 'step', 'ms', 'until first wait ms', 'longest task ms', 'long tasks', 'blocked ms'];
  const lines = [];
  for (const r of rows) {
    for (const library of ['webfusion', 'tfjs']) {
      for (const step of ['first', 'second']) {
        const s = r[library][step];
        lines.push([r.id, library, step, fmt(s.ms), fmt(s.syncMs), s.longTasks ? fmt(s.longest) : '<50', String(s.longTasks), fmt(s.blockedMs)]);
      }
    }
  }
  const widths = head.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i].length)));
  const line = (cells) => cells.map((c, i) => c.padStart(widths[i])).join('  ');
  console.log([line(head), ...lines.map(line)].join('\n'));
  console.log('webfusion as written, each library on a device of its own; long tasks: over 50 ms on the page\'s thread.');
} finally {
  await browser.close();
  server.close();
}
