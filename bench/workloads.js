// The benchmark workloads, written once per library. Inputs are seeded and
// identical for every library; weights stay on the GPU; every timed
// iteration uploads its input, computes, and reads the result back.
import { onnxModel } from './onnx.js';
import { charLoss, digitLoss } from './reference.js';
import { CharModel } from '/www/charlm.js';
import { DigitModel } from '/www/cnn.js';

/** Seeded uniform values in [lo, hi) (mulberry32). */
export function seeded(n, seed, lo = -1, hi = 1) {
  let a = seed >>> 0;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    out[i] = lo + (hi - lo) * (((t ^ (t >>> 14)) >>> 0) / 4294967296);
  }
  return out;
}

// W1: 16 elementwise ops; `x` is the input, numbers are scalar operands.
const CHAIN = [
  ['mul', 0.5], ['add', 0.1], ['exp'], ['mul', 'x'], ['tanh'], ['sub', 0.2], ['sigmoid'], ['add', 'x'],
  ['mul', 1.5], ['tanh'], ['add', 'x'], ['sigmoid'], ['mul', 0.9], ['exp'], ['sub', 'x'], ['tanh'],
];
const W1_N = 1 << 20;

// W6: 1000 small ops on 16 elements.
const SMALL = Array.from({ length: 1000 }, (_, i) => [['add', 0.01], ['mul', 0.999], ['sub', 0.005], ['maximum', -2]][i % 4]);

const MLP = { batch: 256, sizes: [784, 512, 512, 10], lr: 0.01 };

function mlpWeights() {
  const { sizes } = MLP;
  return [0, 1, 2].map((l) => ({
    w: seeded(sizes[l] * sizes[l + 1], 100 + l, -0.05, 0.05),
    b: seeded(sizes[l + 1], 200 + l, -0.01, 0.01),
    shape: [sizes[l], sizes[l + 1]],
  }));
}

function oneHot(batch, classes, seed) {
  const labels = seeded(batch, seed, 0, classes);
  const y = new Float32Array(batch * classes);
  labels.forEach((v, i) => { y[i * classes + Math.floor(v)] = 1; });
  return y;
}

export const WORKLOADS = [
  { id: 'W1', name: '16 elementwise ops on 2^20', heavy: false },
  { id: 'W2-256', name: 'matmul 256', n: 256 },
  { id: 'W2-512', name: 'matmul 512', n: 512 },
  { id: 'W2-1024', name: 'matmul 1024', n: 1024, heavy: true },
  { id: 'W3', name: 'MLP forward 256x784-512-512-10', heavy: true },
  { id: 'W4', name: 'MLP SGD training step', heavy: true },
  { id: 'W4-minimize', name: 'the W4 step on variables, by train.sgd(lr).minimize', heavy: true },
  { id: 'W5', name: 'sum over last axis of [1024,4096]' },
  { id: 'W6', name: '1000 small ops on 16 elements' },
  { id: 'W7', name: 'softmax over last axis of [1024,1024]' },
  { id: 'W8', name: 'digit CNN Adam step (conv 5x5x8, pool, conv 5x5x16, pool, dense 10; batch 64)', heavy: true },
  { id: 'W9', name: 'char transformer Adam step (1 block, width 64, 4 heads, context 64, batch 16)', heavy: true },
];

// W9: www/charlm.js's net, its weights seeded here so every library starts
// from the same ones (and so the float64 reference can compute its loss).
const CHAR = { batch: 16, t: 64, width: 64, heads: 4, vocab: 65, lr: 0.001 };

function charWeights() {
  const { width: c, t, vocab } = CHAR;
  let seed = 900;
  const u = (shape, lo, hi) => ({ values: seeded(shape.reduce((a, b) => a * b), (seed += 1), lo, hi), shape });
  const matrix = (k, m) => u([k, m], -0.15, 0.15);
  return {
    tok: u([vocab, c], -0.5, 0.5), pos: u([t, c], -0.5, 0.5),
    ln1g: u([c], 0.8, 1.2), ln1b: u([c], -0.1, 0.1),
    wq: matrix(c, c), wk: matrix(c, c), wv: matrix(c, c), wo: matrix(c, c),
    ln2g: u([c], 0.8, 1.2), ln2b: u([c], -0.1, 0.1),
    w1: matrix(c, 4 * c), b1: u([4 * c], -0.1, 0.1), w2: matrix(4 * c, c), b2: u([c], -0.1, 0.1),
    lnfg: u([c], 0.8, 1.2), lnfb: u([c], -0.1, 0.1),
    head: matrix(c, vocab),
  };
}

