// The demo page: trains an MLP live (play / pause / step / reset), draws
// its loss, accuracy and decision boundary, shows webfusion's counters, and
// lets a visitor break the next step on purpose (a GPU fault, an
// allocation past the limits, a lost device) to see the failure's chain and
// that the weights were left as they were. Every piece of GPU work goes
// through one queue of jobs (`exclusive`), so a button never interleaves
// with a training batch; at most one training loop runs; whatever a control
// or a batch throws is shown on the page (#error), never left unhandled.
import init, * as wf from 'webfusion';
import uPlot from 'uplot';
import { dataset } from './data.js';
import { GRID, Trainer } from './model.js';
import { $, exclusive, guarded, numberInput, player, renderChain, renderTensors, showError } from './page.js';

const PALETTE = [[231, 76, 60], [52, 152, 219], [46, 204, 113], [155, 89, 182], [241, 196, 15], [230, 126, 34]];
/** Work done between two frames, in ms of registration; the batch size adapts to it. */
const FRAME_BUDGET_MS = 8;
/** Steps between two drawings of the decision boundary. */
const BOUNDARY_EVERY = 50;
/** Long tasks remembered (the newest): the page may play for hours. */
const LONG_TASKS_KEPT = 200;
/** The heat map's size in CSS pixels (its backing store is this times devicePixelRatio). */
const HEATMAP_SIZE = Number($('heatmap').getAttribute('width'));

const state = {
  trainer: null,
  data: null,
  config: null,
  playing: false,
  step: 0,
  // One step first: its flush compiles every kernel of a step, the batch grows after.
  batch: 1,
  loss: null,
  /** The weights last read, with the step they are from: restored after a lost device. */
  saved: null,
  history: { step: [], loss: [], accuracy: [] },
  lastBoundary: -Infinity,
  rate: { at: performance.now(), step: 0, value: null },
  kernelsPerStep: null,
  /** Milliseconds the page's thread spent on one step (registering it and flushing), last batch. */
  registrationMs: 0,
  longestTask: 0,
  /** The newest LONG_TASKS_KEPT tasks over 50 ms: `{ at, ms, step }`. */
  longTasks: [],
  /** GPU devices requested so far (each reset and each recovery requests one). */
  devices: 0,
  /** Training loops running: 0 or 1 (Play starts one only once the last one ended). */
  loops: 0,
  /** Batches trained by the loop, in all. */
  batches: 0,
  /** The probabilities last drawn, kept to draw them again at a new devicePixelRatio. */
  probabilities: null,
};

// ---------------------------------------------------------------- training

/** The problem and model the controls describe; throws a RangeError naming a bad field. */
function readConfig() {
  return {
    kind: $('kind').value,
    arms: numberInput('arms', { integer: true }),
    noise: numberInput('noise'),
    width: numberInput('width', { integer: true }),
    depth: numberInput('depth', { integer: true }),
    optimizer: $('optimizer').value,
    lr: numberInput('lr', { positive: true }),
    seed: 7,
  };
}

/**
 * A new problem and model from the controls, on a new device. A bad field
 * throws before anything changes, so the model trains on as it was. The
 * old trainer goes once the new one exists, with its device: a reset holds
 * one GPU device, not one more each time.
 */
async function reset() {
  const config = readConfig();
  const data = dataset({ kind: config.kind, arms: config.arms, noise: config.noise, n: 300, seed: 11 });
  const trainer = await Trainer.create(wf, data, config);
  state.devices += 1;
  const old = state.trainer;
  Object.assign(state, {
    trainer, config, data, step: 0, loss: null, lastBoundary: -Infinity,
    history: { step: [], loss: [], accuracy: [] },
  });
  old?.dispose();
  state.saved = { step: 0, weights: await trainer.readWeights() };
  fillFaultTargets();
  await observe();
}

/**
 * `count` steps registered back to back, then one read of the last cost
 * (the steps before it ran fused in the same flushes). Returns the cost.
 */
async function train(count) {
  const { trainer } = state;
  const before = trainer.gpu.stats().kernelsLaunched;
  const start = performance.now();
  let cost = null;
  for (let i = 0; i < count; i += 1) {
    cost?.dispose();
    cost = trainer.step();
    state.step += 1;
  }
  try {
    // The read flushes what the steps queued, on this thread, before it
    // returns its promise: that is the page's share of the batch.
    const read = cost.data();
    state.registrationMs = (performance.now() - start) / count;
    state.loss = (await read)[0];
  } finally {
    cost.dispose();
  }
  state.kernelsPerStep = (trainer.gpu.stats().kernelsLaunched - before) / count;
  return state.loss;
}

