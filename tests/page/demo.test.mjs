// `npm start`'s page, as a person uses it: it trains the spiral, draws its
// boundary and curves, stays responsive, and each break button shows the
// failure's chain while the weights stay as they were and training goes on.
// Its controls hold up: one training loop whatever is clicked, one GPU
// device whatever is reset, bad fields refused, every error shown and none
// left unhandled (each test fails if the page reported one).
import { test, before, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { assertNoPageErrors, launch, pageErrors, urlOf } from './browser.mjs';
import { serve } from '../../scripts/serve.mjs';

let browser;
let server;
let page;
let reported;

/**
 * Runs in the page before its scripts: counts the GPUDevices requested and
 * those lost (destroyed), from WebGPU itself, on `window.gpuDevices`. The
 * demo trains in a Worker, so the count runs there: every Worker the page
 * starts runs the page's script and `inWorker`, which reports each change
 * of the count in a message the demo does not answer to.
 */
function countDevices() {
  function inWorker() {
    const devices = { requested: 0, lost: 0 };
    const report = () => self.postMessage({ gpuDevices: { ...devices } });
    const request = GPUAdapter.prototype.requestDevice;
    GPUAdapter.prototype.requestDevice = async function requestDevice(...args) {
      const device = await request.apply(this, args);
      devices.requested += 1;
      report();
      device.lost.then(() => { devices.lost += 1; report(); });
      return device;
    };
  }
  const devices = { requested: 0, lost: 0 };
  window.gpuDevices = devices;
  // The page's own requests, which should be none.
  window.pageGpuDevices = 0;
  if (typeof GPUAdapter !== 'undefined') {
    const request = GPUAdapter.prototype.requestDevice;
    GPUAdapter.prototype.requestDevice = function requestDevice(...args) {
      window.pageGpuDevices += 1;
      return request.apply(this, args);
    };
  }
  // The wasm modules the page compiles, which should be none.
  window.pageWasmModules = 0;
  for (const name of ['compile', 'compileStreaming', 'instantiate', 'instantiateStreaming']) {
    const native = WebAssembly[name];
    WebAssembly[name] = function counted(...args) {
      window.pageWasmModules += 1;
      return native.apply(this, args);
    };
  }
  const NativeWorker = window.Worker;
  window.Worker = class extends NativeWorker {
    constructor(url, options) {
      const script = String(new URL(url, location.href));
      // A static import: the page's script and this count are both in
      // place before the worker takes its first message.
      const prelude = `import ${JSON.stringify(script)};\n(${inWorker})();`;
      super(URL.createObjectURL(new Blob([prelude], { type: 'text/javascript' })), options);
      this.addEventListener('message', ({ data }) => {
        if (data?.gpuDevices) Object.assign(devices, data.gpuDevices);
      });
    }
  };
}

/** A page of the demo, paused (each test drives the training itself), once it is ready. */
async function openDemo(options) {
  const opened = await browser.newPage(options);
  await opened.addInitScript(countDevices);
  const errors = pageErrors(opened);
  await opened.goto(`${urlOf(server)}?paused`);
  await opened.waitForSelector('body[data-state]', { timeout: 60_000 });
  return { page: opened, errors };
}

before(async () => {
  browser = await launch();
  server = await serve({ port: 0 });
  ({ page, errors: reported } = await openDemo());
});
afterEach(async () => {
  assertNoPageErrors(await reported.take(), 'the demo');
});
after(async () => {
  await browser?.close();
  server?.close();
});

/** Resolves once every job the page queued before it (clicks, batches) has run. */
const settled = () => page.evaluate(() => window.demo.exclusive(() => {}));

/** The error the page shows, or null when it shows none. */
const shownError = () => page.evaluate(() => {
  const shown = document.getElementById('error');
  return shown.hidden ? null : shown.textContent;
});

/** The counters memory shows in, read from the worker between two jobs of the page. */
const counters = () => page.evaluate(() => window.demo.exclusive(async () => {
  const s = await window.demo.call('stats');
  return { bytesInUse: s.bytesInUse, failuresHeld: s.failuresHeld, tensorsHeld: s.tensorsHeld };
}));

/** How many pixels of `selector`'s canvas differ from its corner's colour. */
const drawnPixels = (selector) => page.evaluate((selector) => {
  const canvas = document.querySelector(selector);
  const { data } = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height);
  let drawn = 0;
  for (let i = 0; i < data.length; i += 4) {
    if (data[i] !== data[0] || data[i + 1] !== data[1] || data[i + 2] !== data[2] || data[i + 3] !== data[3]) drawn += 1;
  }
  return drawn / (canvas.width * canvas.height);
}, selector);

