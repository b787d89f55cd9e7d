// The demo's text mode: www/charlm.js's character transformer trains live
// on the sonnets (play / pause / step / reset), its loss drawn against the
// text's bigram entropy, samples drawn from it as it learns, and the
// attention of its four heads over one line drawn as maps. GPU work goes
// through the one queue of www/page.js; whatever an action throws is shown.
import init, * as wf from 'webfusion';
import uPlot from 'uplot';
import { CharModel, bigramEntropy, random, vocabulary, windows } from './charlm.js';
import { $, exclusive, guarded, numberInput, player, showError } from './page.js';

const CONTEXT = 64;
/** Work done between two frames, in ms of registration; the steps per batch adapt to it. */
const FRAME_BUDGET_MS = 8;
/** Steps between two samples (and two drawings of the attention). */
const SAMPLE_EVERY = 100;
/** Characters drawn per sample, and what they follow. */
const SAMPLE_LENGTH = 40;
const PROMPT = 'Shall I compare thee';
/** The line whose attention is drawn: the first sonnet's opening, one context long. */
const ATTENTION_LINE_AT = 0;

const state = {
  text: null,
  vocab: null,
  ids: null,
  bigram: null,
  gpu: null,
  model: null,
  next: null,
  step: 0,
  steps: 1,
  loss: null,
  lastSample: -Infinity,
  history: { step: [], loss: [], bigram: [] },
  rate: { at: performance.now(), step: 0, value: null },
  kernelsPerStep: null,
  samples: [],
  playing: false,
  loops: 0,
  batches: 0,
};

/** A new model on a new device; the old one goes once the new one exists. */
async function reset() {
  const lr = numberInput('lr', { positive: true });
  const gpu = await wf.Device.request({ debug: { captureStacks: true } });
  const model = new CharModel(wf, gpu, { vocab: state.vocab.chars.length, context: CONTEXT, seed: 1, lr });
  state.model?.dispose();
  state.gpu?.destroy();
  Object.assign(state, {
    gpu, model, next: random(7), step: 0, steps: 1, loss: null, lastSample: -Infinity,
    history: { step: [], loss: [], bigram: [] }, samples: [],
  });
  chart.setData([[], [], []]);
  $('sample-list').replaceChildren();
  await observe();
}

/** `count` steps registered back to back, then one read of the last cost. */
async function train(count) {
  const { model, gpu } = state;
  const batch = numberInput('batch', { integer: true });
  const before = gpu.stats().kernelsLaunched;
  const start = performance.now();
  let cost = null;
  for (let i = 0; i < count; i += 1) {
    const { x, y } = windows(state.ids, batch, CONTEXT, state.next);
    cost?.dispose();
    cost = model.step(x, y, batch);
    state.step += 1;
  }
  try {
    const read = cost.data();
    const perStep = (performance.now() - start) / count;
    state.steps = Math.max(1, Math.min(20, Math.floor(FRAME_BUDGET_MS / Math.max(perStep, 0.05))));
    state.loss = (await read)[0];
  } finally {
    cost.dispose();
  }
  state.kernelsPerStep = (gpu.stats().kernelsLaunched - before) / count;
  const { history } = state;
  history.step.push(state.step);
  history.loss.push(state.loss);
  history.bigram.push(state.bigram);
  if (history.step.length > 3000) for (const series of Object.values(history)) series.splice(0, 1000);
  chart.setData([history.step, history.loss, history.bigram]);
  if (state.step - state.lastSample >= SAMPLE_EVERY) await observe();
  else showStats();
}

/** A sample and the attention maps, drawn now. */
async function observe() {
  state.lastSample = state.step;
  await drawAttention();
  await sample();
  showStats();
}

async function sample() {
  const { vocab, model } = state;
  const drawn = await model.sample(vocab.encode(PROMPT), SAMPLE_LENGTH, state.step);
  const text = drawn.map((i) => vocab.chars[i]).join('');
  state.samples.push({ step: state.step, text });
  const li = document.createElement('li');
  const at = document.createElement('span');
  at.className = 'at';
  at.textContent = `after step ${state.step}${state.loss === null ? '' : ` (loss ${state.loss.toFixed(3)})`}`;
  const body = document.createElement('span');
  body.textContent = PROMPT + text;
  li.append(at, body);
  $('sample-list').prepend(li);
  $('samples').dataset.count = String(state.samples.length);
}

