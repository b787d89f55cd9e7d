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
      where: await read(gpu.where(gpu.tensor([true, false, true]), gpu.tensor([1, 2, 3]), gpu.tensor([9, 9, 9]))),
      compare: await read(m.greaterEqual(3)),
      sumAxis: await m.sum(1).array(),
      sumKeep: (m.sum([0, 1], true)).shape,
      meanAll: await read(m.mean()),
      argmax: await read(m.argMax(1)),
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
    // Every block a kernel, to count them (these tensors would run in wasm).
    const gpu = await Device.request({ hostMaxElements: 0 });
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

/** Runs `f` and returns what it threw as `Name: message` (null if it returned). */
const CAUGHT = `(f) => {
  try {
    f();
    return null;
  } catch (e) {
    return e.op === undefined ? 'no op: ' + e : e.name + ': ' + e.message;
  }
}`;

test('numbers are required where numbers are meant: full, clamp and arange throw a TypeError instead of computing with NaN', async () => {
  const { result } = await inPage(browser, server, async ({ Device }, CAUGHT) => {
    const caught = eval(CAUGHT);
    const gpu = await Device.request();
    const m = gpu.tensor([1, 5, 9]);
    return {
      full: caught(() => gpu.full([2], 'abc')),
      fullMissing: caught(() => gpu.full([2])),
      clamp: caught(() => m.clamp('a', 3)),
      clampMissing: caught(() => m.clamp(1)),
      arangeStart: caught(() => gpu.arange('a', 3)),
      arangeStop: caught(() => gpu.arange(0, [3])),
      arangeStep: caught(() => gpu.arange(0, 3, '1')),
      keepDims: caught(() => m.sum(0, 'yes')),
      scalar: caught(() => m.add(true)),
      works: Array.from(await gpu.arange(0, 3).add(m.clamp(2, 6)).data()),
    };
  }, CAUGHT);
  assert.deepEqual(result, {
    full: 'TypeError: full: value must be a number, got the string "abc"',
    fullMissing: 'TypeError: full: value must be a number, got undefined',
    clamp: 'TypeError: clamp: min must be a number, got the string "a"',
    clampMissing: 'TypeError: clamp: max must be a number, got undefined',
    arangeStart: 'TypeError: arange: start must be a number, got the string "a"',
    arangeStop: 'TypeError: arange: stop must be a number, got an array of 1 item',
    arangeStep: 'TypeError: arange: step must be a number, got the string "1"',
    keepDims: 'TypeError: sum: keepDims must be a boolean, got the string "yes"',
    scalar: 'TypeError: add: expected a webfusion Tensor or a number, got true',
    works: [2, 6, 8],
  });
});

test('clamp refuses reversed or NaN bounds with a RangeError', async () => {
  const { result } = await inPage(browser, server, async ({ Device }, CAUGHT) => {
    const caught = eval(CAUGHT);
    const gpu = await Device.request();
    const m = gpu.tensor([1, 5, 9]);
    return [caught(() => m.clamp(6, 2)), caught(() => m.clamp(NaN, 2)), caught(() => m.clamp(2, 2))];
  }, CAUGHT);
  assert.deepEqual(result, [
    'RangeError: clamp: needs min <= max (neither NaN), got 6, 2',
    'RangeError: clamp: needs min <= max (neither NaN), got NaN, 2',
    null,
  ]);
});

test('an explicit shape must be the shape nested arrays give, and must fit the count of flat values', async () => {
  const { result } = await inPage(browser, server, async ({ Device }, CAUGHT) => {
    const caught = eval(CAUGHT);
    const gpu = await Device.request();
    return {
      nested: caught(() => gpu.tensor([[1, 2], [3, 4]], [4, 1])),
      nestedSameCount: caught(() => gpu.tensor([[1, 2], [3, 4]], [4])),
      flatCount: caught(() => gpu.tensor(new Float32Array(3), [2, 2])),
      ragged: caught(() => gpu.tensor([[1, 2], [3]])),
      deepRagged: caught(() => gpu.tensor([[1, 2], [3, [4]]])),
      notNumber: caught(() => gpu.tensor([[1, 'a']])),
      typed: caught(() => gpu.tensor(new Float64Array(2))),
      agrees: await gpu.tensor([[1, 2], [3, 4]], [2, 2]).array(),
      flat: await gpu.tensor([1, 2, 3, 4], [2, 2]).array(),
      float32: await gpu.tensor(new Float32Array([1, 2, 3, 4]), [2, 1, 2]).array(),
      empty: gpu.tensor([[], []]).shape,
    };
  }, CAUGHT);
  assert.deepEqual(result, {
    nested: 'RangeError: tensor: shape [4,1] differs from the shape [2,2] the nested arrays give',
    nestedSameCount: 'RangeError: tensor: shape [4] differs from the shape [2,2] the nested arrays give',
    flatCount: 'RangeError: tensor: 3 values do not fill shape [2,2] (4 elements)',
    ragged: 'RangeError: tensor: nested arrays must be rectangular (every row the same length and depth, [2,2] like the first)',
    deepRagged: 'RangeError: tensor: nested arrays must be rectangular (every row the same length and depth, [2,2] like the first)',
    notNumber: 'TypeError: tensor: values must hold numbers or booleans, got the string "a"',
    typed: 'TypeError: tensor: values must be a number, a boolean, an array or a typed array, got an object of class Float64Array',
    agrees: [[1, 2], [3, 4]],
    flat: [[1, 2], [3, 4]],
    float32: [[[1, 2]], [[3, 4]]],
    empty: [2, 0],
  });
});

test('typed arrays arrive and leave as their bits: a subarray uploads its own elements, and data() gives an array of its own', async () => {
  const { result } = await inPage(browser, server, async ({ Device }) => {
    const run = async (gpu) => {
      const floats = new Float32Array(2050).map((_, i) => i - 0.5);
      floats[3] = -0;
      floats[4] = NaN;
      const ints = new Int32Array(2050).map((_, i) => (i % 2 ? -1 : 1) * (i + 16777216));
      // Views starting past their buffer's first byte, as a slice of a
      // larger array is.
      const f = gpu.tensor(floats.subarray(2, 2050));
      const n = gpu.tensor(ints.subarray(1, 2049));
      const [fd, nd] = [await f.data(), await n.data()];
      const firstRead = fd[0];
      fd[0] = 99;
      return {
        kinds: [fd.constructor.name, nd.constructor.name],
        lengths: [fd.length, nd.length, fd.buffer.byteLength, nd.buffer.byteLength],
        negativeZero: Object.is(fd[1], -0),
        nan: Number.isNaN(fd[2]),
        floatsMatch: Array.from(fd.subarray(3)).every((v, i) => v === floats[i + 5]),
        intsMatch: Array.from(nd).every((v, i) => v === ints[i + 1]),
        firstRead,
        // The array handed out is the caller's: writing it changes no tensor.
        rereadAfterWrite: (await f.data())[0],
      };
    };
    return {
      gpu: await run(await Device.request({ hostMaxElements: 0 })),
      host: await run(await Device.request({ hostMaxElements: 1 << 20 })),
    };
  });
  for (const world of ['gpu', 'host']) {
    assert.deepEqual(result[world], {
      kinds: ['Float32Array', 'Int32Array'],
      lengths: [2048, 2048, 8192, 8192],
      negativeZero: true,
      nan: true,
      floatsMatch: true,
      intsMatch: true,
      firstRead: 1.5,
      rereadAfterWrite: 1.5,
    }, world);
  }
});

