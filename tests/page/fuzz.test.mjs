// A seeded corpus of bad calls to every public method of Device and Tensor:
// wrong types, bad numbers, disposed and freed tensors, foreign objects,
// operands on another device in every tensor position, bad receivers. Each
// must throw at once (not return, not reject later) an Error whose `op` is
// the method and whose message starts with it, queue nothing, never panic,
// and leave the device working.
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

test('every bad call in a seeded corpus is refused at once with an Error naming its op (a read\'s promise rejects with it), queues nothing, never panics, and the device keeps working', async () => {
  const { result } = await inPage(browser, server, async (wf, { seed, combos }) => {
    const { Device, Tensor, tidy, panicCount } = wf;

    // mulberry32: the same seed gives the same corpus.
    let state = seed >>> 0;
    const random = () => {
      state = (state + 0x6d2b79f5) >>> 0;
      let t = state;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
    const pick = (list) => list[Math.floor(random() * list.length)];

    const one = await Device.request();
    const two = await Device.request();
    const gone = await Device.request();
    const m = one.tensor([[1, 2, 3], [4, 5, 6]]);
    const v = one.tensor([1, 2, 3]);
    const mt = m.transpose();
    const m3 = m.expandDims(0);
    const m2 = two.tensor([[1, 2, 3], [4, 5, 6]]);
    const v2 = two.tensor([1, 2, 3]);
    const m2t = m2.transpose();
    const lost = gone.ones([2, 3]);
    gone.destroy();

    const disposed = one.ones([2, 3]);
    disposed.dispose();
    const freed = one.ones([2, 3]);
    freed.free();
    const symbolDisposed = one.ones([2, 3]);
    symbolDisposed[Symbol.dispose]();
    let tidied;
    tidy(() => {
      tidied = one.ones([2, 3]);
    });
    class ForeignTensor {
      constructor(id) {
        this.id = id;
      }
    }
    Object.defineProperty(ForeignTensor, 'name', { value: 'Tensor' });
    class ForeignDevice {}
    Object.defineProperty(ForeignDevice, 'name', { value: 'Device' });

    // Bad values by the kind of argument they are bad for: [label, value].
    const junk = {
      undefined: undefined, null: null, "'oops'": 'oops', "''": '', true: true, '{}': {},
      'a symbol': Symbol('s'), '5n': 5n, 'a function': () => 1, 'a Map': new Map(), 'a Date': new Date(0),
    };
    const of = (obj) => Object.entries(obj);
    const without = (obj, ...keys) => of(obj).filter(([k]) => !keys.includes(k));
    const notTensors = [
      ...of(junk), ['[]', []], ["['a']", ['a']], ['[m]', [m]], ['a Float32Array', new Float32Array(2)],
      ['a foreign class named Tensor', new ForeignTensor(m.id)], ['{ id: m.id }', { id: m.id }],
      ['a disposed tensor', disposed], ['a freed tensor', freed], ['a Symbol.dispose-d tensor', symbolDisposed],
      ['a tidy-disposed tensor', tidied], ['a Device', one], ['a boxed number', new Number(2)],
    ];
    const notNumbers = [
      ...of(junk), ["'5'", '5'], ['[]', []], ['[1]', [1]], ['a boxed number', new Number(5)], ['a tensor', v],
    ];
    const badInts = [
      ...without(junk, 'undefined', 'null'), ["'0'", '0'], ['1.5', 1.5], ['NaN', NaN], ['Infinity', Infinity],
      ['-Infinity', -Infinity], ['2**40', 2 ** 40], ['-(2**40)', -(2 ** 40)], ['99', 99], ['-99', -99],
      ['[]', []], ['[0]', [0]], ['a tensor', v],
    ];
    const badAxes = [
      ...without(junk, 'undefined', 'null'), ["'0'", '0'], ['1.5', 1.5], ['NaN', NaN], ['Infinity', Infinity],
      ['99', 99], ['-99', -99], ['[0, 0]', [0, 0]], ["['a']", ['a']], ['[1.5]', [1.5]], ['[NaN]', [NaN]],
      ['[99]', [99]], ['[[0]]', [[0]]], ["[0, '1']", [0, '1']], ['[2**40]', [2 ** 40]], ['a tensor', v],
    ];
    const badBools = [
      ["'yes'", 'yes'], ['1', 1], ['0', 0], ["'false'", 'false'], ['{}', {}], ['[]', []], ['a symbol', Symbol('b')],
    ];
    const badShapes = [
      ...of(junk), ['5', 5], ['array-like', { length: 1, 0: 2 }], ["['a']", ['a']], ['[true]', [true]],
      ['[null]', [null]], ['[undefined]', [undefined]], ['[NaN]', [NaN]], ['[-1]', [-1]], ['[1.5]', [1.5]],
      ['[Infinity]', [Infinity]], ['[2**32]', [2 ** 32]], ['[1e300]', [1e300]], ['[[2]]', [[2]]], ["['2']", ['2']],
      ['[5n]', [5n]], ['[2**31, 2**31, 4]', [2 ** 31, 2 ** 31, 4]], ['a Float32Array', new Float32Array([2])],
    ];
    const badValues = [
      ...of(junk), ["['a']", ['a']], ['[true]', [true]], ['[null]', [null]], ['[undefined]', [undefined]],
      ['[[1, 2], [3]]', [[1, 2], [3]]], ['[[1], [2, 3]]', [[1], [2, 3]]], ['[1, [2]]', [1, [2]]],
      ["[[1, 'a']]", [[1, 'a']]], ['[[[]], [1]]', [[[]], [1]]], ['a Float64Array', new Float64Array(4)],
      ['a Uint16Array', new Uint16Array(4)], ['[m]', [m]],
    ];
    const badDtypes = [
      ...without(junk, 'undefined', 'null'), ["'float64'", 'float64'], ["'int'", 'int'], ["'Float32'", 'Float32'],
      ["'complex64'", 'complex64'], ['5', 5], ["['int32']", ['int32']],
    ];
    const mb = m.greater(2);
    const mi = m.cast('int32');
    const ii = one.tensor(new Int32Array([0, 1]));
    const badOptionalShapes = [
      ['[4, 1]', [4, 1]], ['[4]', [4]], ['[3]', [3]], ['[2, 2, 1]', [2, 2, 1]], ["'a'", 'a'], ['5', 5],
      ['[-1]', [-1]], ['[1.5]', [1.5]], ['{}', {}], ['[NaN, 2]', [NaN, 2]],
    ];
    const badTensorLists = [
      ...of(junk), ['5', 5], ['[]', []], ["[m, 'x']", [m, 'x']], ['[m, 5]', [m, 5]], ['[m, undefined]', [m, undefined]],
      ['[m, null]', [m, null]], ['[m, disposed]', [m, disposed]], ['[m, freed]', [m, freed]],
      ['[m, foreign Tensor]', [m, new ForeignTensor(m.id)]], ['[m, { id }]', [m, { id: m.id }]], ['[m, one]', [m, one]],
      ['[m, [m]]', [m, [m]]], ['a Set of m', new Set([m])], ['array-like of m', { 0: m, length: 1 }],
    ];
    const badDevices = [
      ...of(junk), ['5', 5], ['a tensor', m], ['a foreign class named Device', new ForeignDevice()],
      ['{ __wbg_ptr: 1 }', { __wbg_ptr: 1 }], ['[two]', [two]],
    ];
    const optionJunk = [
      ["'x'", 'x'], ['5', 5], ['true', true], ['[]', []], ['a function', () => ({})], ['a symbol', Symbol('o')],
    ];

    // Every public method: its op name, its arguments' valid values and the
    // bad values of each, and the receivers it must refuse.
    const T = (name) => (self, ...args) => Tensor.prototype[name].call(self, ...args);
    const D = (name) => (self, ...args) => Device.prototype[name].call(self, ...args);
    const getter = (name) => (self) => Object.getOwnPropertyDescriptor(Tensor.prototype, name).get.call(self);
    const deviceGetter = (name) => (self) => Object.getOwnPropertyDescriptor(Device.prototype, name).get.call(self);
    const badTensorThis = [
      ['disposed', disposed], ['freed', freed], ['Symbol.dispose-d', symbolDisposed], ['tidy-disposed', tidied],
      ['a Device as this', one],
    ];
    const badRegisteringThis = [...badTensorThis, ['lost device', lost]];
    const badDeviceThis = [['a Tensor as this', m]];
    const badRegisteringDeviceThis = [...badDeviceThis, ['lost device', gone]];
    const methods = [];
    const tensorMethod = (name, self, args, receivers = badRegisteringThis) =>
      methods.push({ op: name, call: T(name), self, args, receivers });
    const binary = [
      'add', 'sub', 'mul', 'div', 'pow', 'maximum', 'minimum', 'equal', 'greater', 'greaterEqual', 'less', 'lessEqual',
      'mod', 'floorDiv',
    ];
    const logical = ['logicalAnd', 'logicalOr', 'logicalXor'];
    for (const name of binary) {
      tensorMethod(name, m, [{ valid: v, bad: [...notTensors, ['a [5] tensor', one.zeros([5])]] }]);
    }
    for (const name of ['neg', 'abs', 'exp', 'log', 'sqrt', 'rsqrt', 'square', 'relu', 'gelu', 'sigmoid', 'tanh', 'sin', 'cos', 'tan', 'floor', 'flatten']) {
      tensorMethod(name, m, []);
    }
    for (const name of ['sum', 'mean', 'max', 'min', 'prod', 'logSumExp']) {
      tensorMethod(name, m, [{ valid: 1, bad: badAxes }, { valid: false, bad: badBools }]);
    }
    for (const name of ['argMax', 'argMin', 'softmax', 'logSoftmax', 'expandDims']) {
      tensorMethod(name, m, [{ valid: 1, bad: badInts }]);
    }
    for (const name of logical) {
      tensorMethod(name, mb, [{
        valid: mb,
        bad: [...notTensors, ['5', 5], ['true', true], ['a float tensor', m], ['an int32 tensor', mi],
          ['a [5] bool tensor', one.zeros([5], 'bool')]],
      }]);
    }
    tensorMethod('logicalNot', mb, []);
    tensorMethod('bitwiseAnd', mi, [{
      valid: mi,
      bad: [...notTensors, ['5', 5], ['a float tensor', m], ['a bool tensor', mb],
        ['a [3, 2] int32 tensor', mi.reshape([3, 2])], ['a [3] int32 tensor', one.tensor(new Int32Array(3))]],
    }]);
    const badIndices = [...notTensors, ['5', 5], ['[0, 1]', [0, 1]], ['a float tensor', v], ['a bool tensor', mb]];
    tensorMethod('gather', m, [{ valid: ii, bad: badIndices }, { valid: 0, bad: badInts }, { valid: 0, bad: badInts }]);
    const optionalNumbers = [...without(junk, 'undefined', 'null'), ["'5'", '5'], ['[]', []], ['a tensor', v]];
    tensorMethod('oneHot', ii, [
      { valid: 3, bad: [...badInts.filter(([label]) => label !== '99'), ['1', 1], ['0', 0], ['2**31', 2 ** 31], ['2**40', 2 ** 40]] },
      { valid: 1, bad: optionalNumbers },
      { valid: 0, bad: optionalNumbers },
      { valid: 'float32', bad: badDtypes },
    ]);
    tensorMethod('topk', m, [{ valid: 2, bad: [...without(junk, 'undefined', 'null'), ['-1', -1], ['1.5', 1.5], ['4', 4], ['NaN', NaN]] }, { valid: true, bad: badBools }]);
    for (const name of ['cumsum', 'cumprod']) {
      tensorMethod(name, m, [{ valid: 1, bad: badInts }, { valid: true, bad: badBools }, { valid: false, bad: badBools }]);
    }
    tensorMethod('multinomial', m, [
      { valid: 2, bad: [...badInts.filter(([label]) => label !== '99'), ['0', 0]] },
      { valid: 1, bad: [...without(junk, 'undefined', 'null'), ['-1', -1], ['1.5', 1.5], ['NaN', NaN], ['2**60', 2 ** 60]] },
      { valid: false, bad: badBools },
    ]);
    tensorMethod('unsortedSegmentSum', m, [
      { valid: ii, bad: [...badIndices, ['a [3] int32 tensor', one.tensor(new Int32Array(3))]] },
      { valid: 3, bad: [...badInts.filter(([label]) => label !== '99'), ['0', 0]] },
    ]);
    tensorMethod('cast', m, [{ valid: 'int32', bad: [...badDtypes, ['undefined', undefined]] }]);
    const img = one.ones([1, 5, 5, 2]);
    const taps = one.ones([3, 3, 2, 3]);
    const badSteps = [
      ...without(junk, 'undefined', 'null'), ['0', 0], ['-1', -1], ['1.5', 1.5], ['NaN', NaN], ["'1'", '1'],
      ['[1]', [1]], ['[1, 2, 3]', [1, 2, 3]], ['[0, 1]', [0, 1]], ['2**40', 2 ** 40], ['a tensor', v],
    ];
    const badFilters = [
      ...notTensors, ['5', 5], ['a filter of 3 channels', one.ones([3, 3, 3, 3])], ['a rank-3 tensor', one.ones([3, 3, 2])],
      ['an int32 filter', one.ones([3, 3, 2, 3], 'int32')],
    ];
    const badPads = [
      ...of(junk), ["'full'", 'full'], ['-1', -1], ['1.5', 1.5], ['[[1, 1]]', [[1, 1]]],
      ['a batch pad', [[1, 0], [0, 0], [0, 0], [0, 0]]], ['three pairs', [[0, 0], [1, 1], [1, 1]]],
    ];
    const badFormats = [["'NWHC'", 'NWHC'], ["'nhwc'", 'nhwc'], ['5', 5], ['{}', {}], ["'NWC'", 'NWC']];
    tensorMethod('conv2d', img, [
      { valid: taps, bad: badFilters },
      { valid: 1, bad: badSteps },
      { valid: 'same', bad: badPads },
      { valid: 'NHWC', bad: badFormats },
      { valid: [1, 1], bad: badSteps },
    ]);
    tensorMethod('conv1d', one.ones([1, 6, 2]), [
      { valid: one.ones([3, 2, 3]), bad: [...notTensors, ['a filter of 3 channels', one.ones([3, 3, 3])], ['a rank-4 filter', taps]] },
      { valid: 1, bad: badSteps },
      { valid: 'valid', bad: [...badPads, ['explicit pairs', [[1, 1]]]] },
      { valid: 'NWC', bad: [["'NHWC'", 'NHWC'], ["'nwc'", 'nwc'], ['5', 5]] },
      { valid: 1, bad: [['0', 0], ['1.5', 1.5], ['99', 99], ["'1'", '1']] },
    ]);
    for (const name of ['maxPool', 'avgPool']) {
      tensorMethod(name, img, [
        { valid: 2, bad: badSteps },
        { valid: [2, 2], bad: badSteps },
        // A pad as large as the window is no bad call: TF.js computes it (a
        // window wholly in the padding averages to 0, its max is -Infinity).
        { valid: 'same', bad: badPads },
      ]);
    }
    tensorMethod('depthwiseConv2d', img, [
      {
        valid: one.ones([3, 3, 2, 2]),
        bad: [...notTensors, ['a filter of 3 channels', one.ones([3, 3, 3, 1])], ['a rank-3 tensor', one.ones([3, 3, 2])],
          ['an int32 filter', one.ones([3, 3, 2, 1], 'int32')], ['a filter past the image', one.ones([7, 7, 2, 1])]],
      },
      { valid: 1, bad: badSteps },
      { valid: 'valid', bad: badPads },
      { valid: 'NHWC', bad: badFormats },
      { valid: [1, 1], bad: badSteps },
    ]);
    const badSizes = [
      ...of(junk), ['5', 5], ['[2]', [2]], ['[2, 2, 2]', [2, 2, 2]], ['[0, 2]', [0, 2]], ['[-1, 2]', [-1, 2]],
      ['[1.5, 2]', [1.5, 2]], ['[NaN, 2]', [NaN, 2]], ["['2', 2]", ['2', 2]], ['[2**31, 2**31]', [2 ** 31, 2 ** 31]],
    ];
    for (const name of ['resizeBilinear', 'resizeNearestNeighbor']) {
      tensorMethod(name, img, [{ valid: [3, 4], bad: badSizes }, { valid: false, bad: badBools }, { valid: false, bad: badBools }]);
    }
    tensorMethod('moments', m, [{ valid: 1, bad: badAxes }, { valid: false, bad: badBools }]);
    const stat = m.mean(0);
    const badStats = [...notTensors, ['a [5] tensor', one.zeros([5])], ['a [2, 2, 2] tensor', one.zeros([2, 2, 2])]];
    const optionalStats = [...without(junk, 'undefined', 'null'), ['a [5] tensor', one.zeros([5])], ['a disposed tensor', disposed]];
    tensorMethod('batchNorm', m, [
      { valid: stat, bad: badStats },
      { valid: stat, bad: badStats },
      { valid: stat, bad: optionalStats },
      { valid: stat, bad: optionalStats },
      { valid: 0.001, bad: [...optionalNumbers, ['-1', -1], ['NaN', NaN], ['Infinity', Infinity]] },
    ]);
    tensorMethod('dropout', m, [
      { valid: 0.5, bad: [...notNumbers, ['1', 1], ['-0.5', -0.5], ['NaN', NaN], ['Infinity', Infinity]] },
      { valid: null, bad: [...badOptionalShapes, ['a tensor', v]] },
      { valid: 1, bad: [...without(junk, 'undefined', 'null'), ['-1', -1], ['1.5', 1.5], ['NaN', NaN], ['2**60', 2 ** 60]] },
    ]);
    tensorMethod('conv2dTranspose', one.ones([1, 3, 3, 3]), [
      { valid: taps, bad: [...notTensors, ['a filter of 2 outputs', one.ones([3, 3, 2, 2])], ['a filter past the image', one.ones([7, 7, 2, 3])]] },
      { valid: [1, 5, 5, 2], bad: [...badShapes, ['[1, 6, 6, 2]', [1, 6, 6, 2]], ['[1, 5, 5, 3]', [1, 5, 5, 3]], ['[5, 5]', [5, 5]]] },
      { valid: 1, bad: badSteps },
      { valid: 'valid', bad: badPads },
    ]);
    methods.push({ op: 'dtype', call: getter('dtype'), self: m, args: [], receivers: badTensorThis });
    tensorMethod('matmul', m, [{
      valid: mt,
      bad: [...notTensors, ['5', 5], ['NaN', NaN], ['a [4, 5] tensor', one.zeros([4, 5])], ['a rank-1 tensor', v]],
    }]);
    tensorMethod('clamp', m, [{ valid: 2, bad: notNumbers }, { valid: 5, bad: notNumbers }]);
    tensorMethod('transpose', m, [{
      valid: [1, 0],
      bad: [...without(junk, 'undefined', 'null'), ['5', 5], ['[0, 0]', [0, 0]], ['[0]', [0]], ['[0, 1, 2]', [0, 1, 2]],
        ["['a', 0]", ['a', 0]], ['[-1, 0]', [-1, 0]], ['[1.5, 0]', [1.5, 0]], ['[NaN, 0]', [NaN, 0]], ['[1, 2**32]', [1, 2 ** 32]]],
    }]);
    tensorMethod('reshape', m, [{
      valid: [3, 2],
      bad: [...of(junk), ['5', 5], ['[4, -1]', [4, -1]], ['[-1, -1]', [-1, -1]], ['[1.5, 4]', [1.5, 4]], ['[NaN]', [NaN]],
        ["['a']", ['a']], ['[7]', [7]], ['[-2, 3]', [-2, 3]], ['[2**32]', [2 ** 32]], ['[true]', [true]]],
    }]);
    // A begin or size shorter than the rank is TF.js's short form (the
    // leading dims), not a bad call; a longer one is.
    tensorMethod('slice', m, [
      {
        valid: [0, 1],
        bad: [...of(junk), ['-1', -1], ['1.5', 1.5], ['NaN', NaN], ['[-1, 0]', [-1, 0]], ["['a', 0]", ['a', 0]],
          ['[5, 5]', [5, 5]], ['[0, 0, 0]', [0, 0, 0]], ['[2**32, 0]', [2 ** 32, 0]]],
      },
      {
        valid: [2, 2],
        bad: [...without(junk, 'undefined', 'null'), ['[1.5, 1]', [1.5, 1]], ["['a', 1]", ['a', 1]], ['[-2, 1]', [-2, 1]],
          ['[5, 5]', [5, 5]], ['[1, 1, 1]', [1, 1, 1]], ['NaN', NaN], ['[3, 3]', [3, 3]]],
      },
    ]);
    tensorMethod('broadcastTo', m, [{ valid: [2, 2, 3], bad: [...badShapes, ['[5]', [5]], ['[3, 2]', [3, 2]], ['[]', []]] }]);
    tensorMethod('squeeze', m3, [{
      valid: 0,
      bad: [...without(junk, 'undefined', 'null'), ['1', 1], ['[0, 1]', [0, 1]], ['1.5', 1.5], ['NaN', NaN], ['99', 99],
        ["['a']", ['a']], ['[0, 0]', [0, 0]]],
    }]);
    tensorMethod('to', m, [{ valid: two, bad: badDevices }], badTensorThis);
    for (const name of ['data', 'array', 'dataSync', 'arraySync']) tensorMethod(name, m, [], badTensorThis);
    for (const name of ['shape', 'size', 'rank']) {
      methods.push({ op: name, call: getter(name), self: m, args: [], receivers: badTensorThis });
    }
    methods.push({ op: 'id', call: getter('id'), self: m, args: [], receivers: [['a Device as this', one]] });

    const deviceMethod = (name, args, receivers = badRegisteringDeviceThis) =>
      methods.push({ op: name, call: D(name), self: one, args, receivers });
    deviceMethod('tensor', [
      { valid: [[1, 2], [3, 4]], bad: badValues },
      { valid: [2, 2], bad: badOptionalShapes },
      { valid: 'int32', bad: badDtypes },
    ]);
    for (const name of ['zeros', 'ones']) {
      deviceMethod(name, [{ valid: [2, 3], bad: badShapes }, { valid: 'bool', bad: badDtypes }]);
    }
    deviceMethod('full', [
      { valid: [2], bad: badShapes },
      { valid: 7, bad: notNumbers },
      { valid: 'int32', bad: badDtypes },
    ]);
    deviceMethod('arange', [
      { valid: 0, bad: [...notNumbers, ['NaN', NaN], ['Infinity', Infinity]] },
      { valid: 5, bad: [...notNumbers, ['NaN', NaN], ['1e12', 1e12]] },
      { valid: 1, bad: [...without(junk, 'undefined', 'null'), ["'1'", '1'], ['[]', []], ['0', 0], ['NaN', NaN], ['-Infinity', -Infinity]] },
    ]);
    deviceMethod('randomUniform', [
      { valid: [2], bad: badShapes },
      {
        valid: { seed: 1 },
        bad: [...optionJunk, ['{ minval: 2 }', { minval: 2 }], ["{ min: 'a' }", { min: 'a' }], ["{ max: 'b' }", { max: 'b' }],
          ['{ seed: -1 }', { seed: -1 }], ['{ seed: 1.5 }', { seed: 1.5 }], ["{ seed: 'a' }", { seed: 'a' }],
          ['{ seed: 2**60 }', { seed: 2 ** 60 }], ['{ min: 3, max: 1 }', { min: 3, max: 1 }], ['{ min: NaN }', { min: NaN }],
          ['{ max: Infinity }', { max: Infinity }], ['{ seed: NaN }', { seed: NaN }], ['{ min: 5n }', { min: 5n }]],
      },
    ]);
    deviceMethod('randomNormal', [
      { valid: [2], bad: badShapes },
      {
        valid: { seed: 1 },
        bad: [...optionJunk, ['{ stdDev: 1 }', { stdDev: 1 }], ["{ mean: 'a' }", { mean: 'a' }], ['{ std: -1 }', { std: -1 }],
          ["{ std: 'a' }", { std: 'a' }], ['{ seed: -1 }', { seed: -1 }], ['{ mean: NaN }', { mean: NaN }],
          ['{ std: Infinity }', { std: Infinity }], ['{ seed: 1e300 }', { seed: 1e300 }]],
      },
    ]);
    const badOperands = [...notTensors, ['5', 5], ['NaN', NaN], ['a [5] tensor', one.zeros([5])]];
    deviceMethod('where', [
      { valid: mb, bad: [...badOperands, ['a float condition', m], ['an int32 condition', mi]] },
      { valid: m, bad: badOperands },
      { valid: v, bad: badOperands },
    ]);
    deviceMethod('cat', [
      { valid: [m, m], bad: [...badTensorLists, ['[m, v]', [m, v]]] },
      { valid: 0, bad: [...badInts, ['2', 2]] },
    ]);
    deviceMethod('stack', [
      { valid: [m, m], bad: [...badTensorLists, ['[m, v]', [m, v]]] },
      { valid: 0, bad: [...badInts, ['3', 3]] },
    ]);
    deviceMethod('injectFault', [{
      valid: { op: 'exp', nth: 1000000 },
      bad: [...of(junk), ['5', 5], ["'matmul'", 'matmul'], ['[]', []], ['{}', {}], ['{ op: 5 }', { op: 5 }],
        ["{ op: 'nope' }", { op: 'nope' }], ["{ op: '' }", { op: '' }], ["{ op: 'Matmul' }", { op: 'Matmul' }],
        ["{ op: ['matmul'] }", { op: ['matmul'] }], ['kind 5', { op: 'matmul', kind: 5 }],
        ["kind 'meltdown'", { op: 'matmul', kind: 'meltdown' }], ['nth 0', { op: 'matmul', nth: 0 }],
        ['nth -1', { op: 'matmul', nth: -1 }], ['nth 1.5', { op: 'matmul', nth: 1.5 }], ["nth 'a'", { op: 'matmul', nth: 'a' }],
        ['nth NaN', { op: 'matmul', nth: NaN }], ['an unknown key', { op: 'matmul', times: 1 }]],
    }]);
    for (const name of ['sync', 'destroy', 'stats']) deviceMethod(name, [], badDeviceThis);
    methods.push({ op: 'lost', call: deviceGetter('lost'), self: one, args: [], receivers: badDeviceThis });
    methods.push({
      op: 'Device.request',
      call: (_self, options) => Device.request(options),
      self: null,
      args: [{
        valid: { capacity: 8 },
        bad: [...optionJunk, ['{ capcity: 1 }', { capcity: 1 }], ['capacity 0', { capacity: 0 }], ['capacity -1', { capacity: -1 }],
          ['capacity 1.5', { capacity: 1.5 }], ["capacity 'a'", { capacity: 'a' }], ['capacity NaN', { capacity: NaN }],
          ['capacity 2**40', { capacity: 2 ** 40 }], ['debug 5', { debug: 5 }], ["debug 'yes'", { debug: 'yes' }],
          ['debug []', { debug: [] }], ["captureStacks 'yes'", { debug: { captureStacks: 'yes' } }],
          ['errorScopes 1', { debug: { errorScopes: 1 } }], ['checkNumerics 1', { debug: { checkNumerics: 1 } }], ['debug.foo', { debug: { foo: true } }]],
      }],
      receivers: [],
    });

    // Each method's valid call works, so a case with one bad value fails
    // for that value alone (destroy() is left out: it would end `one`).
    const validRefused = [];
    for (const method of methods) {
      if (method.op === 'destroy') continue;
      try {
        const returned = method.call(method.self, ...method.args.map((a) => a.valid));
        if (returned instanceof Promise) await returned;
      } catch (e) {
        validRefused.push(`${method.op}: ${e.message}`);
      }
    }

    // The corpus: each method with each bad value of each argument (the
    // others valid), with each bad receiver, then seeded combinations of
    // several bad arguments and receivers; plus operands on another device
    // in every tensor position.
    const cases = [];
    for (const method of methods) {
      const valid = method.args.map((a) => a.valid);
      method.args.forEach((arg, i) => {
        for (const [label, value] of arg.bad) {
          const args = valid.slice();
          args[i] = value;
          cases.push({ op: method.op, label: `arg ${i} ${label}`, run: () => method.call(method.self, ...args) });
        }
      });
      for (const [label, self] of method.receivers) {
        cases.push({ op: method.op, label: `receiver ${label}`, run: () => method.call(self, ...valid) });
      }
      // A method without arguments has no combinations beyond its receivers.
      if (method.args.length === 0) continue;
      for (let n = 0; n < combos; n += 1) {
        const labels = [];
        const args = method.args.map((arg) => {
          if (random() < 0.5) return arg.valid;
          const [label, value] = pick(arg.bad);
          labels.push(label);
          return value;
        });
        let self = method.self;
        if (method.receivers.length > 0 && (labels.length === 0 || random() < 0.3)) {
          const [label, value] = pick(method.receivers);
          labels.push(`receiver ${label}`);
          self = value;
        }
        if (labels.length === 0) {
          const i = Math.floor(random() * method.args.length);
          const [label, value] = pick(method.args[i].bad);
          labels.push(label);
          args[i] = value;
        }
        cases.push({ op: method.op, label: `combo ${labels.join(' + ')}`, run: () => method.call(self, ...args) });
      }
    }
    const cross = (op, label, run) => cases.push({ op, label: `cross-device ${label}`, run });
    for (const name of binary) {
      cross(name, `m.${name}(v2)`, () => m[name](v2));
      cross(name, `m2.${name}(v)`, () => m2[name](v));
    }
    cross('matmul', 'm.matmul(m2t)', () => m.matmul(m2t));
    cross('matmul', 'm2.matmul(mt)', () => m2.matmul(mt));
    const mb2 = m2.greater(2);
    cross('where', 'one.where(mb2, m, v)', () => one.where(mb2, m, v));
    cross('where', 'one.where(mb, m2, v)', () => one.where(mb, m2, v));
    cross('where', 'one.where(mb, m, v2)', () => one.where(mb, m, v2));
    cross('where', 'two.where(mb, m, v)', () => two.where(mb, m, v));
    for (const name of logical) {
      cross(name, `mb.${name}(mb2)`, () => mb[name](mb2));
    }
    const ii2 = two.tensor(new Int32Array([0, 1]));
    cross('gather', 'm.gather(ii2)', () => m.gather(ii2));
    cross('gather', 'm2.gather(ii)', () => m2.gather(ii));
    cross('unsortedSegmentSum', 'm.unsortedSegmentSum(ii2, 2)', () => m.unsortedSegmentSum(ii2, 2));
    // Values a dtype cannot hold, and float-only ops given an int.
    const wrong = (op, label, run) => cases.push({ op, label: `dtype ${label}`, run });
    wrong('tensor', "tensor([1.5], null, 'int32')", () => one.tensor([1.5], null, 'int32'));
    wrong('tensor', "tensor([2**31], null, 'int32')", () => one.tensor([2 ** 31], null, 'int32'));
    wrong('tensor', "tensor(Float32Array [0.5], null, 'int32')", () => one.tensor(new Float32Array([0.5]), null, 'int32'));
    wrong('full', "full([2], 0.5, 'int32')", () => one.full([2], 0.5, 'int32'));
    wrong('arange', "arange(0, 2.5, 1, 'int32')", () => one.arange(0, 2.5, 1, 'int32'));
    wrong('arange', "arange(0, 2, 1, 'bool')", () => one.arange(0, 2, 1, 'bool'));
    for (const name of ['log', 'sqrt', 'rsqrt', 'sigmoid', 'tanh', 'sin', 'cos', 'tan', 'gelu', 'softmax', 'logSoftmax']) {
      wrong(name, `mi.${name}()`, () => mi[name]());
    }
    wrong('matmul', 'mi.matmul(mt)', () => mi.matmul(mt));
    wrong('multinomial', 'mi.multinomial(2)', () => mi.multinomial(2));
    wrong('multinomial', 'm3.multinomial(2)', () => m3.multinomial(2));
    const mit = mi.transpose();
    wrong('matmul', 'm.matmul(mit)', () => m.matmul(mit));
    for (const name of ['cat', 'stack']) {
      cross(name, `one.${name}([m, m2])`, () => one[name]([m, m2]));
      cross(name, `one.${name}([m2, m])`, () => one[name]([m2, m]));
      cross(name, `two.${name}([m, m])`, () => two[name]([m, m]));
    }

    const describe = (value) => {
      if (value instanceof Tensor) return 'a Tensor';
      if (value instanceof Promise) return 'a Promise';
      try {
        return JSON.stringify(value) ?? String(value);
      } catch {
        return typeof value;
      }
    };
    const works = async (device, expect) => {
      const probe = device.tensor([1, 2]);
      const product = probe.mul(3);
      const values = Array.from(await product.data());
      probe.dispose();
      product.dispose();
      return values.join() === expect;
    };
    const failures = [];
    const byOp = {};
    for (const c of cases) {
      const registered = [one.stats().opsRegistered, two.stats().opsRegistered];
      const problems = [];
      let message = null;
      // TF.js's reads are `async` functions: their refusals reject.
      const rejects = c.op === 'data' || c.op === 'array';
      let refusal = null;
      try {
        const returned = c.run();
        if (rejects && returned instanceof Promise) {
          refusal = await returned.then(() => null, (e) => ({ e }));
          if (refusal === null) problems.push('resolved');
        } else {
          if (returned instanceof Promise) returned.catch(() => {});
          problems.push(`returned ${describe(returned)}`);
        }
      } catch (e) {
        if (rejects) problems.push('threw, not a rejected Promise');
        refusal = { e };
      }
      if (refusal !== null) {
        const { e } = refusal;
        message = e?.message;
        if (!(e instanceof Error)) problems.push(`threw ${String(e)}, not an Error`);
        else {
          if (!['TypeError', 'RangeError', 'Error'].includes(e.name)) problems.push(`is a ${e.name}`);
          if (e.op !== c.op) problems.push(`op is ${e.op}`);
          if (!e.message.startsWith(`${c.op}: `)) problems.push(`message does not start with '${c.op}: '`);
        }
      }
      if (message !== null && problems.length > 0) problems[0] += ` (${message})`;
      const queued = one.stats().opsRegistered - registered[0] + two.stats().opsRegistered - registered[1];
      if (queued !== 0) problems.push(`queued ${queued} op(s)`);
      if (panicCount() !== 0) problems.push('panicked');
      if (!(await works(one, '3,6'))) problems.push('device one stopped working');
      if (problems.length > 0) failures.push({ label: `${c.op}: ${c.label}`, problem: problems.join('; ') });
      byOp[c.op] = (byOp[c.op] ?? 0) + 1;
    }
    return {
      validRefused,
      cases: cases.length,
      methods: Object.keys(byOp).length,
      byOp,
      failures,
      twoWorks: await works(two, '3,6'),
      panics: panicCount(),
    };
  }, { seed: 0x5eed, combos: 8 });

  console.log(`# corpus: ${result.cases} bad calls over ${result.methods} methods`);
  assert.deepEqual(result.validRefused, [], 'the valid call of each method works');
  assert.equal(result.panics, 0);
  assert.equal(result.twoWorks, true);
  assert.deepEqual(result.failures, [], 'bad calls that were accepted, named the wrong op, queued ops, or broke the device');
  // Every public method is in the corpus.
  const expected = [
    'add', 'sub', 'mul', 'div', 'pow', 'maximum', 'minimum', 'equal', 'greater', 'greaterEqual', 'less', 'lessEqual',
    'neg', 'abs', 'exp', 'log', 'sqrt', 'rsqrt', 'square', 'relu', 'gelu', 'sigmoid', 'tanh', 'sin', 'cos', 'tan', 'floor', 'flatten',
    'mod', 'floorDiv', 'logicalAnd', 'logicalOr', 'logicalXor', 'logicalNot', 'bitwiseAnd', 'cast', 'dtype', 'argMin',
    'gather', 'oneHot', 'unsortedSegmentSum', 'cumsum', 'cumprod', 'multinomial', 'topk', 'prod',
    'conv2d', 'conv1d', 'conv2dTranspose', 'maxPool', 'avgPool', 'depthwiseConv2d',
    'resizeBilinear', 'resizeNearestNeighbor', 'moments', 'batchNorm', 'dropout',
    'sum', 'mean', 'max', 'min', 'logSumExp', 'argMax', 'softmax', 'logSoftmax', 'expandDims', 'matmul', 'clamp',
    'transpose', 'reshape', 'slice', 'broadcastTo', 'squeeze', 'to', 'data', 'array', 'dataSync', 'arraySync', 'shape', 'size', 'rank', 'id',
    'tensor', 'zeros', 'ones', 'full', 'arange', 'randomUniform', 'randomNormal', 'where', 'cat', 'stack',
    'injectFault', 'sync', 'destroy', 'stats', 'lost', 'Device.request',
  ];
  assert.deepEqual(Object.keys(result.byOp).sort(), expected.sort());
});
