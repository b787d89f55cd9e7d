// Runs every workload on every library, side by side in one page, and
// exposes the results as `window.runBench()`.
import init, { Device, tidy, train } from 'webfusion';
import * as tf from '@tensorflow/tfjs';
import '@tensorflow/tfjs-backend-webgpu';
import 'webfusion/tfjs';
import * as ort from 'onnxruntime-web';
import { WORKLOADS, ortWorkload, referenceLoss, tfjsWorkload, webfusionWorkload } from './workloads.js';

const log = (line) => {
  console.log(line);
  document.getElementById('log').textContent += `${line}\n`;
};

/**
 * Median ms of each contender's step, timed side by side: after one warm-up
 * each, every round runs each contender once (in a rotating order), so a
 * slow patch of this shared, noisy machine lands on all of them alike. At
 * least 7 rounds, up to 101 while under the time budget. `cold` is each
 * contender's warm-up: its first iteration of the workload (kernels
 * compiled, buffers created), what a user waits for first; `first` is the
 * first value that iteration read.
 */
async function timeSideBySide(steps, heavy) {
  const names = Object.keys(steps);
  const cold = {};
  const first = {};
  for (const name of names) {
    const t0 = performance.now();
    first[name] = (await steps[name]())[0];
    cold[name] = performance.now() - t0;
  }
  const samples = Object.fromEntries(names.map((n) => [n, []]));
  const budget = (heavy ? 1500 : 2500) * names.length;
  const start = performance.now();
  for (let round = 0; round < 7 || (performance.now() - start < budget && round < 101); round++) {
    for (let k = 0; k < names.length; k++) {
      const name = names[(round + k) % names.length];
      const t0 = performance.now();
      await steps[name]();
      samples[name].push(performance.now() - t0);
    }
  }
  return { ms: Object.fromEntries(names.map((n) => [n, median(samples[n])])), samples, cold, first };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * What `variant` costs over `base`, as a fraction: the median over rounds of
 * their ratio within a round. Pairing runs of the same round cancels the
 * machine's drift, which a ratio of two medians does not.
 */
function pairedCost(samples, variant, base) {
  return median(samples[variant].map((v, round) => v / samples[base][round])) - 1;
}

/** Kernels launched and bytes allocated by one more step of `gpu`. */
async function webfusionCounts(gpu, step) {
  const before = gpu.stats();
  await step();
  const after = gpu.stats();
  return {
    kernels: after.kernelsLaunched - before.kernelsLaunched,
    buffers: after.buffersAllocated - before.buffersAllocated,
    bytes: after.bytesAllocated - before.bytesAllocated,
  };
}

/**
 * TF.js's own code for a workload, unchanged, on webfusion's TF.js backend:
 * made (its weights uploaded) and stepped with 'webfusion' the active
 * backend, TF.js's WebGPU backend active again between steps, so the other
 * contenders of a round run as they do alone.
 */
async function onWebfusion(make) {
  await tf.setBackend('webfusion');
  const step = make();
  await tf.setBackend('webgpu');
  return async () => {
    await tf.setBackend('webfusion');
    try {
      return await step();
    } finally {
      await tf.setBackend('webgpu');
    }
  };
}

window.runBench = async (only) => {
  await init();
  await tf.setBackend('webgpu');
  await tf.ready();
  ort.env.wasm.numThreads = 1;
  ort.env.wasm.wasmPaths = '/node_modules/onnxruntime-web/dist/';
  const devices = {
    default: await Device.request(),
    stacks: await Device.request({ debug: { captureStacks: true } }),
    noScopes: await Device.request({ debug: { errorScopes: false } }),
    numerics: await Device.request({ debug: { checkNumerics: true } }),
    // Its own device, so its first iteration compiles its own kernels.
    asWritten: await Device.request(),
  };
  const results = [];
  for (const w of WORKLOADS.filter((w) => !only || only.includes(w.id))) {
    const row = { id: w.id, name: w.name };
    const steps = {
      webfusion: webfusionWorkload({ tidy, train }, devices.default, w.id).step,
      stacks: webfusionWorkload({ tidy, train }, devices.stacks, w.id).step,
      noScopes: webfusionWorkload({ tidy, train }, devices.noScopes, w.id).step,
      numerics: webfusionWorkload({ tidy, train }, devices.numerics, w.id).step,
      asWritten: webfusionWorkload({ tidy, train, asWritten: true }, devices.asWritten, w.id).step,
      tfjs: tfjsWorkload(tf, w.id).step,
      tfjsOnWebfusion: await onWebfusion(() => tfjsWorkload(tf, w.id).step),
    };
    try {
      const session = await ortWorkload(ort, w.id);
      if (session) steps.ort = session.step;
    } catch (e) {
      row.ortError = String(e.message ?? e).slice(0, 200);
    }
    const { ms, samples, cold, first } = await timeSideBySide(steps, w.heavy);
    const reference = referenceLoss(w.id);
    if (reference != null) {
      // Each library's first step against the float64 loss of the same weights and batch.
      row.firstLoss = { float64: reference, webfusion: first.webfusion, asWritten: first.asWritten, tfjs: first.tfjs, tfjsOnWebfusion: first.tfjsOnWebfusion };
    }
    row.webfusion = { ms: ms.webfusion, ...(await webfusionCounts(devices.default, steps.webfusion)) };
    row.asWritten = { ms: ms.asWritten, ...(await webfusionCounts(devices.asWritten, steps.asWritten)) };
    row.asWrittenCost = pairedCost(samples, 'asWritten', 'webfusion');
    row.cold = cold;
    row.stacks = ms.stacks;
    row.noScopes = ms.noScopes;
    row.stacksCost = pairedCost(samples, 'stacks', 'webfusion');
    row.scopesCost = pairedCost(samples, 'webfusion', 'noScopes');
    row.numericsCost = pairedCost(samples, 'numerics', 'webfusion');
    row.numerics = { ms: ms.numerics, ...(await webfusionCounts(devices.numerics, steps.numerics)) };
    // TF.js's own check of every kernel's values (`DEBUG`), beside it
    // without: it reads each kernel's output back (and logs each kernel).
    const tfjsStep = steps.tfjs;
    const debugged = async () => {
      tf.env().set('DEBUG', true);
      try {
        return await tfjsStep();
      } finally {
        tf.env().set('DEBUG', false);
      }
    };
    const { samples: debugSamples } = await timeSideBySide({ tfjs: tfjsStep, tfjsDebug: debugged }, true);
    row.tfjsDebugCost = pairedCost(debugSamples, 'tfjsDebug', 'tfjs');
    row.rounds = samples.webfusion.length;
    row.tfjs = ms.tfjs;
    row.tfjsOnWebfusion = ms.tfjsOnWebfusion;
    row.ort = ms.ort ?? null;
    if (w.id === 'W6') {
      // TF.js forwards small ops to the CPU by default; its GPU path too.
      tf.env().set('WEBGPU_CPU_FORWARD', false);
      const { ms: gpuPath } = await timeSideBySide({ tfjsGpu: tfjsWorkload(tf, w.id).step, webfusion: steps.webfusion }, w.heavy);
      tf.env().set('WEBGPU_CPU_FORWARD', true);
      row.tfjsGpu = gpuPath.tfjsGpu;
      row.webfusionBesideTfjsGpu = gpuPath.webfusion;
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
