// The JS API's contract at its edge: what users can pass, what they get, and
// what is thrown when they pass something wrong.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { inPage, launch, serveFixture } from './browser.mjs';

let browser;
let server;
before(async () => {
  browser = await launch();
  server = await serveFixture();
});
after(async () => {
  await browser?.close();
  server?.close();
});

test('Device.request rejects with an Error naming the flag when no adapter is offered', async () => {
  const plain = await launch({ webgpu: false });
  try {
    const { result } = await inPage(plain, server, async ({ Device }) => {
      try {
        await Device.request();
        return 'resolved';
      } catch (e) {
        return { name: e.name, message: e.message, isError: e instanceof Error };
      }
    });
    assert.equal(result.isError, true);
    assert.match(result.message, /--enable-unsafe-webgpu/);
  } finally {
    await plain.close();
  }
});

test('Device.request rejects with an Error saying WebGPU is missing when navigator.gpu is absent', async () => {
  const page = await browser.newPage();
  await page.addInitScript(() => {
    delete Navigator.prototype.gpu;
  });
  await page.goto(`http://127.0.0.1:${server.address().port}/`);
  const result = await page.evaluate(async () => {
    const { default: init, Device } = await import('webfusion');
    await init();
    try {
      await Device.request();
      return 'resolved';
    } catch (e) {
      return { isError: e instanceof Error, message: e.message };
    }
  });
  assert.equal(result.isError, true);
  assert.match(result.message, /WebGPU is not available/);
  assert.match(result.message, /--enable-unsafe-webgpu/);
  await page.close();
});

test('the shape is known at registration and nested arrays give their shape', async () => {
  const { result } = await inPage(browser, server, async ({ Device }) => {
    const gpu = await Device.request();
    const t = gpu.tensor([[1, 2, 3], [4, 5, 6]]);
    const before = gpu.stats().kernelsLaunched;
    return { shape: t.shape, size: t.size, rank: t.rank, dtype: t.dtype, before, array: await t.add(1).array() };
  });
  assert.deepEqual(result, {
    shape: [2, 3], size: 6, rank: 2, dtype: 'float32', before: 0, array: [[2, 3, 4], [5, 6, 7]],
  });
});

test('bad input throws a TypeError or RangeError naming the op, and the device keeps working', async () => {
  const { result } = await inPage(browser, server, async ({ Device }) => {
    const gpu = await Device.request();
    const caught = (f) => {
      try {
        f();
        return null;
      } catch (e) {
        return { name: e.name, message: e.message, op: e.op };
      }
    };
    const a = gpu.tensor([1, 2, 3]);
    return {
      ragged: caught(() => gpu.tensor([[1, 2], [3]])),
      notNumbers: caught(() => gpu.tensor(['a'])),
      badShape: caught(() => gpu.zeros([2, -1])),
      lengthMismatch: caught(() => gpu.tensor([1, 2, 3], [2, 2])),
      broadcast: caught(() => a.add(gpu.tensor([1, 2]))),
      notATensor: caught(() => a.add({ id: a.id })),
      stillWorks: Array.from(await a.mul(3).data()),
      opsRegistered: gpu.stats().opsRegistered,
    };
  });
  assert.equal(result.ragged.name, 'RangeError');
  assert.equal(result.notNumbers.name, 'TypeError');
  assert.equal(result.badShape.name, 'RangeError');
  assert.match(result.badShape.message, /^zeros: /);
  assert.equal(result.lengthMismatch.name, 'RangeError');
  assert.match(result.lengthMismatch.message, /^tensor: 3 values do not fill shape \[2,2\]/);
  assert.equal(result.broadcast.name, 'Error');
  assert.equal(result.broadcast.message, 'add: shapes [3] and [2] cannot be broadcast together');
  assert.equal(result.notATensor.name, 'TypeError');
  assert.deepEqual(result.stillWorks, [3, 6, 9]);
  // a, the second tensor of `broadcast`, a.mul(3): nothing for the ops that threw.
  assert.equal(result.opsRegistered, 3);
});

