// The README example through a bundler's production build, as a user ships
// it: Vite (minified: class names are renamed, which once broke the tensor
// check), served as static files and run in headless Chromium.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launch, repo, serveFixture, urlOf } from './browser.mjs';

let browser;
let server;
let project;
after(async () => {
  await browser?.close();
  server?.close();
  if (project) rmSync(project, { recursive: true, force: true });
});

test('a Vite production build of the README example (plus matmul, cat and a failure) runs in the browser', async () => {
  project = mkdtempSync(join(tmpdir(), 'webfusion-vite-'));
  mkdirSync(join(project, 'node_modules'));
  symlinkSync(repo, join(project, 'node_modules/webfusion'));
  writeFileSync(join(project, 'index.html'), '<!doctype html><meta charset="utf-8"><script type="module" src="/main.js"></script>');
  writeFileSync(join(project, 'main.js'), `
import init, { Device, tidy } from 'webfusion';
await init();
const gpu = await Device.request({ debug: { captureStacks: true } });
const t = gpu.tensor([1, 2, 3]).add(gpu.tensor([10, 20, 30])).mul(2);
const m = gpu.tensor([[1, 2], [3, 4]]);
const product = m.matmul(m);
const joined = gpu.cat([t, product.flatten()], 0);
const kept = tidy(() => joined.exp().log());
let failure = null;
let sites = null;
try { await gpu.zeros([2 ** 18, 2 ** 18]).add(1).data(); } catch (e) {
  failure = e.name + ' ' + e.root.kind;
  sites = [e.registeredAt, e.askedAt];
}
let refused = null;
try { t.add({ shape: [3] }); } catch (e) { refused = e.name + ': ' + e.message; }
// Shaped as a TF.js tensor is (its class renamed by a minifier too).
const tfjsLike = { dataId: {}, dtype: 'float32', shape: [3], dataSync() { return new Float32Array(3); } };
let foreign = null;
try { t.mul(tfjsLike); } catch (e) { foreign = e.name + ': ' + e.message; }
document.title = JSON.stringify({ values: Array.from(await kept.data()).map(Math.round), failure, sites, refused, foreign });
`);
  const vite = join(repo, 'node_modules/.bin/vite');
  execFileSync(vite, ['build', '--logLevel', 'warn', '--outDir', join(project, 'dist'), project], { cwd: project, encoding: 'utf8' });
  const assets = readdirSync(join(project, 'dist/assets'));
  assert.ok(assets.some((f) => f.endsWith('.wasm')), `the module is emitted: ${assets}`);

  browser = await launch();
  server = await serveFixture({ '/': join(project, 'dist') });
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(urlOf(server));
  await page.waitForFunction(() => document.title !== '', null, { timeout: 60_000 });
  const result = JSON.parse(await page.title());
  assert.deepEqual(errors, []);
  assert.deepEqual(result.values, [22, 44, 66, 7, 10, 15, 22]);
  assert.equal(result.failure, 'TensorError allocation');
  // In the bundle the library and this code share one minified file: each
  // site must point at this code's call (`.add(1)` registered the root's
  // last op, `.data()` asked), not into the library.
  const bundle = assets.find((f) => f.endsWith('.js'));
  const text = readFileSync(join(project, 'dist/assets', bundle), 'utf8').split('\n');
  const at = (site) => {
    const [, file, line, column] = site.match(/^(.*):(\d+):(\d+)$/);
    assert.ok(file.endsWith(bundle), `${site} is in ${bundle}`);
    return text[Number(line) - 1].slice(Number(column) - 1);
  };
  assert.match(at(result.sites[0]), /^add\(1\)/, `registeredAt ${result.sites[0]}`);
  assert.match(at(result.sites[1]), /^data\(\)/, `askedAt ${result.sites[1]}`);
  assert.match(result.refused, /^TypeError: add: expected a webfusion Tensor or a number, got a plain object/);
  assert.match(result.foreign, /^TypeError: mul: expected a webfusion Tensor or a number, got a TF\.js Tensor/);
});
