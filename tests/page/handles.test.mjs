// What a JS object of this package is: recognised by its brand, one handle
// per object, released by dispose(), free() or Symbol.dispose alike (and by
// the garbage collector), and kept or released by tidy().
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { inPage, launch, serveFixture } from './browser.mjs';

let browser;
let server;
before(async () => {
  browser = await launch({ gc: true });
  server = await serveFixture();
});
after(async () => {
  await browser?.close();
  server?.close();
});

/** Runs `f` and returns what it threw, as plain data (null if it returned). */
const CAUGHT = `(f) => {
  try {
    f();
    return null;
  } catch (e) {
    return { name: e.name, message: e.message, op: e.op, isError: e instanceof Error };
  }
}`;

test('a foreign class named Tensor is refused, and never computes with the webfusion tensor whose id it copies', async () => {
  const { result } = await inPage(browser, server, async ({ Device }, CAUGHT) => {
    const caught = eval(CAUGHT);
    const gpu = await Device.request();
    const s = gpu.tensor([100, 200]);
    class Tensor {
      constructor(id) {
        this.id = id;
      }
    }
    const ops = gpu.stats().opsRegistered;
    return {
      foreign: caught(() => gpu.tensor([1, 1]).add(new Tensor(s.id))),
      plain: caught(() => gpu.tensor([1, 1]).mul({ id: s.id })),
      string: caught(() => s.matmul('oops')),
      missing: caught(() => gpu.where(s, s)),
      // Only the two gpu.tensor([1, 1]) calls registered anything.
      registered: gpu.stats().opsRegistered - ops,
    };
  }, CAUGHT);
  assert.deepEqual(result.foreign, {
    name: 'TypeError', op: 'add', isError: true,
    message: 'add: expected a webfusion Tensor or a number, got an object of class Tensor',
  });
  assert.equal(result.plain.message, 'mul: expected a webfusion Tensor or a number, got a plain object');
  assert.equal(result.string.message, 'matmul: expected a webfusion Tensor, got the string "oops"');
  assert.equal(result.missing.message, 'where: expected a webfusion Tensor for b, got undefined');
  assert.equal(result.registered, 2);
});

test('tensors are recognised by their brand, so a renamed class (as a minifier leaves it) changes nothing', async () => {
  const { result } = await inPage(browser, server, async ({ Device, Tensor }) => {
    Object.defineProperty(Tensor, 'name', { value: 'e' });
    const gpu = await Device.request();
    const a = gpu.tensor([1, 2]);
    return Array.from(await gpu.cat([a, a.add(gpu.tensor([10, 20]))]).data());
  });
  assert.deepEqual(result, [1, 2, 11, 22]);
});

test('a copy of a tensor object (a spread, or its fields assigned onto its prototype) is not a tensor, as an argument or as this', async () => {
  const { result } = await inPage(browser, server, async ({ Device, Tensor }, CAUGHT) => {
    const caught = eval(CAUGHT);
    const gpu = await Device.request();
    const s = gpu.tensor([100, 200]);
    const spread = { ...s };
    const onProto = Object.assign(Object.create(Tensor.prototype), s);
    const ops = gpu.stats().opsRegistered;
    return {
      spreadArg: caught(() => s.add(spread)),
      protoArg: caught(() => s.mul(onProto)),
      protoThis: caught(() => onProto.exp()),
      inCat: caught(() => gpu.cat([s, onProto])),
      registered: gpu.stats().opsRegistered - ops,
      works: Array.from(await s.add(s).data()),
    };
  }, CAUGHT);
  assert.equal(result.spreadArg.message, 'add: expected a webfusion Tensor or a number, got a plain object');
  assert.equal(result.protoArg.message, 'mul: expected a webfusion Tensor or a number, got an object of class Tensor');
  assert.deepEqual(result.protoThis, {
    name: 'TypeError', op: 'exp', isError: true,
    message: 'exp: called on an object that is not a webfusion Tensor',
  });
  assert.equal(result.inCat.op, 'cat');
  assert.equal(result.registered, 0, 'no copy registered an op');
  assert.deepEqual(result.works, [200, 400]);
});

