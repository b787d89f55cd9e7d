// A character-level transformer on webfusion, written as a TF.js user writes
// one (variables, an optimizer, a loss function; no tidy): one pre-layer-norm
// block, token and position embeddings (`gather`), causal multi-head
// attention (`bandPart` for the mask, matmuls reading transposed operands in
// place), a GELU MLP, softmax cross-entropy on `oneHot` targets, Adam; and
// sampling with `multinomial` (under `tidy`, as TF.js users sample). Plus the text helpers around it: the
// vocabulary, batches, and the bigram entropy a model that ignores context
// cannot beat.

export { seeded as random } from './data.js';

/** The characters of `text`, sorted, and each one's id. */
export function vocabulary(text) {
  const chars = [...new Set(text)].sort();
  const ids = new Map(chars.map((c, i) => [c, i]));
  return { chars, ids, encode: (s) => Int32Array.from(s, (c) => ids.get(c)) };
}

/**
 * The entropy (nats per character) of the next character given the one
 * before, counted on `ids`: the loss of the best model that sees one
 * character of context.
 */
export function bigramEntropy(ids, size) {
  const pairs = new Float64Array(size * size);
  const firsts = new Float64Array(size);
  for (let i = 0; i + 1 < ids.length; i += 1) {
    pairs[ids[i] * size + ids[i + 1]] += 1;
    firsts[ids[i]] += 1;
  }
  const total = ids.length - 1;
  let h = 0;
  for (let a = 0; a < size; a += 1) {
    for (let b = 0; b < size; b += 1) {
      const n = pairs[a * size + b];
      if (n > 0) h -= (n / total) * Math.log(n / firsts[a]);
    }
  }
  return h;
}

/** `batch` windows of `context + 1` characters of `ids` at random places: inputs and the targets one later. */
export function windows(ids, batch, context, next) {
  const x = new Int32Array(batch * context);
  const y = new Int32Array(batch * context);
  for (let b = 0; b < batch; b += 1) {
    const at = Math.floor(next() * (ids.length - context - 1));
    x.set(ids.subarray(at, at + context), b * context);
    y.set(ids.subarray(at + 1, at + context + 1), b * context);
  }
  return { x, y };
}

export class CharModel {
  /**
   * A model of `vocab` characters on `gpu`: `width` channels in `heads`
   * heads over `context` characters, initialised from `seed`, trained by
   * Adam at `lr`.
   */
  constructor(wf, gpu, { vocab, width = 64, heads = 4, context = 64, seed = 0, lr = 0.001 }) {
    this.wf = wf;
    this.gpu = gpu;
    Object.assign(this, { vocab, width, heads, context });
    let k = seed;
    const normal = (shape, std = 0.02) => gpu.randomNormal(shape, { std, seed: (k += 1) });
    const param = (name, value) => {
      const v = gpu.variable(value, { name });
      value.dispose();
      return v;
    };
    const c = width;
    this.p = {
      tok: param('tok', normal([vocab, c])),
      pos: param('pos', normal([context, c])),
      ln1g: param('ln1g', gpu.ones([c])), ln1b: param('ln1b', gpu.zeros([c])),
      wq: param('wq', normal([c, c])), wk: param('wk', normal([c, c])),
      wv: param('wv', normal([c, c])), wo: param('wo', normal([c, c])),
      ln2g: param('ln2g', gpu.ones([c])), ln2b: param('ln2b', gpu.zeros([c])),
      w1: param('w1', normal([c, 4 * c])), b1: param('b1', gpu.zeros([4 * c])),
      w2: param('w2', normal([4 * c, c])), b2: param('b2', gpu.zeros([c])),
      lnfg: param('lnfg', gpu.ones([c])), lnfb: param('lnfb', gpu.zeros([c])),
      head: param('head', normal([c, vocab])),
    };
    this.vars = Object.values(this.p);
    // 0 on and below the diagonal, -1e9 above it: what a causal softmax adds.
    this.causal = gpu.ones([context, context]).bandPart(-1, 0).sub(1).mul(1e9);
    this.optimizer = wf.train.adam(lr);
  }