test('the page trains the 3-arm spiral to 95% accuracy within 1500 steps and draws its boundary and curves', async () => {
  assert.equal(await page.getAttribute('body', 'data-state'), 'ready');
  let steps = 0;
  let accuracy = 0;
  while (steps < 1500 && accuracy < 0.95) {
    await page.evaluate(() => window.demo.train(100));
    steps += 100;
    accuracy = Number(await page.getAttribute('body', 'data-accuracy'));
  }
  assert.ok(accuracy >= 0.95, `accuracy ${accuracy} after ${steps} steps`);
  // The boundary is three colours over the whole plane, the points on top.
  assert.ok(await drawnPixels('#heatmap') > 0.5, 'the heat map drew');
  // uPlot draws its series on a canvas of its own.
  assert.ok(await drawnPixels('#chart canvas') > 0.005, 'the loss chart drew');
  const stats = await page.evaluate(() => Object.fromEntries(
    [...document.querySelectorAll('#stats dd')].map((dd) => [dd.id, dd.textContent]),
  ));
  assert.equal(stats['stat-failures'], '0');
  assert.match(stats['stat-kernels'], /^\d+\.\d$/);
  assert.match(stats['stat-pipelines'], /^\d+$/);
});

test('the training runs in a Worker: the page requests no GPU device and compiles no wasm', async () => {
  await page.evaluate(() => window.demo.train(10));
  const seen = await page.evaluate(() => ({
    worker: window.gpuDevices.requested,
    page: window.pageGpuDevices,
    wasm: window.pageWasmModules,
  }));
  assert.ok(seen.worker >= 1, 'the worker requested the device it trains on');
  assert.equal(seen.page, 0, 'GPU devices the page requested');
  assert.equal(seen.wasm, 0, 'wasm modules the page compiled');
});

// How long the page holds its thread is a speed target: measured by
// scripts/screenshot.mjs (it prints the tasks over 50 ms), not asserted here.
test('while it plays, the loss falls reading after reading and memory, failures and tensors held stay flat', async () => {
  // A new model, so that its loss has room to fall; warm: the first steps
  // compile the kernels.
  await page.click('#reset');
  await settled();
  await page.evaluate(() => window.demo.train(30));
  const start = await counters();
  await page.evaluate(() => window.demo.setPlaying(true));
  // Every 60 steps the loop trains, the loss it last read.
  const readings = [];
  let step = await page.evaluate(() => window.demo.state.step);
  for (let i = 0; i < 5; i += 1) {
    await page.waitForFunction((target) => window.demo.state.step >= target, step + 60, { timeout: 120_000 });
    const reading = await page.evaluate(() => ({ step: window.demo.state.step, loss: window.demo.state.loss }));
    readings.push(reading);
    ({ step } = reading);
  }
  await page.evaluate(() => window.demo.setPlaying(false));
  const end = await counters();
  for (let i = 1; i < readings.length; i += 1) {
    assert.ok(readings[i].loss < readings[i - 1].loss, `the loss falls while playing: ${JSON.stringify(readings)}`);
  }
  assert.deepEqual(end, start, 'bytes, failures and tensors held');
});

