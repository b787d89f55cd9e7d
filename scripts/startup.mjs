// `npm run startup`: the first steps of W4 and W8 (or the workloads named
// on the command line) in headless Chromium, webfusion's as written beside
// TF.js's WebGPU backend: the set-up (weights and inputs made) and each
// step, each begun in a task of its own, with its time and the longest
// task it held the page's thread for (the browser reports tasks over 50
// ms).
import { openBenchPage } from './bench-page.mjs';

const ids = process.argv.slice(2).length ? process.argv.slice(2) : ['W4', 'W8'];
const { page, close } = await openBenchPage();
try {
  const rows = await page.evaluate(async (ids) => (await import('/startup.js')).firstSteps(ids), ids);
  const fmt = (v) => v.toFixed(0);
  const head = ['workload', 'library', 'step', 'ms', 'until first wait ms', 'longest task ms', 'long tasks', 'blocked ms'];
  const lines = [];
  for (const r of rows) {
    for (const library of ['webfusion', 'tfjs']) {
      for (const step of ['setup', 'first', 'second']) {
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
  await close();
}
