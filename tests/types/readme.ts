// Typed code a user writes, compiled with `tsc --strict` against the built
// package's declarations (tests/page/types.test.mjs). The README example,
// then the API's shapes, then calls that must not compile.
import init, { Device, grads, tidy, valueAndGrads } from 'webfusion';
import type { ExecutionError, NestedNumbers, Stats, Tensor, TensorError } from 'webfusion';

await init();
const gpu = await Device.request();
const t = gpu.tensor([1, 2, 3]).add(gpu.tensor([10, 20, 30])).mul(2);
const shape: number[] = t.shape;
const values: Float32Array = await t.data();

// Optional arguments are optional.
const m = gpu.tensor([[1, 2], [3, 4]]);
const reduced = m.sum().add(m.softmax()).squeeze().transpose();
const nested: NestedNumbers = await m.array();
const stats: Stats = gpu.stats();
const kernels: number = stats.kernelsLaunched + stats.expressionsHeld;

// tidy returns what its function returns, typed.
const kept: { a: typeof t; n: number } = tidy(() => ({ a: t.exp(), n: 3 }));

// Gradients, TF.js's way.
const dx: Tensor[] = grads((a: Tensor, b: Tensor) => a.mul(b).sum())([t, t]);
const { value, grads: dxs } = valueAndGrads((a: Tensor) => a.square().sum())([t]);
console.log(dx, value.shape, dxs.length);

// Errors carry typed fields.
try {
  await gpu.zeros([2 ** 18, 2 ** 18]).add(1).data();
} catch (e) {
  const error = e as TensorError;
  const first: string = error.root.kind;
  const depth: number = error.depth + error.failures.length;
  const site: string | null = error.registeredAt;
  console.log(first, depth, site, error.chain.map((hop) => hop.needed));
}
await gpu.sync().catch((e: ExecutionError) => e.failures.map((f) => f.root.op));

{
  using scoped = gpu.tensor([1]);
  scoped.shape;
}
const lost: string | null = gpu.lost;
console.log(shape, values, reduced, nested, kernels, kept, lost);

// Bad calls do not compile.
// @ts-expect-error: values are numbers
gpu.tensor('oops');
// @ts-expect-error: an operand is a Tensor or a number
t.add('oops');
// @ts-expect-error: a shape is an array of numbers
t.reshape('2x3');
// @ts-expect-error: data() resolves to a Float32Array
const wrong: number[] = await t.data();
// @ts-expect-error: a root's kind is one of the known kinds
const kind: TensorError['root']['kind'] = 'meltdown';
console.log(wrong, kind);
