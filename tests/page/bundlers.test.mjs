// The README example through bundlers' production builds, as a user ships
// it: the packed package installed in a project, built by Vite and by
// webpack 5, each with no configuration (minified: class names are
// renamed, which once broke the tensor check), served as static files and
// run in headless Chromium.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launch, repo, serveFixture, urlOf } from './browser.mjs';

const projects = [];
after(() => {
  for (const project of projects) rmSync(project, { recursive: true, force: true });
});

/** The app both bundlers build: the README example, matmul, cat, a failure, bad operands. */
const APP = `
import init, { Device, TensorError, tidy } from 'webfusion';
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
  failure = e.name + ' ' + e.root.kind + ' ' + (e instanceof TensorError);
  sites = [e.registeredAt, e.askedAt];
}
let refused = null;
try { t.add({ shape: [3] }); } catch (e) { refused = e.name + ': ' + e.message; }
// Shaped as a TF.js tensor is (its class renamed by a minifier too).
const tfjsLike = { dataId: {}, dtype: 'float32', shape: [3], dataSync() { return new Float32Array(3); } };
let foreign = null;
try { t.mul(tfjsLike); } catch (e) { foreign = e.name + ': ' + e.message; }
document.title = JSON.stringify({ values: Array.from(await kept.data()).map(Math.round), failure, sites, refused, foreign });
`;

/**
 * This repository's package as `npm pack` makes it (from the module the
 * test run built: packing runs no build here), packed once.
 */
let tarball = null;
function packed() {
  if (tarball) return tarball;
  const into = mkdtempSync(join(tmpdir(), 'webfusion-tarball-'));
  projects.push(into);
  const out = execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', into], { cwd: repo, encoding: 'utf8' });
  tarball = join(into, JSON.parse(out)[0].filename);
  return tarball;
}

/** A project holding APP, with the packed package installed as `webfusion`. */
function project(name) {
  const dir = mkdtempSync(join(tmpdir(), `webfusion-${name}-`));
  projects.push(dir);
  const installed = join(dir, 'node_modules/webfusion');
  mkdirSync(installed, { recursive: true });
  execFileSync('tar', ['-xzf', packed(), '-C', installed, '--strip-components=1']);
  writeFileSync(join(dir, 'main.js'), APP);
  return dir;
}

/** Serves `dist`, runs the app, and checks what it reports; `bundle` is the built JS file's path. */
async function runBuilt(dist, bundle) {
  const browser = await launch();
  const server = await serveFixture({ '/': dist });
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(urlOf(server));
    await page.waitForFunction(() => document.title !== '', null, { timeout: 60_000 });
    const result = JSON.parse(await page.title());
    assert.deepEqual(errors, []);
    assert.deepEqual(result.values, [22, 44, 66, 7, 10, 15, 22]);
    assert.equal(result.failure, 'TensorError allocation true');
    // In the bundle the library and this code share one minified file: each
    // site must point at this code's call (the `zeros` asked for the size
    // its fused block was refused for, `.data()` asked for the read), not
    // into the library.
    const text = readFileSync(bundle, 'utf8').split('\n');
    const name = bundle.split('/').pop();
    const at = (site) => {
      const [, file, line, column] = site.match(/^(.*):(\d+):(\d+)$/);
      assert.ok(file.endsWith(name), `${site} is in ${name}`);
      return text[Number(line) - 1].slice(Number(column) - 1);
    };
    assert.match(at(result.sites[0]), /^zeros\(/, `registeredAt ${result.sites[0]}`);
    assert.match(at(result.sites[1]), /^data\(\)/, `askedAt ${result.sites[1]}`);
    assert.match(result.refused, /^TypeError: add: expected a webfusion Tensor or a number, got a plain object/);
    assert.match(result.foreign, /^TypeError: mul: expected a webfusion Tensor or a number, got a TF\.js Tensor/);
  } finally {
    await browser.close();
    server.close();
  }
}

test('a Vite production build of the README example (plus matmul, cat and a failure) runs in the browser', async () => {
  const dir = project('vite');
  writeFileSync(join(dir, 'index.html'), '<!doctype html><meta charset="utf-8"><script type="module" src="/main.js"></script>');
  const vite = join(repo, 'node_modules/.bin/vite');
  execFileSync(vite, ['build', '--logLevel', 'warn', '--outDir', join(dir, 'dist'), dir], { cwd: dir, encoding: 'utf8' });
  const assets = readdirSync(join(dir, 'dist/assets'));
  assert.ok(assets.some((f) => f.endsWith('.wasm')), `the module is emitted: ${assets}`);
  await runBuilt(join(dir, 'dist'), join(dir, 'dist/assets', assets.find((f) => f.endsWith('.js'))));
});

test('a webpack 5 production build of the same app, without a configuration file, runs in the browser', async () => {
  const dir = project('webpack');
  const webpack = join(repo, 'node_modules/.bin/webpack');
  execFileSync(webpack, ['build', '--mode', 'production', '--entry', './main.js', '--output-path', join(dir, 'dist')], { cwd: dir, encoding: 'utf8' });
  const emitted = readdirSync(join(dir, 'dist'));
  assert.ok(emitted.some((f) => f.endsWith('.wasm')), `the module is emitted: ${emitted}`);
  writeFileSync(join(dir, 'dist/index.html'), '<!doctype html><meta charset="utf-8"><script src="main.js"></script>');
  await runBuilt(join(dir, 'dist'), join(dir, 'dist/main.js'));
});
