// The TF.js backend's storage: which webfusion tensor stands behind each of
// TF.js's data ids, how many TF.js tensors share it, and how its values are
// read. Kernels (./kernels.js) only translate calls; every rule about owning
// and reading a tensor lives here.
import { KernelBackend, backend_util, engine, util } from '@tensorflow/tfjs-core';
import init, { Device } from '../pkg/webfusion.js';

/**
 * The dtypes webfusion has. complex64 tensors are made by kernels only
 * (`tf.complex`, as two float32 parts: see `complexOf`); string tensors stay
 * on the host (see `move`).
 */
const DTYPES = new Set(['float32', 'int32', 'bool']);

/**
 * A TF.js `KernelBackend` whose every tensor is a webfusion tensor. Nothing
 * runs when a kernel is called: the kernel records a webfusion op, so a chain
 * of TF.js calls fuses as our own ops do, and a tensor TF.js disposes early
 * (as `tf.tidy` does with intermediates) costs nothing. A read is webfusion's
 * `data()`, so a tensor whose work failed rejects with our `TensorError` and
 * its chain.
 */
export class WebfusionBackend extends KernelBackend {
  /** @param {Device} device the device every tensor of this backend lives on. */
  constructor(device) {
    super();
    this.device = device;
    // dataId -> { tensor, refCount, host, shape, dtype, failure? }. A Map, not a
    // WeakMap: TF.js's memory accounting asks how many there are
    // (`numDataIds`). `tensor` is null until a kernel first takes the
    // values the page gave as a tensor (`materialize`): TF.js makes a
    // tensor of every number in `x.add(1)`, and one our op takes as a
    // number is never uploaded. `host` holds the values the page gave, or
    // a computed tensor's once a read brought them back (a tensor never
    // changes, and TF.js's own code reads synchronously after an
    // `await data()`), so a synchronous read can answer; `failure`, the
    // error a read rejected with, so that one throws it.
    this.entries = new Map();
    /** `tensorOf`, and null for a null input: the `t` kernels are given. */
    this.tensorOrNull = (info) => (info == null ? null : this.tensorOf(info));
  }

  /** Checks `dtype` is one webfusion has, naming it otherwise. */
  static dtype(dtype, op) {
    if (!DTYPES.has(dtype)) {
      throw new Error(`${op}: webfusion has no ${dtype} tensors (it has float32, int32 and bool)`);
    }
    return dtype;
  }

  /**
   * The webfusion tensor behind a TF.js tensor (a `TensorInfo`). A data id
   * another backend holds is moved here first, as TF.js's own backends do.
   */
  tensorOf(info) {
    const { tensor, parts } = this.materialize(info);
    if (parts != null) throw new Error('webfusion: this kernel takes no complex64 tensors');
    if (tensor === null) throw new Error('webfusion: internal: a tensor taken in a kernel was not uploaded before it');
    return tensor;
  }

  /**
   * A complex64 tensor is two float32 ones, its real and imaginary parts,
   * each a data id of this backend (as TF.js's CPU backend keeps them):
   * webfusion has no complex dtype, and every op on a complex tensor is ops
   * on its parts. `complexOf` makes one of two float32 `TensorInfo`s it
   * now owns; `partOf` gives one part's `TensorInfo`.
   */
  complexOf(real, imag) {
    const dataId = {};
    const { shape } = real;
    this.entries.set(dataId, { tensor: null, refCount: 1, host: null, parts: { real, imag }, shape, dtype: 'complex64' });
    return { dataId, shape, dtype: 'complex64' };
  }

  partOf(info, which) {
    const parts = this.entries.get(info.dataId)?.parts;
    if (parts == null) throw new Error(`webfusion: this kernel takes complex64 tensors only, not ${info.dtype}`);
    return parts[which];
  }

  /**
   * The entry of `info`, its values uploaded if they were not yet. Kernels
   * call it before their body's `tidy` (see kernels.js's `kernel`): a
   * tensor made inside would be disposed when the body returns.
   */
  materialize(info) {
    let entry = this.entries.get(info.dataId);
    if (entry === undefined) {
      engine().moveData(this, info.dataId);
      entry = this.entries.get(info.dataId);
    }
    if (entry === undefined) {
      throw new Error(`webfusion: a tensor of shape [${info.shape}] has no data on this backend (was it disposed?)`);
    }
    if (entry.dtype === 'string') {
      throw new Error('webfusion has no string tensors on the GPU: strings stay on the host, where they can be ' +
        'reshaped, sliced, concatenated, stacked, tiled, filled, compared and made unique');
    }
    if (entry.parts == null) entry.tensor ??= this.device.tensor(entry.host, entry.shape, entry.dtype);
    return entry;
  }

