// The demo page: trains an MLP live (play / pause / step / reset), draws
// its loss, accuracy and decision boundary, shows webfusion's counters, and
// lets a visitor break the next step on purpose (a GPU fault, an
// allocation past the limits, a lost device, a divergence) to see the
// failure's chain and that the weights were left as they were.
//
// The training runs in a Worker (training.js), which owns the device and
// the model: this thread handles the controls and draws what the worker
// answers, so it never waits for a step. Every call to the worker goes
// through one queue of jobs (`exclusive`), so a button never interleaves
// with a training batch; at most one training loop runs; whatever a control
// or a batch throws (in the worker too: a failure arrives with its fields)
// is shown on the page (#error), never left unhandled.
import uPlot from 'uplot';
import { dataset } from './data.js';
import { GRID } from './model.js';
import { $, exclusive, guarded, numberInput, player, renderChain, renderTensors, showError } from './page.js';

const PALETTE = [[231, 76, 60], [52, 152, 219], [46, 204, 113], [155, 89, 182], [241, 196, 15], [230, 126, 34]];
/**
 * The worker's time for one batch, in ms of registration: the page draws
 * after each batch, and the batch size adapts to it.
 */
const FRAME_BUDGET_MS = 8;
/** Steps between two drawings of the decision boundary. */
const BOUNDARY_EVERY = 50;
/** Long tasks remembered (the newest): the page may play for hours. */
const LONG_TASKS_KEPT = 200;
/** The heat map's size in CSS pixels (its backing store is this times devicePixelRatio). */
const HEATMAP_SIZE = Number($('heatmap').getAttribute('width'));

const state = {
  data: null,
  config: null,
  playing: false,
  /** The step and loss the worker last reported. */
  step: 0,
  loss: null,
  // One step first: its flush compiles every kernel of a step, the batch grows after.
  batch: 1,
  history: { step: [], loss: [], accuracy: [] },
  lastBoundary: -Infinity,
  rate: { at: performance.now(), step: 0, value: null },
  kernelsPerStep: null,
  /** The device's counters as the worker last reported them (with `lost` and `devices`). */
  stats: null,
  longestTask: 0,
  /** The newest LONG_TASKS_KEPT tasks over 50 ms on this thread: `{ at, ms, step }`. */
  longTasks: [],
  /** Training loops running: 0 or 1 (Play starts one only once the last one ended). */
  loops: 0,
  /** Batches trained by the loop, in all. */
  batches: 0,
  /** The probabilities last drawn, kept to draw them again at a new devicePixelRatio. */
  probabilities: null,
};

// ------------------------------------------------------------ the worker
const worker = new Worker(new URL('./training.js', import.meta.url), { type: 'module' });
/** Calls sent and not answered yet, by id: `{ resolve, reject }`. */
const pending = new Map();
let lastCall = 0;
/** Set once the worker failed outside any call (its script did not load): every call then rejects with it. */
let workerFailure = null;

/**
 * Asks the worker to run `method(...args)`; resolves to its value, or
 * rejects with its error, rebuilt with every field it had (a TensorError's
 * `root` and `chain` among them).
 */
function call(method, ...args) {
  if (workerFailure) return Promise.reject(workerFailure);
  lastCall += 1;
  const id = lastCall;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    worker.postMessage({ id, method, args });
  });
}

worker.addEventListener('message', ({ data }) => {
  const waiting = pending.get(data?.id);
  // Not an answer to a call of this page's: not ours to handle.
  if (!waiting) return;
  pending.delete(data.id);
  if ('error' in data) waiting.reject(Object.assign(new Error(data.error.message), data.error));
  else waiting.resolve(data.value);
});

worker.addEventListener('error', (event) => {
  event.preventDefault();
  workerFailure = new Error(`the training worker failed: ${event.message || 'its script did not load'}`);
  for (const { reject } of pending.values()) reject(workerFailure);
  pending.clear();
  showError(workerFailure);
});

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

/** Takes what a worker's answer says of where training stands. */
function absorb({ step, loss, stats }) {
  Object.assign(state, { step, loss, stats });
}

/**
 * A new problem and model from the controls, on a new device (the worker
 * destroys the old one). A bad field throws before anything changes, so
 * the model trains on as it was.
 */
async function reset() {
  const config = readConfig();
  const data = dataset({ kind: config.kind, arms: config.arms, noise: config.noise, n: 300, seed: 11 });
  const { faultTargets } = await call('reset', config, data);
  Object.assign(state, {
    config, data, step: 0, loss: null, lastBoundary: -Infinity,
    history: { step: [], loss: [], accuracy: [] },
  });
  fillFaultTargets(faultTargets);
  await observe();
}

/**
 * `count` steps in the worker, one read of the last cost; `method` 'batch'
 * replaces a lost device instead of failing (its answer's `recovered` says
 * why). Returns the worker's answer.
 */
async function train(count, method = 'train') {
  const answer = await call(method, count);
  absorb(answer);
  if (!answer.recovered) state.kernelsPerStep = answer.kernelsPerStep;
  return answer;
}

