// The npm package as a user gets it: packed from a clean checkout (which
// builds it), installed into a scratch project, and imported there by its
// name.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { launch, repo, serveFixture, urlOf } from './browser.mjs';

let browser;
let server;
let consumer;
let checkout;
let packed;
before(async () => {
  consumer = mkdtempSync(join(tmpdir(), 'webfusion-consumer-'));
  // Packed from a checkout without pkg/ (the working tree's files, as a
  // clone has them): `npm pack` must build the module itself (prepack).
  // The build reuses this repository's target/ and node_modules only to
  // save minutes.
  checkout = mkdtempSync(join(tmpdir(), 'webfusion-checkout-'));
  const files = execFileSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: repo })
    .toString().split('\0').filter((f) => f && existsSync(join(repo, f)));
  for (const f of files) {
    mkdirSync(dirname(join(checkout, f)), { recursive: true });
    cpSync(join(repo, f), join(checkout, f));
  }
  symlinkSync(join(repo, 'node_modules'), join(checkout, 'node_modules'));
  assert.equal(existsSync(join(checkout, 'pkg')), false);
  const env = { ...process.env, CARGO_TARGET_DIR: join(repo, 'target') };
  const out = execFileSync('npm', ['pack', '--json', '--pack-destination', consumer], { cwd: checkout, env });
  // The build's own lines may come first; npm's JSON starts at a line '['.
  const text = out.toString();
  packed = JSON.parse(text.slice(text.search(/^\[$/m)))[0];
  writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  execFileSync('npm', ['install', '--no-audit', '--no-fund', `./${packed.filename}`], { cwd: consumer });
  browser = await launch();
});
after(async () => {
  await browser?.close();
  server?.close();
  if (consumer) rmSync(consumer, { recursive: true, force: true });
  if (checkout) rmSync(checkout, { recursive: true, force: true });
});

test('the packed package ships the module, its glue, its JS snippets, its types, the TF.js backend and its license, and nothing else', () => {
  const files = packed.files
    .map((f) => f.path.replace(/^pkg\/snippets\/webfusion-[0-9a-f]+\//, 'pkg/snippets/webfusion-HASH/'))
    .sort();
  assert.deepEqual(files, [
    'LICENSE',
    'README.md',
    'package.json',
    'pkg/snippets/webfusion-HASH/inline0.js',
    'pkg/snippets/webfusion-HASH/inline1.js',
    'pkg/snippets/webfusion-HASH/inline2.js',
    'pkg/webfusion.d.ts',
    'pkg/webfusion.js',
    'pkg/webfusion_bg.wasm',
    'pkg/webfusion_bg.wasm.d.ts',
    'tfjs/backend.js',
    'tfjs/index.d.ts',
    'tfjs/index.js',
    'tfjs/kernels.js',
  ]);
});

test('a consumer imports the installed package by name and reads a tensor', async () => {
  const installed = join(consumer, 'node_modules/webfusion');
  const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8'));
  // The import map is built from the package's own `exports`, as a bundler would resolve it.
  const entry = manifest.exports['.'].import.replace(/^\.\//, '');
  writeFileSync(
    join(consumer, 'index.html'),
    `<!doctype html><meta charset="utf-8">
<script type="importmap">{ "imports": { "webfusion": "/node_modules/webfusion/${entry}" } }</script>
<script type="module">
  import init, { Device } from 'webfusion';
  await init();
  const gpu = await Device.request();
  const t = gpu.tensor([[1, 2], [3, 4]]).mul(gpu.tensor([10, 100]));
  document.title = Array.from(await t.data()).join(',') + ' ' + JSON.stringify(t.shape);
</script>`,
  );
  server = await serveFixture({ '/': consumer });
  const page = await browser.newPage();
  await page.goto(urlOf(server));
  await page.waitForFunction(() => document.title !== '', null, { timeout: 60_000 });
  assert.equal(await page.title(), '10,200,30,400 [2,2]');
  await page.close();
});
