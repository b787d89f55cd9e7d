// The demo's digits mode: www/cnn.js's CNN (TF.js's tutorial net) trains
// live on the mnist package's digits (play / pause / step / reset), its
// loss and held-out accuracy drawn as it learns, its first layer's filters
// drawn, a digit drawn with the mouse read by it, and the error explorer
// breaking a step inside a convolution. GPU work goes through the one queue
// of www/page.js; whatever an action throws is shown.
import init, * as wf from 'webfusion';
import uPlot from 'uplot';
import { DigitModel, PIXELS, batchOf, mnistSets } from './cnn.js';
import { $, exclusive, guarded, numberInput, player, renderChain, renderTensors, showError } from './page.js';

/** Work done between two frames, in ms of registration; the steps per batch adapt to it. */
const FRAME_BUDGET_MS = 8;
/** Steps between two measurements of the held-out accuracy (and drawings of the filters). */
const MEASURE_EVERY = 25;
/** Held-out digits the accuracy is measured on. */
const HELD_OUT = 500;

const state = {
  sets: null,
  gpu: null,
  model: null,
  step: 0,
  steps: 1,
  cursor: 0,
  loss: null,
  accuracy: null,
  lastMeasured: -Infinity,
  history: { step: [], loss: [], accuracy: [] },
  rate: { at: performance.now(), step: 0, value: null },
  kernelsPerStep: null,
  /** The pixels of the digit drawn last (784 in [0, 1]), or null. */
  drawn: null,
  prediction: null,
  playing: false,
  loops: 0,
  batches: 0,
};

/** A new model on a new device; the old one goes once the new one exists. */
async function reset() {
  const lr = numberInput('lr', { positive: true });
  const gpu = await wf.Device.request({ debug: { captureStacks: true } });
  const model = new DigitModel(wf, gpu, { seed: 1, lr });
  state.model?.dispose();
  state.gpu?.destroy();
  Object.assign(state, {
    gpu, model, step: 0, steps: 1, cursor: 0, loss: null, accuracy: null, lastMeasured: -Infinity,
    history: { step: [], loss: [], accuracy: [] },
  });
  chart.setData([[], [], []]);
  await measure();
}

/** `count` steps registered back to back, then one read of the last cost; its value. */
async function train(count) {
  const { model, gpu } = state;
  const batch = numberInput('batch', { integer: true });
  const before = gpu.stats().kernelsLaunched;
  const start = performance.now();
  let cost = null;
  for (let i = 0; i < count; i += 1) {
    const { x, y } = batchOf(state.sets.training, state.cursor, batch);
    state.cursor = (state.cursor + batch) % state.sets.training.n;
    cost?.dispose();
    cost = model.step(x, y, batch);
    state.step += 1;
  }
  try {
    const read = cost.data();
    const perStep = (performance.now() - start) / count;
    state.steps = Math.max(1, Math.min(10, Math.floor(FRAME_BUDGET_MS / Math.max(perStep, 0.05))));
    state.loss = (await read)[0];
  } finally {
    cost.dispose();
  }
  state.kernelsPerStep = (gpu.stats().kernelsLaunched - before) / count;
  if (state.step - state.lastMeasured >= MEASURE_EVERY) await measure();
  else record();
  return state.loss;
}

/** The held-out accuracy, the filters and the drawn digit's reading, now. */
async function measure() {
  state.lastMeasured = state.step;
  state.accuracy = await state.model.accuracy(state.sets.held, HELD_OUT);
  await drawFilters();
  if (state.drawn) await predict();
  record();
}

/** The point on the curves for this step, and the stats. */
function record() {
  const { history } = state;
  history.step.push(state.step);
  history.loss.push(state.loss);
  history.accuracy.push(state.accuracy);
  if (history.step.length > 3000) for (const series of Object.values(history)) series.splice(0, 1000);
  chart.setData([history.step, history.loss, history.accuracy]);
  showStats();
}

// ----------------------------------------------------------------- drawing
const chart = new uPlot({
  width: 420,
  height: 260,
  scales: { x: { time: false }, acc: { range: [0, 1] } },
  series: [
    { label: 'step' },
    { label: 'loss', stroke: '#c0392b', width: 2 },
    { label: 'held-out accuracy', stroke: '#2c6fbb', width: 2, scale: 'acc' },
  ],
  axes: [{}, { label: 'nats' }, { side: 1, scale: 'acc', label: 'accuracy', grid: { show: false } }],
}, [[], [], []], $('chart'));