/** W9's batch: seeded characters and the targets one later. */
function charBatch() {
  const { batch, t, vocab } = CHAR;
  const text = Int32Array.from(seeded(batch * t + 1, 950, 0, vocab), Math.floor);
  return { x: text.subarray(0, batch * t), y: text.subarray(1) };
}

// W8: www/cnn.js's net, its weights, images and labels seeded here.
const DIGITS = { batch: 64, lr: 0.001 };

function digitWeights() {
  let seed = 800;
  const u = (shape, fanIn) => {
    const a = Math.sqrt(6 / fanIn);
    return { values: seeded(shape.reduce((x, y) => x * y), (seed += 1), -a, a), shape };
  };
  return {
    conv1: u([5, 5, 1, 8], 25), bias1: u([8], 25),
    conv2: u([5, 5, 8, 16], 200), bias2: u([16], 200),
    dense: u([256, 10], 256), bias3: u([10], 256),
  };
}

function digitBatch() {
  const { batch } = DIGITS;
  return {
    x: seeded(batch * 28 * 28, 850, 0, 1),
    y: Int32Array.from(seeded(batch, 851, 0, 10), Math.floor),
  };
}

/** The loss W8's or W9's first step reports, in float64; null for the other workloads. */
export function referenceLoss(id) {
  const values = (weights) => Object.fromEntries(Object.entries(weights).map(([n, { values: v }]) => [n, v]));
  if (id === 'W8') {
    const { x, y } = digitBatch();
    return digitLoss(values(digitWeights()), x, y, DIGITS.batch);
  }
  if (id !== 'W9') return null;
  const { x, y } = charBatch();
  return charLoss(values(charWeights()), x, y, CHAR);
}

// ---------------------------------------------------------------- webfusion
/**
 * Returns `{ step }`: one timed iteration, resolving to the result values.
 * Written once, run two ways. With `asWritten: false`, as tuned code is:
 * like TF.js's tidy, intermediates are disposed when built. With
 * `asWritten: true`, as people write it: every intermediate kept in a
 * variable (`k` pushes it into an array) and disposed after the read.
 */
