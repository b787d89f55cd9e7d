// TF.js's own op tests against a TF.js backend, in headless Chromium.
//
//   node scripts/tfjs-tests.mjs [--backend webfusion|webgpu|both] [--files abs_test,add_test] [--host] [--json out.json]
//
// With `--host`, small work runs where each backend runs it by default
// (webfusion's host, TF.js WebGPU's CPU forwarding); without, as kernels.
// Bundles the compiled tests `@tensorflow/tfjs-core` ships (`dist/ops/**/*_test.js`,
// its folders included, and `dist/gradients_test.js`) behind tests/tfjs/boot.js, runs them in a page
// per backend, and prints per file how many passed, failed and were excluded.
// A spec is excluded when it failed only because TF.js found no kernel of
// that name for the backend (an op the backend does not have: TF.js's own
// "Kernel 'X' not registered" message), or because the backend refused a
// dtype it does not have (string, complex64) by name; any other failure is
// a failure.
// Exits non-zero when a spec failed on webfusion.
import { build } from 'rolldown';
import { copyFile, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { serve } from './serve.mjs';
import { launch } from '../tests/page/browser.mjs';

const repo = resolve(fileURLToPath(import.meta.url), '../..');
const core = join(repo, 'node_modules/@tensorflow/tfjs-core/dist');

/** The test files, as names relative to tfjs-core's dist without `.js`. */
export async function testFiles() {
  const ops = (await readdir(join(core, 'ops'), { recursive: true }))
    .filter((f) => f.endsWith('_test.js'))
    .map((f) => `ops/${f.slice(0, -3)}`);
  return [...ops.sort(), 'gradients_test'];
}

/** Bundles `files` behind the boot module into a fresh folder; returns it. */
async function bundle(files) {
  const dir = await mkdtemp(join(tmpdir(), 'tfjs-tests-'));
  const boot = join(repo, 'tests/tfjs/boot.js');
  const lines = [`import ${JSON.stringify(boot)};`];
  for (const [i, file] of files.entries()) {
    const mark = join(dir, `mark-${i}.js`);
    await writeFile(mark, `import { setFile } from ${JSON.stringify(boot)};\nsetFile(${JSON.stringify(file)});\n`);
    lines.push(`import ${JSON.stringify(mark)};`, `import ${JSON.stringify(join(core, `${file}.js`))};`);
  }
  lines.push(`import { run } from ${JSON.stringify(boot)};`, 'run();');
  await writeFile(join(dir, 'entry.js'), lines.join('\n'));
  const out = join(dir, 'out');
  await build({
    input: join(dir, 'entry.js'),
    output: { file: join(out, 'bundle.js'), format: 'esm' },
    platform: 'browser',
    // TF.js's package and ours say their modules have no side effects (but
    // a few); a test file is nothing but side effects.
    treeshake: { moduleSideEffects: [{ test: /./, sideEffects: true }] },
    // jasmine-core is CommonJS and looks for Node's `global`; finding none,
    // it would keep its timers on an empty object.
    transform: { define: { global: 'globalThis' } },
    logLevel: 'silent',
  });
  await copyFile(join(repo, 'pkg/webfusion_bg.wasm'), join(out, 'webfusion_bg.wasm'));
  await writeFile(join(out, 'index.html'), '<!doctype html><script type="module" src="bundle.js"></script>\n');
  return dir;
}

/** How a spec counts: passed, failed, excluded (with the missing kernel) or skipped. */
export function classify({ status, message }) {
  if (status === 'passed') return { kind: 'passed' };
  if (status !== 'failed') return { kind: 'skipped' };
  const missing = /Kernel '([^']+)' not registered for backend/.exec(message ?? '');
  if (missing) return { kind: 'excluded', kernel: missing[1] };
  // A dtype webfusion does not have is excluded the same way, by the
  // backend's own refusal naming it.
  const dtype = /webfusion has no (\w+) tensors/.exec(message ?? '');
  return dtype ? { kind: 'excluded', kernel: `${dtype[1]} tensors` } : { kind: 'failed' };
}

