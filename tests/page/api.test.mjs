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
    return { message, sum: Array.from(await sum.data()), again: Array.from(await again.data()) };
  });
  assert.match(result.message, /was disposed/);
  assert.deepEqual(result.sum, [4, 6]);
  assert.deepEqual(result.again, [4, 6]);
});
