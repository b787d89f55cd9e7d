// The model the demo trains: an MLP on webfusion, written as a TF.js user
// writes one (variables, an optimizer, a loss function; no tidy), plus what
// the page needs around it: accuracy, the probabilities over a grid for the
// heat map, and reading and restoring the weights.

/** The grid the decision boundary is drawn from: GRID x GRID points. */
export const GRID = 128;

export class Trainer {
  /**
   * A trainer on a new device (`captureStacks` on: a failure names the line
   * of this file that registered its op). `weights`, when given, are the
   * values to start from (after a lost device).
   */
  static async create(wf, data, config, weights = null) {
    const gpu = await wf.Device.request({ debug: { captureStacks: true } });
    return new Trainer(wf, gpu, data, config, weights);
  }

  constructor(wf, gpu, data, config, weights) {
    this.wf = wf;
    this.gpu = gpu;
    this.data = data;
    this.config = config;
    const { n, classes } = data;
    this.x = gpu.tensor(data.points, [n, 2]);
    const oneHot = new Float32Array(n * classes);
    data.labels.forEach((label, i) => { oneHot[i * classes + label] = 1; });
    this.y = gpu.tensor(oneHot, [n, classes]);
    const grid = new Float32Array(GRID * GRID * 2);
    for (let r = 0; r < GRID; r += 1) {
      for (let c = 0; c < GRID; c += 1) {
        grid[2 * (r * GRID + c)] = (c / (GRID - 1)) * 2 - 1;
        grid[2 * (r * GRID + c) + 1] = 1 - (r / (GRID - 1)) * 2;
      }
    }
    this.grid = gpu.tensor(grid, [GRID * GRID, 2]);
    const sizes = [2, ...Array(config.depth).fill(config.width), classes];
    this.vars = [];
    for (let i = 0; i + 1 < sizes.length; i += 1) {
      const [fanIn, fanOut] = [sizes[i], sizes[i + 1]];
      const w = weights ? gpu.tensor(weights[2 * i], [fanIn, fanOut])
        : gpu.randomNormal([fanIn, fanOut], { std: Math.sqrt(2 / (fanIn + fanOut)), seed: config.seed + i });
      const b = weights ? gpu.tensor(weights[2 * i + 1], [fanOut]) : gpu.zeros([fanOut]);
      this.vars.push(gpu.variable(w, { name: `w${i + 1}` }), gpu.variable(b, { name: `b${i + 1}` }));
      w.dispose();
      b.dispose();
    }
    this.optimizer = makeOptimizer(this.wf, config);
  }

  /** The logits for `x` ([n, 2]). */
  forward(x) {
    let h = x;
    const layers = this.vars.length / 2;
    for (let i = 0; i < layers; i += 1) {
      const z = h.matmul(this.vars[2 * i]).add(this.vars[2 * i + 1]);
      h = i + 1 < layers ? z.tanh() : z;
    }
    return h;
  }

  /** Mean softmax cross-entropy over the data. */
  loss({ hugeLayer = false } = {}) {
    const logits = this.forward(this.x);
    const cost = logits.logSoftmax(-1).mul(this.y).sum(-1).mean().neg();
    if (!hugeLayer) return cost;
    // A layer whose activations cannot exist: 65536 copies of the first
    // hidden layer, stored for a matmul (past every buffer limit). Its
    // term is times 0: only its failure counts.
    const h = this.x.matmul(this.vars[0]).add(this.vars[1]).tanh();
    const wide = h.reshape([1, h.size]).broadcastTo([1 << 16, h.size]).exp();
    const huge = wide.matmul(this.gpu.ones([h.size, 1])).mean();
    return cost.add(huge.mul(0));
  }

  /** One training step; its cost (which fails with the step). */
  step(options) {
    return this.optimizer.minimize(() => this.loss(options), true, this.vars);
  }

  /**
   * The cost at the current weights, without a step. Under `tidy`, as the
   * reads below: what the forward pass makes goes with it (minimize does
   * the same for a step).
   */
  cost() {
    return this.wf.tidy(() => this.loss());
  }

  /** The fraction of the points classified right. */
  async accuracy() {
    const predicted = this.wf.tidy(() => this.forward(this.x).argMax(-1));
    const values = await predicted.data();
    predicted.dispose();
    let right = 0;
    values.forEach((p, i) => { if (p === this.data.labels[i]) right += 1; });
    return right / this.data.n;
  }

  /** Each grid point's class probabilities ([GRID * GRID, classes]). */
  async probabilities() {
    const p = this.wf.tidy(() => this.forward(this.grid).softmax(-1));
    try { return await p.data(); } finally { p.dispose(); }
  }

  /** The variables' values, read (Float32Arrays, in order). */
  async readWeights() {
    return Promise.all(this.vars.map((v) => v.data()));
  }

  /** The ops a fault can break, by where they run in a step. */
  faultTargets() {
    const matmuls = this.vars.length / 2;
    return {
      'forward: first matmul': { op: 'matmul', nth: 1 },
      'forward: first tanh': { op: 'tanh', nth: 1 },
      'backward: first matmul': { op: 'matmul', nth: matmuls + 1 },
    };
  }

  setLearningRate(lr) { this.optimizer.learningRate = lr; }

  /**
   * Puts `weights` (as `readWeights` gives them) back into the variables,
   * and starts the optimizer afresh: its state was of other weights.
   */
  restore(weights) {
    this.vars.forEach((v, i) => {
      const t = this.gpu.tensor(weights[i], v.shape);
      v.assign(t);
      t.dispose();
    });
    const lr = this.optimizer.learningRate;
    this.optimizer.dispose();
    this.optimizer = makeOptimizer(this.wf, { ...this.config, lr });
  }

  /** Frees the tensors and destroys the device: `create` requested it for this trainer alone. */
  dispose() {
    for (const t of [this.x, this.y, this.grid, ...this.vars]) t.dispose();
    this.optimizer.dispose();
    this.gpu.destroy();
  }
}

function makeOptimizer({ train }, { optimizer, lr }) {
  switch (optimizer) {
    case 'sgd': return train.sgd(lr);
    case 'momentum': return train.momentum(lr, 0.9);
    default: return train.adam(lr);
  }
}