test('values past what wasm memory holds are refused with a RangeError naming tensor, and converted values keep their positions', async () => {
  const { result } = await inPage(browser, server, async ({ Device }) => {
    const gpu = await Device.request();
    const refusal = (f) => {
      try {
        f();
        return 'made';
      } catch (e) {
        return { name: e.name, op: e.op, message: e.message };
      }
    };
    // 2^29 floats are 2 GiB: past the 2 GiB a wasm vector can hold. Each
    // panicked (capacity overflow) and killed the module before.
    const floats = new Float32Array(2 ** 29);
    const refused = [
      refusal(() => gpu.tensor(floats)),
      refusal(() => gpu.tensor(floats, null, 'int32')),
      refusal(() => gpu.tensor(new Uint8Array(2 ** 29), null, 'bool')),
    ];
    // Conversions are copied a piece at a time: an int32's refusal names
    // its position among all the values, past the first piece.
    const ints = new Float32Array(40000).map((_, i) => i);
    ints[30001] = 0.5;
    const position = refusal(() => gpu.tensor(ints, null, 'int32'));
    const bytes = new Uint8Array(40000).map((_, i) => i % 3);
    const asBool = await gpu.tensor(bytes, null, 'bool').data();
    const asFloat = await gpu.tensor(new Int32Array(40000).map((_, i) => i - 20000), null, 'float32').data();
    return {
      refused,
      position,
      boolMatches: asBool.length === 40000 && asBool.every((v, i) => v === (i % 3 ? 1 : 0)),
      floatMatches: asFloat.length === 40000 && asFloat.every((v, i) => v === i - 20000),
      after: Array.from(await gpu.ones([2]).add(1).data()),
    };
  });
  for (const r of result.refused) {
    assert.equal(r.name, 'RangeError', JSON.stringify(r));
    assert.equal(r.op, 'tensor');
    assert.match(r.message, /536870912 values need 2147483648 bytes of wasm memory/);
  }
  assert.equal(result.position.name, 'RangeError');
  assert.match(result.position.message, /value 0.5 at position 30001 is not an int32/);
  assert.equal(result.boolMatches, true);
  assert.equal(result.floatMatches, true);
  assert.deepEqual(result.after, [2, 2]);
});

test('size counts elements exactly past 32 bits', async () => {
  const { result } = await inPage(browser, server, async ({ Device }) => {
    const gpu = await Device.request();
    return [gpu.zeros([65536, 65536]).size, gpu.zeros([1 << 20, 1 << 20, 4]).size, gpu.zeros([3, 0]).size];
  });
  assert.deepEqual(result, [4294967296, 4398046511104, 0]);
});

test('dims, axes and seeds must be integers a Rust value holds as written', async () => {
  const { result } = await inPage(browser, server, async ({ Device }, CAUGHT) => {
    const caught = eval(CAUGHT);
    const gpu = await Device.request();
    const m = gpu.zeros([2, 3]);
    return {
      bigDim: caught(() => gpu.zeros([2 ** 32])),
      stringDim: caught(() => gpu.zeros(['2'])),
      notArray: caught(() => gpu.zeros(6)),
      tooMany: caught(() => gpu.zeros([2 ** 31, 2 ** 31, 4])),
      axis: caught(() => m.sum(0.5)),
      axisArray: caught(() => m.argMax([1])),
      perm: caught(() => m.transpose(1)),
      seed: caught(() => gpu.randomNormal([2], { seed: 2 ** 60 })),
      unknownOption: caught(() => gpu.randomUniform([2], { minval: 2 })),
      optionsType: caught(() => gpu.randomUniform([2], 7)),
    };
  }, CAUGHT);
  assert.deepEqual(result, {
    bigDim: 'RangeError: zeros: shape[0] must be an integer from 0 to 4294967295, got 4294967296',
    stringDim: 'TypeError: zeros: shape[0] must be a number, got the string "2"',
    notArray: 'TypeError: zeros: shape must be an array, got 6',
    tooMany: 'RangeError: zeros: shape [2147483648,2147483648,4] has more elements than any device can hold',
    axis: 'RangeError: sum: axis must be an integer from -2147483648 to 2147483647, got 0.5',
    axisArray: 'TypeError: argMax: axis must be a number, got an array of 1 item',
    perm: 'TypeError: transpose: perm must be an array, got 1',
    seed: 'RangeError: randomNormal: seed must be an integer from 0 to 9007199254740991, got 1152921504606847000',
    unknownOption: "TypeError: randomUniform: options has no option 'minval' (it takes min, max, seed)",
    optionsType: 'TypeError: randomUniform: options must be an object, got 7',
  });
});

