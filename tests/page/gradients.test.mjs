// Gradients from JS, TF.js's way: grads(f)(xs, dy?) and
// valueAndGrads(f)(xs, dy?), with what f throws thrown as is.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sharedPage } from './shared-page.mjs';

const { run } = sharedPage();

test('grads and valueAndGrads give the gradients of f, and bad calls throw naming what was wrong', async () => {
  const r = await run(async ({ Device, grads, valueAndGrads }) => {
    const gpu = await Device.request();
    const x = gpu.tensor([1, 2, 3]);
    const w = gpu.tensor([0.5, -1, 2]);
    // f = sum((x w)^2): d/dx = 2 x w^2, d/dw = 2 x^2 w.
    const [gx, gw] = grads((x, w) => x.mul(w).square().sum())([x, w]);
    const { value, grads: [ge] } = valueAndGrads((x) => x.exp().sum())([x]);
    const [gdy] = grads((x) => x.mul(3))([x], gpu.tensor([1, 0, -1]));
    const error = (f) => { try { f(); return null; } catch (e) { return `${e.name}: ${e.message}`; } };
    return {
      gx: Array.from(await gx.data()),
      gw: Array.from(await gw.data()),
      value: (await value.data())[0],
      ge: Array.from(await ge.data()),
      gdy: Array.from(await gdy.data()),
      thrown: error(() => grads(() => { throw new RangeError('mine'); })([x])),
      notTensor: error(() => grads(() => 3)([x])),
      notScalar: error(() => grads((x) => x.exp())([x])),
      notFunction: error(() => grads(5)),
      noXs: error(() => grads((x) => x)([])),
    };
  });
  assert.deepEqual(r.gx, [0.5, 4, 24]);
  assert.deepEqual(r.gw, [1, -8, 36]);
  assert.ok(Math.abs(r.value - (Math.E + Math.E ** 2 + Math.E ** 3)) < 1e-3);
  r.ge.forEach((v, i) => assert.ok(Math.abs(v - Math.E ** (i + 1)) < 1e-4, `${r.ge}`));
  assert.deepEqual(r.gdy, [3, 0, -3]);
  assert.equal(r.thrown, 'RangeError: mine', 'what f threw, as is');
  assert.match(r.notTensor, /^TypeError: grads: expected a webfusion Tensor returned by f, got 3/);
  assert.match(r.notScalar, /^Error: grads: f must return a scalar without dy/);
  assert.match(r.notFunction, /^TypeError: grads: f must be a function, got 5/);
  assert.match(r.noXs, /^TypeError: grads: xs must hold at least one tensor/);
});

test('a gradient step in a loop without tidy keeps memory, failures and tensors held flat', async () => {
  const r = await run(async ({ Device, valueAndGrads }) => {
    const gpu = await Device.request();
    const x = gpu.randomUniform([16, 4], { min: -1, max: 1, seed: 1 });
    const y = gpu.randomUniform([16, 1], { min: -1, max: 1, seed: 2 });
    let w = gpu.randomUniform([4, 1], { min: -0.5, max: 0.5, seed: 3 });
    const step = valueAndGrads((w) => x.matmul(w).sub(y).square().mean());
    const losses = [];
    let baseline = null;
    const drift = [];
    for (let i = 0; i < 200; i += 1) {
      const { value, grads: [g] } = step([w]);
      losses.push((await value.data())[0]);
      const scaled = g.mul(0.1);
      const next = w.sub(scaled);
      for (const t of [value, g, scaled, w]) t.dispose();
      w = next;
      await w.data();
      const s = gpu.stats();
      const now = [s.bytesInUse, s.failuresHeld, s.tensorsHeld];
      if (i === 20) baseline = now;
      else if (i > 20 && now.join() !== baseline.join()) drift.push({ i, now });
    }
    return { first: losses[0], last: losses[losses.length - 1], drift: drift.slice(0, 3), baseline };
  });
  assert.ok(r.last < r.first * 0.9, `the loss falls: ${r.first} -> ${r.last}`);
  assert.deepEqual(r.drift, [], `flat at ${r.baseline}`);
  assert.equal(r.baseline[1], 0, 'no failure held');
  assert.equal(r.baseline[2], 3, 'x, y and w: what f made was disposed');
});

test('a minimize or variableGrads that refuses what f returned disposes it, and names the call made', async () => {
  // Found by outside testing: a refused f's value was kept, out of the
  // caller's reach (one tensor held per call), and minimize's refusal
  // named variableGrads.
  const r = await run(async ({ Device, train, variableGrads }) => {
    const gpu = await Device.request();
    const x = gpu.tensor([[1, 2], [3, 4]]);
    const v = gpu.variable(gpu.ones([2, 2]), { name: 'v' });
    const sgd = train.sgd(0.1);
    const held = () => gpu.stats().tensorsHeld;
    const before = held();
    const refusals = new Set();
    const refused = (f) => { try { f(); } catch (e) { refusals.add(String(e).split('\n')[0]); } };
    for (let i = 0; i < 10; i += 1) {
      refused(() => sgd.minimize(() => v.mul(x), true));
      refused(() => variableGrads(() => x.mul(2).sum()));
    }
    const after = held();
    // f returning a tensor it did not make: the caller's, still readable.
    const s = gpu.tensor(3);
    refused(() => sgd.minimize(() => s));
    return { before, after, refusals: [...refusals], s: Array.from(await s.data()), v: Array.from(await v.data()) };
  });
  assert.equal(r.after, r.before, `tensors held: ${r.before} -> ${r.after}`);
  assert.equal(r.refusals.length, 3, r.refusals.join('\n'));
  assert.match(r.refusals[0], /^Error: minimize: f must return a scalar without dy, it returned shape \[2, 2\]/);
  assert.match(r.refusals[1], /^Error: variableGrads: the value f returned does not depend on any of the variables/);
  assert.match(r.refusals[2], /^Error: minimize: the value f returned does not depend on any of the variables/);
  assert.deepEqual(r.s, [3], 'the tensor f returned but did not make still reads');
  assert.deepEqual(r.v, [1, 1, 1, 1], 'no step ran');
});

test('grad and grads dispose the value f made, as TF.js does, and keep a tensor f was given', async () => {
  // Found by outside testing: grads(f) kept f's value, which the caller
  // never receives and so could not dispose: 200 calls held 115 tensors.
  const r = await run(async ({ Device, grad, grads }) => {
    const gpu = await Device.request();
    const x = gpu.tensor([1, 2, 3]);
    const held = () => gpu.stats().tensorsHeld;
    const before = held();
    for (let i = 0; i < 50; i += 1) {
      grad((x) => x.square().sum())(x).dispose();
      for (const g of grads((a, b) => a.mul(b).sum())([x, x])) g.dispose();
    }
    const after = held();
    // f returning the tensor it was given: that tensor is the caller's.
    const identity = grad((x) => x)(x, gpu.tensor([1, 1, 1]));
    const identityGrad = Array.from(await identity.data());
    return { before, after, identityGrad, x: Array.from(await x.data()) };
  });
  assert.equal(r.after, r.before, `tensors held: ${r.before} -> ${r.after}`);
  assert.deepEqual(r.identityGrad, [1, 1, 1]);
  assert.deepEqual(r.x, [1, 2, 3], 'the tensor f was given still reads');
});