/** Runs the bundle in `dir` against `backend`; resolves to the spec records. */
async function runIn(dir, backend, host, log) {
  const server = await serve({ port: 0, mounts: { '/': join(dir, 'out') }, made: {} });
  const browser = await launch();
  try {
    const page = await browser.newPage();
    // An error outside every spec (a test file that throws as it is
    // evaluated, a rejection nobody awaited) is reported, not fatal: jasmine
    // goes on, and an error that stops it shows as results that never come.
    page.on('pageerror', (e) => log(`[${backend}] page error: ${e.stack ?? e}`));
    await page.goto(`http://127.0.0.1:${server.address().port}/?backend=${backend}${host ? '&host' : ''}`);
    for (;;) {
      const done = await page.evaluate(() => window.tfjsTests ?? null);
      if (done) return done.results;
      await new Promise((r) => setTimeout(r, 5000));
    }
  } finally {
    await browser.close();
    server.close();
  }
}

/** Per file: { passed, failed, excluded, skipped } counts of `results`. */
export function tally(results) {
  const files = new Map();
  for (const result of results) {
    const counts = files.get(result.file) ?? { passed: 0, failed: 0, excluded: 0, skipped: 0 };
    counts[classify(result).kind] += 1;
    files.set(result.file, counts);
  }
  return files;
}

/**
 * Runs `files` (all by default) on each of `backends`, with `host` on a
 * default device (small work on the host); resolves to { backend: results }.
 */
export async function runTfjsTests({ backends = ['webfusion'], files, host = false, log = console.error } = {}) {
  const dir = await bundle(files ?? (await testFiles()));
  try {
    const runs = {};
    for (const backend of backends) runs[backend] = await runIn(dir, backend, host, log);
    return runs;
  } finally {
    if (!process.env.KEEP_TFJS_BUNDLE) await rm(dir, { recursive: true, force: true });
  }
}

async function main() {
  const { values } = parseArgs({
    options: { backend: { type: 'string', default: 'webfusion' }, files: { type: 'string' }, host: { type: 'boolean', default: false }, json: { type: 'string' } },
  });
  const backends = values.backend === 'both' ? ['webfusion', 'webgpu'] : [values.backend];
  const all = await testFiles();
  const files = values.files
    ? values.files.split(',').map((name) => {
        const file = all.find((f) => f === name || f.endsWith(`/${name}`));
        if (!file) throw new Error(`no TF.js test file is named ${name}`);
        return file;
      })
    : all;
  const started = Date.now();
  const runs = await runTfjsTests({ backends, files, host: values.host });
  if (values.json) await writeFile(values.json, JSON.stringify(runs, null, 1));
  const tallies = Object.fromEntries(Object.entries(runs).map(([b, r]) => [b, tally(r)]));
  const cell = (c) => (c ? `${c.passed} / ${c.failed} / ${c.excluded}` : '-');
  console.log(`| file | ${backends.map((b) => `${b}: passed / failed / excluded`).join(' | ')} |`);
  console.log(`|---|${backends.map(() => '---').join('|')}|`);
  const names = [...new Set(Object.values(tallies).flatMap((t) => [...t.keys()]))].sort();
  for (const name of names) console.log(`| ${name} | ${backends.map((b) => cell(tallies[b].get(name))).join(' | ')} |`);
  const sum = (t) => [...t.values()].reduce((s, c) => ({ passed: s.passed + c.passed, failed: s.failed + c.failed, excluded: s.excluded + c.excluded }), { passed: 0, failed: 0, excluded: 0 });
  console.log(`| **all** | ${backends.map((b) => cell(sum(tallies[b]))).join(' | ')} |`);
  for (const [backend, results] of Object.entries(runs)) {
    const missing = new Map();
    for (const r of results) {
      const c = classify(r);
      if (c.kind === 'excluded') missing.set(c.kernel, (missing.get(c.kernel) ?? 0) + 1);
    }
    console.log(`\n${backend}: kernels missing (specs excluded): ${[...missing].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ${n}`).join(', ') || 'none'}`);
  }
  console.log(`\n${((Date.now() - started) / 1000).toFixed(0)} s`);
  const failed = runs.webfusion?.filter((r) => classify(r).kind === 'failed') ?? [];
  for (const r of failed.slice(0, 400)) console.log(`FAILED ${r.file}: ${r.name}\n    ${r.message}`);
  process.exitCode = failed.length > 0 ? 1 : 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await main();