test('to() refuses anything but a working webfusion Device synchronously', async () => {
  const { result } = await inPage(browser, server, async ({ Device }, CAUGHT) => {
    const caught = eval(CAUGHT);
    const gpu = await Device.request();
    const gone = await Device.request();
    gone.destroy();
    const t = gpu.ones([2]);
    return {
      plain: caught(() => t.to({})),
      tensor: caught(() => t.to(t)),
      missing: caught(() => t.to()),
      lost: caught(() => t.to(gone)),
    };
  }, CAUGHT);
  const { lost, ...types } = result;
  assert.deepEqual(types, {
    plain: 'TypeError: to: expected a webfusion Device, got a plain object',
    tensor: 'TypeError: to: expected a webfusion Device, got a webfusion Tensor',
    missing: 'TypeError: to: expected a webfusion Device, got undefined',
  });
  assert.match(lost, /^Error: to: device #\d+ was lost \(the device was destroyed with destroy\(\)\); request a new device$/);
});

test('injectFault refuses an unknown op, a kind not among its names, a bad nth and a lost device, naming injectFault', async () => {
  const { result } = await inPage(browser, server, async ({ Device }, CAUGHT) => {
    const caught = eval(CAUGHT);
    const gpu = await Device.request();
    const lost = await Device.request();
    lost.destroy();
    return {
      unknownOp: caught(() => gpu.injectFault({ op: 'matmull' })),
      opType: caught(() => gpu.injectFault({ op: 5 })),
      kindType: caught(() => gpu.injectFault({ op: 'matmul', kind: 5 })),
      kindName: caught(() => gpu.injectFault({ op: 'matmul', kind: 'meltdown' })),
      nthZero: caught(() => gpu.injectFault({ op: 'matmul', nth: 0 })),
      nthFraction: caught(() => gpu.injectFault({ op: 'matmul', nth: 1.5 })),
      unknownKey: caught(() => gpu.injectFault({ op: 'matmul', times: 2 })),
      missing: caught(() => gpu.injectFault()),
      lost: caught(() => lost.injectFault({ op: 'matmul' })),
      fine: caught(() => gpu.injectFault({ op: 'exp', nth: 2, kind: 'out-of-memory' })),
    };
  }, CAUGHT);
  assert.match(result.unknownOp, /^RangeError: injectFault: no op is named 'matmull'; faults go into one of: .*\bmatmul\b/);
  assert.equal(result.opType, 'TypeError: injectFault: op must be a string, got 5');
  assert.equal(result.kindType, "TypeError: injectFault: kind must be one of 'validation', 'out-of-memory', 'internal', got 5");
  assert.equal(result.kindName, "RangeError: injectFault: kind must be one of 'validation', 'out-of-memory', 'internal', got the string \"meltdown\"");
  assert.equal(result.nthZero, 'RangeError: injectFault: nth counts from 1');
  assert.equal(result.nthFraction, 'RangeError: injectFault: nth must be an integer from 0 to 4294967295, got 1.5');
  assert.equal(result.unknownKey, "TypeError: injectFault: spec has no option 'times' (it takes op, nth, kind)");
  assert.equal(result.missing, 'TypeError: injectFault: expected { op, nth?, kind? }, got undefined');
  assert.match(result.lost, /^Error: injectFault: device #\d+ was lost/);
  assert.equal(result.fine, null);
});

test('Device.request refuses bad options synchronously, naming Device.request and the key', async () => {
  const { result } = await inPage(browser, server, async ({ Device }, CAUGHT) => {
    const caught = eval(CAUGHT);
    return {
      notObject: caught(() => Device.request(5)),
      unknown: caught(() => Device.request({ capacty: 8 })),
      capacityZero: caught(() => Device.request({ capacity: 0 })),
      capacityFraction: caught(() => Device.request({ capacity: 2.5 })),
      capacityType: caught(() => Device.request({ capacity: '8' })),
      debugType: caught(() => Device.request({ debug: true })),
      flagType: caught(() => Device.request({ debug: { captureStacks: 'yes' } })),
      scopesType: caught(() => Device.request({ debug: { errorScopes: 0 } })),
      debugUnknown: caught(() => Device.request({ debug: { captureStack: true } })),
      numericsType: caught(() => Device.request({ debug: { checkNumerics: 'on' } })),
      hostNegative: caught(() => Device.request({ hostMaxElements: -1 })),
      hostFraction: caught(() => Device.request({ hostMaxElements: 0.5 })),
      hostType: caught(() => Device.request({ hostMaxElements: true })),
      works: Array.from(await (await Device.request({ capacity: 4, debug: { captureStacks: true } })).ones([2]).data()),
      kernelsOnly: Array.from(await (await Device.request({ hostMaxElements: 0 })).ones([2]).data()),
    };
  }, CAUGHT);
  assert.deepEqual(result, {
    notObject: 'TypeError: Device.request: options must be an object, got 5',
    unknown: "TypeError: Device.request: options has no option 'capacty' (it takes capacity, hostMaxElements, debug)",
    capacityZero: 'RangeError: Device.request: capacity must be an integer from 1 to 4294967295, got 0',
    capacityFraction: 'RangeError: Device.request: capacity must be an integer from 1 to 4294967295, got 2.5',
    capacityType: 'TypeError: Device.request: capacity must be a number, got the string "8"',
    debugType: 'TypeError: Device.request: debug must be an object, got true',
    flagType: 'TypeError: Device.request: debug.captureStacks must be a boolean, got the string "yes"',
    scopesType: 'TypeError: Device.request: debug.errorScopes must be a boolean, got 0',
    debugUnknown: "TypeError: Device.request: debug has no option 'captureStack' (it takes captureStacks, errorScopes, checkNumerics)",
    numericsType: 'TypeError: Device.request: debug.checkNumerics must be a boolean, got the string "on"',
    hostNegative: 'RangeError: Device.request: hostMaxElements must be an integer from 0 to 4294967295, got -1',
    hostFraction: 'RangeError: Device.request: hostMaxElements must be an integer from 0 to 4294967295, got 0.5',
    hostType: 'TypeError: Device.request: hostMaxElements must be a number, got true',
    works: [1, 1],
    kernelsOnly: [1, 1],
  });
});

test('checkNumerics from JS: the op that made a NaN or an infinity is a non-finite root, the page\'s own NaN reads, and the property refuses a non-boolean', async () => {
  const { result } = await inPage(browser, server, async ({ Device, TensorError, train }, CAUGHT) => {
    const caught = eval(CAUGHT);
    // An optimizer's skipNonFinite turns its device's checks on at its first step.
    const plain = await Device.request();
    const w = plain.variable(plain.tensor([1, 2]));
    const sgd = train.sgd(1e19);
    const skipping = [sgd.skipNonFinite, caught(() => { sgd.skipNonFinite = 1; })];
    sgd.skipNonFinite = true;
    const before = plain.checkNumerics;
    const stepCost = sgd.minimize(() => w.square().sum(), true, [w]);
    await stepCost.data();
    const overflow = sgd.minimize(() => w.square().sum(), true, [w]);
    const overflowKind = await overflow.data().then(() => null, (e) => e.root.kind);
    skipping.push(before, plain.checkNumerics, overflowKind, Array.from(await w.data()).every(Number.isFinite));
    const gpu = await Device.request({ debug: { checkNumerics: true, captureStacks: true } });
    const x = gpu.tensor([1, 0, 4]);
    const doubled = x.mul(2);
    const log = doubled.log();
    const logged = log.add(1);
    const error = await logged.data().then(() => null, (e) => e);
    const own = Array.from(await gpu.tensor([NaN, 1]).exp().data());
    const synced = await gpu.sync().then(() => null, (e) => e.failures.map((f) => f.root.kind));
    const on = gpu.checkNumerics;
    const bad = caught(() => { gpu.checkNumerics = 'yes'; });
    gpu.checkNumerics = false;
    const off = Array.from(await x.log().data());
    for (const t of [doubled, log, logged]) t.dispose();
    return {
      isTensorError: error instanceof TensorError,
      root: { kind: error.root.kind, op: error.root.op, message: error.root.message },
      registeredAt: error.registeredAt,
      own, synced, on, bad, off, after: gpu.checkNumerics, skipping,
      held: gpu.stats().failuresHeld,
    };
  }, CAUGHT);
  assert.equal(result.isTensorError, true);
  assert.deepEqual(result.root, { kind: 'non-finite', op: 'log', message: 'it made -Infinity at [1] of its [3] result from finite operands: 0' });
  assert.match(result.registeredAt, /<anonymous>:\d+:\d+$/);
  assert.ok(Number.isNaN(result.own[0]) && Math.abs(result.own[1] - Math.E) < 1e-6, 'the page\'s NaN is a value');
  assert.deepEqual(result.synced, ['non-finite'], 'sync() reports it once');
  assert.equal(result.on, true);
  assert.equal(result.bad, 'TypeError: checkNumerics: takes a boolean');
  assert.deepEqual(result.off, [0, -Infinity, Math.log(4)].map((v) => Math.fround(v)));
  assert.equal(result.after, false);
  assert.equal(result.held, 0, 'the failure went with its tensor');
  assert.deepEqual(result.skipping, [false, 'TypeError: skipNonFinite: takes a boolean', false, true, 'non-finite', true]);
});

test('profiles of synchronous fns called together each get their own kernels, and one called while an async fn\'s runs is refused', async () => {
  // Found by outside testing: a profile ended in its promise, so a second
  // profile called meanwhile took the first's kernels and left it none.
  const { result } = await inPage(browser, server, async ({ Device }) => {
    const gpu = await Device.request({ hostMaxElements: 0 });
    const x = gpu.tensor([1, -2, 3, -4]);
    const [neg, abs] = await Promise.all([gpu.profile(() => x.neg().sum()), gpu.profile(() => x.abs().sum())]);
    let finish;
    const running = gpu.profile(() => new Promise((resolve) => { finish = resolve; }));
    let refused = 'not refused';
    try {
      gpu.profile(() => x.mul(2));
    } catch (e) {
      refused = { isError: e instanceof Error, op: e.op, message: e.message };
    }
    finish(x.square().sum());
    const awaited = await running;
    const again = await gpu.profile(() => x.add(1).sum());
    const other = await Device.request();
    other.destroy();
    let lost = 'not refused';
    try {
      other.profile(() => 1);
    } catch (e) {
      lost = e.message;
    }
    return { neg: neg.kernelNames, abs: abs.kernelNames, refused, awaited: awaited.kernelNames, again: again.kernelNames, lost, total: await awaited.result.data() };
  });
  const has = (names, op) => names.length === 1 && names[0].includes(op);
  assert.ok(has(result.neg, 'neg') && !result.neg[0].includes('abs'), `the first profile's own kernel: ${result.neg}`);
  assert.ok(has(result.abs, 'abs') && !result.abs[0].includes('neg'), `the second's: ${result.abs}`);
  assert.equal(result.refused.isError, true, JSON.stringify(result.refused));
  assert.equal(result.refused.op, 'profile');
  assert.match(result.refused.message, /another profile of this device is running: profiles do not nest/);
  assert.ok(has(result.awaited, 'square'), `the async profile's kernel: ${result.awaited}`);
  assert.equal(result.total[0], 30);
  assert.ok(has(result.again, 'add'), `a profile after it: ${result.again}`);
  assert.match(result.lost, /^profile: .*lost/, 'a destroyed device profiles nothing');
});

test('a read names where it was asked only on a device that captures stacks', async () => {
  const { result } = await inPage(browser, server, async ({ Device }) => {
    const askedAt = async (options) => {
      const gpu = await Device.request(options);
      return gpu.zeros([2 ** 18, 2 ** 18]).add(1).data().then(() => 'read', (e) => e.askedAt);
    };
    return { plain: await askedAt(), captured: await askedAt({ debug: { captureStacks: true } }) };
  });
  assert.equal(result.plain, null);
  // This test's code runs through `new Function`, so its frame is `<anonymous>`.
  assert.match(result.captured, /^<anonymous>:\d+:\d+$/);
});

test('matmul(b, transposeA, transposeB) and split(numOrSizeSplits, axis) take TF.js\'s arguments and refuse bad ones by name', async () => {
  const { result } = await inPage(browser, server, async ({ Device }) => {
    const gpu = await Device.request();
    const error = (f) => { try { f(); return null; } catch (e) { return `${e.name}: ${e.message}`; } };
    const a = gpu.tensor([[1, 2], [3, 4], [5, 6]]); // [3, 2]
    const b = gpu.tensor([[1, 0, 2], [0, 1, 3]]); // [2, 3]
    const x = gpu.tensor([[0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11]]);
    const ops = gpu.stats().opsRegistered;
    const bad = {
      notBoolean: error(() => a.matmul(b, 'yes')),
      inner: error(() => a.matmul(b, true, false)),
      notDividing: error(() => x.split(4, 1)),
      sizes: error(() => x.split([2, 2], 1)),
      fraction: error(() => x.split(1.5, 1)),
      axis: error(() => x.split(2, 3)),
    };
    const queued = gpu.stats().opsRegistered - ops;
    const pieces = x.split([1, -1, 2], 1);
    return {
      plain: await a.matmul(b).array(),
      // a^T [2, 3] @ b^T [3, 2]
      both: await a.matmul(b, true, true).array(),
      shapes: pieces.map((p) => p.shape),
      middle: await pieces[1].array(),
      halves: await Promise.all(x.split(2).map((p) => p.array())),
      bad,
      queued,
    };
  });
  assert.deepEqual(result.plain, [[1, 2, 8], [3, 4, 18], [5, 6, 28]]);
  assert.deepEqual(result.both, [[11, 18], [14, 22]]);
  assert.deepEqual(result.shapes, [[2, 1], [2, 3], [2, 2]]);
  assert.deepEqual(result.middle, [[1, 2, 3], [7, 8, 9]]);
  assert.deepEqual(result.halves, [[[0, 1, 2, 3, 4, 5]], [[6, 7, 8, 9, 10, 11]]]);
  assert.match(result.bad.notBoolean, /^TypeError: matmul: transposeA must be a boolean/);
  assert.match(result.bad.inner, /^Error: matmul: inner dimensions differ: \[2,3\] x \[2,3\]/);
  assert.match(result.bad.notDividing, /^RangeError: split: 4 pieces do not divide an axis of size 6/);
  assert.match(result.bad.sizes, /^RangeError: split: sizes \[2, 2\] do not add up to the axis' size 6/);
  assert.match(result.bad.fraction, /^(TypeError|RangeError): split: numOrSizeSplits/);
  assert.match(result.bad.axis, /^RangeError: split: axis 3 is out of range for rank 2/);
  assert.equal(result.queued, 0, 'a refused call queues nothing');
});

test('pad(paddings, constantValue), tile(reps) and bandPart(numLower, numUpper) take TF.js\'s arguments and refuse bad ones by name', async () => {
  const { result } = await inPage(browser, server, async ({ Device }) => {
    const gpu = await Device.request();
    const error = (f) => { try { f(); return null; } catch (e) { return `${e.name}: ${e.message}`; } };
    const x = gpu.tensor([[1, 2], [3, 4]]);
    const ops = gpu.stats().opsRegistered;
    const bad = {
      notPairs: error(() => x.pad([1, 1])),
      triple: error(() => x.pad([[0, 0], [1, 2, 3]])),
      negative: error(() => x.pad([[0, 0], [-1, 0]])),
      value: error(() => x.pad([[0, 0], [0, 1]], 'zero')),
      tooFew: error(() => x.tile([2])),
      fraction: error(() => x.tile([1.5, 1])),
      bandVector: error(() => gpu.tensor([1, 2]).bandPart(0, 0)),
      bandFraction: error(() => x.bandPart(0.5, 0)),
    };
    const queued = gpu.stats().opsRegistered - ops;
    return {
      padded: await x.pad([[0, 1], [1, 0]], 7).array(),
      zeros: await x.pad([[1, 0], [0, 0]]).array(),
      tiled: await x.tile([1, 2]).array(),
      causal: await gpu.tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9]]).bandPart(-1, 0).array(),
      bad,
      queued,
    };
  });
  assert.deepEqual(result.padded, [[7, 1, 2], [7, 3, 4], [7, 7, 7]]);
  assert.deepEqual(result.zeros, [[0, 0], [1, 2], [3, 4]]);
  assert.deepEqual(result.tiled, [[1, 2, 1, 2], [3, 4, 3, 4]]);
  assert.match(result.bad.notPairs, /^TypeError: pad: paddings\[0\]/);
  assert.match(result.bad.triple, /^RangeError: pad: paddings\[1\] must be a \[before, after\] pair, got 3 numbers/);
  assert.match(result.bad.negative, /^RangeError: pad: paddings\[1\]\[0\]/);
  assert.match(result.bad.value, /^TypeError: pad: constantValue must be a number/);
  assert.match(result.bad.tooFew, /^RangeError: tile: reps \[2\] has 1 entries for \[2,2\]/);
  assert.match(result.bad.fraction, /^(TypeError|RangeError): tile: reps\[0\]/);
  assert.deepEqual(result.causal, [[1, 0, 0], [4, 5, 0], [7, 8, 9]]);
  assert.match(result.bad.bandVector, /^RangeError: bandPart: needs a matrix \(rank >= 2\), got \[2\]/);
  assert.match(result.bad.bandFraction, /^(TypeError|RangeError): bandPart: numLower/);
  assert.equal(result.queued, 1, 'a refused call queues nothing (the tensor() of bandVector is queued)');
});