  /**
   * The value of `info` as a number, when our op may take it in place of
   * the tensor against `other`: both float32 (a number is a float32 to our
   * ops), `info` one element whose value the page gave, and of no higher
   * rank than `other` (so it broadcasts to nothing new). Otherwise null.
   */
  scalarOf(info, other) {
    const entry = this.entries.get(info.dataId);
    const one = info.shape.every((d) => d === 1) && info.shape.length <= other.shape.length;
    const floats = info.dtype === 'float32' && other.dtype === 'float32';
    return entry?.host != null && one && floats ? entry.host[0] : null;
  }

  /** The values the page gave for `info` (or a read brought back), or null. */
  given(info) {
    return this.entries.get(info.dataId)?.host ?? null;
  }

  /** A TF.js `TensorInfo` for `tensor`, which this backend now owns. */
  adopt(tensor) {
    const dataId = {};
    // Each read of `shape` is a call into wasm and a new array: read once.
    const { shape, dtype } = tensor;
    this.entries.set(dataId, { tensor, refCount: 1, host: null, shape, dtype });
    return { dataId, shape, dtype };
  }

  /**
   * A kernel's result as a TF.js `TensorInfo`: `adopt`, or where the
   * kernel returned one of its `inputs`' tensors unchanged (a `reverse` of
   * no axes, a `mirrorPad` of no padding), that input's data id, shared as
   * `Identity` shares it. Adopted, one webfusion tensor would stand behind
   * two data ids, and disposing the input (as `tf.tidy` does) would leave
   * the result reading as disposed.
   */
  result(tensor, inputs) {
    const behind = (info) => info != null && this.entries.get(info.dataId)?.tensor === tensor;
    for (const name in inputs) {
      const info = inputs[name];
      const same = Array.isArray(info) ? info.find(behind) : behind(info) ? info : undefined;
      if (same !== undefined) {
        this.incRef(same.dataId);
        return { dataId: same.dataId, shape: same.shape, dtype: same.dtype };
      }
    }
    return this.adopt(tensor);
  }

  write(values, shape, dtype) {
    const dataId = {};
    this.move(dataId, values, shape, dtype, 1);
    return dataId;
  }

  /** A TF.js `TensorInfo` of values held on the host (a string tensor's, a host kernel's result). */
  hostTensor(values, shape, dtype) {
    return { dataId: this.write(values, shape, dtype), shape, dtype };
  }

  move(dataId, values, shape, dtype, refCount) {
    // A string tensor lives on the host, as in TF.js's GPU backends: the
    // kernels that move strings (see kernels.js's `strings`) run there.
    if (dtype === 'string') {
      this.entries.set(dataId, { tensor: null, refCount, host: values ?? new Array(util.sizeFromShape(shape)).fill(new Uint8Array()), shape, dtype });
      return;
    }
    WebfusionBackend.dtype(dtype, 'tensor');
    // The values the page gave stay beside the tensor: `dataSync()` of a
    // tensor made from them can answer without a GPU read.
    const tensor = values == null ? this.device.zeros(shape, dtype) : null;
    this.entries.set(dataId, { tensor, refCount, host: values ?? null, shape, dtype });
  }

  async read(dataId) {
    const entry = this.entries.get(dataId);
    if (entry === undefined) throw new Error('webfusion: read of a disposed tensor');
    if (entry.parts != null) {
      // TF.js reads a complex tensor as its parts interleaved.
      const [real, imag] = await Promise.all([this.read(entry.parts.real.dataId), this.read(entry.parts.imag.dataId)]);
      return backend_util.mergeRealAndImagArrays(real, imag);
    }
    if (entry.host !== null) return entry.host;
    let values;
    try {
      values = await entry.tensor.data();
    } catch (e) {
      // A failure is kept as the values would be: `readSync` throws it,
      // not the message that reads are asynchronous.
      if (this.entries.get(dataId) === entry) entry.failure = e;
      throw e;
    }
    // A copy is kept: the caller may write into the array it gets.
    if (this.entries.get(dataId) === entry) entry.host = values.slice();
    return values;
  }