/** One batch of steps sized to the frame budget, then what the page shows. */
async function batch() {
  try {
    await train(state.batch);
  } catch (error) {
    if (!state.trainer.gpu.lost) throw error;
    await recover(`the device was lost while training: ${state.trainer.gpu.lost}`);
    return;
  }
  // Registering and flushing hold the page's thread; the GPU's time is awaited.
  const perStep = Math.max(state.registrationMs, 0.05);
  state.batch = Math.max(1, Math.min(50, Math.floor(FRAME_BUDGET_MS / perStep)));
  if (state.step - state.lastBoundary >= BOUNDARY_EVERY) await observe();
  else showStats();
}

/** Accuracy, the curve, the decision boundary and the weights, read now. */
async function observe() {
  const { trainer } = state;
  const accuracy = await trainer.accuracy();
  if (state.loss === null) {
    const cost = trainer.cost();
    state.loss = (await cost.data())[0];
    cost.dispose();
  }
  const { history } = state;
  history.step.push(state.step);
  history.loss.push(state.loss);
  history.accuracy.push(accuracy);
  if (history.step.length > 1500) for (const series of Object.values(history)) series.splice(0, 500);
  chart.setData([history.step, history.loss, history.accuracy]);
  drawBoundary(await trainer.probabilities());
  state.saved = { step: state.step, weights: await trainer.readWeights() };
  state.lastBoundary = state.step;
  document.body.dataset.accuracy = String(accuracy);
  showStats();
}

// ----------------------------------------------------------------- drawing
const chart = new uPlot({
  width: 420,
  height: 300,
  scales: { x: { time: false }, loss: { auto: true }, acc: { range: [0, 1] } },
  series: [
    { label: 'step' },
    { label: 'loss', scale: 'loss', stroke: '#c0392b', width: 2 },
    { label: 'accuracy', scale: 'acc', stroke: '#2c6fbb', width: 2 },
  ],
  axes: [{}, { scale: 'loss', label: 'loss' }, { scale: 'acc', side: 1, label: 'accuracy', grid: { show: false } }],
}, [[], [], []], $('chart'));

const shade = document.createElement('canvas');
shade.width = GRID;
shade.height = GRID;

/**
 * Sizes the heat map's backing store to its CSS size times
 * devicePixelRatio, so it is crisp on a HiDPI screen, and draws what was
 * drawn again; called again whenever the ratio changes (a zoom, another
 * screen). uPlot does the same for the chart on its own.
 */
function fitHeatmap() {
  const ratio = window.devicePixelRatio || 1;
  const canvas = $('heatmap');
  canvas.width = Math.round(HEATMAP_SIZE * ratio);
  canvas.height = Math.round(HEATMAP_SIZE * ratio);
  if (state.probabilities) drawBoundary(state.probabilities);
  // A range, not `resolution: ${ratio}dppx`: a fractional ratio (1.1 as
  // 1.100000023841858) may never match exactly, and then never change.
  const now = `(min-resolution: ${ratio - 0.001}dppx) and (max-resolution: ${ratio + 0.001}dppx)`;
  matchMedia(now).addEventListener('change', fitHeatmap, { once: true });
}
fitHeatmap();

/** The class probabilities over the grid as colours, the points on top. */
function drawBoundary(probabilities) {
  state.probabilities = probabilities;
  const { classes, points, labels, n } = state.data;
  const image = shade.getContext('2d').createImageData(GRID, GRID);
  for (let i = 0; i < GRID * GRID; i += 1) {
    const rgb = [0, 0, 0];
    for (let c = 0; c < classes; c += 1) {
      const p = probabilities[i * classes + c];
      for (let k = 0; k < 3; k += 1) rgb[k] += p * PALETTE[c][k];
    }
    // Lightened towards white, so the points stand out.
    for (let k = 0; k < 3; k += 1) image.data[4 * i + k] = 255 - 0.55 * (255 - rgb[k]);
    image.data[4 * i + 3] = 255;
  }
  shade.getContext('2d').putImageData(image, 0, 0);
  const canvas = $('heatmap');
  const ctx = canvas.getContext('2d');
  // Drawn in CSS pixels, scaled to the backing store's.
  const scale = canvas.width / HEATMAP_SIZE;
  ctx.setTransform(scale, 0, 0, scale, 0, 0);
  ctx.imageSmoothingEnabled = true;
  ctx.drawImage(shade, 0, 0, HEATMAP_SIZE, HEATMAP_SIZE);
  const toPixel = (v, flip) => ((flip ? -v : v) + 1) / 2 * HEATMAP_SIZE;
  for (let i = 0; i < n; i += 1) {
    ctx.beginPath();
    ctx.arc(toPixel(points[2 * i], false), toPixel(points[2 * i + 1], true), 3.2, 0, 2 * Math.PI);
    ctx.fillStyle = `rgb(${PALETTE[labels[i]].join(',')})`;
    ctx.fill();
    ctx.lineWidth = 1;
    ctx.strokeStyle = 'white';
    ctx.stroke();
  }
}

