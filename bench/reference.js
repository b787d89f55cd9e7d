// W9's loss in float64, on the host: the number both libraries' first step
// is held to. Written plainly (loops over Float64Arrays), apart from either
// library, so a bug shared by the two GPU versions cannot hide in it.

/** `a` [n, k] times `b` [k, m], row-major. */
function matmul(a, b, n, k, m) {
  const out = new Float64Array(n * m);
  for (let i = 0; i < n; i += 1) {
    for (let j = 0; j < k; j += 1) {
      const x = a[i * k + j];
      for (let c = 0; c < m; c += 1) out[i * m + c] += x * b[j * m + c];
    }
  }
  return out;
}

function layerNorm(x, g, b, rows, c) {
  const out = new Float64Array(rows * c);
  for (let r = 0; r < rows; r += 1) {
    let mean = 0;
    for (let i = 0; i < c; i += 1) mean += x[r * c + i];
    mean /= c;
    let variance = 0;
    for (let i = 0; i < c; i += 1) variance += (x[r * c + i] - mean) ** 2;
    const scale = 1 / Math.sqrt(variance / c + 1e-5);
    for (let i = 0; i < c; i += 1) out[r * c + i] = (x[r * c + i] - mean) * scale * g[i] + b[i];
  }
  return out;
}

const gelu = (x) => 0.5 * x * (1 + Math.tanh(0.7978845608 * (x + 0.044715 * x * x * x)));

/**
 * The mean next-character cross-entropy of the one-block transformer of
 * www/charlm.js with weights `w` (Float32Arrays by name) on int32
 * characters `x` and targets `y` ([batch, t]).
 */
export function charLoss(w, x, y, { batch, t, width, heads, vocab }) {
  const rows = batch * t;
  const c = width;
  const d = c / heads;
  const h = new Float64Array(rows * c);
  for (let r = 0; r < rows; r += 1) {
    for (let i = 0; i < c; i += 1) h[r * c + i] = w.tok[x[r] * c + i] + w.pos[(r % t) * c + i];
  }
  const a = layerNorm(h, w.ln1g, w.ln1b, rows, c);
  const [q, k, v] = [w.wq, w.wk, w.wv].map((m) => matmul(a, m, rows, c, c));
  const mixed = new Float64Array(rows * c);
  const scores = new Float64Array(t);
  for (let b = 0; b < batch; b += 1) {
    for (let head = 0; head < heads; head += 1) {
      for (let i = 0; i < t; i += 1) {
        const qi = (b * t + i) * c + head * d;
        let top = -Infinity;
        for (let j = 0; j <= i; j += 1) {
          const kj = (b * t + j) * c + head * d;
          let s = 0;
          for (let e = 0; e < d; e += 1) s += q[qi + e] * k[kj + e];
          scores[j] = s / Math.sqrt(d);
          top = Math.max(top, scores[j]);
        }
        let total = 0;
        for (let j = 0; j <= i; j += 1) total += (scores[j] = Math.exp(scores[j] - top));
        for (let j = 0; j <= i; j += 1) {
          const vj = (b * t + j) * c + head * d;
          for (let e = 0; e < d; e += 1) mixed[qi + e] += (scores[j] / total) * v[vj + e];
        }
      }
    }
  }
  const attended = matmul(mixed, w.wo, rows, c, c);
  for (let i = 0; i < h.length; i += 1) h[i] += attended[i];
  const hidden = matmul(layerNorm(h, w.ln2g, w.ln2b, rows, c), w.w1, rows, c, 4 * c);
  for (let i = 0; i < hidden.length; i += 1) hidden[i] = gelu(hidden[i] + w.b1[i % (4 * c)]);
  const out = matmul(hidden, w.w2, rows, 4 * c, c);
  for (let i = 0; i < h.length; i += 1) h[i] += out[i] + w.b2[i % c];
  const logits = matmul(layerNorm(h, w.lnfg, w.lnfb, rows, c), w.head, rows, c, vocab);
  let loss = 0;
  for (let r = 0; r < rows; r += 1) {
    let top = -Infinity;
    for (let i = 0; i < vocab; i += 1) top = Math.max(top, logits[r * vocab + i]);
    let total = 0;
    for (let i = 0; i < vocab; i += 1) total += Math.exp(logits[r * vocab + i] - top);
    loss -= logits[r * vocab + y[r]] - top - Math.log(total);
  }
  return loss / rows;
}

/** A valid, stride-1 conv2d of `x` [n, h, w, c] with `f` [k, k, c, o] plus `b`, then relu. */
function convRelu(x, [n, h, w, c], f, k, o, b) {
  const [oh, ow] = [h - k + 1, w - k + 1];
  const y = new Float64Array(n * oh * ow * o);
  for (let img = 0; img < n; img += 1) {
    for (let i = 0; i < oh; i += 1) {
      for (let j = 0; j < ow; j += 1) {
        const at = ((img * oh + i) * ow + j) * o;
        for (let co = 0; co < o; co += 1) y[at + co] = b[co];
        for (let p = 0; p < k; p += 1) {
          for (let q = 0; q < k; q += 1) {
            for (let ci = 0; ci < c; ci += 1) {
              const v = x[((img * h + i + p) * w + j + q) * c + ci];
              const from = ((p * k + q) * c + ci) * o;
              for (let co = 0; co < o; co += 1) y[at + co] += v * f[from + co];
            }
          }
        }
        for (let co = 0; co < o; co += 1) y[at + co] = Math.max(y[at + co], 0);
      }
    }
  }
  return [y, [n, oh, ow, o]];
}

/** A 2x2, stride-2 max pool of `x` [n, h, w, c]. */
function maxPool2([x, [n, h, w, c]]) {
  const [oh, ow] = [Math.floor(h / 2), Math.floor(w / 2)];
  const y = new Float64Array(n * oh * ow * c);
  for (let img = 0; img < n; img += 1) {
    for (let i = 0; i < oh; i += 1) {
      for (let j = 0; j < ow; j += 1) {
        for (let ch = 0; ch < c; ch += 1) {
          let m = -Infinity;
          for (let p = 0; p < 2; p += 1) {
            for (let q = 0; q < 2; q += 1) m = Math.max(m, x[((img * h + 2 * i + p) * w + 2 * j + q) * c + ch]);
          }
          y[((img * oh + i) * ow + j) * c + ch] = m;
        }
      }
    }
  }
  return [y, [n, oh, ow, c]];
}

/**
 * The mean cross-entropy of the digit recognizer of www/cnn.js with
 * weights `w` on images `x` ([batch, 28, 28, 1]) and int labels `y`.
 */
export function digitLoss(w, x, y, batch) {
  const [h1, s1] = maxPool2(convRelu(x, [batch, 28, 28, 1], w.conv1, 5, 8, w.bias1));
  const [h2] = maxPool2(convRelu(h1, s1, w.conv2, 5, 16, w.bias2));
  const logits = matmul(h2, w.dense, batch, 256, 10);
  let loss = 0;
  for (let r = 0; r < batch; r += 1) {
    const row = Array.from({ length: 10 }, (_, i) => logits[r * 10 + i] + w.bias3[i]);
    const top = Math.max(...row);
    const total = row.reduce((s, v) => s + Math.exp(v - top), 0);
    loss -= row[y[r]] - top - Math.log(total);
  }
  return loss / batch;
}
