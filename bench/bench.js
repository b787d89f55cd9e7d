// Runs every workload on every library, side by side in one page, and
// exposes the results as `window.runBench()`.
import init, { Device, tidy } from 'webfusion';
import * as ort from 'onnxruntime-web';
import { WORKLOADS, ortWorkload, tfjsWorkload, webfusionWorkload } from './workloads.js';

const log = (line) => {
  console.log(line);
  document.getElementById('log').textContent += `${line}\n`;
};

/** Median ms of `step` (after a warm-up): at least 3 runs, more while under the time budget. */
async function time(step, heavy) {
  await step();
  const samples = [];
  const budget = heavy ? 1500 : 2500;
  const start = performance.now();
  while (samples.length < 3 || (performance.now() - start < budget && samples.length < 15)) {
    const t0 = performance.now();
    await step();
    samples.push(performance.now() - t0);
  }
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)];
}

async function webfusionRun(gpu, w) {
  const { step } = webfusionWorkload({ tidy }, gpu, w.id);
  const ms = await time(step, w.heavy);
  const before = gpu.stats();
  await step();
  const after = gpu.stats();
  return {
    ms,
    kernels: after.kernelsLaunched - before.kernelsLaunched,
    buffers: after.buffersAllocated - before.buffersAllocated,
    bytes: after.bytesAllocated - before.bytesAllocated,
  };
}

window.runBench = async (only) => {
  await init();
  const tf = window.tf;
  await tf.setBackend('webgpu');
  await tf.ready();
  ort.env.wasm.numThreads = 1;
  ort.env.wasm.wasmPaths = '/node_modules/onnxruntime-web/dist/';
  const devices = {
    default: await Device.request(),
    stacks: await Device.request({ debug: { captureStacks: true } }),
    noScopes: await Device.request({ debug: { errorScopes: false } }),
  };
  const results = [];
  for (const w of WORKLOADS.filter((w) => !only || only.includes(w.id))) {
    const row = { id: w.id, name: w.name };
    row.webfusion = await webfusionRun(devices.default, w);
    row.stacks = (await webfusionRun(devices.stacks, w)).ms;
    row.noScopes = (await webfusionRun(devices.noScopes, w)).ms;
    row.tfjs = await time(tfjsWorkload(tf, w.id).step, w.heavy);
    if (w.id === 'W6') {
      // TF.js forwards small ops to the CPU by default; its GPU path too.
      tf.env().set('WEBGPU_CPU_FORWARD', false);
      row.tfjsGpu = await time(tfjsWorkload(tf, w.id).step, w.heavy);
      tf.env().set('WEBGPU_CPU_FORWARD', true);
    }
    try {
      const session = await ortWorkload(ort, w.id);
      row.ort = session ? await time(session.step, w.heavy) : null;
    } catch (e) {
      row.ort = null;
      row.ortError = String(e.message ?? e).slice(0, 200);
    }
    log(JSON.stringify(row));
    results.push(row);
  }
  // Registration cost: ops recorded per second (JS call -> wasm -> queue),
  // with a queue large enough that nothing flushes while recording.
  const recorder = await Device.request({ capacity: 1_000_000 });
  const x = recorder.tensor(new Float32Array(16));
  const n = 20000;
  const t0 = performance.now();
  tidy(() => {
    let y = x;
    for (let i = 0; i < n; i += 1) y = y.add(1);
    return null;
  });
  const registration = { ops: n, ms: performance.now() - t0 };
  registration.opsPerSecond = Math.round((n / registration.ms) * 1000);
  await recorder.sync();
  log(JSON.stringify({ registration }));
  return { results, registration };
};
document.body.dataset.ready = 'yes';