export function webfusionWorkload({ tidy, train, asWritten = false }, gpu, id) {
  // One iteration's intermediates: `k(t)` keeps `t` (as written) or lets it
  // be (under tidy); `build(f)` runs `f` as written or inside tidy;
  // `dispose(except)` disposes what was kept, all but `except`.
  const keeper = () => {
    const kept = [];
    return {
      k: asWritten ? (t) => { kept.push(t); return t; } : (t) => t,
      build: (f) => (asWritten ? f() : tidy(f)),
      dispose: (except) => { for (const t of kept) if (t !== except) t.dispose(); },
    };
  };
  const read = async (build) => {
    const { k, build: run, dispose } = keeper();
    const y = run(() => build(k));
    try { return await y.data(); } finally {
      y.dispose();
      dispose(y);
    }
  };
  const chain = (k, x, ops) => ops.reduce((y, [op, arg]) => k(arg === undefined ? y[op]() : y[op](arg === 'x' ? x : arg)), x);
  switch (id) {
    case 'W1': {
      const data = seeded(W1_N, 1);
      return { step: () => read((k) => chain(k, k(gpu.tensor(data)), CHAIN)) };
    }
    case 'W2-256': case 'W2-512': case 'W2-1024': {
      const n = Number(id.slice(3));
      const a = seeded(n * n, 2);
      const b = gpu.tensor(seeded(n * n, 3), [n, n]);
      return { step: () => read((k) => k(k(gpu.tensor(a, [n, n])).matmul(b))) };
    }
    case 'W3': {
      const layers = mlpWeights().map(({ w, b, shape }) => ({ w: gpu.tensor(w, shape), b: gpu.tensor(b) }));
      const x = seeded(MLP.batch * MLP.sizes[0], 4);
      return {
        step: () => read((k) => layers.reduce((h, { w, b }, i) => {
          const z = k(k(h.matmul(w)).add(b));
          return k(i < 2 ? z.relu() : z.softmax(-1));
        }, k(gpu.tensor(x, [MLP.batch, MLP.sizes[0]])))),
      };
    }
    case 'W4': {
      let layers = mlpWeights().map(({ w, b, shape }) => ({ w: gpu.tensor(w, shape), b: gpu.tensor(b) }));
      const x = seeded(MLP.batch * MLP.sizes[0], 4);
      const y = oneHot(MLP.batch, 10, 5);
      return {
        step: async () => {
          const { k, build: run, dispose } = keeper();
          const build = () => {
            const input = k(gpu.tensor(x, [MLP.batch, MLP.sizes[0]]));
            const labels = k(gpu.tensor(y, [MLP.batch, 10]));
            const acts = [input];
            const pre = [];
            let h = input;
            layers.forEach(({ w, b }, i) => {
              const z = k(k(h.matmul(w)).add(b));
              pre.push(z);
              h = i < 2 ? k(z.relu()) : z;
              acts.push(h);
            });
            const logp = k(h.logSoftmax(-1));
            const loss = k(k(k(k(labels.mul(logp)).sum()).neg()).div(MLP.batch));
            // Backward, by hand: d(loss)/d(logits) = (softmax - y) / batch.
            let grad = k(k(k(logp.exp()).sub(labels)).div(MLP.batch));
            const next = [];
            for (let i = 2; i >= 0; i--) {
              const { w, b } = layers[i];
              const wt = k(acts[i].transpose());
              next[i] = {
                w: w.sub(k(k(wt.matmul(grad)).mul(MLP.lr))),
                b: b.sub(k(k(grad.sum(0)).mul(MLP.lr))),
              };
              if (i > 0) grad = k(k(grad.matmul(k(w.transpose()))).mul(k(pre[i - 1].greater(0))));
            }
            return { loss, next };
          };
          const { loss, next } = run(build);
          const values = await loss.data();
          loss.dispose();
          dispose(loss);
          layers.forEach(({ w, b }) => { w.dispose(); b.dispose(); });
          layers = next;
          return values;
        },
      };
    }
    case 'W4-minimize': {
      // As a TF.js user trains: variables, an optimizer, a loss function.
      // minimize disposes what the loss makes; the inputs are the step's.
      const vars = mlpWeights().flatMap(({ w, b, shape }) => [gpu.variable(gpu.tensor(w, shape)), gpu.variable(gpu.tensor(b))]);
      const optimizer = train.sgd(MLP.lr);
      const x = seeded(MLP.batch * MLP.sizes[0], 4);
      const y = oneHot(MLP.batch, 10, 5);
      return {
        step: async () => {
          const input = gpu.tensor(x, [MLP.batch, MLP.sizes[0]]);
          const labels = gpu.tensor(y, [MLP.batch, 10]);
          const cost = optimizer.minimize(() => {
            let h = input;
            for (let i = 0; i < 3; i++) {
              const z = h.matmul(vars[2 * i]).add(vars[2 * i + 1]);
              h = i < 2 ? z.relu() : z;
            }
            return labels.mul(h.logSoftmax(-1)).sum().neg().div(MLP.batch);
          }, true, vars);
          const values = await cost.data();
          for (const t of [cost, input, labels]) t.dispose();
          return values;
        },
      };
    }
    case 'W5': {
      const data = seeded(1024 * 4096, 6);
      return { step: () => read((k) => k(k(gpu.tensor(data, [1024, 4096])).sum(-1))) };
    }
    case 'W6': {
      const data = seeded(16, 7);
      return { step: () => read((k) => chain(k, k(gpu.tensor(data)), SMALL)) };
    }
    case 'W7': {
      const data = seeded(1024 * 1024, 8);
      return { step: () => read((k) => k(k(gpu.tensor(data, [1024, 1024])).softmax(-1))) };
    }
    case 'W8': {
      // The model of the page test and the training script, as written there (no tidy).
      const model = new DigitModel({ tidy, train }, gpu, { lr: DIGITS.lr });
      for (const [name, { values, shape }] of Object.entries(digitWeights())) {
        const value = gpu.tensor(values, shape);
        model.p[name].assign(value);
        value.dispose();
      }
      const { x, y } = digitBatch();
      return {
        step: async () => {
          const cost = model.step(x, y, DIGITS.batch);
          try { return await cost.data(); } finally { cost.dispose(); }
        },
      };
    }
    case 'W9': {
      // The model of the demo and the page test, as written there (no tidy).
      const model = new CharModel({ tidy, train }, gpu, { vocab: CHAR.vocab, width: CHAR.width, heads: CHAR.heads, context: CHAR.t, lr: CHAR.lr });
      for (const [name, { values, shape }] of Object.entries(charWeights())) {
        const value = gpu.tensor(values, shape);
        model.p[name].assign(value);
        value.dispose();
      }
      const { x, y } = charBatch();
      return {
        step: async () => {
          const cost = model.step(x, y, CHAR.batch);
          try { return await cost.data(); } finally { cost.dispose(); }
        },
      };
    }
    default: throw new Error(`unknown workload ${id}`);
  }
}