test('pausing and playing again inside one batch leaves one training loop, and a pause ends it', async () => {
  await page.evaluate(() => window.demo.setPlaying(true));
  await page.waitForFunction(() => window.demo.state.batches > 0 && window.demo.state.loops === 1);
  // One task of the page: the loop is inside a batch or waiting for the
  // next frame, and has not seen the pause when the play comes.
  await page.evaluate(() => {
    window.demo.setPlaying(false);
    window.demo.setPlaying(true);
  });
  const batches = await page.evaluate(() => window.demo.state.batches);
  // Long enough for the first loop to have looked again and left.
  await page.waitForFunction((target) => window.demo.state.batches >= target, batches + 5, { timeout: 120_000 });
  const loops = await page.evaluate(() => window.demo.state.loops);
  await page.evaluate(() => window.demo.setPlaying(false));
  await page.waitForFunction(() => window.demo.state.loops === 0, null, { timeout: 60_000 });
  assert.equal(loops, 1, 'training loops running after Pause and Play in one batch');
});

test('each reset destroys the device it replaces, so the page holds one GPU device', async () => {
  const before = await page.evaluate(() => ({ ...window.gpuDevices }));
  for (let i = 0; i < 3; i += 1) await page.click('#reset');
  await settled();
  // Destroyed devices report their loss asynchronously: wait for them (the
  // assertion below says what was left if they never do).
  await page.waitForFunction(() => window.gpuDevices.requested - window.gpuDevices.lost === 1, null, { timeout: 30_000 })
    .catch(() => {});
  const after = await page.evaluate(() => ({ ...window.gpuDevices }));
  assert.equal(after.requested - before.requested, 3, 'each reset requested one device');
  assert.equal(after.requested - after.lost, 1, `GPU devices not destroyed: ${JSON.stringify(after)}`);
  assert.equal(await shownError(), null);
});

test('a failing click or batch shows its error with no unhandled rejection, and the next action that succeeds clears it', async () => {
  // A click that fails: Step on a device that is gone.
  await page.evaluate(() => window.demo.exclusive(() => window.demo.call('destroyDevice')));
  await page.click('#step');
  await settled();
  assert.match(await shownError(), /^Error: .*was lost/);
  assert.deepEqual(await reported.take(), [], 'no unhandled rejection');
  await page.click('#reset');
  await settled();
  assert.equal(await shownError(), null, 'the reset that worked cleared it');
  // A batch that fails while playing: the loop stops and shows why.
  await page.evaluate(async () => {
    await window.demo.exclusive(() => window.demo.call('breakSteps', 'a broken step'));
    window.demo.setPlaying(true);
  });
  await page.waitForFunction(() => !document.getElementById('error').hidden, null, { timeout: 60_000 });
  assert.equal(await shownError(), 'Error: a broken step');
  assert.equal(await page.textContent('#play'), 'Play', 'the failed loop stopped playing');
  assert.deepEqual(await reported.take(), [], 'no unhandled rejection');
  await page.evaluate(() => window.demo.exclusive(() => window.demo.call('breakSteps', null)));
  await page.click('#step');
  await settled();
  assert.equal(await shownError(), null, 'the step that worked cleared it');
});