/** conv1's eight 5x5 kernels, each scaled to its largest weight: red positive, blue negative. */
async function drawFilters() {
  const weights = await state.model.p.conv1.data();
  const [kh, kw, , out] = state.model.p.conv1.shape;
  const figures = [];
  for (let o = 0; o < out; o += 1) {
    const canvas = document.createElement('canvas');
    canvas.width = kw;
    canvas.height = kh;
    const context = canvas.getContext('2d');
    const image = context.createImageData(kw, kh);
    let top = 0;
    for (let t = 0; t < kh * kw; t += 1) top = Math.max(top, Math.abs(weights[t * out + o]));
    for (let t = 0; t < kh * kw; t += 1) {
      const w = weights[t * out + o] / (top || 1);
      const fade = Math.round(255 * (1 - Math.abs(w)));
      image.data.set(w >= 0 ? [255, fade, fade, 255] : [fade, fade, 255, 255], 4 * t);
    }
    context.putImageData(image, 0, 0);
    figures.push(canvas);
  }
  $('filters').replaceChildren(...figures);
  $('filters').dataset.step = String(state.step);
}

function showStats() {
  const { gpu } = state;
  const now = performance.now();
  if (now - state.rate.at > 1000) {
    state.rate = { at: now, step: state.step, value: ((state.step - state.rate.step) * 1000) / (now - state.rate.at) };
  }
  const set = (id, text) => { $(id).textContent = text; };
  set('stat-step', state.step);
  set('stat-epoch', ((state.step * numberInput('batch', { integer: true })) / state.sets.training.n).toFixed(2));
  set('stat-loss', state.loss === null ? '–' : state.loss.toFixed(3));
  set('stat-accuracy', state.accuracy === null ? '–' : `${(100 * state.accuracy).toFixed(1)}%`);
  set('stat-rate', state.rate.value === null ? '–' : state.rate.value.toFixed(1));
  set('stat-kernels', state.kernelsPerStep === null ? '–' : state.kernelsPerStep.toFixed(0));
  set('stat-failures', gpu.stats().failuresHeld);
  document.body.dataset.step = String(state.step);
}

// ------------------------------------------------------ drawing a digit
const pad = $('pad');
const ink = pad.getContext('2d');

function clearPad() {
  ink.fillStyle = '#000';
  ink.fillRect(0, 0, pad.width, pad.height);
  state.drawn = null;
  state.prediction = null;
  $('prediction').replaceChildren();
  delete $('prediction').dataset.digit;
}

/** A stroke through `points` (`[x, y]` in the pad's pixels), in white. */
function stroke(points) {
  ink.strokeStyle = '#fff';
  ink.lineWidth = 20;
  ink.lineCap = 'round';
  ink.lineJoin = 'round';
  ink.beginPath();
  points.forEach(([x, y], i) => (i === 0 ? ink.moveTo(x, y) : ink.lineTo(x, y)));
  if (points.length === 1) ink.lineTo(points[0][0] + 0.1, points[0][1]);
  ink.stroke();
}

/**
 * The pad as an MNIST digit: the ink's bounding box scaled to fit 20x20
 * and centred in 28x28, as the digits were made; 784 values in [0, 1].
 * Null when nothing is drawn.
 */
function padPixels() {
  const { width, height } = pad;
  const data = ink.getImageData(0, 0, width, height).data;
  let [left, top, right, bottom] = [width, height, -1, -1];
  for (let y = 0; y < height; y += 1) {
    for (let x = 0; x < width; x += 1) {
      if (data[4 * (y * width + x)] > 0) {
        left = Math.min(left, x); right = Math.max(right, x);
        top = Math.min(top, y); bottom = Math.max(bottom, y);
      }
    }
  }
  if (right < 0) return null;
  const w = right - left + 1;
  const h = bottom - top + 1;
  const scale = 20 / Math.max(w, h);
  const small = document.createElement('canvas');
  small.width = 28;
  small.height = 28;
  const context = small.getContext('2d');
  context.fillStyle = '#000';
  context.fillRect(0, 0, 28, 28);
  context.imageSmoothingQuality = 'high';
  context.drawImage(pad, left, top, w, h, 14 - (w * scale) / 2, 14 - (h * scale) / 2, w * scale, h * scale);
  const pixels = context.getImageData(0, 0, 28, 28).data;
  const out = new Float32Array(PIXELS);
  for (let i = 0; i < PIXELS; i += 1) out[i] = pixels[4 * i] / 255;
  return out;
}

/** What the model reads in the drawn digit: each digit's probability, the likeliest marked. */
async function predict() {
  state.drawn = padPixels();
  if (!state.drawn) return;
  const p = await state.model.probabilities(state.drawn);
  const digit = p.indexOf(Math.max(...p));
  state.prediction = { digit, p: [...p] };
  $('prediction').replaceChildren(...[...p].map((value, d) => {
    const li = document.createElement('li');
    li.className = d === digit ? 'top' : '';
    const label = document.createElement('span');
    label.textContent = String(d);
    const bar = document.createElement('span');
    bar.className = 'bar';
    bar.style.width = `${(100 * value).toFixed(1)}%`;
    const pct = document.createElement('span');
    pct.textContent = `${(100 * value).toFixed(0)}%`;
    li.append(label, bar, pct);
    return li;
  }));
  $('prediction').dataset.digit = String(digit);
}