  readSync(dataId) {
    const entry = this.entries.get(dataId);
    if (entry === undefined) throw new Error('webfusion: read of a disposed tensor');
    if (entry.parts != null) {
      return backend_util.mergeRealAndImagArrays(this.readSync(entry.parts.real.dataId), this.readSync(entry.parts.imag.dataId));
    }
    if (entry.host !== null) return entry.host;
    if (entry.failure !== undefined) throw entry.failure;
    // Small work on values the page gave ran on the host (a graph model's
    // shape arithmetic: `Shape`, `StridedSlice`, `Pack`, `Prod`), and the
    // host answers now, as TF.js's WebGPU backend answers for tensors it
    // computed on the CPU.
    try {
      entry.host = entry.tensor.dataSync();
      return entry.host;
    } catch (e) {
      if (e.name === 'TensorError') {
        entry.failure = e;
        throw e;
      }
    }
    throw new Error(
      `webfusion reads are asynchronous: tensor [${entry.shape}] is computed on the GPU, ` +
        'and WebGPU cannot be read synchronously, as dataSync(), arraySync() and the kernels that ' +
        'need values on the host (unique, the sparse and ragged ops) read, and as TF.js reads a tensor ' +
        'it moves to another backend after tf.setBackend(). Use `await tensor.data()` or ' +
        '`await tensor.array()` instead of dataSync() or arraySync(); before such a kernel or a switch ' +
        'of backend, `await tensor.data()` keeps the values here, and the kernel or the move then runs.');
  }

  disposeData(dataId, force = false) {
    const entry = this.entries.get(dataId);
    if (entry === undefined) return true;
    entry.refCount -= 1;
    if (!force && entry.refCount > 0) return false;
    entry.tensor?.dispose();
    if (entry.parts != null) {
      this.disposeData(entry.parts.real.dataId);
      this.disposeData(entry.parts.imag.dataId);
    }
    this.entries.delete(dataId);
    return true;
  }

  refCount(dataId) {
    return this.entries.get(dataId)?.refCount ?? 0;
  }

  incRef(dataId) {
    const entry = this.entries.get(dataId);
    if (entry !== undefined) entry.refCount += 1;
  }

  numDataIds() {
    return this.entries.size;
  }

  memory() {
    const stats = this.device.stats();
    return { unreliable: false, numBytesInGPU: stats.bytesInUse, numBytesAllocatedInGPU: stats.bytesAllocated };
  }

  /**
   * True: TF.js's `tf.profile` (and its `DEBUG` mode) then times each
   * kernel call with `time`, flushing between them, so a profile's kernels
   * do not fuse. False made its profiler read every kernel's output with
   * `dataSync()`, which a GPU tensor refuses: `tf.profile` threw and left
   * the profiler on, and every later op on the page threw too (found by
   * outside testing).
   */
  timerAvailable() {
    return true;
  }

  /**
   * Runs `f` and everything it recorded: `kernelMs` is the GPU's time
   * running its kernels, from the adapter's timestamps (a profile of `f`),
   * and `wallMs` the whole run. Where the adapter writes no timestamps,
   * `kernelMs` says so, as TF.js's WebGL backend does without its timer
   * extension.
   */
  async time(f) {
    const start = performance.now();
    let profiling;
    try {
      profiling = this.device.profile(f);
    } catch (e) {
      // A profile of the device is running (the page's own, of an async
      // fn): `f` runs untimed, as TF.js's profiler needs its outputs.
      if (e.op !== 'profile') throw e;
      f();
      return { kernelMs: { error: `webfusion: ${e.message}` }, wallMs: performance.now() - start };
    }
    const { kernelMs } = await profiling;
    const wallMs = performance.now() - start;
    return { kernelMs: kernelMs ?? { error: 'this adapter writes no GPU timestamps; wallMs is the time to run the kernels' }, wallMs };
  }

  floatPrecision() {
    return 32;
  }

  dispose() {
    for (const { tensor } of this.entries.values()) tensor?.dispose();
    this.entries.clear();
    this.device.destroy();
  }
}

/**
 * A backend on a new device; `options` are `Device.request`'s (a test of
 * kernels asks for `{ hostMaxElements: 0 }`, so no op runs in wasm).
 */
export async function createBackend(options) {
  await init();
  return new WebfusionBackend(await Device.request(options));
}