test('a learning rate or a width outside its field\'s range is refused with a message naming the field, and the model trains on unchanged', async () => {
  /** The worker's model: `{ id, lr, shapes }` (a new model has a new id). */
  const model = () => page.evaluate(() => window.demo.exclusive(() => window.demo.call('model')));
  /**
   * Types `value` into `field` and leaves it, which commits it (a `change`
   * event). Left focused, the field would commit on the next click, of
   * whichever later test.
   */
  const enter = async (field, value) => {
    await page.fill(field, value);
    await page.locator(field).blur();
    await settled();
  };
  const before = await model();
  for (const value of ['', '0', '-0.5', '11']) {
    await enter('#lr', value);
    assert.match(await shownError(), /^RangeError: Learning rate must be a number above 0 and at most 10/, `lr '${value}'`);
    assert.equal(await page.getAttribute('#lr', 'aria-invalid'), 'true');
  }
  for (const value of ['', '1', '2.5', '257']) {
    await enter('#width', value);
    assert.match(await shownError(), /^RangeError: Width must be an integer from 2 to 256/, `width '${value}'`);
  }
  assert.deepEqual(await model(), before, 'no model was built: the learning rate and the layers are as they were');
  await page.evaluate(() => window.demo.train(20));
  assert.ok(Number.isFinite(await page.evaluate(() => window.demo.state.loss)), 'it trains on');
  // Good values are taken, and clear the error.
  await enter('#lr', '0.05');
  assert.equal(await shownError(), null);
  // The optimizer computes with it as a float32 and reads it back as set.
  assert.equal((await model()).lr, 0.05);
  await enter('#width', '16');
  assert.equal(await shownError(), null);
  assert.equal(await page.getAttribute('#width', 'aria-invalid'), 'false');
  const { lr, shapes } = await model();
  assert.deepEqual({ lr, shapes }, { lr: 0.05, shapes: '2x16,16,16x16,16,16x3,3' });
  // As the other tests expect it.
  await enter('#lr', '0.02');
  await enter('#width', '32');
  assert.equal(await shownError(), null);
});

test('the long-task list keeps only its newest entries', async () => {
  const kept = await page.evaluate(() => window.demo.longTasksKept);
  await page.evaluate((count) => {
    for (let i = 0; i < count; i += 1) window.demo.recordLongTask({ startTime: -1 - i, duration: 60 + i });
  }, kept + 10);
  // A real one, seen by the page's PerformanceObserver: 80 ms of a task of
  // the page's own (what a test's evaluate runs is not counted as one).
  const since = await page.evaluate(() => performance.now());
  await page.evaluate(() => setTimeout(() => { const end = performance.now() + 80; while (performance.now() < end); }, 0));
  await page.waitForFunction((since) => window.demo.state.longTasks.some((t) => t.at >= since && t.ms >= 80), since);
  const tasks = await page.evaluate(() => window.demo.state.longTasks);
  assert.equal(tasks.length, kept);
  assert.ok(tasks.some((t) => t.at >= since && t.ms >= 80), 'the task the page just ran is kept');
  // What is left of the recorded ones are the newest of them, in order.
  const recorded = tasks.filter((t) => t.at < 0).map((t) => t.ms);
  assert.ok(recorded.length >= kept - 10, `${recorded.length} recorded entries kept`);
  assert.deepEqual(recorded, recorded.map((_, i) => 60 + kept + 10 - recorded.length + i));
});

