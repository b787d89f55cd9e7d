// Code written the usual JS way, without `tidy`: intermediates kept in
// variables and arrays, temporaries left to the garbage collector. Bytes are
// written when they are needed (docs/design.md §2 item 10), so it fuses as the
// `tidy` form does, and a temporary holds neither bytes nor failures.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sharedPage } from './shared-page.mjs';

const { run } = sharedPage();

// What the kernels are, on tensors small enough that a default device would
// run them in wasm: these devices run every block as a kernel.
const KERNELS_ONLY = { hostMaxElements: 0 };

test('a 16-op chain kept in an array launches one kernel and allocates one buffer, and an intermediate read afterwards is computed inline', async () => {
  const result = await run(async ({ Device }, options) => {
    const gpu = await Device.request(options);
    const x = gpu.tensor([0.5, -1, 2, 0.25]);
    await x.data();
    const before = gpu.stats();
    const kept = [x];
    for (let i = 0; i < 16; i += 1) {
      const y = kept[kept.length - 1];
      kept.push([() => y.mul(0.9), () => y.tanh(), () => y.add(x), () => y.sigmoid()][i % 4]());
    }
    const last = Array.from(await kept[16].data());
    const mid = gpu.stats();
    const eighth = Array.from(await kept[8].data());
    const after = gpu.stats();
    for (const t of kept.slice(1)) t.dispose();
    const end = gpu.stats();
    return {
      last, eighth,
      kernels: mid.kernelsLaunched - before.kernelsLaunched,
      buffers: mid.buffersAllocated - before.buffersAllocated,
      written: mid.bytesWritten - before.bytesWritten,
      expressions: mid.expressionsHeld - before.expressionsHeld,
      kernelsForEighth: after.kernelsLaunched - mid.kernelsLaunched,
      expressionsAtEnd: end.expressionsHeld - before.expressionsHeld,
      bytesBack: end.bytesInUse === before.bytesInUse,
    };
  }, KERNELS_ONLY);
  const want = [[0.5, -1, 2, 0.25]];
  for (let i = 0; i < 16; i += 1) {
    want.push(want[i].map((v, k) => [v * 0.9, Math.tanh(v), v + want[0][k], 1 / (1 + Math.exp(-v))][i % 4]));
  }
  const close = (got, expected) => got.forEach((v, k) => assert.ok(Math.abs(v - expected[k]) < 1e-5, `${got} vs ${expected}`));
  close(result.last, want[16]);
  close(result.eighth, want[8]);
  assert.equal(result.kernels, 1);
  assert.equal(result.buffers, 1);
  assert.equal(result.written, 16, 'only the result is written');
  assert.equal(result.expressions, 15);
  assert.equal(result.kernelsForEighth, 1);
  assert.equal(result.expressionsAtEnd, 0);
  assert.equal(result.bytesBack, true);
});

test('twelve elementwise ops in a plain loop launch one kernel', async () => {
  const kernels = await run(async ({ Device }, options) => {
    const gpu = await Device.request(options);
    const x = gpu.tensor([1, 2, 3, 4]);
    await x.data();
    const before = gpu.stats().kernelsLaunched;
    let y = x;
    for (let i = 0; i < 4; i += 1) {
      y = y.mul(1.01);
      y = y.add(x);
      y = y.tanh();
    }
    await y.data();
    return gpu.stats().kernelsLaunched - before;
  }, KERNELS_ONLY);
  assert.equal(kernels, 1);
});

/** The W6 loop, every intermediate kept, four times on one device. */
async function thousandOps({ Device }, options) {
    const gpu = await Device.request(options);
    const data = new Float32Array(16).map((_, i) => i / 8 - 1);
    const perIteration = [];
    for (let iteration = 0; iteration < 4; iteration += 1) {
      const before = gpu.stats();
      const kept = [gpu.tensor(data)];
      for (let i = 0; i < 1000; i += 1) {
        const y = kept[kept.length - 1];
        kept.push([() => y.add(0.01), () => y.mul(0.999), () => y.sub(0.005), () => y.maximum(-2)][i % 4]());
      }
      const values = Array.from(await kept[1000].data());
      const after = gpu.stats();
      for (const t of kept) t.dispose();
      perIteration.push({
        values,
        kernels: after.kernelsLaunched - before.kernelsLaunched,
        created: after.gpuBuffersCreated - before.gpuBuffersCreated,
        hostOps: after.hostOps - before.hostOps,
        pipelines: after.pipelinesCompiled,
        bytesInUse: after.bytesInUse,
      });
    }
    return perIteration;
}