// ---------------------------------------------------------------- TF.js
export function tfjsWorkload(tf, id) {
  const chain = (x, ops) => ops.reduce((y, [op, arg]) => (arg === undefined ? tf[op](y) : tf[op](y, arg === 'x' ? x : arg)), x);
  switch (id) {
    case 'W1': {
      const data = seeded(W1_N, 1);
      return { step: async () => { const y = tf.tidy(() => chain(tf.tensor(data), CHAIN)); const v = await y.data(); y.dispose(); return v; } };
    }
    case 'W2-256': case 'W2-512': case 'W2-1024': {
      const n = Number(id.slice(3));
      const a = seeded(n * n, 2);
      const b = tf.tensor(seeded(n * n, 3), [n, n]);
      return { step: async () => { const y = tf.tidy(() => tf.matMul(tf.tensor(a, [n, n]), b)); const v = await y.data(); y.dispose(); return v; } };
    }
    case 'W3': {
      const layers = mlpWeights().map(({ w, b, shape }) => ({ w: tf.tensor(w, shape), b: tf.tensor(b) }));
      const x = seeded(MLP.batch * MLP.sizes[0], 4);
      return {
        step: async () => {
          const y = tf.tidy(() => layers.reduce((h, { w, b }, i) => {
            const z = tf.add(tf.matMul(h, w), b);
            return i < 2 ? tf.relu(z) : tf.softmax(z);
          }, tf.tensor(x, [MLP.batch, MLP.sizes[0]])));
          const v = await y.data();
          y.dispose();
          return v;
        },
      };
    }
    case 'W4': case 'W4-minimize': {
      const layers = mlpWeights().map(({ w, b, shape }) => ({ w: tf.variable(tf.tensor(w, shape)), b: tf.variable(tf.tensor(b)) }));
      const x = seeded(MLP.batch * MLP.sizes[0], 4);
      const y = oneHot(MLP.batch, 10, 5);
      const optimizer = tf.train.sgd(MLP.lr);
      return {
        step: async () => {
          const input = tf.tensor(x, [MLP.batch, MLP.sizes[0]]);
          const labels = tf.tensor(y, [MLP.batch, 10]);
          const loss = optimizer.minimize(() => {
            const logits = layers.reduce((h, { w, b }, i) => {
              const z = tf.add(tf.matMul(h, w), b);
              return i < 2 ? tf.relu(z) : z;
            }, input);
            return tf.div(tf.neg(tf.sum(tf.mul(labels, tf.logSoftmax(logits)))), MLP.batch);
          }, true);
          const v = await loss.data();
          tf.dispose([input, labels, loss]);
          return v;
        },
      };
    }
    case 'W5': {
      const data = seeded(1024 * 4096, 6);
      return { step: async () => { const y = tf.tidy(() => tf.sum(tf.tensor(data, [1024, 4096]), -1)); const v = await y.data(); y.dispose(); return v; } };
    }
    case 'W6': {
      const data = seeded(16, 7);
      return { step: async () => { const y = tf.tidy(() => chain(tf.tensor(data), SMALL)); const v = await y.data(); y.dispose(); return v; } };
    }
    case 'W7': {
      const data = seeded(1024 * 1024, 8);
      return { step: async () => { const y = tf.tidy(() => tf.softmax(tf.tensor(data, [1024, 1024]), -1)); const v = await y.data(); y.dispose(); return v; } };
    }
    case 'W8': {
      // The same net as TF.js's tutorial users write it: tf.fused.conv2d
      // with its bias and relu, tf.maxPool, tf.oneHot labels,
      // optimizer.minimize.
      const { batch } = DIGITS;
      const p = Object.fromEntries(Object.entries(digitWeights()).map(([n, { values, shape }]) => [n, tf.variable(tf.tensor(values, shape))]));
      const optimizer = tf.train.adam(DIGITS.lr);
      const { x, y } = digitBatch();
      const layer = (h, filter, bias) => tf.maxPool(
        tf.fused.conv2d({ x: h, filter, strides: 1, pad: 'valid', bias, activation: 'relu' }), 2, 2, 'valid');
      return {
        step: async () => {
          const images = tf.tensor(x, [batch, 28, 28, 1]);
          const labels = tf.tensor(y, [batch], 'int32');
          const cost = optimizer.minimize(() => {
            const h = layer(layer(images, p.conv1, p.bias1), p.conv2, p.bias2);
            const logits = tf.add(tf.matMul(tf.reshape(h, [batch, 256]), p.dense), p.bias3);
            return tf.logSoftmax(logits, -1).mul(tf.oneHot(labels, 10, 1, 0, 'float32')).sum(-1).mean().neg();
          }, true);
          const v = await cost.data();
          tf.dispose([images, labels, cost]);
          return v;
        },
      };
    }
    case 'W9': {
      // The same net as TF.js's users write it: tf.gather for the
      // embeddings, tf.moments in the layer norms, tf.linalg.bandPart for
      // the causal mask, tf.oneHot targets, optimizer.minimize. TF.js has
      // no gelu op: it is written out, as www/charlm.js's gelu computes it.
      // Weights multiply 2-D rows, as tf.layers.dense does: TF.js's
      // gradient of a batch-broadcast matMul has the batch's shape and is
      // refused.
      const { batch, t, width: c, heads, vocab } = CHAR;
      const d = c / heads;
      const p = Object.fromEntries(Object.entries(charWeights()).map(([n, { values, shape }]) => [n, tf.variable(tf.tensor(values, shape))]));
      const causal = tf.tidy(() => tf.linalg.bandPart(tf.ones([t, t]), -1, 0).sub(1).mul(1e9));
      const optimizer = tf.train.adam(CHAR.lr);
      const { x, y } = charBatch();
      const layerNorm = (h, g, b) => {
        const { mean, variance } = tf.moments(h, -1, true);
        return h.sub(mean).mul(variance.add(1e-5).rsqrt()).mul(g).add(b);
      };
      const gelu = (h) => h.mul(0.5).mul(tf.tanh(h.add(h.pow(3).mul(0.044715)).mul(0.7978845608)).add(1));
      const split = (h) => h.reshape([batch, t, heads, d]).transpose([0, 2, 1, 3]);
      const dense = (h, w) => tf.matMul(h.reshape([batch * t, -1]), w).reshape([batch, t, w.shape[1]]);
      return {
        step: async () => {
          const input = tf.tensor(x, [batch, t], 'int32');
          const targets = tf.tensor(y, [batch, t], 'int32');
          const cost = optimizer.minimize(() => {
            let h = tf.gather(p.tok, input).add(p.pos);
            const a = layerNorm(h, p.ln1g, p.ln1b);
            const [q, k, v] = [p.wq, p.wk, p.wv].map((w) => split(dense(a, w)));
            const weights = tf.softmax(tf.matMul(q, k, false, true).mul(1 / Math.sqrt(d)).add(causal), -1);
            const mixed = tf.matMul(weights, v).transpose([0, 2, 1, 3]).reshape([batch, t, c]);
            h = h.add(dense(mixed, p.wo));
            h = h.add(dense(gelu(dense(layerNorm(h, p.ln2g, p.ln2b), p.w1).add(p.b1)), p.w2).add(p.b2));
            const logits = dense(layerNorm(h, p.lnfg, p.lnfb), p.head);
            return tf.logSoftmax(logits, -1).mul(tf.oneHot(targets, vocab, 1, 0, 'float32')).sum(-1).mean().neg();
          }, true);
          const v = await cost.data();
          tf.dispose([input, targets, cost]);
          return v;
        },
      };
    }
    default: throw new Error(`unknown workload ${id}`);
  }
}