for (const [button, kind, op] of [
  ['#break-fault', 'injected', 'matmul'],
  ['#break-alloc', 'allocation', 'exp'],
  ['#break-lost', 'device-lost', 'device'],
  // The op that overflows first depends on the weights: any op of the step.
  ['#break-diverge', 'non-finite', null],
]) {
  test(`${button} shows the chain from the ${op ?? kind} root, leaves the weights, and training goes on`, async () => {
    await page.evaluate(() => { document.getElementById('outcome').dataset.state = ''; });
    await page.click(button);
    await page.waitForSelector('#outcome[data-state=done]', { timeout: 120_000 });
    const o = await page.evaluate(() => ({
      ...document.getElementById('outcome').dataset,
      root: document.querySelector('#chain li.root')?.textContent,
      read: document.querySelector('#chain li.read')?.textContent,
      rows: [...document.querySelectorAll('#tensors tbody tr')].map((tr) => [tr.className, tr.textContent]),
    }));
    assert.equal(o.kind, kind);
    if (op) assert.equal(o.rootOp, op);
    assert.ok(o.root.startsWith(`${kind}: ${o.rootOp}`), o.root);
    assert.match(o.read, /^read of tensor #\d+/);
    assert.ok(Number(o.lossAfter) < Number(o.lossBefore), `the loss ${o.lossBefore} -> ${o.lossAfter}`);
    assert.equal((await counters()).failuresHeld, 0, 'the failure went with the tensors that carried it');
    if (kind === 'device-lost') {
      assert.equal(o.device, 'new', 'training resumed on a new device');
    } else {
      assert.equal(o.unchanged, 'true', 'the weights read after the failed step equal those before');
      assert.match(o.root, /registered at http:\/\/127\.0\.0\.1:\d+\/model\.js:\d+:\d+/);
      assert.deepEqual(o.rows[0][0], 'tainted', 'the cost');
      assert.ok(o.rows.slice(1).every(([cls, text]) => cls === 'normal' && text.includes('unchanged')), JSON.stringify(o.rows));
    }
  });
}

test('on a HiDPI screen the heat map is drawn at devicePixelRatio times its CSS size, the same picture as at ratio 1', async () => {
  /** The heat map of a new demo page at `ratio`, averaged down to one value per CSS pixel. */
  const heatmap = async (ratio) => {
    const { page: opened, errors } = await openDemo({ deviceScaleFactor: ratio });
    try {
      return await opened.evaluate(() => {
        const canvas = document.getElementById('heatmap');
        const chart = document.querySelector('#chart canvas');
        const ratio = window.devicePixelRatio;
        const { width, height } = canvas;
        const css = canvas.clientWidth;
        const { data } = canvas.getContext('2d').getImageData(0, 0, width, height);
        const down = new Array(css * css * 4).fill(0);
        const k = Math.round(width / css);
        for (let y = 0; y < css * k; y += 1) {
          for (let x = 0; x < css * k; x += 1) {
            for (let c = 0; c < 4; c += 1) down[4 * (Math.floor(y / k) * css + Math.floor(x / k)) + c] += data[4 * (y * width + x) + c] / (k * k);
          }
        }
        return {
          ratio, width, height, css, down,
          chart: { width: chart.width, css: chart.clientWidth },
        };
      });
    } finally {
      assertNoPageErrors(await errors.take(), `the demo at ratio ${ratio}`);
      await opened.close();
    }
  };
  const [one, two] = [await heatmap(1), await heatmap(2)];
  assert.equal(two.ratio, 2);
  assert.deepEqual([two.width, two.height], [2 * two.css, 2 * two.css], 'the backing store');
  assert.equal(two.chart.width, 2 * two.chart.css, 'the chart\'s backing store (uPlot\'s own)');
  // Points, boundary and all at the same places and sizes: a pixel of the
  // picture at ratio 1 differs from the 2x2 pixels it became only where
  // edges are antialiased.
  let differ = 0;
  for (let i = 0; i < one.down.length; i += 4) {
    const most = Math.max(...[0, 1, 2].map((c) => Math.abs(one.down[i + c] - two.down[i + c])));
    if (most > 48) differ += 1;
  }
  const fraction = differ / (one.css * one.css);
  assert.ok(fraction < 0.01, `${(100 * fraction).toFixed(2)}% of the pixels differ from the picture at ratio 1`);
});

test('profiling one step lists its kernels, fused ones among them, each with its WGSL', async () => {
  await page.click('#profile');
  await page.waitForSelector('#ran[data-state=done]');
  const kernels = await page.evaluate(() => [...document.querySelectorAll('#kernels li')].map((li) => ({
    ops: Number(li.dataset.ops),
    phase: li.dataset.phase,
    wgsl: li.querySelector('pre.wgsl').textContent,
  })));
  const fused = kernels.filter((k) => k.ops > 1);
  assert.ok(fused.length > 0, 'a kernel with more than one op fused');
  assert.ok(kernels.every((k) => k.wgsl.includes('@compute')), 'each with its WGSL');
  assert.deepEqual([...new Set(kernels.map((k) => k.phase))], ['forward', 'backward', 'update']);
  const summary = await page.textContent('#profile-summary');
  assert.match(summary, /kernels, .* [0-9.]+ ms on the GPU;/, 'the step\'s GPU time, from the adapter\'s timestamps');
});