test('to() on the same device gives a second object; disposing either leaves the other readable', async () => {
  const { result } = await inPage(browser, server, async ({ Device }) => {
    const gpu = await Device.request();
    const a = gpu.tensor([1, 2]);
    const b = await a.to(gpu);
    b.dispose();
    const aAfter = Array.from(await a.add(1).data());
    const c = await a.to(gpu);
    a.dispose();
    return { sameId: b.id === a.id, aAfter, cAfter: Array.from(await c.data()), distinct: b !== a };
  });
  assert.deepEqual(result, { sameId: true, aAfter: [2, 3], cAfter: [1, 2], distinct: true });
});

test('free() and Symbol.dispose release a tensor as dispose() does, and a later use throws that it was disposed (a read rejects, as TF.js\'s async reads do)', async () => {
  const { result } = await inPage(browser, server, async ({ Device, panicCount }, CAUGHT) => {
    const caught = eval(CAUGHT);
    // Every value in GPU memory (a default device keeps these in wasm).
    const gpu = await Device.request({ hostMaxElements: 0 });
    const start = gpu.stats().bytesInUse;
    const a = gpu.tensor([1, 2, 3, 4]);
    await a.data();
    const held = gpu.stats().bytesInUse - start;
    a.free();
    await gpu.sync();
    const afterFree = gpu.stats().bytesInUse - start;
    const b = gpu.ones([2]);
    b[Symbol.dispose]();
    const c = gpu.ones([2]);
    // A `using` declaration, in the page's parser (this file's may not know it).
    new Function('c', '{ using scoped = c; }')(c);
    const d = gpu.ones([2]);
    d.free();
    d.free();
    d.dispose();
    // TF.js's data() and array() are async functions: a refusal is the
    // promise's rejection, never a throw from the call.
    const rejection = async (f) => {
      const returned = f();
      if (!(returned instanceof Promise)) return { returned: typeof returned };
      return returned.then(() => null, (e) => ({ name: e.name, message: e.message, op: e.op, isError: e instanceof Error }));
    };
    const readThrew = caught(() => a.data().catch(() => {}));
    const arrayThrew = caught(() => a.array().catch(() => {}));
    return {
      readThrew,
      arrayThrew,
      freedRead: await rejection(() => a.data()),
      freedArray: await rejection(() => a.array()),
      held,
      afterFree,
      freed: caught(() => a.exp()),
      freedShape: caught(() => a.shape),
      freedId: a.id,
      symbol: caught(() => b.add(1)),
      using: caught(() => c.relu()),
      asOperand: caught(() => gpu.ones([2]).add(a)),
      again: caught(() => d.sum()),
      panics: panicCount(),
      works: Array.from(await gpu.tensor([5]).neg().data()),
    };
  }, CAUGHT);
  assert.ok(result.held > 0, 'the read tensor held memory');
  assert.equal(result.afterFree, 0, 'free() released it without waiting for the collector');
  assert.match(result.freed.message, /^exp: tensor #\d+ was disposed$/);
  assert.equal(result.freed.name, 'Error');
  assert.equal(result.freed.op, 'exp');
  assert.equal(result.readThrew, null, 'data() of a disposed tensor returns a promise, and throws nothing');
  assert.equal(result.arrayThrew, null, 'array() of a disposed tensor returns a promise, and throws nothing');
  assert.match(result.freedRead.message, /^data: tensor #\d+ was disposed$/);
  assert.equal(result.freedRead.isError, true);
  assert.equal(result.freedRead.op, 'data');
  assert.match(result.freedArray.message, /^array: tensor #\d+ was disposed$/);
  assert.match(result.freedShape.message, /^shape: tensor #\d+ was disposed$/);
  assert.equal(typeof result.freedId, 'number');
  assert.match(result.symbol.message, /^add: tensor #\d+ was disposed$/);
  assert.match(result.using.message, /^relu: tensor #\d+ was disposed$/);
  assert.equal(result.asOperand.message, `add: tensor #${result.freedId} was disposed`);
  assert.match(result.again.message, /^sum: tensor #\d+ was disposed$/);
  assert.equal(result.panics, 0);
  assert.deepEqual(result.works, [-5]);
});

test('free() and Symbol.dispose destroy a device as destroy() does, and a later use throws that it was lost', async () => {
  const { result } = await inPage(browser, server, async ({ Device }, CAUGHT) => {
    const caught = eval(CAUGHT);
    const gpu = await Device.request();
    const t = gpu.ones([2]);
    gpu.free();
    const other = await Device.request();
    other[Symbol.dispose]();
    return {
      zeros: caught(() => gpu.zeros([2])),
      op: caught(() => t.exp()),
      lost: gpu.lost,
      otherLost: other.lost !== null,
      read: await t.data().then(() => 'read', (e) => e.root.kind),
      fresh: Array.from(await (await Device.request()).ones([1]).data()),
    };
  }, CAUGHT);
  assert.match(result.zeros.message, /^zeros: device #\d+ was lost \(the device was destroyed with destroy\(\)\); request a new device$/);
  assert.match(result.op.message, /^exp: device #\d+ was lost/);
  assert.equal(result.lost, 'the device was destroyed with destroy()');
  assert.equal(result.otherLost, true);
  assert.equal(result.read, 'device-lost');
  assert.deepEqual(result.fresh, [1]);
});

test('a tensor object collected without dispose() releases its tensor through the FinalizationRegistry, freed or not', async () => {
  const { result } = await inPage(browser, server, async ({ Device, panicCount }) => {
    const gpu = await Device.request();
    const start = gpu.stats().bytesInUse;
    // Made in a function of its own so no reference survives it.
    const make = async (free) => {
      const t = gpu.tensor(new Float32Array(1 << 16)).add(1);
      await t.data();
      if (free) t.free();
    };
    await make(false);
    await make(true);
    const held = gpu.stats().bytesInUse - start;
    let back = false;
    for (let i = 0; i < 50 && !back; i += 1) {
      globalThis.gc();
      await new Promise((resolve) => setTimeout(resolve, 20));
      await gpu.sync();
      back = gpu.stats().bytesInUse === start;
    }
    return { held, back, panics: panicCount(), works: Array.from(await gpu.tensor([2]).square().data()) };
  });
  assert.ok(result.held > 0, 'the unfreed tensor held memory until collected');
  assert.equal(result.back, true, 'collection released it');
  assert.equal(result.panics, 0, 'collecting a freed object did not release it twice');
  assert.deepEqual(result.works, [4]);
});

test('free and methods read off the class before any object exists still only dispose, and refuse the other class', async () => {
  const { result } = await inPage(browser, server, async ({ Device, Tensor, panicCount }, CAUGHT) => {
    const caught = eval(CAUGHT);
    // Read before the first object guards the prototypes.
    const { free, exp } = Tensor.prototype;
    const dispose = Tensor.prototype[Symbol.dispose];
    const gpu = await Device.request();
    const start = gpu.stats().bytesInUse;
    const make = async (release) => {
      const x = gpu.tensor(new Float32Array(1 << 16));
      const t = x.add(1);
      await t.data();
      x.dispose();
      release.call(t);
      return caught(() => t.exp());
    };
    const freed = await make(free);
    const symbol = await make(dispose);
    await gpu.sync();
    const released = gpu.stats().bytesInUse === start;
    // Each struct is freed once, by its finalizer, when collected.
    for (let i = 0; i < 200; i += 1) await make(free);
    for (let i = 0; i < 5; i += 1) {
      globalThis.gc();
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return {
      freed,
      symbol,
      released,
      otherClass: caught(() => exp.call(gpu)),
      panics: panicCount(),
      works: Array.from(await gpu.tensor([1, 2, 3]).mul(gpu.tensor([4, 5, 6])).data()),
    };
  }, CAUGHT);
  assert.match(result.freed.message, /^exp: tensor #\d+ was disposed$/);
  assert.match(result.symbol.message, /^exp: tensor #\d+ was disposed$/);
  assert.equal(result.released, true, 'the early free released the tensor at once');
  assert.deepEqual(result.otherClass, {
    name: 'TypeError', op: 'exp', isError: true,
    message: 'exp: called on an object that is not a webfusion Tensor',
  });
  assert.equal(result.panics, 0);
  assert.deepEqual(result.works, [4, 10, 18]);
});

test('a method called with the other class as this is refused, naming the method', async () => {
  const { result } = await inPage(browser, server, async ({ Device, Tensor }, CAUGHT) => {
    const caught = eval(CAUGHT);
    const gpu = await Device.request();
    const t = gpu.ones([2]);
    return {
      tensorMethod: caught(() => Tensor.prototype.exp.call(gpu)),
      deviceMethod: caught(() => Device.prototype.zeros.call(t, [2])),
      getter: caught(() => Object.getOwnPropertyDescriptor(Tensor.prototype, 'shape').get.call(gpu)),
      free: caught(() => Tensor.prototype.free.call(gpu)),
      symbolDispose: caught(() => Tensor.prototype[Symbol.dispose].call(gpu)),
      destroy: caught(() => Device.prototype[Symbol.dispose].call(t)),
      works: Array.from(await t.mul(3).data()),
    };
  }, CAUGHT);
  assert.deepEqual(result.tensorMethod, {
    name: 'TypeError', op: 'exp', isError: true,
    message: 'exp: called on an object that is not a webfusion Tensor',
  });
  assert.equal(result.deviceMethod.message, 'zeros: called on an object that is not a webfusion Device');
  assert.equal(result.getter.message, 'shape: called on an object that is not a webfusion Tensor');
  // free() and Symbol.dispose are the guarded release too.
  assert.equal(result.free.message, 'dispose: called on an object that is not a webfusion Tensor');
  assert.equal(result.symbolDispose.message, 'dispose: called on an object that is not a webfusion Tensor');
  assert.equal(result.destroy.message, 'destroy: called on an object that is not a webfusion Device');
  assert.deepEqual(result.works, [3, 3]);
});

test('a method taken off its object, or called on a foreign this, throws a TypeError naming it (a read rejects with it), and the module keeps working', async () => {
  const { result } = await inPage(browser, server, async ({ Device, Tensor, panicCount }, CAUGHT) => {
    const caught = eval(CAUGHT);
    const gpu = await Device.request();
    const t = gpu.ones([2]);
    const add = t.add;
    const zeros = gpu.zeros;
    return {
      unbound: caught(() => add(1)),
      unboundDevice: caught(() => zeros([2])),
      plainThis: caught(() => Tensor.prototype.exp.call({})),
      protoThis: caught(() => Tensor.prototype.exp.call(Object.create(Tensor.prototype))),
      getter: caught(() => Object.getOwnPropertyDescriptor(Tensor.prototype, 'size').get.call(undefined)),
      readThrew: caught(() => { const read = t.data; read().catch(() => {}); }),
      unboundRead: await (async () => { const read = t.data; return read().then(() => null, (e) => ({ name: e.name, op: e.op, message: e.message })); })(),
      foreignArray: await Tensor.prototype.array.call({}).then(() => null, (e) => ({ name: e.name, op: e.op, message: e.message })),
      panics: panicCount(),
      works: Array.from(await t.add(1).data()),
    };
  }, CAUGHT);
  assert.deepEqual(result.unbound, {
    name: 'TypeError', op: 'add', isError: true,
    message: 'add: called on undefined, not a webfusion Tensor: call it on one (a method taken off its object loses it)',
  });
  assert.equal(result.unboundDevice.op, 'zeros');
  assert.match(result.unboundDevice.message, /^zeros: called on undefined, not a webfusion Device/);
  assert.equal(result.plainThis.message, 'exp: called on an object that is not a webfusion Tensor');
  assert.equal(result.protoThis.message, 'exp: called on an object that is not a webfusion Tensor');
  assert.equal(result.getter.op, 'size');
  assert.equal(result.readThrew, null, 'data() taken off its object returns a promise, and throws nothing');
  assert.deepEqual(result.unboundRead, {
    name: 'TypeError', op: 'data',
    message: 'data: called on undefined, not a webfusion Tensor: call it on one (a method taken off its object loses it)',
  });
  assert.deepEqual(result.foreignArray, { name: 'TypeError', op: 'array', message: 'array: called on an object that is not a webfusion Tensor' });
  assert.equal(result.panics, 0);
  assert.deepEqual(result.works, [2, 2]);
});

test('tidy keeps tensors returned at any depth in arrays, plain objects, Maps and Sets, through cycles, and disposes the rest', async () => {
  const { result } = await inPage(browser, server, async ({ Device, tidy }) => {
    const gpu = await Device.request();
    const x = gpu.tensor([1, 2]);
    const made = {};
    const out = tidy(() => {
      made.deep = x.add(1);
      made.key = x.add(2);
      made.value = x.add(3);
      made.inSet = x.add(4);
      made.dropped = x.add(5);
      made.inClass = x.add(6);
      const cycle = { deep: [[[{ t: made.deep }]]] };
      cycle.self = cycle;
      cycle.list = [cycle];
      class Box {
        constructor(t) {
          this.t = t;
        }
      }
      return {
        cycle,
        map: new Map([[made.key, made.value]]),
        set: new Set([made.inSet]),
        box: new Box(made.inClass),
        nested: Object.assign(Object.create(null), { deeper: { list: [1, 'a', null] } }),
      };
    });
    const state = async (t) => t.data().then((v) => Array.from(v), (e) => e.message.replace(/#\d+/, '#N'));
    const states = {};
    for (const [name, t] of Object.entries(made)) {
      try {
        states[name] = await state(t);
      } catch (e) {
        states[name] = e.message.replace(/#\d+/, '#N');
      }
    }
    return { states, sameObject: out.cycle.deep[0][0][0].t === made.deep };
  });
  assert.deepEqual(result.states, {
    deep: [2, 3],
    key: [3, 4],
    value: [4, 5],
    inSet: [5, 6],
    dropped: 'data: tensor #N was disposed',
    inClass: 'data: tensor #N was disposed',
  });
  assert.equal(result.sameObject, true);
});

test('tidy refuses a non-function, and disposes what a throwing function made before rethrowing its error', async () => {
  const { result } = await inPage(browser, server, async ({ Device, tidy }, CAUGHT) => {
    const caught = eval(CAUGHT);
    const gpu = await Device.request();
    let inner = null;
    const boom = new Error('boom');
    let rethrown = null;
    try {
      tidy(() => {
        inner = gpu.ones([2]);
        throw boom;
      });
    } catch (e) {
      rethrown = e === boom;
    }
    return {
      five: caught(() => tidy(5)),
      missing: caught(() => tidy()),
      rethrown,
      inner: caught(() => inner.exp()),
    };
  }, CAUGHT);
  assert.deepEqual(result.five, { name: 'TypeError', op: 'tidy', isError: true, message: 'tidy: fn must be a function, got 5' });
  assert.equal(result.missing.message, 'tidy: fn must be a function, got undefined');
  assert.equal(result.rethrown, true);
  assert.match(result.inner.message, /^exp: tensor #\d+ was disposed$/);
});