test('a disposed tensor throws when used, and an operand can be reused', async () => {
  const { result } = await inPage(browser, server, async ({ Device }) => {
    const gpu = await Device.request();
    const a = gpu.tensor([1, 2]);
    const b = gpu.tensor([3, 4]);
    const sum = a.add(b);
    const again = a.add(b); // b is still usable after being an operand
    a.dispose();
    let message = null;
    try {
      a.exp();
    } catch (e) {
      message = e.message;
    }
    const c = gpu.tensor([5]);
    c[Symbol.dispose]();
    let afterSymbol = null;
    try {
      c.exp();
    } catch (e) {
      afterSymbol = e instanceof Error;
    }
    return { message, afterSymbol, sum: Array.from(await sum.data()), again: Array.from(await again.data()) };
  });
  assert.match(result.message, /was disposed/);
  assert.equal(result.afterSymbol, true, 'a tensor freed by Symbol.dispose throws when used');
  assert.deepEqual(result.sum, [4, 6]);
  assert.deepEqual(result.again, [4, 6]);
});

test('the op set is callable from JS with TensorFlow.js names and gives the right values', async () => {
  const { result } = await inPage(browser, server, async ({ Device }) => {
    const gpu = await Device.request();
    const m = gpu.tensor([[1, 2, 3], [4, 5, 6]]);
    const read = async (t) => Array.from(await t.data());
    return {
      arange: await read(gpu.arange(0, 1, 0.25)),
      zerosOnes: [...(await read(gpu.zeros([2]))), ...(await read(gpu.ones([1]))), ...(await read(gpu.full([1], 7)))],
      uniformSame: (await read(gpu.randomUniform([8], { min: 2, max: 3, seed: 5 }))).join() ===
        (await read(gpu.randomUniform([8], { min: 2, max: 3, seed: 5 }))).join(),
      normalShape: gpu.randomNormal([3, 2], { mean: 0, std: 1, seed: 1 }).shape,
      where: await read(gpu.where(gpu.tensor([1, 0, 1]), gpu.tensor([1, 2, 3]), gpu.tensor([9, 9, 9]))),
      compare: await read(m.greaterEqual(3)),
      sumAxis: await m.sum(1).array(),
      sumKeep: (m.sum([0, 1], true)).shape,
      meanAll: await read(m.mean()),
      argmax: await read(m.argmax(1)),
      softmaxRows: (await m.softmax().sum(-1).array()).map((v) => Math.round(v * 1e5) / 1e5),
      matmul: await m.matmul(m.transpose()).array(),
      reshape: (m.reshape([3, -1])).shape,
      slice: await m.slice([0, 1], [2, -1]).array(),
      sliceToEnd: await m.slice([1, 1]).array(),
      cat: await gpu.cat([m, m], 0).sum().array(),
      stack: gpu.stack([m, m], 1).shape,
      expand: m.expandDims(0).shape,
      squeeze: m.expandDims(0).squeeze().shape,
      flatten: m.flatten().shape,
      broadcast: await gpu.tensor([1, 2]).broadcastTo([2, 2]).array(),
      clamp: await read(m.clamp(2, 5)),
      logSoftmax: m.logSoftmax(0).shape,
      scalar: await gpu.tensor(3).square().array(),
    };
  });
  assert.deepEqual(result, {
    arange: [0, 0.25, 0.5, 0.75],
    zerosOnes: [0, 0, 1, 7],
    uniformSame: true,
    normalShape: [3, 2],
    where: [1, 9, 3],
    compare: [0, 0, 1, 1, 1, 1],
    sumAxis: [6, 15],
    sumKeep: [1, 1],
    meanAll: [3.5],
    argmax: [2, 2],
    softmaxRows: [1, 1],
    matmul: [[14, 32], [32, 77]],
    reshape: [3, 2],
    slice: [[2, 3], [5, 6]],
    sliceToEnd: [[5, 6]],
    cat: 42,
    stack: [2, 2, 3],
    expand: [1, 2, 3],
    squeeze: [2, 3],
    flatten: [6],
    broadcast: [[1, 2], [1, 2]],
    clamp: [2, 2, 3, 4, 5, 5],
    logSoftmax: [2, 3],
    scalar: 9,
  });
});

