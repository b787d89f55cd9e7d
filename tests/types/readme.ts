// Typed code a user writes, compiled with `tsc --strict` against the built
// package's declarations (tests/page/types.test.mjs). The README example,
// then the API's shapes, then calls that must not compile.
import init, { Device, ExecutionError, TensorError, grad, grads, tidy, train, valueAndGrads, variableGrads } from 'webfusion';
import type { DataType, NestedNumbers, Optimizer, Profile, Stats, Tensor, TypedValues, Variable } from 'webfusion';

await init();
const gpu = await Device.request();
const t = gpu.tensor([1, 2, 3]).add(gpu.tensor([10, 20, 30])).mul(2);
const shape: number[] = t.shape;
const values: TypedValues = await t.data();
const floats = (await t.data()) as Float32Array;

// Optional arguments are optional.
const m = gpu.tensor([[1, 2], [3, 4]]);
const reduced = m.sum().add(m.softmax()).squeeze().transpose();
const nested: NestedNumbers = await m.array();
const stats: Stats = gpu.stats();
const kernels: number = stats.kernelsLaunched + stats.expressionsHeld + stats.hostOps;
const kernelsOnly: Device = await Device.request({ hostMaxElements: 0, capacity: 64 });

// Dtypes, as TF.js names them.
const ints = gpu.tensor(new Int32Array([1, 2, 3]));
const dtype: DataType = ints.dtype;
const flags: Tensor = gpu.tensor([true, false]).logicalNot();
const asked: Tensor = gpu.tensor([1, 2], null, 'int32').cast('float32').add(gpu.zeros([2], 'int32'));
const index: Tensor = m.argMax(1).add(gpu.arange(0, 2, 1, 'int32'));
const rows: Tensor = m.gather(gpu.tensor(new Int32Array([1, 0])), 0, 0).add(index.oneHot(2, 1, 0, 'float32'));
const { values: best, indices: bestAt } = m.topk(1);
const drawn: Tensor = m.multinomial(3, 7).add(m.cumsum(1).argMin(1).expandDims(1));
console.log(rows.shape, best.shape, bestAt.dtype, drawn.shape);

// tidy returns what its function returns, typed.
const kept: { a: typeof t; n: number } = tidy(() => ({ a: t.exp(), n: 3 }));

// Gradients, TF.js's way.
const dx: Tensor[] = grads((a: Tensor, b: Tensor) => a.mul(b).sum())([t, t]);
const { value, grads: dxs } = valueAndGrads((a: Tensor) => a.square().sum())([t]);
console.log(dx, value.shape, dxs.length);

// Training: the README's example, then the rest of the API.
const x = gpu.tensor([[0, 0], [0, 1], [1, 0], [1, 1]]);
const y = gpu.tensor([[0], [1], [1], [0]]);
const w1 = gpu.variable(gpu.randomNormal([2, 8], { seed: 1 }));
const w2 = gpu.variable(gpu.randomNormal([8, 1], { seed: 2 }));
const optimizer = train.adam(0.05);
for (let i = 0; i < 300; i++) {
  const cost = optimizer.minimize(() => x.matmul(w1).tanh().matmul(w2).sigmoid().sub(y).square().mean(), true);
  if (i % 100 === 99) console.log(await cost.data());
  cost.dispose();
}
const named: Variable = gpu.variable(t, { name: 'bias', trainable: false });
named.assign(t.mul(2));
const vars: Variable[] = gpu.trainableVariables();
const sgd: Optimizer = train.sgd(0.1);
sgd.learningRate = 0.01;
const none: null = sgd.minimize(() => w1.square().sum());
const cost: Tensor = sgd.minimize(() => w1.square().sum(), { returnCost: true, varList: vars });
const { grads: byName } = variableGrads(() => w2.sum());
sgd.applyGradients(byName);
const g: Tensor = grad((a: Tensor) => a.exp().sum())(t);
console.log(named.name, none, cost, g, train.momentum(0.1, 0.9, true).name);

// What one step ran.
const profile: Profile = await gpu.profile(() => sgd.minimize(() => w1.square().sum(), true));
const wgsl: string[] = profile.kernels.flatMap((k) => k.wgsl);
const peak: number = profile.peakBytes + gpu.stats().peakBytesInUse;
console.log(wgsl.length, peak, profile.kernelNames);

// Errors are classes: instanceof narrows.
try {
  await gpu.zeros([2 ** 18, 2 ** 18]).add(1).data();
} catch (e) {
  if (e instanceof TensorError) {
    const op: string = e.root.op;
    const tensor: number = e.tensor;
    console.log(op, tensor, e.message);
  }
}

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
// @ts-expect-error: data() resolves to a typed array
const wrong: number[] = await t.data();
// @ts-expect-error: a dtype is one of TF.js's names
gpu.zeros([2], 'float64');
// @ts-expect-error: a root's kind is one of the known kinds
const kind: TensorError['root']['kind'] = 'meltdown';
// @ts-expect-error: only a variable has assign
t.assign(t);
// @ts-expect-error: minimize's f takes no arguments
train.sgd(0.1).minimize((a: Tensor) => a.sum());
console.log(wrong, kind);