  static layerNorm(x, g, b) {
    const mean = x.mean(-1, true);
    const d = x.sub(mean);
    return d.mul(d.square().mean(-1, true).add(1e-5).rsqrt()).mul(g).add(b);
  }

  /** The token and position embeddings of int32 characters `x` ([batch, t], t <= context). */
  embed(x) {
    const { p, width } = this;
    return p.tok.gather(x).add(p.pos.slice([0, 0], [x.shape[1], width]));
  }

  /**
   * Causal multi-head attention over `a` ([batch, t, width]): `weights`
   * ([batch, heads, t, t]; row i, how much character i takes from each one
   * up to it) and what they `mixed` ([batch, t, width]).
   */
  attend(a) {
    const { p, heads, width } = this;
    const [batch, t] = a.shape;
    const d = width / heads;
    const split = (m) => m.reshape([batch, t, heads, d]).transpose([0, 2, 1, 3]);
    const [q, k, v] = [p.wq, p.wk, p.wv].map((w) => split(a.matmul(w)));
    const mask = this.causal.slice([0, 0], [t, t]);
    const weights = q.matmul(k, false, true).mul(1 / Math.sqrt(d)).add(mask).softmax(-1);
    const mixed = weights.matmul(v).transpose([0, 2, 1, 3]).reshape([batch, t, width]);
    return { weights, mixed };
  }

  /** The logits ([batch, t, vocab]) of int32 characters `x` ([batch, t], t <= context). */
  forward(x) {
    const { p } = this;
    let h = this.embed(x);
    const { mixed } = this.attend(CharModel.layerNorm(h, p.ln1g, p.ln1b));
    h = h.add(mixed.matmul(p.wo));
    const m = CharModel.layerNorm(h, p.ln2g, p.ln2b).matmul(p.w1).add(p.b1).gelu();
    h = h.add(m.matmul(p.w2).add(p.b2));
    return CharModel.layerNorm(h, p.lnfg, p.lnfb).matmul(p.head);
  }

  /** The attention weights ([batch, heads, t, t]) the block gives characters `x`. */
  attention(x) {
    const { p } = this;
    return this.wf.tidy(() => this.attend(CharModel.layerNorm(this.embed(x), p.ln1g, p.ln1b)).weights);
  }

  /** Mean cross-entropy (nats) of the next characters `y` after `x`. */
  loss(x, y) {
    const targets = y.oneHot(this.vocab, 1, 0, 'float32');
    return this.forward(x).logSoftmax(-1).mul(targets).sum(-1).mean().neg();
  }

  /** One Adam step on a batch (`Int32Array`s of [batch, context]); its cost. */
  step(xs, ys, batch) {
    const shape = [batch, this.context];
    const x = this.gpu.tensor(xs, shape);
    const y = this.gpu.tensor(ys, shape);
    const cost = this.optimizer.minimize(() => this.loss(x, y), true, this.vars);
    x.dispose();
    y.dispose();
    return cost;
  }

  /** `n` characters (ids) drawn after `prompt` (ids), one `multinomial` each. */
  async sample(prompt, n, seed = 0) {
    const out = Array.from(prompt);
    for (let i = 0; i < n; i += 1) {
      const window = Int32Array.from(out.slice(-this.context));
      const x = this.gpu.tensor(window, [1, window.length]);
      const drawn = this.wf.tidy(() => {
        const logits = this.forward(x);
        const last = logits.slice([0, window.length - 1, 0], [1, 1, this.vocab]).reshape([1, this.vocab]);
        return last.multinomial(1, seed + i);
      });
      out.push((await drawn.data())[0]);
      x.dispose();
      drawn.dispose();
    }
    return out.slice(prompt.length);
  }

  /** Frees the weights, the mask and the optimizer's state. */
  dispose() {
    for (const t of [...this.vars, this.causal]) t.dispose();
    this.optimizer.dispose();
  }
}