function showStats() {
  const { trainer } = state;
  const s = trainer.gpu.stats();
  const now = performance.now();
  if (now - state.rate.at > 1000) {
    state.rate = { at: now, step: state.step, value: ((state.step - state.rate.step) * 1000) / (now - state.rate.at) };
  }
  const set = (id, text) => { $(id).textContent = text; };
  set('stat-step', state.step);
  set('stat-rate', state.rate.value === null ? '–' : state.rate.value.toFixed(0));
  set('stat-kernels', state.kernelsPerStep === null ? '–' : state.kernelsPerStep.toFixed(1));
  set('stat-fused', s.fusedOps.toLocaleString());
  set('stat-bytes', s.bytesInUse.toLocaleString());
  set('stat-pipelines', s.pipelinesCompiled);
  set('stat-failures', s.failuresHeld);
  set('stat-longtask', state.longestTask ? `${state.longestTask.toFixed(0)} ms` : 'none over 50 ms');
  set('stat-device', trainer.gpu.lost ? `lost: ${trainer.gpu.lost}` : `${state.devices} requested`);
}

// ------------------------------------------------------ breaking a step
function fillFaultTargets() {
  const select = $('fault-op');
  const targets = state.trainer.faultTargets();
  select.replaceChildren(...Object.keys(targets).map((label) => new Option(label, label)));
}

/** `[{ name, id }]` of the variables: what the explorer reads back. */
const variableRows = () => state.trainer.vars.map((v) => ({ name: v.name, id: v.id }));

/**
 * Breaks the next step (`how`: 'fault', 'allocation', 'lost'), then shows
 * what happened: the chain, which tensors read and which did not, whether
 * the weights changed, and the loss after training goes on.
 */