// ---------------------------------------------------------------- ONNX Runtime Web
/** The ONNX graph of a workload, or null where ONNX Runtime has no equivalent run. */
export function onnxGraph(id) {
  switch (id) {
    case 'W1': {
      const nodes = [];
      const initializers = [];
      let prev = 'x';
      CHAIN.forEach(([op, arg], i) => {
        const out = i === CHAIN.length - 1 ? 'y' : `t${i}`;
        const onnxOp = { mul: 'Mul', add: 'Add', sub: 'Sub', exp: 'Exp', tanh: 'Tanh', sigmoid: 'Sigmoid' }[op];
        if (arg === undefined) nodes.push([onnxOp, [prev], [out]]);
        else if (arg === 'x') nodes.push([onnxOp, [prev, 'x'], [out]]);
        else { initializers.push([`c${i}`, [], [arg]]); nodes.push([onnxOp, [prev, `c${i}`], [out]]); }
        prev = out;
      });
      return { graph: { inputs: [['x', [W1_N]]], outputs: [['y', [W1_N]]], initializers, nodes }, feeds: { x: [seeded(W1_N, 1), [W1_N]] } };
    }
    case 'W2-256': case 'W2-512': case 'W2-1024': {
      const n = Number(id.slice(3));
      return {
        graph: { inputs: [['a', [n, n]]], outputs: [['y', [n, n]]], initializers: [['b', [n, n], seeded(n * n, 3)]], nodes: [['MatMul', ['a', 'b'], ['y']]] },
        feeds: { a: [seeded(n * n, 2), [n, n]] },
      };
    }
    case 'W3': {
      const initializers = [];
      const nodes = [];
      let h = 'x';
      mlpWeights().forEach(({ w, b, shape }, i) => {
        initializers.push([`w${i}`, shape, w], [`b${i}`, [shape[1]], b]);
        nodes.push(['MatMul', [h, `w${i}`], [`m${i}`]], ['Add', [`m${i}`, `b${i}`], [`z${i}`]]);
        h = `z${i}`;
        if (i < 2) { nodes.push(['Relu', [h], [`h${i}`]]); h = `h${i}`; }
      });
      nodes.push(['Softmax', [h], ['y'], { axis: -1 }]);
      return {
        graph: { inputs: [['x', [MLP.batch, MLP.sizes[0]]]], outputs: [['y', [MLP.batch, 10]]], initializers, nodes },
        feeds: { x: [seeded(MLP.batch * MLP.sizes[0], 4), [MLP.batch, MLP.sizes[0]]] },
      };
    }
    case 'W5':
      return {
        graph: { inputs: [['x', [1024, 4096]]], outputs: [['y', [1024]]], initializers: [['axes', [1], [-1], 7]], nodes: [['ReduceSum', ['x', 'axes'], ['y'], { keepdims: 0 }]] },
        feeds: { x: [seeded(1024 * 4096, 6), [1024, 4096]] },
      };
    case 'W7':
      return {
        graph: { inputs: [['x', [1024, 1024]]], outputs: [['y', [1024, 1024]]], nodes: [['Softmax', ['x'], ['y'], { axis: -1 }]] },
        feeds: { x: [seeded(1024 * 1024, 8), [1024, 1024]] },
      };
    default:
      return null; // W4 (training) and W6 (1000 tiny ops): no ONNX Runtime equivalent
  }
}

export async function ortWorkload(ort, id) {
  const spec = onnxGraph(id);
  if (!spec) return null;
  const session = await ort.InferenceSession.create(onnxModel(spec.graph), { executionProviders: ['webgpu'] });
  const feeds = Object.fromEntries(Object.entries(spec.feeds).map(([k, [data, dims]]) => [k, new ort.Tensor('float32', data, dims)]));
  return { step: async () => (await session.run(feeds)).y.data };
}
