// The demo's training, in a dedicated module Worker: it owns the GPU
// device, the model and its optimizer, runs the steps and breaks them on
// purpose. The page's thread only handles controls and draws, so it never
// waits for a step (its registration, its flush, its read) however long
// one takes.
//
// The protocol (main.js is the other side): the page posts `{ id, method,
// args }`; the worker answers `{ id, value }` or `{ id, error }`. What
// crosses is values, never tensors: losses, the probabilities to draw, a
// profile's kernels, and a failure as a plain object of its own fields, so
// a TensorError's kind, root and chain reach the page as they were. Calls
// run one at a time in the order they came: a second call's steps never
// interleave with the first's.
//
// Workers see no import map: the package is imported by its path.
import init, * as wf from '/pkg/webfusion.js';
import { Trainer } from './model.js';

/** A learning rate at which every model here overflows within a few steps. */
const DIVERGING_LR = 1e38;

const state = {
  trainer: null,
  data: null,
  config: null,
  step: 0,
  loss: null,
  /** The weights last read, with the step they are from: restored after a lost device. */
  saved: null,
  /** GPU devices requested so far (each reset and each recovery requests one). */
  devices: 0,
  /** Counts the models built, so the page can tell one from the next. */
  models: 0,
  /** When set, a step throws an Error with this message (a test's broken step). */
  brokenStep: null,
};

/** One training step of the current model; its cost. */
function step(options) {
  if (state.brokenStep !== null) throw new Error(state.brokenStep);
  return state.trainer.step(options);
}

/** Where training stands, as every answer that trained reports it. */
function progress() {
  return { step: state.step, loss: state.loss, stats: stats() };
}

/** The device's counters, whether it is lost, and how many were requested. */
function stats() {
  const { gpu } = state.trainer;
  return { ...gpu.stats(), lost: gpu.lost ?? null, devices: state.devices };
}

/**
 * `count` steps registered back to back, then one read of the last cost
 * (the steps before it ran fused in the same flushes).
 */
async function train(count) {
  const { trainer } = state;
  const before = trainer.gpu.stats().kernelsLaunched;
  const start = performance.now();
  let cost = null;
  let registrationMs;
  try {
    for (let i = 0; i < count; i += 1) {
      cost?.dispose();
      cost = null;
      cost = step();
      state.step += 1;
    }
    // The read flushes what the steps queued before it returns its promise:
    // registering and flushing are this thread's share of the batch.
    const read = cost.data();
    registrationMs = (performance.now() - start) / count;
    state.loss = (await read)[0];
  } finally {
    cost?.dispose();
  }
  const kernelsPerStep = (trainer.gpu.stats().kernelsLaunched - before) / count;
  return { ...progress(), registrationMs, kernelsPerStep };
}

/** A new device, the weights last read restored, the same problem. */
async function recover() {
  const old = state.trainer;
  state.trainer = await Trainer.create(wf, state.data, state.config, state.saved.weights);
  state.devices += 1;
  state.models += 1;
  // Its tensors and its (lost) device.
  old.dispose();
  state.step = state.saved.step;
}

/** Copies an error's own fields into a plain object that survives postMessage. */
function plainError(error) {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error) };
  return { ...error, name: error.name, message: error.message, stack: error.stack };
}

/**
 * Steps at `DIVERGING_LR` with the numerics checks on until one fails (at
 * most 10), reading each step's cost and, after a good one, the weights.
 * Returns the failed step's cost and error, the weights of the last good
 * step (`before` if none was), and how many steps it took; the learning
 * rate and the checks are as they were.
 */
async function divergingSteps(trainer, before) {
  const lr = trainer.optimizer.learningRate;
  trainer.gpu.checkNumerics = true;
  trainer.setLearningRate(DIVERGING_LR);
  let good = before;
  let error = null;
  let cost = null;
  let steps = 0;
  try {
    while (!error && steps < 10) {
      steps += 1;
      cost = step();
      try {
        await cost.data();
        good = await trainer.readWeights();
        cost.dispose();
        cost = null;
      } catch (e) {
        error = e;
      }
    }
  } finally {
    trainer.gpu.checkNumerics = false;
    trainer.setLearningRate(lr);
  }
  return { cost, error, good, steps };
}