let points = null;
const at = (event) => {
  const box = pad.getBoundingClientRect();
  return [((event.clientX - box.left) * pad.width) / box.width, ((event.clientY - box.top) * pad.height) / box.height];
};
pad.addEventListener('pointerdown', (event) => {
  pad.setPointerCapture(event.pointerId);
  points = [at(event)];
  stroke(points);
});
pad.addEventListener('pointermove', (event) => {
  if (!points) return;
  points.push(at(event));
  stroke(points.slice(-2));
});
const lift = () => {
  if (!points) return;
  points = null;
  guarded(predict)();
};
pad.addEventListener('pointerup', lift);
pad.addEventListener('pointercancel', lift);

// ------------------------------------------------------ breaking a step
function fillFaultTargets() {
  const select = $('fault-op');
  select.replaceChildren(...Object.keys(state.model.faultTargets()).map((label) => new Option(label, label)));
}

/**
 * Breaks the next step with a GPU fault in the kernel chosen, then shows
 * what happened: the chain from the root to the read of the cost, every
 * variable read unchanged, and training going on.
 */
async function breakStep() {
  const outcome = $('outcome');
  outcome.hidden = false;
  outcome.dataset.state = 'running';
  const { model, gpu } = state;
  const lossBefore = state.loss ?? (await train(1));
  const before = await model.readWeights();
  const target = model.faultTargets()[$('fault-op').value];
  gpu.injectFault({ ...target, kind: $('fault-kind').value });
  const batch = numberInput('batch', { integer: true });
  const { x, y } = batchOf(state.sets.training, state.cursor, batch);
  const cost = model.step(x, y, batch);
  let error = null;
  try { await cost.data(); } catch (e) { error = e; }
  const costId = cost.id;
  cost.dispose();
  const after = await model.readWeights();
  const unchanged = after.every((w, i) => w.every((v, j) => v === before[i][j]));
  renderChain(error, cost);
  renderTensors([
    [`tensor #${costId}`, 'the step\'s cost', error ? `rejected: ${error.root.kind} at ${error.root.op}` : 'read', error ? 'tainted' : 'normal'],
    ...model.vars.map((v) => [`tensor #${v.id}`, `variable ${v.name}`, unchanged ? 'read: unchanged' : 'read: changed', 'normal']),
  ]);
  const more = 5;
  const lossAfter = await train(more);
  $('outcome-summary').textContent = `The step failed (${error?.root.kind} at ${error?.root.op}); every variable `
    + `${unchanged ? 'kept its value' : 'CHANGED'}. Training went on: the loss is ${lossAfter.toFixed(4)} after ${more} `
    + `more steps (it was ${lossBefore.toFixed(4)}).`;
  Object.assign(outcome.dataset, {
    kind: error?.root.kind ?? '',
    rootOp: error?.root.op ?? '',
    unchanged: String(unchanged),
    lossAfter: String(lossAfter),
    state: 'done',
  });
}

// ----------------------------------------------------------------- wiring
const setPlaying = player(state, () => train(state.steps));

$('play').addEventListener('click', () => setPlaying(!state.playing));
$('step').addEventListener('click', guarded(() => train(1)));
$('reset').addEventListener('click', guarded(reset));
$('clear').addEventListener('click', clearPad);
$('lr').addEventListener('change', guarded(() => { state.model.optimizer.learningRate = numberInput('lr', { positive: true }); }));
$('break-fault').addEventListener('click', guarded(breakStep));

/** What the page test drives and reads. */
window.digitsDemo = {
  state,
  exclusive,
  setPlaying,
  /** `steps` more steps at full speed, `perRead` between two reads of the cost. */
  train: (steps, perRead = 5) => exclusive(async () => {
    for (let done = 0; done < steps; done += perRead) await train(Math.min(perRead, steps - done));
  }),
  /** Draws `strokes` (each a list of `[x, y]` in the pad's pixels) and reads them. */
  draw: (strokes) => exclusive(async () => {
    clearPad();
    for (const s of strokes) stroke(s);
    await predict();
  }),
  measure: () => exclusive(measure),
};

try {
  await init();
  clearPad();
  state.sets = await mnistSets('/digits/');
  await exclusive(reset);
  fillFaultTargets();
  document.body.dataset.state = 'ready';
  if (!new URLSearchParams(location.search).has('paused')) setPlaying(true);
} catch (error) {
  document.body.dataset.state = 'failed';
  showError(error);
}
