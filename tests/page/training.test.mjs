// Training from JS, TF.js's way: variables, variableGrads, grad and
// valueAndGrad, train.sgd/momentum/adam with minimize and applyGradients,
// written as users write it (no tidy), and steps that fail whole.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sharedPage } from './shared-page.mjs';

const { run } = sharedPage();

test('variables, variableGrads, grad and valueAndGrad work as in TF.js, and bad calls throw naming what was wrong', async () => {
  const r = await run(async ({ Device, tidy, grad, valueAndGrad, variableGrads, train }) => {
    const gpu = await Device.request();
    const error = (f) => { try { f(); return null; } catch (e) { return `${e.name}: ${e.message}`; } };
    const init = gpu.tensor([1, 2]);
    const a = gpu.variable(init, { name: 'a' });
    const b = tidy(() => gpu.variable(gpu.tensor([3, 4]), { name: 'b', trainable: false }));
    init.dispose(); // a holds its own copy
    const { value, grads } = variableGrads(() => a.mul(b).sum());
    const g = grad((x) => x.square().sum())(gpu.tensor([1, -2]));
    const vg = valueAndGrad((x) => x.exp().sum())(gpu.tensor([0]));
    a.assign(gpu.tensor([5, 6]));
    const optimizer = train.sgd(0.1);
    optimizer.learningRate = 0.5;
    const lr = optimizer.learningRate;
    // Read back as set, though a step computes in float32 (outside testing
    // read 0.05000000074505806), and TF.js's setter method sets it too.
    optimizer.learningRate = 0.05;
    const lrBack = optimizer.learningRate;
    optimizer.setLearningRate(0.3);
    const lrSet = optimizer.learningRate;
    const badSetLr = [NaN, 1e40].map((v) => error(() => optimizer.setLearningRate(v)));
    const out = {
      a: Array.from(await a.data()),
      b: Array.from(await b.data()),
      names: [a.name, b.name, a.trainable, b.trainable],
      trainable: gpu.trainableVariables().map((v) => v.name),
      same: gpu.trainableVariables()[0] === a,
      value: (await value.data())[0],
      gradNames: Object.keys(grads),
      ga: Array.from(await grads.a.data()),
      g: Array.from(await g.data()),
      vg: [(await vg.value.data())[0], (await vg.grad.data())[0]],
      lr,
      lrBack,
      lrSet,
      badSetLr,
      plainAssign: error(() => gpu.tensor([1]).assign(gpu.tensor([2]))),
      wrongShape: error(() => a.assign(gpu.tensor([1, 2, 3]))),
      duplicate: error(() => gpu.variable(gpu.tensor([1]), { name: 'a' })),
      badOption: error(() => gpu.variable(gpu.tensor([1]), { trainble: true })),
      notFunction: error(() => optimizer.minimize(3)),
      badVarList: error(() => optimizer.minimize(() => a.sum(), true, [gpu.tensor([1])])),
      unknownName: error(() => optimizer.applyGradients({ nope: gpu.tensor([1]) })),
      badLr: error(() => train.sgd('fast')),
      badBeta: error(() => train.adam(0.1, 1.5)),
      badSet: error(() => { optimizer.learningRate = NaN; }),
      unconnected: error(() => variableGrads(() => gpu.tensor([1]).sum())),
    };
    optimizer.dispose();
    out.disposed = error(() => optimizer.minimize(() => a.sum()));
    b.dispose();
    out.afterDispose = gpu.trainableVariables().map((v) => v.name);
    a.dispose();
    return out;
  });
  assert.deepEqual(r.a, [5, 6]);
  assert.deepEqual(r.b, [3, 4], 'tidy leaves a variable alone');
  assert.deepEqual(r.names, ['a', 'b', true, false]);
  assert.deepEqual(r.trainable, ['a']);
  assert.ok(r.same, 'trainableVariables returns the very objects');
  assert.equal(r.value, 11);
  assert.deepEqual(r.gradNames, ['a'], 'only the trainable variable');
  assert.deepEqual(r.ga, [3, 4]);
  assert.deepEqual(r.g, [2, -4]);
  assert.deepEqual(r.vg, [1, 1]);
  assert.equal(r.lr, 0.5);
  assert.equal(r.lrBack, 0.05);
  assert.equal(r.lrSet, 0.3);
  assert.match(r.badSetLr[0], /^RangeError: setLearningRate: the learning rate must be a finite float32, got NaN/);
  assert.match(r.badSetLr[1], /^RangeError: setLearningRate: the learning rate must be a finite float32, got 1e\+40/);
  assert.match(r.plainAssign, /^TypeError: assign: tensor #\d+ is not a variable/);
  assert.match(r.wrongShape, /^RangeError: assign: variable 'a' has shape \[2\], the new value \[3\]/);
  assert.match(r.duplicate, /^Error: variable: device #\d+ already has a variable named 'a'/);
  assert.match(r.badOption, /^TypeError: variable: options has no option 'trainble'/);
  assert.match(r.notFunction, /^TypeError: minimize: f must be a function, got 3/);
  assert.match(r.badVarList, /^TypeError: minimize: varList\[0\] must be a variable/);
  assert.match(r.unknownName, /^Error: applyGradients: no variable is named 'nope'/);
  assert.match(r.badLr, /^TypeError: sgd: learningRate must be a number/);
  assert.match(r.badBeta, /^RangeError: adam: beta1 must be in \[0, 1\)/);
  assert.match(r.badSet, /^RangeError: learningRate: the learning rate must be a finite float32, got NaN/);
  assert.match(r.unconnected, /^Error: variableGrads: the value f returned does not depend on any of the variables/);
  assert.match(r.disposed, /^Error: minimize: the optimizer was disposed/);
  assert.deepEqual(r.afterDispose, ['a']);
});

// An MLP on XOR, written as a TF.js user writes it: no tidy.
const xorSetup = async ({ Device, train }, { optimizer, lr, seed }) => {
  const gpu = await Device.request();
  const x = gpu.tensor([[0, 0], [0, 1], [1, 0], [1, 1]]);
  const y = gpu.tensor([[1, 0], [0, 1], [0, 1], [1, 0]]);
  // Each variable holds a copy: the initial values can go at once.
  const variable = (initial, name) => { const v = gpu.variable(initial, { name }); initial.dispose(); return v; };
  const w1 = variable(gpu.randomNormal([2, 8], { std: 0.8, seed }), 'w1');
  const b1 = variable(gpu.zeros([8]), 'b1');
  const w2 = variable(gpu.randomNormal([8, 2], { std: 0.5, seed: seed + 1 }), 'w2');
  const b2 = variable(gpu.zeros([2]), 'b2');
  const vars = [w1, b1, w2, b2];
  const loss = () => {
    const hidden = x.matmul(w1).add(b1).tanh();
    const logits = hidden.matmul(w2).add(b2);
    return logits.logSoftmax(-1).mul(y).sum(-1).mean().neg();
  };
  const opt = optimizer === 'adam' ? train.adam(lr) : optimizer === 'momentum' ? train.momentum(lr, 0.9) : train.sgd(lr);
  const values = async () => Promise.all(vars.map(async (v) => Array.from(await v.data())));
  return { gpu, vars, loss, opt, values, x, y };
};

test('an MLP learns XOR with each optimizer, without tidy, with memory flat and the same kernels every step', async () => {
  const r = await run(async (wf, setup) => {
    const make = new Function(`return (${setup})`)();
    const out = {};
    for (const [optimizer, lr] of [['sgd', 0.5], ['momentum', 0.1], ['adam', 0.05]]) {
      const s = await make(wf, { optimizer, lr, seed: 3 });
      const costs = [];
      const kernels = [];
      let baseline = null;
      const drift = [];
      let before = s.gpu.stats().kernelsLaunched;
      for (let i = 0; i < 300; i += 1) {
        const cost = s.opt.minimize(s.loss, true);
        if (i % 10 === 9) {
          // The ten steps since the last read run now.
          costs.push((await cost.data())[0]);
          kernels.push(s.gpu.stats().kernelsLaunched - before);
          before = s.gpu.stats().kernelsLaunched;
          const st = s.gpu.stats();
          const now = [st.bytesInUse, st.failuresHeld, st.tensorsHeld];
          if (i === 49) baseline = now;
          else if (i > 49 && now.join() !== baseline.join()) drift.push({ i, now });
        }
        cost.dispose();
      }
      const st = s.gpu.stats();
      out[optimizer] = { first: costs[0], last: costs[costs.length - 1], kernels: kernels.slice(1), perStep: kernels[1] / 10, drift, baseline, pipelines: st.pipelinesCompiled };
      // Everything disposed, so no collection of this run's objects can
      // show in the next run's counters.
      for (const t of [...s.vars, s.x, s.y]) t.dispose();
      s.opt.dispose();
    }
    return out;
  }, xorSetup.toString());
  for (const [name, o] of Object.entries(r)) {
    assert.ok(o.last < 0.1, `${name}: XOR's cost ${o.first} -> ${o.last} after 300 steps`);
    assert.deepEqual(o.drift, [], `${name}: memory, failures and tensors flat at ${o.baseline}`);
    assert.equal(o.baseline[1], 0, `${name}: no failure held`);
    assert.ok(o.kernels.every((k) => k === o.kernels[0]), `${name}: kernels per step ${o.kernels}`);
  }
});

test('a failed step changes no variable, its cost rejects naming the root, and the next step runs normally', async () => {
  const r = await run(async (wf, setup) => {
    const make = new Function(`return (${setup})`)();
    const s = await make(wf, { optimizer: 'adam', lr: 0.01, seed: 3 });
    const outcomes = [];
    let last = (await s.opt.minimize(s.loss, true).data())[0];
    const breaks = {
      forward: () => { s.gpu.injectFault({ op: 'tanh' }); return s.opt.minimize(s.loss, true); },
      backward: () => { s.gpu.injectFault({ op: 'matmul', nth: 3, kind: 'out-of-memory' }); return s.opt.minimize(s.loss, true); },
      update: () => { s.gpu.injectFault({ op: 'sqrt', nth: 2, kind: 'internal' }); return s.opt.minimize(s.loss, true); },
      allocation: () => s.opt.minimize(() => {
        const cost = s.loss();
        const huge = cost.reshape([1, 1]).broadcastTo([1 << 16, 1 << 16]);
        const layer = huge.exp().matmul(s.gpu.ones([1 << 16, 1]));
        return cost.add(layer.mean().mul(0));
      }, true),
    };
    for (const [what, step] of Object.entries(breaks)) {
      const before = await s.values();
      const cost = step();
      let error = null;
      try { await cost.data(); } catch (e) { error = e; }
      const after = await s.values();
      const next = (await s.opt.minimize(s.loss, true).data())[0];
      outcomes.push({
        what,
        name: error?.name,
        kind: error?.root.kind,
        op: error?.root.op,
        chainEnd: error?.chain[0]?.op,
        unchanged: JSON.stringify(before) === JSON.stringify(after),
        next,
        last,
      });
      last = next;
    }
    // Lost: the queued step's cost rejects, the next is refused; a new
    // device with the weights last read trains on.
    const saved = await s.values();
    const queued = s.opt.minimize(s.loss, true);
    s.gpu.destroy();
    let lost = null;
    try { await queued.data(); } catch (e) { lost = e.root.kind; }
    let refused = null;
    try { s.opt.minimize(s.loss, true); } catch (e) { refused = e.message; }
    for (const v of s.vars) v.dispose();
    const gpu = await wf.Device.request();
    const shapes = [[2, 8], [8], [8, 2], [2]];
    const vars = saved.map((values, i) => gpu.variable(gpu.tensor(values, shapes[i])));
    const x = gpu.tensor([[0, 0], [0, 1], [1, 0], [1, 1]]);
    const y = gpu.tensor([[1, 0], [0, 1], [0, 1], [1, 0]]);
    const opt = wf.train.adam(0.01);
    const resumed = (await opt.minimize(() => {
      const logits = x.matmul(vars[0]).add(vars[1]).tanh().matmul(vars[2]).add(vars[3]);
      return logits.logSoftmax(-1).mul(y).sum(-1).mean().neg();
    }, true).data())[0];
    for (const v of vars) v.dispose();
    return { outcomes, lost, refused, resumed, last };
  }, xorSetup.toString());
  for (const o of r.outcomes) {
    assert.equal(o.name, 'TensorError', `${o.what}: the cost rejects`);
    assert.ok(o.unchanged, `${o.what}: no variable changed`);
    assert.ok(o.next < o.last, `${o.what}: the next step's cost ${o.next} after ${o.last}`);
  }
  const by = Object.fromEntries(r.outcomes.map((o) => [o.what, o]));
  assert.deepEqual([by.forward.kind, by.forward.op], ['injected', 'tanh']);
  assert.deepEqual([by.backward.kind, by.backward.op], ['injected', 'matmul']);
  assert.deepEqual([by.update.kind, by.update.op], ['injected', 'sqrt']);
  assert.equal(by.allocation.kind, 'allocation');
  assert.equal(by.backward.chainEnd, 'guard', 'the chain runs through the backward pass to the step');
  assert.equal(r.lost, 'device-lost');
  assert.match(r.refused, /lost/);
  assert.ok(r.resumed < r.last, `resumed at ${r.resumed}, last ${r.last}`);
});

test('a thousand steps, with tidy and without, keep memory, failures and tensors held flat', async () => {
  const r = await run(async (wf, setup) => {
    const make = new Function(`return (${setup})`)();
    const out = {};
    for (const form of ['tidy', 'without tidy']) {
      const s = await make(wf, { optimizer: 'momentum', lr: 0.1, seed: 3 });
      const step = form === 'tidy' ? () => wf.tidy(() => s.opt.minimize(s.loss, true)) : () => s.opt.minimize(s.loss, true);
      let baseline = null;
      const drift = [];
      let value = null;
      for (let i = 0; i < 1000; i += 1) {
        const cost = step();
        if (i % 100 === 99) {
          value = (await cost.data())[0];
          const st = s.gpu.stats();
          const now = [st.bytesInUse, st.failuresHeld, st.tensorsHeld];
          if (baseline === null) baseline = now;
          else if (now.join() !== baseline.join()) drift.push({ i, now });
        }
        cost.dispose();
      }
      out[form] = { drift, baseline, value };
      for (const t of [...s.vars, s.x, s.y]) t.dispose();
      s.opt.dispose();
    }
    return out;
  }, xorSetup.toString());
  for (const [form, o] of Object.entries(r)) {
    assert.deepEqual(o.drift, [], `${form}: flat at ${o.baseline}`);
    assert.equal(o.baseline[1], 0, `${form}: no failure held`);
    assert.ok(o.value < 0.05, `${form}: trained, cost ${o.value}`);
  }
});

test('minimize and variableGrads without a varList train the variables the loss reads, though another device holds trainable variables too', async () => {
  const r = await run(async ({ Device, variableGrads, train }) => {
    // Two models on two devices (a page with two demos), and a variable
    // each loss never reads: TF.js keeps what the value depends on.
    const first = await Device.request();
    const second = await Device.request();
    const a = first.variable(first.tensor([1, 2]), { name: 'pair-a' });
    const idle = first.variable(first.tensor([7]), { name: 'pair-idle' });
    const b = second.variable(second.tensor([3, 4]), { name: 'pair-b' });
    const { value, grads } = variableGrads(() => a.square().sum());
    const optimizer = train.sgd(0.5);
    const cost = optimizer.minimize(() => b.square().sum(), true);
    const out = {
      value: (await value.data())[0],
      gradNames: Object.keys(grads),
      ga: Array.from(await grads['pair-a'].data()),
      cost: (await cost.data())[0],
      a: Array.from(await a.data()),
      b: Array.from(await b.data()),
      idle: Array.from(await idle.data()),
    };
    for (const t of [a, idle, b, value, cost, ...Object.values(grads)]) t.dispose();
    optimizer.dispose();
    first.destroy();
    second.destroy();
    return out;
  });
  assert.equal(r.value, 5);
  assert.deepEqual(r.gradNames, ['pair-a']);
  assert.deepEqual(r.ga, [2, 4]);
  assert.equal(r.cost, 25);
  assert.deepEqual(r.b, [0, 0], 'b - 0.5 * 2b');
  assert.deepEqual(r.a, [1, 2], 'the other device\'s model is untouched');
  assert.deepEqual(r.idle, [7]);
});

test('warmup compiles a training step from JS and runs nothing: no launch, no variable changed, nothing left held, and the first step compiles nothing more', async () => {
  const r = await run(async ({ Device, train }) => {
    // Every block a kernel: on the host path Adam's powers run on the host
    // in a first step (and in a warm-up) and as a kernel after, which the
    // first step after a warm-up then compiles, as a second step would.
    const gpu = await Device.request({ hostMaxElements: 0 });
    const error = (f) => { try { f(); return null; } catch (e) { return `${e.name}: ${e.message}`; } };
    const x = gpu.tensor([[0, 0], [0, 1], [1, 0], [1, 1]]);
    const y = gpu.tensor([[0], [1], [1], [0]]);
    const w = gpu.variable(gpu.tensor([[0.5], [-0.5]]), { name: 'w' });
    const optimizer = train.adam(0.1);
    const loss = () => x.matmul(w).sub(y).square().mean();
    const initial = Array.from(await w.data());
    const before = gpu.stats();
    const returned = gpu.warmup(() => optimizer.minimize(loss, true));
    const warmed = gpu.stats();
    const afterWarmup = Array.from(await w.data());
    const cost = optimizer.minimize(loss, true);
    const firstLoss = (await cost.data())[0];
    const first = gpu.stats();
    return {
      returned: returned === undefined,
      compiled: warmed.pipelinesCompiled - before.pipelinesCompiled,
      launched: warmed.kernelsLaunched - before.kernelsLaunched,
      held: [before.tensorsHeld, warmed.tensorsHeld],
      initial,
      afterWarmup,
      firstLoss,
      firstCompiled: first.pipelinesCompiled - warmed.pipelinesCompiled,
      notFunction: error(() => gpu.warmup(3)),
      async: error(() => gpu.warmup(async () => x.add(1))),
      thrown: error(() => gpu.warmup(() => x.reshape([5]))),
      synced: await gpu.sync().then(() => 'resolved', (e) => e.name),
    };
  });
  assert.equal(r.returned, true);
  assert.ok(r.compiled > 0, 'the warm-up compiles');
  assert.equal(r.launched, 0, 'and launches nothing');
  assert.deepEqual(r.held, [r.held[0], r.held[0]], 'everything it made was disposed');
  assert.deepEqual(r.afterWarmup, r.initial, 'no variable changed');
  assert.ok(Math.abs(r.firstLoss - 0.625) < 1e-6, `the first real step starts from the initial weights: ${r.firstLoss}`);
  assert.equal(r.firstCompiled, 0, 'the first real step compiles nothing');
  assert.match(r.notFunction, /^TypeError: warmup: fn must be a function/);
  assert.match(r.async, /^TypeError: warmup: fn must not be async/);
  assert.match(r.thrown, /reshape/);
  assert.equal(r.synced, 'resolved', 'a warm-up reports no failure');
});

test('work nobody reads is released once the page idles: a loop that never reads or syncs holds nothing after it', async () => {
  // Found by outside testing: flushed work settled only at the next read,
  // sync() or flush, so what it held (and the buffers of tensors disposed
  // meanwhile) stayed held while the page idled: 117 MB after 4000 steps
  // of a 16 KiB variable, still held 500 ms later.
  const r = await run(async ({ Device }) => {
    const gpu = await Device.request({ hostMaxElements: 0 });
    const v = gpu.variable(gpu.zeros([4096]));
    await v.data();
    const start = gpu.stats().bytesInUse;
    for (let i = 0; i < 600; i += 1) {
      const next = v.add(1);
      v.assign(next);
      next.dispose();
    }
    const inLoop = gpu.stats().bytesInUse;
    await new Promise((resolve) => setTimeout(resolve, 300));
    const idle = gpu.stats().bytesInUse;
    const value = (await v.data())[0];
    return { start, inLoop, idle, value };
  });
  assert.equal(r.value, 600);
  assert.ok(r.idle <= r.start * 2, `released while idle, with no read or sync: ${r.start} -> ${r.inLoop} -> ${r.idle}`);
});