async function breakStep(how) {
  const outcome = $('outcome');
  outcome.hidden = false;
  outcome.dataset.state = 'running';
  const { trainer } = state;
  const lossBefore = state.loss ?? (await train(1));
  const before = await trainer.readWeights();
  // The weights last read: what a new device starts from if this one goes.
  state.saved = { step: state.step, weights: before };
  const rows = variableRows();
  let error = null;
  let thrown = null;
  let cost = null;
  if (how === 'fault') {
    const target = trainer.faultTargets()[$('fault-op').value];
    trainer.gpu.injectFault({ ...target, kind: $('fault-kind').value });
  }
  if (how === 'lost') trainer.gpu.destroy();
  let diverged = 0;
  // What the failed step must leave: the weights of the last good step.
  let good = before;
  if (how === 'diverge') {
    ({ cost, error, good, steps: diverged } = await divergingSteps(trainer, before));
  } else {
    try {
      cost = trainer.step(how === 'allocation' ? { hugeLayer: true } : undefined);
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
  renderChain(report, cost);
  const tensorRows = [];
  if (cost) {
    tensorRows.push([`tensor #${costId}`, 'the step\'s cost', error ? `rejected: ${error.root.kind} at ${error.root.op}` : 'read', error ? 'tainted' : 'normal']);
  }
  rows.forEach(({ name, id }, i) => {
    const text = after ? (unchanged ? 'read: unchanged' : 'read: changed') : `rejected: ${readError.root.kind}`;
    tensorRows.push([`tensor #${id}`, `variable ${name}`, text, after ? 'normal' : 'tainted', i]);
  });
  renderTensors(tensorRows);
  let summary = '';
  if (how === 'lost') {
    summary = `The device was lost: minimize threw "${thrown?.message}". `;
    await recover('the page destroyed the device', true);
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
  const lossAfter = await train(more);
  await observe();
  summary += `Training went on: the loss is ${lossAfter.toFixed(4)} after ${more} more steps (it was ${lossBefore.toFixed(4)}).`;
  $('outcome-summary').textContent = summary;
  Object.assign(outcome.dataset, {
    kind: report?.root.kind ?? '',
    rootOp: report?.root.op ?? '',
    unchanged: String(how === 'lost' ? false : unchanged),
    lossBefore: String(lossBefore),
    lossAfter: String(lossAfter),
    device: state.trainer.gpu === trainer.gpu ? 'same' : 'new',
    state: 'done',
  });
}

/** A learning rate at which every model here overflows within a few steps. */
const DIVERGING_LR = 1e38;

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
      cost = trainer.step();
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

/** A new device, the weights last read restored, the same problem. */
async function recover(why, quiet = false) {
  const old = state.trainer;
  state.trainer = await Trainer.create(wf, state.data, state.config, state.saved.weights);
  state.devices += 1;
  // Its tensors and its (lost) device.
  old.dispose();
  state.step = state.saved.step;
  if (!quiet) $('outcome-summary').textContent = `${why}; a new device took over from step ${state.saved.step}.`;
  showStats();
}

// ----------------------------------------------------------- what ran
async function profileStep() {
  const { trainer } = state;
  const shapes = new Set(trainer.vars.map((v) => v.shape.join('x')));
  const profile = await trainer.gpu.profile(() => trainer.step());
  state.step += 1;
  profile.result.dispose();
  // The forward pass runs up to the scalar cost. After it, a kernel that
  // writes a tensor of a variable's shape with elementwise ops only is the
  // update (new weights, moments); one that ends a matmul with the update
  // (SGD's `w - lr * x^T g`, fused) is both; the rest is the backward pass.
  const reduces = (op) => ['matmul', 'sum', 'mean', 'max', 'min', 'logSumExp'].includes(op);
  let phase = 'forward';
  const items = profile.kernels.map((k) => {
    const writesWeights = k.outputs.some((t) => shapes.has(t.shape.join('x')));
    let label = phase;
    if (phase === 'backward' && writesWeights && !k.ops.some(reduces)) label = 'update';
    else if (phase === 'backward' && writesWeights && k.ops.includes('sub')) label = 'backward+update';
    if (phase === 'forward' && k.outputs.some((t) => t.shape.length === 0)) phase = 'backward';
    const li = document.createElement('li');
    li.dataset.ops = String(k.ops.length);
    li.dataset.phase = label;
    const details = document.createElement('details');
    const summary = document.createElement('summary');
    const io = (list) => list.map((t) => `#${t.id} [${t.shape.join(',')}]`).join(' ');
    summary.innerHTML = `<span class="phase">${label}</span>`;
    summary.append(`${k.name}: reads ${io(k.inputs)} → writes ${io(k.outputs)}`);
    const pre = document.createElement('pre');
    pre.className = 'wgsl';
    pre.textContent = k.wgsl.join('\n// ---- next launch\n');
    details.append(summary, pre);
    li.append(details);
    return li;
  });
  $('kernels').replaceChildren(...items);
  const fused = profile.kernels.filter((k) => k.ops.length > 1).length;
  $('profile-summary').textContent = `${profile.kernels.length} kernels, ${fused} of them fusing several ops; `
    + `peak ${profile.peakBytes.toLocaleString()} bytes, new ${profile.newBytes.toLocaleString()} bytes. Open one for its WGSL.`;
  $('ran').dataset.state = 'done';
}

// ----------------------------------------------------------------- wiring
/** Starts or stops training; a loop starts only once the last one ended. */
const setPlaying = player(state, batch);

$('play').addEventListener('click', () => setPlaying(!state.playing));
$('step').addEventListener('click', guarded(async () => { await train(1); await observe(); }));
$('reset').addEventListener('click', guarded(reset));
$('lr').addEventListener('change', guarded(() => state.trainer.setLearningRate(numberInput('lr', { positive: true }))));
$('break-fault').addEventListener('click', guarded(() => breakStep('fault')));
$('break-alloc').addEventListener('click', guarded(() => breakStep('allocation')));
$('break-lost').addEventListener('click', guarded(() => breakStep('lost')));
$('break-diverge').addEventListener('click', guarded(() => breakStep('diverge')));
$('profile').addEventListener('click', guarded(profileStep));
for (const id of ['kind', 'arms', 'noise', 'width', 'depth', 'optimizer']) {
  $(id).addEventListener('change', guarded(reset));
}

/** Remembers a task over 50 ms (a PerformanceEntry), keeping the newest LONG_TASKS_KEPT. */
function recordLongTask(entry) {
  state.longTasks.push({ at: entry.startTime, ms: entry.duration, step: state.step });
  if (state.longTasks.length > LONG_TASKS_KEPT) state.longTasks.splice(0, state.longTasks.length - LONG_TASKS_KEPT);
  state.longestTask = Math.max(state.longestTask, entry.duration);
}

// Tasks over 50 ms on the page's thread: what would make it stutter.
if (PerformanceObserver.supportedEntryTypes?.includes('longtask')) {
  new PerformanceObserver((list) => list.getEntries().forEach(recordLongTask)).observe({ type: 'longtask' });
}

/** What the page tests drive and read. */
window.demo = {
  state,
  exclusive,
  /** `steps` more steps at full speed (no drawing between batches). */
  train: (steps, batchSize = 25) => exclusive(async () => {
    for (let done = 0; done < steps; done += batchSize) await train(Math.min(batchSize, steps - done));
    await observe();
  }),
  setPlaying,
  recordLongTask,
  longTasksKept: LONG_TASKS_KEPT,
};

try {
  await init();
  await exclusive(reset);
  document.body.dataset.state = 'ready';
  if (!new URLSearchParams(location.search).has('paused')) setPlaying(true);
} catch (error) {
  document.body.dataset.state = 'failed';
  showError(error);
}