test('int32 and bool tensors follow TF.js: the dtype inferred or asked, typed data(), exact ints, bool comparisons and TF.js upcasting', async () => {
  const { result } = await inPage(browser, server, async ({ Device }) => {
    const gpu = await Device.request();
    const kernels = await Device.request({ hostMaxElements: 0 });
    const kind = (x) => Object.prototype.toString.call(x).slice(8, -1);
    const error = (f) => { try { f(); return null; } catch (e) { return `${e.name}: ${e.message}`; } };
    const on = async (d) => {
      const big = d.tensor(new Int32Array([2147483647, -2147483648, 16777217, -7]));
      const m = d.tensor([[1, 2, 3], [4, 5, 6]]);
      const flags = d.tensor([true, false, true]);
      const data = await big.data();
      return {
        dtypes: [big.dtype, flags.dtype, m.dtype, d.tensor(new Uint8Array([1, 2])).dtype, d.tensor([1, 0], null, 'bool').dtype],
        kinds: [kind(data), kind(await flags.data()), kind(await m.data())],
        exact: Array.from(data),
        transposed: await d.tensor(new Int32Array([16777217, 1, 2, 16777219]), [2, 2]).transpose().array(),
        sumExact: await big.slice([2], [2]).sum().array(),
        wraps: Array.from(await big.add(d.tensor(new Int32Array([1, 0, 0, 0]))).data()),
        floorDiv: Array.from(await d.tensor(new Int32Array([7, -7, 7, 5])).div(d.tensor(new Int32Array([2, 2, -2, 0]))).data()),
        mod: Array.from(await d.tensor(new Int32Array([7, -7, 7, 5])).mod(d.tensor(new Int32Array([2, 2, -2, 0]))).data()),
        compare: { dtype: m.greater(2).dtype, values: await m.greater(2).array() },
        where: await d.where(m.greater(3), m, d.zeros([1], 'int32')).array(),
        logical: Array.from(await flags.logicalAnd(d.tensor([true, true, false])).data()),
        argMax: { dtype: m.argMax(1).dtype, values: Array.from(await m.argMax(1).data()) },
        argMin: Array.from(await m.argMin(0).data()),
        cast: Array.from(await d.tensor([1.7, -1.7, NaN, 3e9]).cast('int32').data()),
        toBool: Array.from(await d.tensor([0, -0, 2, NaN]).cast('bool').data()),
        upcast: [m.add(big.slice([3], [1])).dtype, big.add(1).dtype, flags.add(flags).dtype, big.mean().dtype, flags.sum().dtype],
        filled: [d.zeros([2], 'int32').dtype, d.ones([2], 'bool').dtype, d.full([1], 3, 'int32').dtype, d.arange(0, 3, 1, 'int32').dtype],
        range: Array.from(await d.arange(2, 8, 2, 'int32').data()),
      };
    };
    const ops = gpu.stats().opsRegistered;
    const refused = {
      fraction: error(() => gpu.tensor([1.5], null, 'int32')),
      dtype: error(() => gpu.tensor([1], null, 'float64')),
      log: error(() => gpu.tensor(new Int32Array([1])).log()),
      condition: error(() => gpu.where(gpu.tensor([1, 0]), gpu.tensor([1, 2]), gpu.tensor([3, 4]))),
      logical: error(() => gpu.tensor([1, 0]).logicalNot()),
      cast: error(() => gpu.tensor([1]).cast('int')),
    };
    const queued = gpu.stats().opsRegistered - ops;
    return { host: await on(gpu), kernels: await on(kernels), refused, queued };
  });
  for (const world of ['host', 'kernels']) {
    const r = result[world];
    assert.deepEqual(r.dtypes, ['int32', 'bool', 'float32', 'int32', 'bool'], world);
    assert.deepEqual(r.kinds, ['Int32Array', 'Uint8Array', 'Float32Array'], world);
    assert.deepEqual(r.exact, [2147483647, -2147483648, 16777217, -7], world);
    assert.deepEqual(r.transposed, [[16777217, 2], [1, 16777219]], world);
    assert.equal(r.sumExact, 16777210, world);
    assert.deepEqual(r.wraps, [-2147483648, -2147483648, 16777217, -7], world);
    assert.deepEqual(r.floorDiv, [3, -4, -4, 0], world);
    assert.deepEqual(r.mod, [1, 1, -1, 0], world);
    assert.deepEqual(r.compare, { dtype: 'bool', values: [[0, 0, 1], [1, 1, 1]] }, world);
    assert.deepEqual(r.where, [[0, 0, 0], [4, 5, 6]], world);
    assert.deepEqual(r.logical, [1, 0, 0], world);
    assert.deepEqual(r.argMax, { dtype: 'int32', values: [2, 2] }, world);
    assert.deepEqual(r.argMin, [0, 0, 0], world);
    assert.deepEqual(r.cast, [1, -1, 0, 2147483647], world);
    assert.deepEqual(r.toBool, [0, 0, 1, 1], world);
    assert.deepEqual(r.upcast, ['float32', 'float32', 'int32', 'float32', 'int32'], world);
    assert.deepEqual(r.filled, ['int32', 'bool', 'int32', 'int32'], world);
    assert.deepEqual(r.range, [2, 4, 6], world);
  }
  assert.match(result.refused.fraction, /^RangeError: tensor: value 1.5 at position 0 is not an int32/);
  assert.match(result.refused.dtype, /^TypeError: tensor: dtype must be 'float32', 'int32' or 'bool'/);
  assert.match(result.refused.log, /^Error: log: tensor #\d+ must be a float32 tensor, but it is int32/);
  assert.match(result.refused.condition, /^Error: where: the condition \(tensor #\d+\) must be a bool tensor, but it is float32/);
  assert.match(result.refused.logical, /^Error: logicalNot: .* must be a bool tensor/);
  assert.match(result.refused.cast, /^TypeError: cast: dtype must be/);
  assert.equal(result.queued, 6, 'a refused call queues nothing (the tensors given to refused calls are queued)');
});

test('gather, oneHot and unsortedSegmentSum take TF.js\'s arguments; an index past the table rejects the read with kind index naming it', async () => {
  const { result } = await inPage(browser, server, async ({ Device, TensorError }) => {
    const gpu = await Device.request();
    const error = (f) => { try { f(); return null; } catch (e) { return `${e.name}: ${e.message}`; } };
    const table = gpu.tensor([[1, 2], [3, 4], [5, 6]]);
    const idx = gpu.tensor(new Int32Array([2, 0]));
    const ops = gpu.stats().opsRegistered;
    const bad = {
      floatIndices: error(() => table.gather(gpu.tensor([0, 1]))),
      arrayIndices: error(() => table.gather([0, 1])),
      axis: error(() => table.gather(idx, 2)),
      depth: error(() => idx.oneHot(1)),
      hugeDepth: error(() => idx.oneHot(2 ** 40)),
      segments: error(() => table.unsortedSegmentSum(idx, 0)),
    };
    const queued = gpu.stats().opsRegistered - ops;
    const past = table.gather(gpu.tensor(new Int32Array([1, 3]))).mul(2);
    let rejected;
    try {
      await past.data();
    } catch (e) {
      rejected = { isTensorError: e instanceof TensorError, kind: e.root.kind, op: e.root.op, message: e.root.message };
    }
    return {
      rows: await table.gather(idx).array(),
      columns: await table.gather(gpu.tensor(new Int32Array([1])), 1).array(),
      batched: await table.gather(gpu.tensor(new Int32Array([1, 0, 1]), [3, 1]), 1, 1).array(),
      hot: { dtype: idx.oneHot(3).dtype, values: await idx.oneHot(3).array() },
      smooth: await idx.oneHot(3, 0.9, 0.05, 'float32').array(),
      sums: await table.unsortedSegmentSum(gpu.tensor(new Int32Array([1, 1, 0])), 2).array(),
      top: await (async () => { const { values, indices } = table.topk(1); return [await values.array(), await indices.array()]; })(),
      cumsum: await table.cumsum(0, false, true).array(),
      cumprod: await table.cumprod(1, true).array(),
      prod: { columns: await table.prod(0).array(), ints: await gpu.tensor(new Int32Array([65536, 65536, 5])).prod().array() },
      drawn: { dtype: table.multinomial(4, 3).dtype, shape: table.multinomial(4, 3).shape },
      bad,
      queued,
      rejected,
      afterwards: await table.sum().array(),
    };
  });
  assert.deepEqual(result.rows, [[5, 6], [1, 2]]);
  assert.deepEqual(result.columns, [[2], [4], [6]]);
  assert.deepEqual(result.batched, [[2], [3], [6]]);
  assert.deepEqual(result.hot, { dtype: 'int32', values: [[0, 0, 1], [1, 0, 0]] });
  assert.deepEqual(result.smooth.map((r) => r.map((v) => Math.round(v * 100) / 100)), [[0.05, 0.05, 0.9], [0.9, 0.05, 0.05]]);
  assert.deepEqual(result.sums, [[5, 6], [4, 6]]);
  assert.deepEqual(result.top, [[[2], [4], [6]], [[1], [1], [1]]]);
  assert.deepEqual(result.cumsum, [[9, 12], [8, 10], [5, 6]]);
  assert.deepEqual(result.cumprod, [[1, 1], [1, 3], [1, 5]]);
  assert.deepEqual(result.prod, { columns: [15, 48], ints: 0 });
  assert.deepEqual(result.drawn, { dtype: 'int32', shape: [3, 4] });
  assert.match(result.bad.floatIndices, /^Error: gather: the indices \(tensor #\d+\) must be an int32 tensor, not float32/);
  assert.match(result.bad.arrayIndices, /^TypeError: gather: expected a webfusion Tensor as indices/);
  assert.match(result.bad.axis, /^RangeError: gather: axis 2 is out of range for rank 2/);
  assert.match(result.bad.depth, /^RangeError: oneHot: depth must be at least 2/);
  assert.match(result.bad.hugeDepth, /^RangeError: oneHot: depth must be/);
  assert.match(result.bad.segments, /^RangeError: unsortedSegmentSum: numSegments must be at least 1, got 0/);
  assert.equal(result.queued, 1, 'a refused call queues nothing (the float indices of the first are queued)');
  assert.deepEqual(result.rejected, {
    isTensorError: true,
    kind: 'index',
    op: 'gather',
    message: 'index 3 at [1] of the indices is outside [0, 3), the axis 0 of the table [3,2]',
  });
  assert.equal(result.afterwards, 21, 'the table itself still reads');
});

test('conv2d, conv1d, conv2dTranspose, maxPool and avgPool take TF.js\'s arguments (pads, strides, formats) and their gradients flow', async () => {
  const { result } = await inPage(browser, server, async ({ Device, grads }) => {
    const gpu = await Device.request();
    const error = (f) => { try { f(); return null; } catch (e) { return `${e.name}: ${e.message}`; } };
    // A 3x3 image of 1..9, one channel; a 2x2 filter of ones: window sums.
    const x = gpu.tensor([1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 3, 3, 1]);
    const f = gpu.ones([2, 2, 1, 1]);
    const ops = gpu.stats().opsRegistered;
    const bad = {
      channels: error(() => x.conv2d(gpu.ones([2, 2, 2, 1]), 1, 'valid')),
      pad: error(() => x.conv2d(f, 1, 'full')),
      batchPad: error(() => x.conv2d(f, 1, [[1, 0], [0, 0], [0, 0], [0, 0]])),
      stride: error(() => x.conv2d(f, 0, 'valid')),
      format: error(() => x.conv2d(f, 1, 'valid', 'NWHC')),
      both: error(() => x.conv2d(f, 2, 'valid', 'NHWC', 2)),
      larger: error(() => x.conv2d(gpu.ones([4, 4, 1, 1]), 1, 'valid')),
      filter: error(() => x.conv2d([[1]], 1, 'valid')),
      poolSize: error(() => x.maxPool(0, 1, 'valid')),
    };
    const queued = gpu.stats().opsRegistered - ops;
    const [dx, df] = grads((a, b) => a.conv2d(b, 1, 'valid').sum())([x, f]);
    return {
      valid: await x.conv2d(f, 1, 'valid').array(),
      same: await x.conv2d(f, 1, 'same').array(),
      strided: await x.conv2d(f, [2, 2], 1).array(),
      explicit: (await x.conv2d(f, 1, [[0, 0], [1, 0], [0, 0], [0, 0]]).data()).length,
      nchw: await gpu.tensor([1, 2, 3, 4, 5, 6, 7, 8, 9], [1, 1, 3, 3]).conv2d(f, 1, 'valid', 'NCHW').array(),
      dilated: await x.conv2d(f, 1, 'valid', 'NHWC', 2).array(),
      oneD: await gpu.tensor([1, 2, 3, 4], [4, 1]).conv1d(gpu.ones([2, 1, 1]), 1, 'valid').array(),
      transposed: await gpu.ones([1, 2, 2, 1]).conv2dTranspose(f, [1, 3, 3, 1], 1, 'valid').array(),
      maxPool: await x.maxPool(2, 1, 'valid').array(),
      avgPool: await x.avgPool([2, 2], 2, 'same').array(),
      // A pad as wide as the window: the windows wholly in it average to 0, as TF.js's do.
      wholePad: await x.avgPool(2, 2, 2).array(),
      poolGrad: await grads((a) => a.maxPool(2, 2, 'same').sum())([x])[0].array(),
      dx: await dx.array(),
      df: await df.array(),
      bad,
      queued,
    };
  });
  assert.deepEqual(result.valid, [[[[12], [16]], [[24], [28]]]]);
  // 'same' pads after: the last row and column see one padded line.
  assert.deepEqual(result.same, [[[[12], [16], [9]], [[24], [28], [15]], [[15], [17], [9]]]]);
  assert.deepEqual(result.strided, [[[[1], [5]], [[11], [28]]]]);
  assert.equal(result.explicit, 3 * 2);
  assert.deepEqual(result.nchw, [[[[12, 16], [24, 28]]]]);
  assert.deepEqual(result.dilated, [[[[20]]]]);
  assert.deepEqual(result.oneD, [[3], [5], [7]]);
  assert.deepEqual(result.transposed, [[[[1], [2], [1]], [[2], [4], [2]], [[1], [2], [1]]]]);
  assert.deepEqual(result.maxPool, [[[[5], [6]], [[8], [9]]]]);
  // 'same' windows past the image average only what they hold.
  assert.deepEqual(result.avgPool, [[[[3], [4.5]], [[7.5], [9]]]]);
  assert.deepEqual(result.poolGrad, [[[[0], [0], [0]], [[0], [1], [1]], [[0], [1], [1]]]]);
  assert.deepEqual(result.dx, [[[[1], [2], [1]], [[2], [4], [2]], [[1], [2], [1]]]]);
  assert.deepEqual(result.df, [[[[12]], [[16]]], [[[24]], [[28]]]]);
  assert.match(result.bad.channels, /^Error: conv2d: the input has 1 channels but the filter \[2,2,2,1\] takes 2/);
  assert.match(result.bad.pad, /^RangeError: conv2d: pad must be 'valid', 'same', a number or explicit pairs/);
  assert.match(result.bad.batchPad, /^RangeError: conv2d: an explicit pad is four \[before, after\] pairs/);
  assert.match(result.bad.stride, /^RangeError: conv2d: strides must each be at least 1/);
  assert.match(result.bad.format, /^RangeError: conv2d: dataFormat must be 'NHWC' or 'NCHW', got 'NWHC'/);
  assert.match(result.bad.both, /^RangeError: conv2d: strides \[2, 2\] and dilations \[2, 2\] cannot both be above 1/);
  assert.match(result.bad.larger, /^RangeError: conv2d: the filter's height \(4 taps, dilation 1: 4 wide\) is larger than the padded input's \(3\)/);
  assert.match(result.bad.filter, /^TypeError: conv2d: expected a webfusion Tensor as filter/);
  assert.match(result.bad.poolSize, /^RangeError: maxPool: filterSize must each be at least 1/);
  assert.deepEqual(result.wholePad, [[[[0], [0], [0]], [[0], [3], [4.5]], [[0], [7.5], [9]]]]);
  assert.equal(result.queued, 2, 'a refused call queues nothing (the two filters made for refused calls are queued)');
});

test('depthwiseConv2d, moments, batchNorm, dropout and the resizes take TF.js\'s arguments and give its values', async () => {
  const { result } = await inPage(browser, server, async ({ Device, grads }) => {
    const gpu = await Device.request();
    const error = (f) => { try { f(); return null; } catch (e) { return `${e.name}: ${e.message}`; } };
    // Two channels: 1..4 and 10..40 over a 2x2 image.
    const x = gpu.tensor([1, 10, 2, 20, 3, 30, 4, 40], [1, 2, 2, 2]);
    const f = gpu.tensor([1, 1, 1, -1], [1, 1, 2, 2]);
    const stats = x.reshape([4, 2]);
    const { mean, variance } = stats.moments(0);
    const ops = gpu.stats().opsRegistered;
    const bad = {
      channels: error(() => x.depthwiseConv2d(gpu.ones([1, 1, 3, 1]), 1, 'valid')),
      size: error(() => x.resizeBilinear([2])),
      corners: error(() => x.resizeNearestNeighbor([3, 3], true, true)),
      // TF.js refuses both for a bilinear resize too (outside testing).
      bilinearCorners: error(() => x.resizeBilinear([3, 3], true, true)),
      rate: error(() => x.dropout(1)),
      mean: error(() => stats.batchNorm(gpu.zeros([3]), variance)),
      epsilon: error(() => stats.batchNorm(mean, variance, null, null, NaN)),
    };
    const queued = gpu.stats().opsRegistered - ops;
    const [dx] = grads((a) => a.depthwiseConv2d(f, 1, 'valid').sum())([x]);
    const dropped = await gpu.ones([1000]).dropout(0.5, null, 3).data();
    return {
      depthwise: await x.depthwiseConv2d(f, 1, 'valid').array(),
      dx: await dx.array(),
      mean: await mean.array(),
      variance: await variance.array(),
      kept: (await stats.moments([0, 1], true).mean.array()),
      normed: await stats.batchNorm(mean, variance, gpu.tensor([0, 1]), gpu.tensor([2, 1]), 0).array(),
      dropped: [...new Set(dropped)].sort(),
      up: await gpu.tensor([2, 2, 4, 4], [2, 2, 1]).resizeBilinear([3, 3]).array(),
      aligned: await gpu.tensor([2, 2, 4, 4], [2, 2, 1]).resizeBilinear([3, 3], true).array(),
      nearest: await gpu.tensor([1, 2, 3, 4], [1, 2, 2, 1]).resizeNearestNeighbor([3, 3]).array(),
      bad,
      queued,
    };
  });
  // Channel 0 times 1 and 1; channel 1 times 1 and -1.
  assert.deepEqual(result.depthwise, [[[[1, 1, 10, -10], [2, 2, 20, -20]], [[3, 3, 30, -30], [4, 4, 40, -40]]]]);
  assert.deepEqual(result.dx, [[[[2, 0], [2, 0]], [[2, 0], [2, 0]]]]);
  assert.deepEqual(result.mean, [2.5, 25]);
  assert.deepEqual(result.variance, [1.25, 125]);
  assert.deepEqual(result.kept, [[13.75]]);
  const s0 = 1 / Math.sqrt(1.25);
  const normed = result.normed.flat();
  const want = [-1.5, -1.5, -0.5, -0.5, 0.5, 0.5, 1.5, 1.5].map((d, i) => (i % 2 === 0 ? d * s0 * 2 : d * s0 + 1));
  normed.forEach((v, i) => assert.ok(Math.abs(v - want[i]) < 1e-5, `batchNorm [${i}] = ${v}, want ${want[i]}`));
  assert.deepEqual(result.dropped, [0, 2]);
  const third = 10 / 3;
  const up = [2, 2, 2, third, third, third, 4, 4, 4];
  result.up.flat(2).forEach((v, i) => assert.ok(Math.abs(v - up[i]) < 1e-6, `resizeBilinear [${i}] = ${v}, want ${up[i]}`));
  assert.deepEqual(result.aligned.flat(2), [2, 2, 2, 3, 3, 3, 4, 4, 4]);
  assert.deepEqual(result.nearest.flat(3), [1, 1, 2, 1, 1, 2, 3, 3, 4]);
  assert.match(result.bad.channels, /^Error: depthwiseConv2d: the input has 2 channels but the filter/);
  assert.match(result.bad.size, /^RangeError: resizeBilinear: size must be \[height, width\]/);
  assert.match(result.bad.corners, /^Error: resizeNearestNeighbor: alignCorners and halfPixelCenters cannot both be true/);
  assert.match(result.bad.bilinearCorners, /^Error: resizeBilinear: alignCorners and halfPixelCenters cannot both be true/);
  assert.match(result.bad.rate, /^RangeError: dropout: rate must be in \[0, 1\), got 1/);
  assert.match(result.bad.mean, /^Error: batchNorm: mean \[3\] does not broadcast to x \[4,2\]/);
  assert.match(result.bad.epsilon, /^RangeError: batchNorm: varianceEpsilon must be finite/);
  assert.equal(result.queued, 2, 'a refused call queues nothing (the two tensors made for refused calls are queued)');
});

// Found by outside testing: TF.js keeps the values a read brought back, and
// code written for it calls dataSync() after `await data()`; ours threw.
test('dataSync and arraySync answer with the values an earlier data() or array() of the object brought back, a copy each time, for that tensor only', async () => {
  const { result } = await inPage(browser, server, async ({ Device, TensorError }) => {
    const gpu = await Device.request({ hostMaxElements: 0, debug: { checkNumerics: true } });
    const thrown = (f) => {
      try {
        f();
        return null;
      } catch (e) {
        return { isTensorError: e instanceof TensorError, op: e.op, kind: e.root?.kind, message: e.message };
      }
    };
    const y = gpu.tensor([1, 2, 3]).mul(2);
    const before = thrown(() => y.dataSync());
    const arrayBefore = thrown(() => y.arraySync());
    const read = await y.data();
    read[0] = 99;
    const first = Array.from(y.dataSync());
    y.dataSync()[1] = 99;
    const second = Array.from(y.dataSync());
    const nested = gpu.tensor([1, 2, 3, 4], [2, 2]).mul(2);
    await nested.data();
    const ints = gpu.tensor([4, 5], [2], 'int32').add(gpu.tensor([1, 1], [2], 'int32'));
    await ints.array();
    const flags = gpu.tensor([1, 2]).greater(1.5);
    await flags.data();
    const other = gpu.tensor([1, 2, 3]).mul(2);
    const v = gpu.variable(gpu.tensor([7, 8]));
    await v.data();
    v.assign(gpu.tensor([9, 10]).mul(1));
    const stale = thrown(() => v.dataSync());
    await v.array();
    const assigned = Array.from(v.dataSync());
    const failed = gpu.tensor([1, -1]).log();
    const racing = failed.data().catch(() => 'rejected');
    const disposedMidRead = gpu.tensor([3]).mul(3);
    const pending = disposedMidRead.data();
    disposedMidRead.dispose();
    await pending;
    const lost = await Device.request({ hostMaxElements: 0 });
    const kept = lost.tensor([1, 2]).mul(3);
    await kept.data();
    lost.destroy();
    return {
      before,
      first,
      second,
      arrayBefore,
      nested: nested.arraySync(),
      scalar: (await (async () => { const s = gpu.tensor(5).mul(2); await s.array(); return s.arraySync(); })()),
      ints: Array.from(ints.dataSync()),
      isInt32Array: ints.dataSync() instanceof Int32Array,
      flags: Array.from(flags.dataSync()),
      isUint8Array: flags.dataSync() instanceof Uint8Array,
      other: thrown(() => other.dataSync()),
      stale,
      assigned,
      racing: await racing,
      failed: thrown(() => failed.dataSync()),
      disposed: thrown(() => disposedMidRead.dataSync()),
      lost: thrown(() => kept.dataSync()),
    };
  });
  assert.match(result.before.message, /dataSync: tensor #\d+ of shape \[3\] has its bytes on the GPU/);
  assert.deepEqual(result.first, [2, 4, 6], 'the array data() gave is the caller\'s: writing into it changes nothing kept');
  assert.deepEqual(result.second, [2, 4, 6], 'each dataSync() is a copy');
  assert.equal(result.arrayBefore.op, 'arraySync');
  assert.match(result.arrayBefore.message, /^arraySync: tensor #\d+ of shape \[3\] has its bytes on the GPU.*await tensor\.array\(\)/);
  assert.deepEqual(result.nested, [[2, 4], [6, 8]], 'arraySync nests what data() kept');
  assert.equal(result.scalar, 10);
  assert.deepEqual(result.ints, [5, 6], 'kept by array() too');
  assert.equal(result.isInt32Array, true);
  assert.deepEqual(result.flags, [0, 1]);
  assert.equal(result.isUint8Array, true);
  assert.match(result.other.message, /has its bytes on the GPU/, 'an equal tensor not read is not answered');
  assert.match(result.stale.message, /dataSync: tensor #\d+ of shape \[2\] has its bytes on the GPU/, 'after assign, the variable\'s old values are not its values');
  assert.deepEqual(result.assigned, [9, 10]);
  assert.equal(result.racing, 'rejected');
  assert.equal(result.failed.isTensorError, true);
  assert.match(result.disposed.message, /was disposed/);
  assert.equal(result.lost.isTensorError, true, 'a lost device fails its tensors, read or not, as data() does');
  assert.equal(result.lost.kind, 'device-lost');
});

test('dataSync answers what the host holds, empty values included, throws a TensorError for work that failed there and an Error naming dataSync for bytes on the GPU, work or values past hostMaxElements', async () => {
  const { result } = await inPage(browser, server, async ({ Device, TensorError }) => {
    const gpu = await Device.request({ debug: { checkNumerics: true } });
    const message = (f) => {
      try {
        f();
        return null;
      } catch (e) {
        return { isTensorError: e instanceof TensorError, isError: e instanceof Error, op: e.op, kind: e.root?.kind, message: e.message };
      }
    };
    const ints = gpu.tensor([8, 3, 4], [3], 'int32');
    const shape = gpu.stack([ints.slice([0], [1]).reshape([]), ints.slice([1], [2]).prod()]);
    const flags = gpu.tensor([1, 0, 1], [3], 'bool');
    const big = gpu.ones([64, 64]).mul(2);
    const failed = gpu.tensor([1, -1]).log();
    const kernelsOnly = await Device.request({ hostMaxElements: 0 });
    return {
      shape: Array.from(shape.dataSync()),
      isInt32Array: shape.dataSync() instanceof Int32Array,
      flags: Array.from(flags.logicalNot().dataSync()),
      isUint8Array: flags.logicalNot().dataSync() instanceof Uint8Array,
      big: message(() => big.dataSync()),
      bigLater: (await big.data())[0],
      given: message(() => gpu.tensor(new Float32Array(2000)).dataSync()),
      empty: message(() => big.slice([0, 0], [0, 64]).dataSync()),
      emptyGiven: Array.from(gpu.tensor([]).dataSync()),
      emptyMade: Array.from(gpu.zeros([0, 3]).add(1).dataSync()),
      emptyKernelsOnly: message(() => kernelsOnly.tensor([]).dataSync()),
      emptyLater: Array.from(await gpu.zeros([2, 0]).data()),
      failed: message(() => failed.dataSync()),
      kernels: gpu.stats().kernelsLaunched,
      // After the count: a kernel reads the empty values the host holds.
      emptyProduct: Array.from(await gpu.tensor([], [2, 0]).matmul(gpu.tensor([], [0, 3])).data()),
    };
  });
  assert.deepEqual(result.shape, [8, 12]);
  assert.equal(result.isInt32Array, true);
  assert.deepEqual(result.flags, [0, 1, 0]);
  assert.equal(result.isUint8Array, true);
  assert.equal(result.big.isError, true);
  assert.equal(result.big.isTensorError, false);
  assert.equal(result.big.op, 'dataSync');
  assert.match(result.big.message, /dataSync: tensor #\d+ of shape \[64, 64\] has its bytes on the GPU.*await tensor\.data\(\)/);
  assert.equal(result.bigLater, 2, 'the asynchronous read after it gets the values');
  // Found by outside testing: values the page gave past hostMaxElements are
  // uploaded, and the message said they were computed there.
  assert.match(result.given.message, /has its bytes on the GPU.*values the page gave of at most `hostMaxElements` elements/);
  // Found by outside testing: an empty tensor's refusal said it had bytes.
  assert.match(result.empty.message, /dataSync: tensor #\d+ of shape \[0, 64\] has no elements but is made on the GPU.*await tensor\.data\(\)/);
  // Found by outside testing: an empty tensor the page gave, or small work
  // made, has nothing to wait for, and TF.js answers [] for it.
  assert.deepEqual(result.emptyGiven, []);
  assert.deepEqual(result.emptyMade, []);
  assert.deepEqual(result.emptyProduct, [0, 0, 0, 0, 0, 0], 'a kernel reads empty values the host holds');
  assert.match(result.emptyKernelsOnly.message, /has no elements but is made on the GPU/, 'a kernels-only device keeps even an empty tensor on the GPU');
  assert.deepEqual(result.emptyLater, []);
  assert.equal(result.failed.isTensorError, true);
  assert.equal(result.failed.kind, 'non-finite');
  assert.equal(result.kernels, 1, 'only the GPU\'s work ran as a kernel');
});
