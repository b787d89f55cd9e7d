// Failures as a JS user meets them: structured errors with the whole chain,
// sync() that tells the truth, and a page whose module never panics (the
// shared page checks the panic counter around each test).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sharedPage } from './shared-page.mjs';

const { run, page } = sharedPage();

test('the seed scenario rejects only the huge tensor, with the chain, the root and the line that registered it', async () => {
  const result = await page().evaluate(async () => {
    const { seedScenario } = await import('/seed.js');
    return seedScenario(await import('webfusion'));
  });
  assert.deepEqual(result.shape, [262144, 262144]);
  assert.deepEqual(result.smallValues, [2, 4]);
  assert.equal(result.beforeRead, 'resolved', 'huge is an expression until the slice reads it');
  assert.equal(result.syncError.name, 'ExecutionError');
  assert.equal(result.syncError.failures.length, 1);
  assert.equal(result.syncError.failures[0].root.kind, 'allocation');
  assert.equal(result.secondSync, 'resolved');

  const e = result.error;
  assert.equal(e.name, 'TensorError');
  assert.equal(e.isError, true);
  assert.equal(typeof e.failureId, 'number');
  assert.equal(e.depth, 1);
  assert.deepEqual(e.chain.map((hop) => hop.op), ['slice']);
  assert.equal(e.chain[0].needed, `tensor #${e.hugeId}`);
  assert.equal(e.root.kind, 'allocation');
  assert.equal(e.root.op, 'zeros+add');
  assert.equal(e.root.message, '274877906944 bytes exceeds maxBufferSize (268435456)');
  assert.match(e.registeredAt, /\/seed\.js:5:\d+$/, 'the user line that registered the root op');
  assert.match(e.askedAt, /\/seed\.js:\d+:\d+$/);
  assert.equal(e.causeIsError, true);
  assert.match(e.cause, /zeros\+add: 274877906944 bytes exceeds maxBufferSize \(268435456\)/);
  const lines = e.message.split('\n');
  assert.match(lines[0], /^reading tensor #\d+ \[1,2\] failed: its bytes were never written \(failure #\d+, still carried by \d+ buffer\(s\)\)$/);
  assert.equal(lines[1], '  skipped 1 operation(s) below a failure');
  assert.equal(lines[2], `  skipped \`slice\`: it needed tensor #${e.hugeId}, which carried the failure`);
  assert.equal(lines[3], '  caused by: zeros+add: 274877906944 bytes exceeds maxBufferSize (268435456)');
  assert.match(lines[4], /^ {2}registered at http:\/\/127\.0\.0\.1:\d+\/seed\.js:5:\d+$/);
});

test('an injected GPU failure rejects its tensor and leaves independent work of the same flush intact', async () => {
  const result = await run(async ({ Device, TensorError, ExecutionError }) => {
    const gpu = await Device.request();
    const x = gpu.tensor([[1, 2], [3, 4]]);
    gpu.injectFault({ op: 'matmul', nth: 1, kind: 'internal' });
    const product = x.matmul(x);
    const independent = x.add(10);
    const values = Array.from(await independent.data());
    const caught = await product.data().then(() => null, (e) => ({
      name: e.name,
      root: e.root,
      depth: e.depth,
      classes: [e instanceof TensorError, e instanceof Error, e instanceof ExecutionError],
      printed: String(e).split('\n')[0],
      stack: e.stack.split('\n')[0],
      own: Object.keys(e).includes('message'),
    }));
    const synced = await gpu.sync().then(() => null, (e) => [e instanceof ExecutionError, e instanceof Error, e.name]);
    let bad = null;
    try {
      gpu.injectFault({ op: 'matmul', kind: 'meltdown' });
    } catch (e) {
      bad = `${e.name}: ${e.message}`;
    }
    return { values, caught, bad, synced };
  });
  assert.deepEqual(result.values, [11, 12, 13, 14]);
  assert.equal(result.caught.name, 'TensorError');
  assert.deepEqual(result.caught.classes, [true, true, false], 'instanceof TensorError and Error');
  assert.match(result.caught.printed, /^TensorError: reading tensor #\d+/);
  assert.match(result.caught.stack, /^TensorError: reading tensor #\d+/);
  assert.equal(result.caught.own, false, 'message is not enumerable, as on an Error');
  assert.deepEqual(result.synced, [true, true, 'ExecutionError']);
  assert.equal(result.caught.root.kind, 'injected');
  assert.match(result.caught.root.message, /injected internal fault/);
  assert.equal(result.caught.depth, 0);
  assert.match(result.bad, /^RangeError: injectFault: kind must be/);
});

test('two failures reaching one tensor are both reported, each once', async () => {
  const result = await run(async ({ Device }) => {
    const gpu = await Device.request();
    // Each read on its own, so each fails in its own kernel.
    const a = gpu.zeros([2 ** 18, 2 ** 18]).add(1);
    await a.data().catch(() => {});
    const b = gpu.ones([2 ** 18, 2 ** 18]).mul(3);
    await b.data().catch(() => {});
    return a.add(b).data().then(() => null, (e) => e.failures.map((f) => f.root.op).sort());
  });
  assert.deepEqual(result, ['ones+mul', 'zeros+add']);
});

test('failuresHeld returns to 0 and bytesInUse to its start once the tainted tensors are disposed', async () => {
  const result = await run(async ({ Device }) => {
    const gpu = await Device.request();
    const start = gpu.stats();
    // Every handle is kept, so every one can be disposed.
    const zeros = gpu.zeros([2 ** 18, 2 ** 18]);
    const huge = zeros.add(1);
    const slice = huge.slice([0, 0], [2, 2]);
    const below = slice.exp();
    const ones = gpu.ones([64]);
    const fine = ones.mul(3);
    await fine.data();
    await below.data().catch(() => {});
    const held = gpu.stats().failuresHeld;
    for (const t of [zeros, huge, slice, below, ones, fine]) t.dispose();
    await gpu.sync().catch(() => {});
    const end = gpu.stats();
    return { held, failuresHeld: end.failuresHeld, bytesBack: end.bytesInUse === start.bytesInUse };
  });
  assert.ok(result.held > 0);
  assert.equal(result.failuresHeld, 0);
  assert.equal(result.bytesBack, true);
});

test('a destroyed device rejects every read with device-lost, throws on registration, and a new device works', async () => {
  const result = await run(async ({ Device }) => {
    const gpu = await Device.request();
    const a = gpu.tensor([1, 2]).add(1);
    await a.data();
    const queued = a.mul(2);
    gpu.destroy();
    const kinds = [];
    for (const t of [a, queued]) kinds.push(await t.data().then(() => 'read', (e) => e.root.kind));
    let thrown = null;
    try {
      a.exp();
    } catch (e) {
      thrown = e.message;
    }
    const fresh = await Device.request();
    return { kinds, thrown, lost: gpu.lost !== null, fresh: Array.from(await fresh.tensor([3]).neg().data()) };
  });
  assert.deepEqual(result.kinds, ['device-lost', 'device-lost']);
  assert.match(result.thrown, /was lost/);
  assert.equal(result.lost, true);
  assert.deepEqual(result.fresh, [-3]);
});

test('cross-device ops throw at registration and to() carries a failure onto the other device', async () => {
  const result = await run(async ({ Device }) => {
    const [one, two] = [await Device.request(), await Device.request()];
    let thrown = null;
    try {
      one.ones([2]).add(two.ones([2]));
    } catch (e) {
      thrown = e.message;
    }
    const moved = await one.tensor([1, 2]).to(two);
    const sum = Array.from(await moved.add(two.ones([2])).data());
    const tainted = one.zeros([2 ** 18, 2 ** 18]).add(1).slice([0, 0], [1, 2]);
    const carried = await tainted.to(two);
    const e = await carried.data().then(() => null, (err) => ({ kind: err.root.kind, message: err.root.message, chain: err.chain.map((h) => h.op) }));
    return { thrown, sum, e };
  });
  assert.match(result.thrown, /^add: operand 1 \(tensor #\d+\) lives on device #\d+, but the op runs on device #\d+; move it with to\(\)$/);
  assert.deepEqual(result.sum, [2, 3]);
  assert.equal(result.e.kind, 'allocation');
  assert.match(result.e.message, /on device #\d+; carried here by `to`/);
  assert.deepEqual(result.e.chain, ['to', 'slice']);
});

test('a 2000-step training-like loop written without tidy, with a failing step every tenth, keeps memory, failures and tensors held flat', async () => {
  const result = await run(async ({ Device }) => {
    const gpu = await Device.request();
    const x = gpu.randomUniform([16, 8], { min: -1, max: 1, seed: 1 });
    const y = gpu.randomUniform([16, 4], { min: -1, max: 1, seed: 2 });
    let w = gpu.randomUniform([8, 4], { min: -0.5, max: 0.5, seed: 3 });
    // Per outcome: after an update, `w` is an expression holding the old
    // weights and the gradient until the next step's matmul writes it.
    const baseline = [null, null];
    let failed = 0;
    let drift = [];
    let compiledAt20 = 0;
    for (let step = 0; step < 2000; step += 1) {
      if (step === 20) compiledAt20 = gpu.stats().pipelinesCompiled;
      // Into the forward pass (the first `sub` kernel would be the last
      // step's weight update, computed when this step's matmul needs it).
      if (step % 10 === 5) gpu.injectFault({ op: 'tanh' });
      // Every intermediate in a variable, as people write it.
      const h = x.matmul(w);
      const out = h.tanh();
      const diff = out.sub(y);
      const sq = diff.square();
      const loss = sq.mean();
      const xt = x.transpose();
      const scaled = diff.mul(0.01);
      const grad = xt.matmul(scaled);
      let outcome = 0;
      try {
        await loss.data();
        const next = w.sub(grad);
        w.dispose();
        w = next;
      } catch (e) {
        if (e.name !== 'TensorError' || e.root.op !== 'tanh') throw e;
        failed += 1;
        outcome = 1;
      }
      for (const t of [h, out, diff, sq, loss, xt, scaled, grad]) t.dispose();
      await gpu.sync().catch(() => {});
      const s = gpu.stats();
      const now = [s.bytesInUse, s.failuresHeld, s.tensorsHeld];
      if (baseline[outcome] === null) baseline[outcome] = now;
      else if (now.join() !== baseline[outcome].join()) drift.push({ step, now });
    }
    const weights = await w.data();
    const compiledAfter = gpu.stats().pipelinesCompiled - compiledAt20;
    return { failed, drift: drift.slice(0, 3), baseline, compiledAfter, finite: weights.every(Number.isFinite), uncaptured: gpu.stats().uncapturedErrors };
  });
  assert.equal(result.failed, 200);
  assert.deepEqual(result.drift, [], `bytesInUse, failuresHeld, tensorsHeld stay at ${result.baseline}`);
  for (const b of result.baseline) {
    assert.equal(b[1], 0, 'no failure held between steps');
    assert.equal(b[2], 3, 'x, y and w');
  }
  assert.equal(result.compiledAfter, 0, 'a failing step compiles nothing once its kernels were seen');
  assert.equal(result.finite, true);
  assert.equal(result.uncaptured, 0);
});

test('a TensorError and an ExecutionError are real Errors: a structured clone (a Worker\'s postMessage) keeps the message, no internal field shows, and free() does nothing', async () => {
  // Found by outside testing: both were wasm-bindgen objects whose
  // prototype inherited Error's, so a clone was `[object Object]` without
  // its message, and the object's pointer was an enumerable field.
  const r = await run(async ({ Device }) => {
    const gpu = await Device.request({ hostMaxElements: 0 });
    gpu.injectFault({ op: 'exp' });
    const x = gpu.tensor([1, 2]).exp();
    let read;
    try {
      await x.data();
    } catch (e) {
      read = e;
    }
    gpu.injectFault({ op: 'neg' });
    gpu.tensor([1, 2]).neg();
    let synced;
    try {
      await gpu.sync();
    } catch (e) {
      synced = e;
    }
    const describe = (e) => {
      const clone = structuredClone(e);
      const described = {
        tag: Object.prototype.toString.call(e),
        own: Object.keys(e).filter((k) => k.startsWith('__')),
        name: e.name,
        kind: e.failures?.[0]?.root?.kind,
        cloneTag: Object.prototype.toString.call(clone),
        cloneMessage: clone.message,
        message: e.message,
      };
      // An error holds no wasm memory: the wasm class's free() it would
      // inherit freed a null pointer and threw.
      try {
        e.free();
        e[Symbol.dispose]?.();
        described.freed = Object.keys(e).filter((k) => k.startsWith('__')).length === 0 ? 'ok' : 'a field was set';
      } catch (thrown) {
        described.freed = String(thrown);
      }
      return described;
    };
    return { read: describe(read), synced: describe(synced) };
  });
  for (const [what, e] of Object.entries(r)) {
    assert.equal(e.tag, '[object Error]', what);
    assert.deepEqual(e.own, [], `${what}: no internal field`);
    assert.equal(e.cloneTag, '[object Error]', what);
    assert.equal(e.cloneMessage, e.message, `${what}: the clone keeps the message`);
    assert.equal(e.kind, 'injected', what);
    assert.equal(e.freed, 'ok', `${what}: free() and Symbol.dispose do nothing`);
  }
  assert.equal(r.read.name, 'TensorError');
  assert.equal(r.synced.name, 'ExecutionError');
});