const methods = {
  /**
   * A new model on a new device for `data` (the page generated it, and
   * draws it). The old model goes once the new one exists, with its
   * device: the worker holds one GPU device, not one more each reset.
   */
  async reset(config, data) {
    await init();
    const trainer = await Trainer.create(wf, data, config);
    const old = state.trainer;
    Object.assign(state, { trainer, config, data, step: 0, loss: null });
    state.devices += 1;
    state.models += 1;
    old?.dispose();
    state.saved = { step: 0, weights: await trainer.readWeights() };
    return { faultTargets: Object.keys(trainer.faultTargets()) };
  },

  train,

  /** `train`, except that a lost device is replaced: `recovered` says why. */
  async batch(count) {
    try {
      return await train(count);
    } catch (error) {
      if (!state.trainer.gpu.lost) throw error;
      const why = `the device was lost while training: ${state.trainer.gpu.lost}`;
      await recover();
      return { ...progress(), recovered: why };
    }
  },

  /** Accuracy, the cost and the grid's probabilities, read now; the weights saved. */
  async observe() {
    const { trainer } = state;
    const accuracy = await trainer.accuracy();
    if (state.loss === null) {
      const cost = trainer.cost();
      try { state.loss = (await cost.data())[0]; } finally { cost.dispose(); }
    }
    const probabilities = await trainer.probabilities();
    state.saved = { step: state.step, weights: await trainer.readWeights() };
    return { ...progress(), accuracy, probabilities };
  },

  stats,

  setLearningRate(lr) {
    state.trainer.setLearningRate(lr);
  },

  /** The model's identity, learning rate and layer shapes (what a reset changes). */
  model() {
    const { trainer } = state;
    return {
      id: state.models,
      lr: trainer.optimizer.learningRate,
      shapes: trainer.vars.map((v) => v.shape.join('x')).join(),
    };
  },

  /**
   * Breaks the next step (`how`: 'fault' at the op labelled `faultLabel`
   * with `faultKind`, 'allocation', 'lost', 'diverge'), then reports what
   * happened: the failure, which tensors read and which did not, whether
   * the weights changed, and the loss after training goes on.
   */
  async breakStep(how, faultLabel, faultKind) {
    const { trainer } = state;
    const lossBefore = state.loss ?? (await train(1)).loss;
    const before = await trainer.readWeights();
    // The weights last read: what a new device starts from if this one goes.
    state.saved = { step: state.step, weights: before };
    const variables = trainer.vars.map((v) => ({ name: v.name, id: v.id }));
    let error = null;
    let thrown = null;
    let cost = null;
    if (how === 'fault') trainer.gpu.injectFault({ ...trainer.faultTargets()[faultLabel], kind: faultKind });
    if (how === 'lost') trainer.gpu.destroy();
    let diverged = 0;
    // What the failed step must leave: the weights of the last good step.
    let good = before;
    if (how === 'diverge') {
      ({ cost, error, good, steps: diverged } = await divergingSteps(trainer, before));
    } else {
      try {
        cost = step(how === 'allocation' ? { hugeLayer: true } : undefined);
      } catch (e) {
        thrown = e;
      }
      if (cost) {
        try { await cost.data(); } catch (e) { error = e; }
      }
    }
    const costId = cost?.id;
    // Disposed once read, like any tensor: its failure goes with it.
    cost?.dispose();
    let after = null;
    let readError = null;
    try { after = await trainer.readWeights(); } catch (e) { readError = e; }
    const unchanged = after !== null && after.every((w, i) => w.every((v, j) => v === good[i][j]));
    const report = error ?? readError;
    const rows = [];
    if (costId !== undefined) {
      rows.push([`tensor #${costId}`, 'the step\'s cost', error ? `rejected: ${error.root.kind} at ${error.root.op}` : 'read', error ? 'tainted' : 'normal']);
    }
    for (const { name, id } of variables) {
      const text = after ? (unchanged ? 'read: unchanged' : 'read: changed') : `rejected: ${readError.root.kind}`;
      rows.push([`tensor #${id}`, `variable ${name}`, text, after ? 'normal' : 'tainted']);
    }
    let summary = '';
    if (how === 'lost') {
      summary = `The device was lost: minimize threw "${thrown?.message}". `;
      await recover();
      summary += `A new device was requested and the weights last read (step ${state.saved.step}) restored. `;
    } else if (how === 'diverge') {
      const finite = after?.every((w) => w.every(Number.isFinite));
      summary = `At learning rate ${DIVERGING_LR.toExponential(0)}, step ${diverged} made a non-finite value `
        + `(${report?.root.op}: ${report?.root.message}); `
        + `every variable ${unchanged ? 'kept the last good step\'s value' : 'CHANGED'}${finite ? ', all finite' : ''}. `
        + 'The weights from before the divergence were put back. ';
      trainer.restore(state.saved.weights);
    } else {
      summary = `The step failed (${report?.root.kind} at ${report?.root.op}); every variable ${unchanged ? 'kept its value' : 'CHANGED'}. `;
    }
    // Training goes on. After a lost device the optimizer starts afresh (its
    // moments went with the device), and takes a while to settle again.
    const more = how === 'lost' ? 100 : 20;
    const { loss: lossAfter } = await train(more);
    summary += `Training went on: the loss is ${lossAfter.toFixed(4)} after ${more} more steps (it was ${lossBefore.toFixed(4)}).`;
    return {
      report: report && plainError(report),
      hadCost: costId !== undefined,
      rows,
      summary,
      outcome: {
        kind: report?.root.kind ?? '',
        rootOp: report?.root.op ?? '',
        unchanged: String(how === 'lost' ? false : unchanged),
        lossBefore: String(lossBefore),
        lossAfter: String(lossAfter),
        device: state.trainer === trainer ? 'same' : 'new',
      },
    };
  },

  /** One step under `profile`: its kernels (each with its WGSL) and the variables' shapes. */
  async profile() {
    const { trainer } = state;
    const profile = await trainer.gpu.profile(() => step());
    state.step += 1;
    profile.result.dispose();
    const { kernels, kernelMs, peakBytes, newBytes } = profile;
    return { ...progress(), kernels, kernelMs, peakBytes, newBytes, shapes: trainer.vars.map((v) => v.shape.join('x')) };
  },

  // What the page tests drive: a device gone behind the page's back, and a
  // step that throws (`message`; null mends it).
  destroyDevice() {
    state.trainer.gpu.destroy();
  },
  breakSteps(message) {
    state.brokenStep = message;
  },
};

let queue = Promise.resolve();
self.onmessage = ({ data }) => {
  const { id, method, args } = data;
  queue = queue.then(async () => {
    try {
      if (!Object.hasOwn(methods, method)) throw new TypeError(`the training worker has no method '${method}'`);
      self.postMessage({ id, value: await methods[method](...args) });
    } catch (error) {
      const plain = plainError(error);
      try {
        self.postMessage({ id, error: plain });
      } catch {
        // A field that does not clone: the name and message still do.
        self.postMessage({ id, error: { name: plain.name, message: plain.message } });
      }
    }
  });
};