/** One batch of steps sized to the frame budget, then what the page shows. */
async function batch() {
  const answer = await train(state.batch, 'batch');
  if (answer.recovered) {
    $('outcome-summary').textContent = `${answer.recovered}; a new device took over from step ${answer.step}.`;
    showStats();
    return;
  }
  const perStep = Math.max(answer.registrationMs, 0.05);
  state.batch = Math.max(1, Math.min(50, Math.floor(FRAME_BUDGET_MS / perStep)));
  if (state.step - state.lastBoundary >= BOUNDARY_EVERY) await observe();
  else showStats();
}

/** Accuracy, the curve, the decision boundary, read now (the worker saves the weights). */
async function observe() {
  const answer = await call('observe');
  absorb(answer);
  const { history } = state;
  history.step.push(state.step);
  history.loss.push(state.loss);
  history.accuracy.push(answer.accuracy);
  if (history.step.length > 1500) for (const series of Object.values(history)) series.splice(0, 500);
  chart.setData([history.step, history.loss, history.accuracy]);
  drawBoundary(answer.probabilities);
  state.lastBoundary = state.step;
  document.body.dataset.accuracy = String(answer.accuracy);
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
  const s = state.stats;
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
  set('stat-device', s.lost ? `lost: ${s.lost}` : `${s.devices} requested`);
}

// ------------------------------------------------------ breaking a step
/** The break controls' op list: `labels` of the ops a fault can break. */
function fillFaultTargets(labels) {
  $('fault-op').replaceChildren(...labels.map((label) => new Option(label, label)));
}

/**
 * Breaks the next step (`how`: 'fault', 'allocation', 'lost', 'diverge')
 * in the worker, then shows what happened: the chain, which tensors read
 * and which did not, whether the weights changed, and the loss after
 * training goes on.
 */
async function breakStep(how) {
  const outcome = $('outcome');
  outcome.hidden = false;
  outcome.dataset.state = 'running';
  const answer = await call('breakStep', how, $('fault-op').value, $('fault-kind').value);
  renderChain(answer.report, answer.hadCost);
  renderTensors(answer.rows);
  await observe();
  $('outcome-summary').textContent = answer.summary;
  Object.assign(outcome.dataset, { ...answer.outcome, state: 'done' });
}

// ----------------------------------------------------------- what ran
async function profileStep() {
  const answer = await call('profile');
  absorb(answer);
  const shapes = new Set(answer.shapes);
  // The forward pass runs up to the scalar cost. After it, a kernel that
  // writes a tensor of a variable's shape with elementwise ops only is the
  // update (new weights, moments); one that ends a matmul with the update
  // (SGD's `w - lr * x^T g`, fused) is both; the rest is the backward pass.
  const reduces = (op) => ['matmul', 'sum', 'mean', 'max', 'min', 'logSumExp'].includes(op);
  let phase = 'forward';
  const items = answer.kernels.map((k) => {
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
    const time = k.kernelMs === undefined ? '' : `, ${k.kernelMs.toFixed(3)} ms on the GPU`;
    summary.append(`${k.name}: reads ${io(k.inputs)} → writes ${io(k.outputs)}${time}`);
    const pre = document.createElement('pre');
    pre.className = 'wgsl';
    pre.textContent = k.wgsl.join('\n// ---- next launch\n');
    details.append(summary, pre);
    li.append(details);
    return li;
  });
  $('kernels').replaceChildren(...items);
  const fused = answer.kernels.filter((k) => k.ops.length > 1).length;
  const gpuTime = answer.kernelMs === undefined ? '' : ` ${answer.kernelMs.toFixed(2)} ms on the GPU;`;
  $('profile-summary').textContent = `${answer.kernels.length} kernels, ${fused} of them fusing several ops;${gpuTime} `
    + `peak ${answer.peakBytes.toLocaleString()} bytes, new ${answer.newBytes.toLocaleString()} bytes. Open one for its WGSL.`;
  $('ran').dataset.state = 'done';
  showStats();
}

// ----------------------------------------------------------------- wiring
/** Starts or stops training; a loop starts only once the last one ended. */
const setPlaying = player(state, batch);

$('play').addEventListener('click', () => setPlaying(!state.playing));
$('step').addEventListener('click', guarded(async () => { await train(1); await observe(); }));
$('reset').addEventListener('click', guarded(reset));
$('lr').addEventListener('change', guarded(() => call('setLearningRate', numberInput('lr', { positive: true }))));
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
  /** A call to the training worker (`call('stats')`, `call('model')`, …). */
  call,
  recordLongTask,
  longTasksKept: LONG_TASKS_KEPT,
};

try {
  await exclusive(reset);
  document.body.dataset.state = 'ready';
  if (!new URLSearchParams(location.search).has('paused')) setPlaying(true);
} catch (error) {
  document.body.dataset.state = 'failed';
  showError(error);
}