const W6_WANT = Array.from({ length: 16 }, (_, k) => {
  let y = Math.fround(k / 8 - 1);
  for (let i = 0; i < 1000; i += 1) y = [y + 0.01, y * 0.999, y - 0.005, Math.max(y, -2)][i % 4];
  return y;
});

test('1000 ops on one tensor, every intermediate kept, launch one kernel per iteration and create no GPU buffer after the first', async () => {
  const result = await run(thousandOps, KERNELS_ONLY);
  for (const r of result) {
    assert.equal(r.kernels, 1);
    r.values.forEach((v, k) => assert.ok(Math.abs(v - W6_WANT[k]) < 1e-3, `${r.values} vs ${W6_WANT}`));
  }
  assert.deepEqual(result.slice(1).map((r) => r.created), [0, 0, 0], 'no GPU buffer created after the first iteration');
});

test('1000 ops on sixteen values the page gave run in wasm: no kernel, no GPU buffer, no pipeline', async () => {
  const result = await run(thousandOps);
  for (const r of result) {
    assert.deepEqual(
      { kernels: r.kernels, created: r.created, pipelines: r.pipelines, bytesInUse: r.bytesInUse, hostOps: r.hostOps },
      { kernels: 0, created: 0, pipelines: 0, bytesInUse: 0, hostOps: 1001 },
    );
    r.values.forEach((v, k) => assert.ok(Math.abs(v - W6_WANT[k]) < 1e-3, `${r.values} vs ${W6_WANT}`));
  }
});

test('an MLP forward with its products, pre-activations and activations kept launches one kernel per layer', async () => {
  const result = await run(async ({ Device }) => {
    const gpu = await Device.request();
    const sizes = [16, 32, 32, 4];
    const x = gpu.randomUniform([8, 16], { min: -1, max: 1, seed: 1 });
    const layers = [0, 1, 2].map((l) => ({
      w: gpu.randomUniform([sizes[l], sizes[l + 1]], { min: -0.3, max: 0.3, seed: 10 + l }),
      b: gpu.randomUniform([sizes[l + 1]], { min: -0.1, max: 0.1, seed: 20 + l }),
    }));
    await gpu.sync();
    const before = gpu.stats().kernelsLaunched;
    const kept = [];
    let h = x;
    layers.forEach(({ w, b }, l) => {
      const product = h.matmul(w);
      const pre = product.add(b);
      h = l < 2 ? pre.relu() : pre;
      kept.push(product, pre, h);
    });
    const got = Array.from(await h.data());
    const kernels = gpu.stats().kernelsLaunched - before;
    let act = Array.from(await x.data());
    for (let l = 0; l < 3; l += 1) {
      const w = await layers[l].w.data();
      const b = await layers[l].b.data();
      const [n, m] = [sizes[l], sizes[l + 1]];
      const next = [];
      for (let r = 0; r < 8; r += 1) {
        for (let c = 0; c < m; c += 1) {
          let z = b[c];
          for (let k = 0; k < n; k += 1) z += act[r * n + k] * w[k * m + c];
          next.push(l < 2 ? Math.max(z, 0) : z);
        }
      }
      act = next;
    }
    return { kernels, worst: Math.max(...got.map((v, k) => Math.abs(v - act[k]))) };
  });
  assert.equal(result.kernels, 3);
  assert.ok(result.worst < 1e-4, `largest error ${result.worst}`);
});

test('a failed read through a temporary leaves no failure held and no bytes in use once the result is disposed, before any garbage collection', async () => {
  const result = await run(async ({ Device }) => {
    const gpu = await Device.request();
    const start = gpu.stats();
    // The `zeros` temporary is held by a JS object the collector may not have taken.
    const y = gpu.zeros([2 ** 16, 2 ** 16]).add(1);
    const caught = await y.data().then(() => null, (e) => ({ kind: e.root.kind, op: e.root.op }));
    const held = gpu.stats().failuresHeld;
    y.dispose();
    await gpu.sync().catch(() => {});
    const end = gpu.stats();
    return {
      caught, held,
      failuresHeld: end.failuresHeld,
      bytesBack: end.bytesInUse === start.bytesInUse,
      expressions: end.expressionsHeld - start.expressionsHeld,
    };
  });
  assert.deepEqual(result.caught, { kind: 'allocation', op: 'zeros+add' });
  assert.equal(result.held, 1, 'y carries it while held');
  assert.equal(result.failuresHeld, 0);
  assert.equal(result.bytesBack, true);
  // The `zeros` temporary stays an expression until the collector takes its
  // JS object, which it may do at any moment (a clean-clone CI run saw 0):
  // what is held after that moment is not this test's to assert.
  assert.ok(result.expressions <= 1, `at most the zeros temporary is still an expression: ${result.expressions}`);
});
