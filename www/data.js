// The 2-D classification problems the demo trains on, generated in the
// page from a seed: the same seed gives the same points.

/** A seeded generator of uniform numbers in [0, 1) (mulberry32). */
export function seeded(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A normal sample from a uniform generator (Box-Muller). */
const normal = (rand) => Math.sqrt(-2 * Math.log(1 - rand())) * Math.cos(2 * Math.PI * rand());

/**
 * `{ points: Float32Array (n x 2, in [-1, 1]), labels: Int32Array, classes }`
 * for `kind` ('spiral', 'moons', 'circles', 'xor'), `n` points in all.
 * `arms` is the spiral's number of classes; `noise` the spread.
 */
export function dataset({ kind, n = 300, arms = 3, noise = 0.1, seed = 1 }) {
  const rand = seeded(seed);
  const points = new Float32Array(2 * n);
  const labels = new Int32Array(n);
  const put = (i, x, y, label) => {
    points[2 * i] = x + noise * normal(rand);
    points[2 * i + 1] = y + noise * normal(rand);
    labels[i] = label;
  };
  let classes = 2;
  for (let i = 0; i < n; i += 1) {
    switch (kind) {
      case 'spiral': {
        classes = arms;
        const arm = i % arms;
        const r = (Math.floor(i / arms) + 1) / Math.ceil(n / arms);
        const t = (arm * 2 * Math.PI) / arms + 3.5 * r;
        put(i, 0.9 * r * Math.cos(t), 0.9 * r * Math.sin(t), arm);
        break;
      }
      case 'moons': {
        const upper = i % 2 === 0;
        const t = Math.PI * rand();
        put(i, upper ? Math.cos(t) * 0.6 - 0.25 : 0.35 - Math.cos(t) * 0.6, upper ? Math.sin(t) * 0.6 - 0.15 : 0.15 - Math.sin(t) * 0.6, upper ? 0 : 1);
        break;
      }
      case 'circles': {
        const inner = i % 2 === 0;
        const t = 2 * Math.PI * rand();
        const r = inner ? 0.35 : 0.8;
        put(i, r * Math.cos(t), r * Math.sin(t), inner ? 0 : 1);
        break;
      }
      case 'xor': {
        const x = rand() * 2 - 1;
        const y = rand() * 2 - 1;
        put(i, x * 0.9, y * 0.9, (x > 0) !== (y > 0) ? 1 : 0);
        break;
      }
      default:
        throw new RangeError(`dataset: no problem is named '${kind}'`);
    }
  }
  return { points, labels, classes, n };
}