test('invalid registrations throw the conventional JS error naming the op and the shapes', async () => {
  const { result } = await inPage(browser, server, async ({ Device }) => {
    const gpu = await Device.request();
    const caught = (f) => {
      try {
        f();
        return null;
      } catch (e) {
        return `${e.name}: ${e.message}`;
      }
    };
    const a = gpu.zeros([2, 3]);
    return {
      matmul: caught(() => a.matmul(gpu.zeros([4, 5]))),
      axis: caught(() => a.sum(5)),
      perm: caught(() => a.transpose([0, 0])),
      nanDim: caught(() => gpu.zeros([NaN])),
      fractionalDim: caught(() => gpu.ones([1.5])),
      emptyCat: caught(() => gpu.cat([], 0)),
      notTensorInCat: caught(() => gpu.cat([a, 3], 0)),
      reshape: caught(() => a.reshape([4, -1])),
      seed: caught(() => gpu.randomUniform([2], { seed: -1 })),
      works: Array.from(await a.add(2).data()),
    };
  });
  assert.equal(result.matmul, 'Error: matmul: inner dimensions differ: [2,3] x [4,5]');
  assert.match(result.axis, /^RangeError: sum: axis 5 is out of range for rank 2/);
  assert.match(result.perm, /^RangeError: transpose: /);
  assert.match(result.nanDim, /^RangeError: zeros: /);
  assert.match(result.fractionalDim, /^RangeError: ones: /);
  assert.equal(result.emptyCat, 'Error: cat: needs at least one tensor');
  assert.equal(result.notTensorInCat, 'TypeError: cat: expected a webfusion Tensor at tensors[1], got 3');
  assert.match(result.reshape, /^RangeError: reshape: cannot reshape \[2,3\]/);
  assert.match(result.seed, /^RangeError: randomUniform: seed/);
  assert.deepEqual(result.works, [2, 2, 2, 2, 2, 2]);
});

test('tidy disposes what its function created except what it returns, so the chain fuses', async () => {
  const { result } = await inPage(browser, server, async ({ Device, tidy }) => {
    const gpu = await Device.request();
    const x = gpu.tensor([1, 2, 3, 4]);
    await x.data();
    let inner = null;
    const before = gpu.stats();
    const y = tidy(() => {
      inner = x.mul(2);
      let t = inner;
      for (let i = 0; i < 15; i += 1) t = t.add(1);
      return t;
    });
    const values = Array.from(await y.data());
    const after = gpu.stats();
    let disposed = null;
    try {
      inner.exp();
    } catch (e) {
      disposed = e.message;
    }
    let asyncRefused = null;
    try {
      tidy(async () => x.exp());
    } catch (e) {
      asyncRefused = e.name;
    }
    const pair = tidy(() => ({ a: x.add(1), b: [x.sub(1)] }));
    return {
      values,
      kernels: after.kernelsLaunched - before.kernelsLaunched,
      buffers: after.buffersAllocated - before.buffersAllocated,
      disposed,
      asyncRefused,
      pair: [Array.from(await pair.a.data()), Array.from(await pair.b[0].data())],
    };
  });
  assert.deepEqual(result.values, [17, 19, 21, 23]);
  assert.equal(result.kernels, 1, 'sixteen ops, one kernel');
  assert.ok(result.buffers <= 1);
  assert.match(result.disposed, /was disposed/);
  assert.equal(result.asyncRefused, 'TypeError');
  assert.deepEqual(result.pair, [[2, 3, 4, 5], [0, 1, 2, 3]]);
});