/** One map per head: `weights` ([1, heads, t, t]) as shades, row i over columns up to i. */
async function drawAttention() {
  const { vocab, model } = state;
  const line = state.text.slice(ATTENTION_LINE_AT, ATTENTION_LINE_AT + CONTEXT);
  $('attention-line').textContent = JSON.stringify(line);
  const x = state.gpu.tensor(vocab.encode(line), [1, CONTEXT]);
  const weights = model.attention(x);
  x.dispose();
  let values;
  try { values = await weights.data(); } finally { weights.dispose(); }
  const heads = model.heads;
  const t = CONTEXT;
  const figures = [];
  let causal = true;
  for (let h = 0; h < heads; h += 1) {
    const canvas = document.createElement('canvas');
    canvas.width = t;
    canvas.height = t;
    const image = canvas.getContext('2d').createImageData(t, t);
    for (let i = 0; i < t; i += 1) {
      // Each row scaled to its largest weight, so a spread row still shows.
      const row = values.subarray((h * t + i) * t, (h * t + i + 1) * t);
      const top = Math.max(...row.subarray(0, i + 1));
      for (let j = 0; j < t; j += 1) {
        if (j > i && row[j] !== 0) causal = false;
        const shade = 255 - Math.round(255 * (row[j] / top));
        const at = 4 * (i * t + j);
        image.data.set([shade, shade, 255 - (255 - shade) / 3, 255], at);
      }
    }
    canvas.getContext('2d').putImageData(image, 0, 0);
    const figure = document.createElement('figure');
    const caption = document.createElement('figcaption');
    caption.textContent = `head ${h + 1}`;
    figure.append(canvas, caption);
    figures.push(figure);
  }
  $('heads').replaceChildren(...figures);
  Object.assign($('attention').dataset, { step: String(state.step), causal: String(causal) });
}

// ----------------------------------------------------------------- drawing
const chart = new uPlot({
  width: 420,
  height: 300,
  scales: { x: { time: false } },
  series: [
    { label: 'step' },
    { label: 'loss', stroke: '#c0392b', width: 2 },
    { label: 'bigram entropy', stroke: '#66707a', width: 1, dash: [6, 4] },
  ],
  axes: [{}, { label: 'nats per character' }],
}, [[], [], []], $('chart'));

function showStats() {
  const { gpu } = state;
  const now = performance.now();
  if (now - state.rate.at > 1000) {
    state.rate = { at: now, step: state.step, value: ((state.step - state.rate.step) * 1000) / (now - state.rate.at) };
  }
  const set = (id, text) => { $(id).textContent = text; };
  set('stat-step', state.step);
  set('stat-loss', state.loss === null ? '–' : state.loss.toFixed(3));
  set('stat-bigram', state.bigram.toFixed(3));
  set('stat-rate', state.rate.value === null ? '–' : state.rate.value.toFixed(1));
  set('stat-kernels', state.kernelsPerStep === null ? '–' : state.kernelsPerStep.toFixed(0));
  set('stat-vocab', state.vocab.chars.length);
  set('stat-failures', gpu.stats().failuresHeld);
  document.body.dataset.step = String(state.step);
}

// ----------------------------------------------------------------- playing
const setPlaying = player(state, () => train(state.steps));

$('play').addEventListener('click', () => setPlaying(!state.playing));
$('step').addEventListener('click', guarded(() => train(1)));
$('reset').addEventListener('click', guarded(reset));
$('sample').addEventListener('click', guarded(observe));
$('lr').addEventListener('change', guarded(() => { state.model.optimizer.learningRate = numberInput('lr', { positive: true }); }));

/** What the page test drives and reads. */
window.textDemo = {
  state,
  exclusive,
  setPlaying,
  /** `steps` more steps at full speed, `perRead` between two reads of the cost. */
  train: (steps, perRead = 5) => exclusive(async () => {
    for (let done = 0; done < steps; done += perRead) await train(Math.min(perRead, steps - done));
  }),
  observe: () => exclusive(observe),
};

try {
  await init();
  const response = await fetch('/text/sonnets.txt');
  if (!response.ok) throw new Error(`the sonnets did not load: ${response.status} ${response.statusText}`);
  const text = await response.text();
  const vocab = vocabulary(text);
  const ids = vocab.encode(text);
  Object.assign(state, { text, vocab, ids, bigram: bigramEntropy(ids, vocab.chars.length) });
  await exclusive(reset);
  document.body.dataset.state = 'ready';
  if (!new URLSearchParams(location.search).has('paused')) setPlaying(true);
} catch (error) {
  document.body.dataset.state = 'failed';
  showError(error);
}
