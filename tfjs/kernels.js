// TF.js's kernels, each translated to the webfusion ops that compute it.
//
// A kernel here only records: it reads its inputs' webfusion tensors from
// the backend, calls our ops with TF.js's attributes, and hands the result
// back to the backend to own. No kernel reads values or runs anything, so a
// chain of kernels fuses as a chain of our own ops does.
//
// A kernel TF.js has and this table lacks is not registered: TF.js then
// throws its own "Kernel 'X' not registered for backend 'webfusion'" when it
// is called, rather than something close being computed. A kernel whose
// attribute asks for what our op does not do (an
// activation we lack) throws naming the kernel and the attribute.
import { backend_util, gather_util, kernel_impls, scatter_util, slice_util, upcastType, util } from '@tensorflow/tfjs-core';
import { grads, tidy } from '../pkg/webfusion.js';
import { WebfusionBackend } from './backend.js';

/**
 * `value` as TF.js's backends store it in a tensor of `dtype`: written into
 * a typed array, so an int32 truncates (and wraps) and a bool is 0 or 1.
 * Our ops refuse a fraction for an int32; a kernel's attribute gets TF.js's
 * meaning instead (`tf.fill([2], 2.7, 'int32')` is [2, 2]).
 */
const stored = (value, dtype) => (dtype === 'int32' ? new Int32Array([value])[0] : dtype === 'bool' ? Number(Boolean(value)) : value);

/** A tensor of one value (float32 unless said), shaped [] so it broadcasts anywhere. */
const scalar = (backend, value, dtype = 'float32') => backend.device.tensor(value, [], dtype);

/**
 * Runs `f` on the inputs' tensors and adopts what it returns (a tensor or an
 * array of them). `f` runs in our `tidy`: a composite's intermediates and
 * constants are disposed as soon as it returns, so they fuse into its result
 * instead of being kept (and written) for JS objects nobody reads.
 */
function kernel(f, numbersOf = () => NONE, single = false) {
  return ({ inputs, backend, attrs }) => {
    // Inputs taken as numbers are not uploaded; the rest are, before the
    // body's `tidy` (which would dispose an upload made inside it).
    const numbers = numbersOf(inputs, backend);
    eachInput(inputs, (info, name) => { if (!(name in numbers)) backend.materialize(info); });
    const t = backend.tensorOrNull;
    // A body that records a single op has no intermediates to dispose,
    // and skips the scope (a tenth of the cost of a small op).
    const out = single ? f({ inputs, attrs, t, backend, numbers }) : tidy(() => f({ inputs, attrs, t, backend, numbers }));
    const own = (o) => backend.result(o, inputs);
    if (Array.isArray(out)) return out.map(own);
    // A complex64 result is its parts (see `complex`).
    if (out.constructor === Object) return backend.complexOf(own(out.real), own(out.imag));
    return own(out);
  };
}

/** No inputs taken as numbers. */
const NONE = Object.freeze({});

/**
 * Calls `f(info, name)` for each input `TensorInfo` of a kernel (a list
 * input's each), without the arrays `Object.values(...).flat()` would make
 * on every call of a small op.
 */
function eachInput(inputs, f) {
  for (const name in inputs) {
    const info = inputs[name];
    if (Array.isArray(info)) {
      for (const one of info) if (one != null) f(one, name);
    } else if (info != null) {
      f(info, name);
    }
  }
}

/** Whether some input is of `dtype`. */
function anyInputOf(inputs, dtype) {
  for (const name in inputs) {
    const info = inputs[name];
    if (Array.isArray(info) ? info.some((one) => one?.dtype === dtype) : info?.dtype === dtype) return true;
  }
  return false;
}

const isComplex = (inputs) => anyInputOf(inputs, 'complex64');

/**
 * A kernel of complex64 tensors, on their parts: `c(info)` gives an input's
 * `{ real, imag }` (float32 tensors), and `f` returns a tensor or the
 * `{ real, imag }` of a complex64 result. Where no input is complex64,
 * `plain` runs instead (a null `plain`: the kernel takes complex64 only).
 */
function complex(plain, f) {
  const onParts = kernel(({ inputs, t, backend, attrs }) => {
    const c = (info) => ({ real: t(backend.partOf(info, 'real')), imag: t(backend.partOf(info, 'imag')) });
    return f({ inputs, c, t, backend, attrs });
  });
  return (args) => (plain === null || isComplex(args.inputs) ? onParts(args) : plain(args));
}

/**
 * `k`, which is linear and moves values without mixing them (add, reshape,
 * concat, ...), on complex64 inputs: run on the real parts and on the
 * imaginary parts, as TF.js's CPU backend does.
 */
function partwise(k) {
  return (args) => {
    const { inputs, backend } = args;
    if (!isComplex(inputs)) return k(args);
    const pick = (which) => {
      const part = (info) => (info?.dtype === 'complex64' ? backend.partOf(info, which) : info);
      return Array.isArray(inputs) ? inputs.map(part)
        : Object.fromEntries(Object.entries(inputs).map(([name, info]) => [name, part(info)]));
    };
    return backend.complexOf(k({ ...args, inputs: pick('real') }), k({ ...args, inputs: pick('imag') }));
  };
}

// String tensors live on the host (as in TF.js's GPU backends), and the
// kernels that only move values (or compare them) run there for them.

const isString = (inputs) => anyInputOf(inputs, 'string');

/**
 * `plain`, or where an input is a string tensor `f` on the host: `v(info)`
 * gives an input's values, and `f` returns `{ values, shape, dtype }` (or
 * a list of them) for the outputs.
 */
function strings(plain, f) {
  return (args) => {
    if (!isString(args.inputs) && args.attrs?.dtype !== 'string') return plain(args);
    const { backend } = args;
    const out = f({ ...args, v: (info) => backend.readSync(info.dataId) });
    const info = ({ values, shape, dtype }) => backend.hostTensor(values, shape, dtype ?? 'string');
    return Array.isArray(out) ? out.map(info) : info(out);
  };
}

/** Values of `shape` in row-major order, each `at(position)`. */
function build(shape, at) {
  const strides = util.computeStrides(shape);
  return Array.from({ length: util.sizeFromShape(shape) }, (_, i) => at(util.indexToLoc(i, shape.length, strides)));
}

/** The element of `values` (of `shape`) at a position. */
function reader(values, shape) {
  const strides = util.computeStrides(shape);
  return (loc) => values[util.locToIndex(loc, shape.length, strides)];
}

/** `reader`, at a position of a shape of `rank` that `shape` broadcasts to. */
function broadcastReader(values, shape, rank) {
  const at = reader(values, shape);
  const skip = rank - shape.length;
  return (loc) => at(loc.slice(skip).map((l, d) => (shape[d] === 1 ? 0 : l)));
}

/** A comparison of two string tensors, broadcast, as TF.js's CPU compares their text. */
function compareStrings(test) {
  return ({ inputs: { a, b }, v }) => {
    const shape = backend_util.assertAndGetBroadcastShape(a.shape, b.shape);
    const side = (info) => broadcastReader(v(info).map((bytes) => util.decodeString(bytes)), info.shape, shape.length);
    const [x, y] = [side(a), side(b)];
    return { values: Uint8Array.from(build(shape, (loc) => (test(x(loc), y(loc)) ? 1 : 0))), shape, dtype: 'bool' };
  };
}

/**
 * TF.js's `unique` along `axis`: the distinct slices in order of first
 * appearance, and for each slice of the input the index of its own. The
 * output's size depends on the values, so they must be the page's (a
 * computed tensor cannot be read synchronously, and is refused so).
 */
function unique(backend, x, axis) {
  const values = backend.readSync(x.dataId);
  const a = util.parseAxisParam(axis, x.shape)[0];
  const [outer, n, inner] = [util.sizeFromShape(x.shape.slice(0, a)), x.shape[a], util.sizeFromShape(x.shape.slice(a + 1))];
  const text = (v) => (x.dtype === 'string' ? util.decodeString(v) : String(v));
  const seen = new Map();
  const kept = [];
  const indices = new Int32Array(n);
  for (let i = 0; i < n; i += 1) {
    const key = [];
    for (let o = 0; o < outer; o += 1) for (let k = 0; k < inner; k += 1) key.push(text(values[(o * n + i) * inner + k]));
    const id = key.join('\u0000');
    if (!seen.has(id)) {
      seen.set(id, kept.length);
      kept.push(i);
    }
    indices[i] = seen.get(id);
  }
  const shape = x.shape.map((d, k) => (k === a ? kept.length : d));
  const at = reader(values, x.shape);
  const picked = build(shape, (loc) => at(loc.map((l, k) => (k === a ? kept[l] : l))));
  const out = x.dtype === 'string' ? picked : util.toTypedArray(picked, x.dtype);
  return [backend.hostTensor(out, shape, x.dtype), backend.hostTensor(indices, [n], 'int32')];
}

/**
 * TF.js's `RaggedRange`, on the host from the page's values, like `unique`:
 * the output's size depends on them. Row `i` counts from `starts[i]` by
 * `deltas[i]` up to `limits[i]` (a scalar input stands for every row); the
 * rows' values are laid end to end, and `rtNestedSplits` says where each
 * begins.
 */
function raggedRange(backend, { starts, limits, deltas }) {
  const inputs = { starts, limits, deltas };
  const lengths = [];
  for (const [name, info] of Object.entries(inputs)) {
    if (info.shape.length > 1) throw new Error(`${name} must be a scalar or vector`);
    if (info.shape.length === 1) lengths.push(info.shape[0]);
  }
  if (lengths.some((n) => n !== lengths[0])) throw new Error('starts, limits, and deltas must have the same shape');
  const rows = lengths[0] ?? 1;
  const [start, limit, delta] = [starts, limits, deltas].map((info) => {
    const values = backend.readSync(info.dataId);
    return (row) => values[info.shape.length === 0 ? 0 : row];
  });
  const splits = new Int32Array(rows + 1);
  for (let row = 0; row < rows; row += 1) {
    const [from, to, by] = [start(row), limit(row), delta(row)];
    if (by === 0) throw new Error('Requires delta != 0');
    const size = (by > 0 && to < from) || (by < 0 && to > from) ? 0 : Math.ceil(Math.abs((to - from) / by));
    if (size > 2147483647) throw new Error('Requires ((limit - start) / delta) <= 2147483647');
    splits[row + 1] = splits[row] + size;
  }
  const values = util.getArrayFromDType(starts.dtype, splits[rows]);
  for (let row = 0, at = 0; row < rows; row += 1) {
    for (let i = 0, v = start(row); i < splits[row + 1] - splits[row]; i += 1, v += delta(row)) values[at++] = v;
  }
  return [backend.hostTensor(splits, [rows + 1], 'int32'), backend.hostTensor(values, [values.length], starts.dtype)];
}

/**
 * TF.js's `RaggedGather`, on the host from the page's values, like
 * `unique`. A ragged tensor is `paramsDenseValues` cut into rows by
 * `paramsNestedSplits`, one level of splits per ragged dim. An index's row
 * is followed down the levels to the span of dense values under it. The
 * output's splits give the lengths of what was gathered, laid end to end,
 * after one uniform level for each dim of `indices` but the last.
 */
function raggedGather(backend, { paramsNestedSplits, paramsDenseValues, indices }) {
  if (paramsNestedSplits.length === 0) throw new Error('paramsNestedSplits must be non empty');
  if (paramsNestedSplits[0].shape.length === 0) throw new Error('Split tensors must not be scalars');
  const levels = paramsNestedSplits.map((info) => backend.readSync(info.dataId));
  const at = backend.readSync(indices.dataId);
  const rows = paramsNestedSplits[0].shape[0] - 1;
  const strides = util.computeStrides(indices.shape);
  at.forEach((index, i) => {
    if (index < 0 || index >= rows) {
      throw new Error(`indices[${util.indexToLoc(i, indices.shape.length, strides).join(',')}] = ${index} is not in [0, ${rows})`);
    }
  });
  if (paramsDenseValues.shape.length === 0) throw new Error('params.rank must be nonzero');
  levels.forEach((splits, level) => {
    const end = level === levels.length - 1 ? paramsDenseValues.shape[0] : levels[level + 1].length;
    if (splits.length === 0) throw new Error('Ragged splits may not be empty');
    if (splits[0] < 0) throw new Error('Ragged splits must be non-negative');
    if (splits[splits.length - 1] > end) throw new Error('Ragged splits must not point past values');
    if (splits.some((v, i) => i > 0 && splits[i - 1] > v)) throw new Error('Ragged splits must be sorted in ascending order');
  });
  const uniform = indices.shape.length - 1;
  const out = Array.from({ length: uniform + levels.length }, () => [0]);
  for (let d = 0, n = 1; d < uniform; d += 1) {
    n *= indices.shape[d];
    for (let i = 1; i <= n; i += 1) out[d].push(i * indices.shape[d + 1]);
  }
  const spans = [];
  for (const index of at) {
    let [from, to] = [index, index + 1];
    levels.forEach((splits, level) => {
      const o = out[uniform + level];
      if (o !== undefined) {
        const shift = o[o.length - 1] - splits[from];
        for (let j = from; j < to; j += 1) o.push(splits[j + 1] + shift);
      }
      [from, to] = [splits[from], splits[to]];
    });
    if (to > from) spans.push([from, to]);
  }
  const values = backend.readSync(paramsDenseValues.dataId);
  const inner = util.sizeFromShape(paramsDenseValues.shape.slice(1));
  const shape = [spans.reduce((n, [from, to]) => n + to - from, 0), ...paramsDenseValues.shape.slice(1)];
  const gathered = util.getArrayFromDType(paramsDenseValues.dtype, util.sizeFromShape(shape));
  let k = 0;
  for (const [from, to] of spans) for (let i = from * inner; i < to * inner; i += 1) gathered[k++] = values[i];
  return [
    ...out.map((splits) => backend.hostTensor(Int32Array.from(splits), [splits.length], 'int32')),
    backend.hostTensor(gathered, shape, paramsDenseValues.dtype),
  ];
}

/**
 * TF.js's `RaggedTensorToTensor`, on the host from the values it holds,
 * like `raggedGather`. The ragged tensor is `values` (its rows, each of the
 * dense inner shape) under one row partition per ragged dim, each
 * `ROW_SPLITS` (where each row's children begin) or `VALUE_ROWIDS` (each
 * child's row), the first possibly `FIRST_DIM_SIZE` (the outer dim's
 * length). Each value row is followed up the levels to its place in the
 * output: its column at each level is its position among its row's
 * children, and a row or column past the output's `shape` (-1: the
 * longest there is) drops it with everything under it. Places no value
 * reaches hold `defaultValue`, broadcast over the inner shape.
 */
function raggedTensorToTensor(backend, { shape, values, defaultValue, rowPartitionTensors }, { rowPartitionTypes }) {
  const { RowPartitionType: Type } = backend_util;
  let types = backend_util.getRowPartitionTypesHelper(rowPartitionTypes);
  const rank = backend_util.getRaggedRank(types);
  let partitions = rowPartitionTensors.map((info) => backend.readSync(info.dataId));
  if (partitions.length === 0 || partitions[0].length === 0) {
    throw new Error('Invalid first partition input. Tensor requires at least one element.');
  }
  let rows;
  if (types[0] === Type.FIRST_DIM_SIZE) {
    rows = partitions[0][0];
    [types, partitions] = [types.slice(1), partitions.slice(1)];
  } else if (types[0] === Type.ROW_SPLITS) {
    rows = partitions[0].length - 1;
  } else {
    throw new Error(`Cannot handle ${rowPartitionTypes[0]} in the first dimension.`);
  }
  const unsupported = types.findIndex((type) => type !== Type.ROW_SPLITS && type !== Type.VALUE_ROWIDS);
  if (unsupported >= 0) throw new Error(`Cannot handle partition type ${rowPartitionTypes[unsupported]}`);
  // Each partition as the row and the column of each of its children.
  const children = partitions.map((partition, level) => {
    const row = [];
    const column = [];
    if (types[level] === Type.ROW_SPLITS) {
      for (let r = 0; r + 1 < partition.length; r += 1) {
        for (let c = 0; c < partition[r + 1] - partition[r]; c += 1) {
          row.push(r);
          column.push(c);
        }
      }
    } else {
      partition.forEach((r, j) => {
        row.push(r);
        column.push(j > 0 && partition[j - 1] === r ? column[j - 1] + 1 : 0);
      });
    }
    return { row, column, rows: types[level] === Type.ROW_SPLITS ? partition.length - 1 : null };
  });

  backend_util.validateDefaultValueShape(defaultValue.shape, values.shape);
  // The shape asked for: a dim of -1 (or a scalar -1, every dim) is the
  // longest there is.
  const asked = backend.readSync(shape.dataId);
  if (shape.shape.length === 0 && asked[0] !== -1) {
    throw new Error('The only valid scalar shape tensor is the fully unknown shape specified as -1.');
  }
  const bad = asked.find((d) => d < -1);
  if (bad !== undefined) throw new Error(`Dimension ${bad} must be >= -1`);
  const requested = shape.shape.length === 0 ? null : Array.from(asked);
  const out = backend_util.combineRaggedTensorToTensorShapes(rank, requested, values.shape);
  if (out[0] < 0) out[0] = rows;
  children.forEach(({ column }, level) => {
    if (out[level + 1] < 0) out[level + 1] = column.reduce((widest, c) => Math.max(widest, c + 1), 0);
  });

  // Where each row of each level starts in the output (in whole elements of
  // the levels below), or -1 where it is cut off.
  const strides = util.computeStrides(out).concat(1);
  let at = Array.from({ length: rows }, (_, r) => (r < out[0] ? r * strides[0] : -1));
  children.forEach(({ row, column, rows: parents }, level) => {
    if (parents !== null && parents > at.length) {
      throw new Error(`Row partition size is greater than output size: ${parents} > ${at.length}`);
    }
    at = row.map((r, j) => {
      if (r < 0 || r >= at.length) throw new Error(`Got a row id of ${r}, which is not in [0, ${at.length})`);
      return at[r] < 0 || column[j] >= out[level + 1] ? -1 : at[r] + column[j] * strides[level + 1];
    });
  });
  const inner = util.sizeFromShape(values.shape.slice(1));
  if (at.length * inner !== util.sizeFromShape(values.shape)) {
    throw new Error(`The row partitions place ${at.length} rows of values, but values has ${values.shape[0]}`);
  }

  const given = backend.readSync(values.dataId);
  const fill = backend.readSync(defaultValue.dataId);
  const element = values.shape.slice(1);
  const filler = build(element, broadcastReader(fill, defaultValue.shape, element.length));
  const result = util.getArrayFromDType(values.dtype, util.sizeFromShape(out));
  for (let i = 0; i < result.length; i += 1) result[i] = filler[i % inner];
  at.forEach((place, j) => {
    if (place >= 0) for (let i = 0; i < inner; i += 1) result[place + i] = given[j * inner + i];
  });
  return backend.hostTensor(result, out, values.dtype);
}

/**
 * TF.js's `CropAndResize`: box `i` (y1, x1, y2, x2, as fractions of the
 * height and width) of image `boxInd[i]`, sampled on a `cropSize` grid that
 * spans it, bilinearly or at the nearest pixel; a sample outside the image
 * is `extrapolationValue`, and a box of an image past the batch all zeros,
 * as TF.js's CPU leaves it. Boxes computed on the GPU work too.
 */
function cropAndResize(backend, image, boxes, boxInd, [rows, cols], method, extrapolationValue) {
  const [batch, height, width] = image.shape;
  const n = boxes.shape[0];
  // The samples' positions along one axis, [n, size]: from the box's near
  // edge (column `near` of `boxes`) to its far one, in pixels.
  const positions = (near, size, extent) => {
    const [from, to] = [near, near + 2].map((c) => boxes.slice([0, c], [n, 1]));
    if (size === 1) return from.add(to).mul(0.5 * (extent - 1));
    const steps = backend.device.arange(0, size, 1).reshape([1, size]);
    return from.mul(extent - 1).add(steps.mul(to.sub(from).mul((extent - 1) / (size - 1))));
  };
  const ys = positions(0, rows, height).reshape([n, rows, 1]);
  const xs = positions(1, cols, width).reshape([n, 1, cols]);
  const which = boxInd.clamp(0, batch - 1).reshape([n, 1, 1]);
  const value = sample(backend, image, which, ys, xs, method, 0);
  const within = (v, extent) => v.greaterEqual(0).logicalAnd(v.lessEqual(extent - 1));
  const inside = within(ys, height).logicalAnd(within(xs, width)).reshape([n, rows, cols, 1]);
  const valid = boxInd.greaterEqual(0).logicalAnd(boxInd.less(batch)).reshape([n, 1, 1, 1]);
  return select(backend, valid, select(backend, inside, value, scalar(backend, extrapolationValue)), scalar(backend, 0));
}

/**
 * Image `which` (int32, broadcasting with the positions) of `image`
 * [batch, height, width, depth], sampled at rows `ys` and columns `xs`
 * (floats broadcasting to the output's [n, rows, cols]), at the nearest
 * pixel (halves round up, as TF.js's `Math.round`) or bilinearly between
 * the four around; a pixel outside the image reads as `fill` (a number, or
 * one per channel). Positions are int32 throughout: a float32 index is
 * exact only below 2^24. `CropAndResize`, `Transform` and
 * `RotateWithOffset` read their images so.
 */
function sample(backend, image, which, ys, xs, interpolation, fill) {
  const [batch, height, width, depth] = image.shape;
  const int = (v) => scalar(backend, v, 'int32');
  const pixels = image.cast('float32').reshape([batch * height * width, depth]);
  const first = which.mul(int(height * width));
  const filler = Array.isArray(fill) ? backend.device.tensor(Float32Array.from(fill), [depth]) : scalar(backend, fill);
  // The pixel at integer positions `y`, `x`, or `fill` outside the image.
  const at = (y, x) => {
    const inside = y.greaterEqual(0).logicalAnd(y.lessEqual(height - 1))
      .logicalAnd(x.greaterEqual(0)).logicalAnd(x.lessEqual(width - 1));
    const [yi, xi] = [y.clamp(0, height - 1).cast('int32'), x.clamp(0, width - 1).cast('int32')];
    const values = pixels.gather(first.add(yi.mul(int(width))).add(xi), 0);
    return select(backend, inside.reshape([...inside.shape, 1]), values, filler);
  };
  if (interpolation === 'nearest') return at(ys.add(0.5).floor(), xs.add(0.5).floor());
  if (interpolation !== 'bilinear') {
    throw new Error(`Expect 'nearest' or 'bilinear' interpolation, but got ${interpolation}`);
  }
  const [top, left] = [ys.floor(), xs.floor()];
  const [bottom, right] = [top.add(1), left.add(1)];
  const weight = (v) => v.reshape([...v.shape, 1]);
  const [dy, dx] = [weight(ys.sub(top)), weight(xs.sub(left))];
  const upper = at(top, left).mul(dx.neg().add(1)).add(at(top, right).mul(dx));
  const lower = at(bottom, left).mul(dx.neg().add(1)).add(at(bottom, right).mul(dx));
  return upper.mul(dy.neg().add(1)).add(lower.mul(dy));
}

/**
 * TF.js's `Transform`'s fill modes: where an output pixel's position in
 * the input (`v`, along an axis of `size`) is read from when it falls
 * outside. 'constant' keeps it (it reads the fill value), 'nearest' clamps
 * it to the edge, 'reflect' mirrors it about the edges, 'wrap' tiles the
 * image, as TF.js's CPU maps them.
 */
function fillMode(backend, v, size, mode) {
  // 'constant' is also what TF.js does for a mode it does not know.
  if (mode !== 'nearest' && mode !== 'reflect' && mode !== 'wrap') return v;
  if (mode === 'nearest' || size <= 1) return v.clamp(0, size - 1);
  const [low, high] = [v.less(0), v.greater(size - 1)];
  let mapped;
  if (mode === 'reflect') {
    const twice = 2 * size;
    // Below: shifted up by whole periods, then mirrored about -0.5.
    const up = v.neg().div(twice).floor().mul(twice).add(v);
    const below = select(backend, up.less(-size), up.add(twice), up.neg().sub(1));
    // Above: taken down by whole periods, then mirrored about size - 0.5.
    const down = v.sub(v.div(twice).floor().mul(twice));
    const above = select(backend, down.greaterEqual(size), down.neg().add(twice - 1), down);
    mapped = select(backend, low, below, select(backend, high, above, v));
  } else {
    const period = size - 1;
    const below = v.add(v.neg().div(period).floor().add(1).mul(size));
    const above = v.sub(v.div(period).floor().mul(size));
    mapped = select(backend, low, below, select(backend, high, above, v));
  }
  return mapped.clamp(0, size - 1);
}

/**
 * TF.js's `Transform`: output pixel (x, y) of image b reads the input at
 * ((a0 x + a1 y + a2) / k, (a3 x + a4 y + a5) / k), k = a6 x + a7 y + 1,
 * from its row of `transforms` (one row for every image, or one each);
 * where k is 0 it is the fill value, as in TF.js.
 */
function transform(backend, image, transforms, { interpolation, fillMode: mode, fillValue, outputShape }) {
  const [, height, width] = image.shape;
  const [rows, cols] = outputShape ?? [height, width];
  const device = backend.device;
  const n = transforms.shape[0];
  const a = count(8, (k) => transforms.slice([0, k], [n, 1]).reshape([n, 1, 1]));
  const x = device.arange(0, cols, 1).reshape([1, 1, cols]);
  const y = device.arange(0, rows, 1).reshape([1, rows, 1]);
  const k = a[6].mul(x).add(a[7].mul(y)).add(1);
  const zero = k.equal(0);
  const safe = select(backend, zero, scalar(backend, 1), k);
  const xs = a[0].mul(x).add(a[1].mul(y)).add(a[2]).div(safe);
  const ys = a[3].mul(x).add(a[4].mul(y)).add(a[5]).div(safe);
  const every = backend.device.arange(0, image.shape[0], 1, 'int32').reshape([image.shape[0], 1, 1]);
  const read = sample(backend, image, every, fillMode(backend, ys, height, mode), fillMode(backend, xs, width, mode),
    interpolation, fillValue);
  return select(backend, zero.reshape([n, rows, cols, 1]), scalar(backend, fillValue), read);
}

/**
 * TF.js's `RotateWithOffset`: each output pixel reads the input pixel
 * nearest to it rotated by `radians` about `center` (fractions of the
 * width and height); outside the image, `fillValue` (a number, or a color
 * whose alpha channel is opaque).
 */
function rotateWithOffset(backend, image, { radians, fillValue, center }) {
  const [, height, width, depth] = image.shape;
  const [cx, cy] = backend_util.getImageCenter(center, height, width);
  const [sin, cos] = [Math.sin(radians), Math.cos(radians)];
  const x = backend.device.arange(0, width, 1).reshape([1, 1, width]).sub(cx);
  const y = backend.device.arange(0, height, 1).reshape([1, height, 1]).sub(cy);
  const xs = x.mul(cos).sub(y.mul(sin)).add(cx);
  const ys = x.mul(sin).add(y.mul(cos)).add(cy);
  const fill = typeof fillValue === 'number' ? fillValue : count(depth, (c) => (c === 3 ? 255 : fillValue[c]));
  const every = backend.device.arange(0, image.shape[0], 1, 'int32').reshape([image.shape[0], 1, 1]);
  return sample(backend, image, every, ys, xs, 'nearest', fill);
}

/**
 * TF.js's `SparseSegmentSum` and `SparseSegmentMean`: row `indices[i]` of
 * `data` goes to segment `segmentIds[i]`; the output has a row per segment
 * up to the last id, each the sum (or mean) of its rows, 0 where none. The
 * ids and indices are read on the host (the output's size is the last id;
 * computed ones must have been read), checked in TF.js's order with its
 * messages; the rows are gathered and summed by our ops, so `data` may be
 * computed.
 */
function sparseSegment(backend, { data, indices, segmentIds }, mean) {
  const [at, ids] = [indices, segmentIds].map((info) => backend.readSync(info.dataId));
  const n = ids.length;
  const rows = data.shape[0];
  const segments = n > 0 ? ids[n - 1] + 1 : 0;
  if (n > 0 && segments <= 0) throw new Error(backend_util.getSparseSegmentReductionNegativeSegmentIdsErrorMessage());
  const counts = new Float32Array(Math.max(segments, 0));
  for (let start = 0; start < n;) {
    let end = start + 1;
    while (end < n && ids[end] === ids[start]) end += 1;
    if (end < n && ids[end] < ids[start]) {
      throw new Error(backend_util.getSparseSegmentReductionNonIncreasingSegmentIdsErrorMessage());
    }
    if (ids[start] < 0 || ids[start] >= segments) {
      throw new Error(backend_util.getSparseSegmentReductionSegmentIdOutOfRangeErrorMessage(ids[start], segments));
    }
    for (let i = start; i < end; i += 1) {
      if (at[i] < 0 || at[i] >= rows) {
        throw new Error(backend_util.getSparseSegmentReductionIndicesOutOfRangeErrorMessage(i, at[i], rows));
      }
    }
    counts[ids[start]] = end - start;
    start = end;
  }
  const inner = data.shape.slice(1);
  if (n === 0) return backend.device.zeros([0, ...inner], data.dtype);
  // Our segment sum adds floats: int32 data is summed as float32 (exact
  // below 2^24) and cast back, a mean truncated as TF.js's int32 one is.
  const x = backend.tensorOf(data).cast('float32');
  let out = x.gather(backend.tensorOf(indices), 0).unsortedSegmentSum(backend.tensorOf(segmentIds), segments);
  if (mean) out = out.div(backend.device.tensor(counts.map((c) => Math.max(c, 1)), [segments, ...inner.map(() => 1)]));
  return data.dtype === 'float32' ? out : out.cast(data.dtype);
}

/**
 * TF.js's `StringNGrams`, on the host where strings live. Row `i` of
 * `data` is its tokens `dataSplits[i]` up to `dataSplits[i + 1]`, padded
 * with `padWidth` (-1: the width less one; never more) copies of `leftPad`
 * and `rightPad`; its n-grams of each width are the windows over that,
 * joined by `separator`. With `preserveShortSequences`, a row too short
 * for any still gives one, the whole padded row.
 */
function stringNGrams(backend, { data, dataSplits }, attrs) {
  const { separator, nGramWidths, leftPad, rightPad, padWidth, preserveShortSequences } = attrs;
  const [tokens, splits] = [data, dataSplits].map((info) => backend.readSync(info.dataId));
  if (splits.length > 0) {
    if (splits[0] !== 0) throw new Error(`First split value must be 0, got ${splits[0]}`);
    for (let i = 1; i < splits.length; i += 1) {
      if (splits[i] < splits[i - 1] || splits[i] > tokens.length) {
        throw new Error(`Invalid split value ${splits[i]}, must be in [${splits[i - 1]}, ${tokens.length}]`);
      }
    }
    if (splits[splits.length - 1] !== tokens.length) {
      throw new Error(`Last split value must be data size. Expected ${tokens.length}, got ${splits[splits.length - 1]}`);
    }
  }
  const [sep, left, right] = [separator, leftPad, rightPad].map((s) => util.encodeString(s));
  const padOf = (width) => Math.min(padWidth < 0 ? width - 1 : padWidth, width - 1);
  const countOf = (length, width) => Math.max(0, length + 2 * padOf(width) - width + 1);
  // N-gram `k` of `count` of `width`, over the row starting at `start`.
  const nGram = (start, width, k, count) => {
    const pad = padOf(width);
    const before = Math.max(0, pad - k);
    const after = Math.max(0, pad - (count - k - 1));
    const first = start + (before > 0 ? 0 : k - pad);
    const words = [...Array(before).fill(left)];
    for (let n = 0; n < width - before - after; n += 1) words.push(tokens[first + n]);
    for (let n = 0; n < after; n += 1) words.push(right);
    const bytes = new Uint8Array(words.reduce((size, w) => size + w.length, 0) + sep.length * Math.max(0, words.length - 1));
    let at = 0;
    words.forEach((w, i) => {
      if (i > 0) {
        bytes.set(sep, at);
        at += sep.length;
      }
      bytes.set(w, at);
      at += w.length;
    });
    return bytes;
  };
  const out = [];
  const outSplits = new Int32Array(Math.max(splits.length, 1));
  for (let row = 0; row + 1 < splits.length; row += 1) {
    const [start, length] = [splits[row], splits[row + 1] - splits[row]];
    const before = out.length;
    for (const width of nGramWidths) {
      const count = countOf(length, width);
      for (let k = 0; k < count; k += 1) out.push(nGram(start, width, k, count));
    }
    if (preserveShortSequences && length > 0 && out.length === before) {
      out.push(nGram(start, length + 2 * padWidth, 0, 1));
    }
    outSplits[row + 1] = out.length;
  }
  return [
    backend.hostTensor(out, [out.length], 'string'),
    backend.hostTensor(outSplits.subarray(0, splits.length), [splits.length], 'int32'),
  ];
}

/**
 * TF.js's `StringSplit`, on the host: each string cut at every byte of
 * `delimiter` (at every byte, when it is empty), the empty pieces dropped
 * with `skipEmpty`; the pieces as a sparse [strings, most pieces] tensor's
 * indices, values and shape.
 */
function stringSplit(backend, { input, delimiter }, { skipEmpty }) {
  const [cuts] = backend.given(delimiter);
  const pieces = backend.given(input).map((bytes) => {
    if (cuts.length === 0) return Array.from(bytes, (_, i) => bytes.subarray(i, i + 1));
    if (bytes.length === 0) return [];
    const out = [];
    let start = 0;
    for (let i = 0; i <= bytes.length; i += 1) {
      if (i < bytes.length && !cuts.includes(bytes[i])) continue;
      if (!skipEmpty || i > start) out.push(bytes.subarray(start, i));
      start = i + 1;
    }
    return out;
  });
  const values = pieces.flat();
  const indices = new Int32Array(2 * values.length);
  let k = 0;
  pieces.forEach((row, i) => row.forEach((_, j) => {
    indices[k++] = i;
    indices[k++] = j;
  }));
  const widest = pieces.reduce((most, row) => Math.max(most, row.length), 0);
  return [
    backend.hostTensor(indices, [values.length, 2], 'int32'),
    backend.hostTensor(values, [values.length], 'string'),
    backend.hostTensor(Int32Array.of(pieces.length, widest), [2], 'int32'),
  ];
}

/**
 * TF.js's `SparseReshape`, on the host: the nonzeros' positions in a dense
 * shape (`inputShape`) as positions in `newShape`, whose one -1 is what the
 * rest leave, with TF.js's checks and messages.
 */
function sparseReshape(backend, { inputIndices, inputShape, newShape }) {
  if (inputIndices.shape.length !== 2) throw new Error(`Input indices should be a matrix but received shape ${inputIndices.shape}`);
  if (inputShape.shape.length !== 1) throw new Error(`Input shape should be a vector but received shape ${inputShape.shape}`);
  if (newShape.shape.length !== 1) throw new Error(`Target shape should be a vector but received shape ${newShape.shape}`);
  const [indices, from, target] = [inputIndices, inputShape, newShape].map((info) => backend.readSync(info.dataId));
  const size = util.sizeFromShape(Array.from(from));
  const shape = Array.from(target);
  const unknown = shape.indexOf(-1);
  shape.forEach((d, i) => {
    if (d === -1 && i !== unknown) throw new Error(backend_util.getSparseReshapeMultipleNegativeOneOutputDimErrorMessage(unknown, i));
    if (d < -1) throw new Error(backend_util.getSparseReshapeNegativeOutputDimErrorMessage(i, d));
  });
  if (unknown >= 0) {
    const known = shape.reduce((p, d, i) => (i === unknown ? p : p * d), 1);
    if (known <= 0) throw new Error(backend_util.getSparseReshapeEmptyTensorZeroOutputDimErrorMessage());
    const missing = Math.trunc(size / known);
    shape[unknown] = 1;
    if (known * missing !== size) throw new Error(backend_util.getSparseReshapeInputOutputMultipleErrorMessage(Array.from(from), shape));
    shape[unknown] = missing;
  }
  if (util.sizeFromShape(shape) !== size) {
    throw new Error(backend_util.getSparseReshapeInputOutputMismatchErrorMessage(Array.from(from), shape));
  }
  const [nonzeros, rank] = inputIndices.shape;
  const [inStrides, outStrides] = [Array.from(from), shape].map((s) => (s.length === 0 ? [] : [...util.computeStrides(s), 1]));
  const out = util.getArrayFromDType(inputIndices.dtype, nonzeros * shape.length);
  for (let i = 0; i < nonzeros; i += 1) {
    let flat = 0;
    for (let j = 0; j < rank; j += 1) flat += indices[i * rank + j] * inStrides[j];
    for (let j = 0; j < shape.length; j += 1) {
      out[i * shape.length + j] = Math.trunc(flat / outStrides[j]);
      flat %= outStrides[j];
    }
  }
  return [
    backend.hostTensor(out, [nonzeros, shape.length], inputIndices.dtype),
    backend.hostTensor(Int32Array.from(shape), [shape.length], newShape.dtype),
  ];
}

/**
 * TF.js's `SparseFillEmptyRows`, on the host: the nonzeros ordered by row
 * (stably), and a `[row, 0, ...]` entry of `defaultValue` for each row that
 * has none; with which rows were empty and where each input entry went.
 */
function sparseFillEmptyRows(backend, { indices, values, denseShape, defaultValue }) {
  if (denseShape.shape.length !== 1) throw new Error(`Dense shape must be a vector, saw: ${denseShape.shape}`);
  if (indices.shape.length !== 2) throw new Error(`Indices must be a matrix, saw: ${indices.shape}`);
  if (values.shape.length !== 1) throw new Error(`Values must be a vector, saw: ${values.shape}`);
  if (defaultValue.shape.length !== 0) throw new Error(`Default value must be a scalar, saw: ${defaultValue.shape}`);
  const [at, given, dense, fill] = [indices, values, denseShape, defaultValue].map((info) => backend.readSync(info.dataId));
  const [count, rank] = indices.shape;
  const rows = dense[0];
  if (rows === 0 && count !== 0) throw new Error(backend_util.getSparseFillEmptyRowsIndicesDenseShapeMismatch(count));
  const perRow = new Array(rows).fill(0);
  for (let i = 0; i < count; i += 1) {
    const row = at[i * rank];
    if (row < 0) throw new Error(backend_util.getSparseFillEmptyRowsNegativeIndexErrorMessage(i, row));
    if (row >= rows) throw new Error(backend_util.getSparseFillEmptyRowsOutOfRangeIndexErrorMessage(i, row, rows));
    perRow[row] += 1;
  }
  // Where each row's entries start: an empty row still takes one.
  const starts = [];
  perRow.reduce((next, n) => {
    starts.push(next);
    return next + Math.max(n, 1);
  }, 0);
  const total = rows === 0 ? 0 : starts[rows - 1] + Math.max(perRow[rows - 1], 1);
  const outIndices = util.getArrayFromDType(indices.dtype, total * rank);
  const outValues = util.getArrayFromDType(values.dtype, total);
  const placed = new Array(rows).fill(0);
  const where = new Int32Array(count);
  for (let i = 0; i < count; i += 1) {
    const row = at[i * rank];
    const k = starts[row] + placed[row]++;
    for (let j = 0; j < rank; j += 1) outIndices[k * rank + j] = at[i * rank + j];
    outValues[k] = given[i];
    where[i] = k;
  }
  perRow.forEach((n, row) => {
    if (n > 0) return;
    outIndices[starts[row] * rank] = row;
    outValues[starts[row]] = fill[0];
  });
  return [
    backend.hostTensor(outIndices, [total, rank], indices.dtype),
    backend.hostTensor(outValues, [total], values.dtype),
    backend.hostTensor(Uint8Array.from(perRow, (n) => (n === 0 ? 1 : 0)), [rows], 'bool'),
    backend.hostTensor(where, [count], indices.dtype),
  ];
}

/**
 * TF.js's synchronous `nonMaxSuppression` (kernel `version` 3, 4 with
 * padding, 5 with soft-NMS), by TF.js's own implementation on the host, as
 * its GPU backends run it: which boxes survive is a sequence of decisions
 * on values. So it takes boxes and scores the host holds (the page gave
 * them, or a read brought them back); others are refused naming
 * `tf.image.nonMaxSuppressionAsync`, which reads them first.
 */
function nonMaxSuppression(backend, { boxes, scores }, attrs, version) {
  const [b, s] = [boxes, scores].map((info) => {
    const values = backend.given(info);
    if (values === null) {
      throw new Error(`webfusion runs nonMaxSuppression on values the host holds only: [${info.shape}] is computed on ` +
        'the GPU and not read yet, and WebGPU cannot be read synchronously. Use ' +
        '`await tf.image.nonMaxSuppressionAsync(...)` instead.');
    }
    return values;
  });
  const { maxOutputSize, iouThreshold, scoreThreshold } = attrs;
  const indices = (selected) => backend.hostTensor(Int32Array.from(selected), [selected.length], 'int32');
  if (version === 3) {
    return indices(kernel_impls.nonMaxSuppressionV3Impl(b, s, maxOutputSize, iouThreshold, scoreThreshold).selectedIndices);
  }
  if (version === 4) {
    const { selectedIndices, validOutputs } = kernel_impls.nonMaxSuppressionV4Impl(
      b, s, maxOutputSize, iouThreshold, scoreThreshold, attrs.padToMaxOutputSize);
    return [indices(selectedIndices), backend.hostTensor(Int32Array.of(validOutputs), [], 'int32')];
  }
  const { selectedIndices, selectedScores } = kernel_impls.nonMaxSuppressionV5Impl(
    b, s, maxOutputSize, iouThreshold, scoreThreshold, attrs.softNmsSigma);
  return [indices(selectedIndices), backend.hostTensor(Float32Array.from(selectedScores), [selectedScores.length], 'float32')];
}

/**
 * TF.js's `Draw` (`tf.browser.draw`): an image's values into a 2D canvas,
 * at once, as TF.js's CPU backend draws them (floats in [0, 1], ints in
 * [0, 255], one channel as grey). It is synchronous, so it draws the
 * values the page gave only: a computed image would need a synchronous
 * GPU read, which WebGPU does not have, and is refused naming the
 * asynchronous way, `tf.browser.toPixels`.
 */
function draw(backend, image, { canvas, options }) {
  const { contextOptions, imageOptions } = options ?? {};
  // TF.js's backends each draw through a context of their own name
  // ('webgl', 'webgpu'); this one's is a 2D context.
  const asked = contextOptions?.contextType || '2d';
  if (asked !== '2d' && asked !== 'webfusion') {
    throw new Error(`Context type ${asked} is not supported by the webfusion backend: it draws with '2d'.`);
  }
  const type = '2d';
  const values = backend.given(image);
  if (values === null) {
    throw new Error(`webfusion draws only images whose values the page gave: image [${image.shape}] is computed ` +
      'on the GPU, which cannot be read synchronously. Use `await tf.browser.toPixels(image, canvas)` instead.');
  }
  const ctx = canvas.getContext(type, contextOptions?.contextAttributes || {});
  if (ctx == null) throw new Error(`Could not get the context with ${type} type.`);
  const [height, width] = image.shape;
  const depth = image.shape[2] ?? 1;
  const [scale, top] = image.dtype === 'float32' ? [255, 1] : [1, 255];
  const alpha = 255 * (imageOptions?.alpha || 1);
  const bytes = new Uint8ClampedArray(width * height * 4);
  for (let i = 0; i < width * height; i += 1) {
    const rgba = [0, 0, 0, alpha];
    for (let d = 0; d < depth; d += 1) {
      const value = values[i * depth + d];
      if (value < 0 || value > top) {
        throw new Error(`Tensor values for a ${image.dtype} Tensor must be in the range [0 - ${top}] but encountered ${value}.`);
      }
      if (depth === 1) rgba.fill(value * scale, 0, 3);
      else rgba[d] = value * scale;
    }
    for (let c = 0; c < 4; c += 1) bytes[i * 4 + c] = Math.round(rgba[c]);
  }
  canvas.width = width;
  canvas.height = height;
  ctx.putImageData(new ImageData(bytes, width, height), 0, 0);
  // The input tensor itself: TF.js's engine makes no new tensor of an
  // output that is one, and `tf.browser.draw` drops what the kernel returns.
  return image;
}

/**
 * TF.js's `FFT` (or with `inverse` its `IFFT`) along the innermost axis:
 * the product with the DFT's cosine and sine matrices, made in float64 on
 * the host, `e^(-2 pi i jk / n)` (or `e^(+..) / n`).
 */
function fourier(backend, { real, imag }, inverse) {
  const n = real.shape.at(-1);
  const cos = new Float32Array(n * n);
  const sin = new Float32Array(n * n);
  for (let j = 0; j < n; j += 1) {
    for (let k = 0; k < n; k += 1) {
      const angle = (2 * Math.PI * ((j * k) % n)) / n;
      [cos[j * n + k], sin[j * n + k]] = [Math.cos(angle), Math.sin(angle)];
    }
  }
  const [c, s] = [backend.device.tensor(cos, [n, n]), backend.device.tensor(sin, [n, n])];
  const rows = [real.size / n, n];
  const [re, im] = [real.reshape(rows), imag.reshape(rows)];
  const scale = inverse ? 1 / n : 1;
  const sign = inverse ? -1 : 1;
  return {
    real: re.matmul(c).add(im.matmul(s).mul(sign)).mul(scale).reshape(real.shape),
    imag: im.matmul(c).sub(re.matmul(s).mul(sign)).mul(scale).reshape(real.shape),
  };
}

const unary = (f) => kernel(({ inputs: { x }, t, backend, attrs }) => f(t(x), backend, attrs));

/**
 * A two-input kernel. An operand that is a float32 scalar the page gave
 * (TF.js makes one of every number in `x.mul(2)`) is passed to our op as the
 * number: it is then a constant of the fused kernel, not a buffer of its
 * own (sixteen such would exceed a kernel's bindings and split the fusion).
 * A `commutes` kernel takes a number on either side.
 */
function binary(f, commutes = false, single = false) {
  const numbersOf = ({ a, b }, backend) => {
    const right = backend.scalarOf(b, a);
    if (right !== null) return { b: right };
    const left = commutes ? backend.scalarOf(a, b) : null;
    return left !== null ? { a: left } : {};
  };
  return kernel(({ inputs: { a, b }, t, backend, numbers }) => {
    if ('b' in numbers) return f(t(a), numbers.b, backend);
    if ('a' in numbers) return f(t(b), numbers.a, backend);
    return f(t(a), t(b), backend);
  }, numbersOf, single);
}
const method = (name) => kernel(({ inputs: { x }, t }) => t(x)[name](), undefined, true);
const binaryMethod = (name, commutes = false) => binary((a, b) => a[name](b), commutes, true);

/** Our `where`, as the composites below spell it. */
const select = (backend, cond, a, b) => backend.device.where(cond, a, b);

const isNaN = (x) => x.equal(x).logicalNot();

function step(x, backend, alpha) {
  return select(backend, isNaN(x), x,
    select(backend, x.greater(0), scalar(backend, 1), scalar(backend, alpha)));
}

function elu(x, backend) {
  return select(backend, x.greater(0), x, x.exp().sub(1));
}

function leakyRelu(x, backend, alpha) {
  return select(backend, x.less(0), x.mul(alpha), x);
}

function prelu(x, alpha, backend) {
  return select(backend, x.less(0), x.mul(alpha), x);
}

/** TF.js's `round`: half to even, as its CPU and WebGPU backends do. */
function round(x, backend) {
  if (x.dtype !== 'float32') return x.reshape(x.shape);
  const floor = x.floor();
  const fraction = x.sub(floor);
  const even = floor.mod(2).equal(0);
  const up = floor.add(1);
  return select(backend, fraction.greater(0.5), up,
    select(backend, fraction.less(0.5), floor, select(backend, even, floor, up)));
}

/** TF.js's `softplus`, with its thresholds (the log1p form loses precision at the ends). */
function softplus(x, backend) {
  const threshold = Math.log(1.1920928955078125e-7) + 2;
  const exp = x.exp();
  return select(backend, x.greater(-threshold), x,
    select(backend, x.less(threshold), exp, exp.add(1).log()));
}

const SELU_SCALE = 1.0507009873554804934193349852946;
const SELU_ALPHA = 1.6732632423543772848170429916717;

/** The fused kernels' `activation` attribute, applied to `x`. */
/**
 * A fused convolution's bias or PReLU weights as they broadcast over its
 * output: a vector of one value per channel lies along the last dim in
 * NHWC, and is reshaped to [channels, 1, 1] in NCHW (as TF.js's backends
 * do), or it would broadcast along the width, silently wrong wherever the
 * width equals the channel count.
 */
function channels(v, dataFormat) {
  return dataFormat === 'NCHW' && v.shape.length === 1 && v.shape[0] !== 1 ? v.reshape([v.shape[0], 1, 1]) : v;
}

function activate(x, backend, activation, preluWeights, leakyreluAlpha, kernelName) {
  switch (activation ?? 'linear') {
    case 'linear': return x;
    case 'relu': return x.relu();
    case 'relu6': return x.clamp(0, 6);
    case 'elu': return elu(x, backend);
    case 'sigmoid': return x.sigmoid();
    case 'prelu': return prelu(x, preluWeights, backend);
    case 'leakyrelu': return leakyRelu(x, backend, leakyreluAlpha ?? 0.2);
    default: throw new Error(`${kernelName}: webfusion has no activation '${activation}'`);
  }
}

/**
 * An explicit `pad` as TF.js reads it: only the height's and width's pairs
 * count (TF.js's conv_util ignores the batch's and channels'), so those are
 * what our ops get, the others zero.
 */
function explicit(pad, dataFormat) {
  if (!Array.isArray(pad)) return pad;
  const zero = [0, 0];
  return dataFormat === 'NCHW' ? [zero, zero, pad[2], pad[3]] : [zero, pad[1], pad[2], zero];
}

const pair = (v) => (Array.isArray(v) ? v : [v, v]);

/**
 * TF.js's `pad` as our ops take it, for an input of `shape` and a window of
 * `filter` (height, width). With a `dimRoundingMode`, TF.js's output size is
 * `round((in - reach + before + after) / stride + 1)` in that mode, the
 * windows past the input clipped: our ops floor, so the pad after each
 * spatial dim widens until they give that size (a floor needs no widening).
 */
function padsOf(shape, filter, { strides, pad, dataFormat, dilations, dimRoundingMode }) {
  const pads = explicit(pad, dataFormat);
  if (dimRoundingMode == null || typeof pad === 'string') return pads;
  const round = { floor: Math.floor, ceil: Math.ceil, round: Math.round }[dimRoundingMode];
  if (round == null) throw new Error(`webfusion: unknown dimRoundingMode '${dimRoundingMode}'`);
  const [s, d] = [pair(strides), pair(dilations ?? 1)];
  const axes = dataFormat === 'NCHW' ? [2, 3] : [1, 2];
  const sides = axes.map((axis, i) => {
    const [before, after] = typeof pads === 'number' ? [pads, pads] : pads[axis];
    const reach = (filter[i] - 1) * d[i] + 1;
    const out = round((shape[axis] - reach + before + after) / s[i] + 1);
    return [before, Math.max(after, (out - 1) * s[i] + reach - shape[axis] - before)];
  });
  const zero = [0, 0];
  return dataFormat === 'NCHW' ? [zero, zero, ...sides] : [zero, ...sides, zero];
}

/**
 * TF.js's `AvgPoolGrad`, which divides each window's gradient by the whole
 * window's size even where the forward `avgPool` divided by the taps
 * inside the input (a padded edge's). It is the gradient of an average over
 * the zero-padded input, every window whole, so that is how it is taken.
 */
function avgPoolGrad(x, dy, attrs) {
  const { filterSize, strides, pad, dimRoundingMode } = attrs;
  const { padInfo: p } = backend_util.computePool2DInfo(x.shape, filterSize, strides, 1, pad, dimRoundingMode);
  const sides = [[0, 0], [p.top, p.bottom], [p.left, p.right], [0, 0]];
  return backprop((v) => v.pad(sides, 0).avgPool(filterSize, strides, 'valid'), x, dy);
}

/**
 * TF.js's local response normalization: each value over `(bias + alpha *
 * the sum of squares of its channel's neighbours within depthRadius)` to
 * the `beta`. The window sums are one product with a band of ones.
 */
function lrn(backend, x, { depthRadius, bias, alpha, beta }) {
  const c = x.shape[3];
  const channel = backend.device.arange(0, c, 1, 'int32');
  const band = channel.reshape([c, 1]).sub(channel.reshape([1, c])).abs().lessEqual(depthRadius).cast('float32');
  const sums = x.square().reshape([x.size / c, c]).matmul(band).reshape(x.shape);
  return x.mul(sums.mul(alpha).add(bias).pow(-beta));
}

/**
 * TF.js's `einsum`, computed as its CPU backend does: each operand
 * transposed and expanded onto the equation's dims, multiplied in, and the
 * summed dims reduced in TF.js's own order.
 */
function einsum(tensors, equation) {
  const { allDims, summedDims, idDims } = backend_util.decodeEinsumEquation(equation, tensors.length);
  backend_util.checkEinsumDimSizes(allDims.length, idDims, tensors);
  const { path, steps } = backend_util.getEinsumComputePath(summedDims, idDims);
  let out = null;
  let remaining = allDims.length;
  steps.forEach((terms, i) => {
    for (const term of terms) {
      const { permutationIndices: perm, expandDims } = backend_util.getEinsumPermutation(remaining, idDims[term]);
      let x = backend_util.isIdentityPermutation(perm) ? tensors[term] : tensors[term].transpose(perm);
      const shape = x.shape.slice();
      for (const d of expandDims) shape.splice(d, 0, 1);
      x = x.reshape(shape);
      out = out === null ? x : x.mul(out);
    }
    if (i < steps.length - 1) {
      if (path[i] >= 0) out = out.sum(path[i] - (allDims.length - remaining), false);
      remaining -= 1;
    }
  });
  return out;
}

/**
 * TF.js's `bincount` of int32 `x` (a row, or rows): at each value below
 * `size` the sum of its weights (or its count, with no weights), or 1 with
 * `binaryOutput`. Values at or past `size` are left out, as TF.js's are.
 */
function bincount(backend, x, weights, size, binaryOutput) {
  const hot = x.reshape([...x.shape, 1]).equal(backend.device.arange(0, size, 1, 'int32')).cast(weights.dtype);
  const axis = x.shape.length - 1;
  if (binaryOutput) return hot.max(axis, false);
  if (weights.size === 0) return hot.sum(axis, false);
  return hot.mul(weights.reshape([...weights.shape, 1])).sum(axis, false);
}

/**
 * The pad after a dim of `size` that `out` windows of `reach`, `stride`
 * apart and starting `before` it, need to stay inside the padded input.
 */
const after = (out, stride, reach, size, before) => Math.max(0, (out - 1) * stride + reach - size - before);

/**
 * A 3D window op made of 2D ones. For each depth tap `kd`, the depth slice
 * each output depth reads (the input padded in depth with `fill`) joins a
 * batch of images, which `f(images, pads, kd)` windows in height and width
 * with TF.js's pads (`info` is TF.js's conv3d or pool3d info); `combine`
 * folds the taps' results.
 */
function depthTaps(backend, x, info, fill, f, combine) {
  const [n, d, h, w, c] = x.shape;
  const { front, top, bottom, left, right } = info.padInfo;
  const back = after(info.outDepth, info.strideDepth, info.effectiveFilterDepth, d, front);
  const padded = x.pad([[0, 0], [front, back], [0, 0], [0, 0], [0, 0]], fill);
  const pads = [[0, 0],
    [top, Math.max(bottom, after(info.outHeight, info.strideHeight, info.effectiveFilterHeight, h, top))],
    [left, Math.max(right, after(info.outWidth, info.strideWidth, info.effectiveFilterWidth, w, left))], [0, 0]];
  let out = null;
  for (let kd = 0; kd < info.filterDepth; kd += 1) {
    const rows = Array.from({ length: info.outDepth }, (_, od) => od * info.strideDepth + kd * info.dilationDepth);
    const images = padded.gather(positions(backend, rows), 1).reshape([n * info.outDepth, h, w, c]);
    const y = f(images, pads, kd);
    out = out === null ? y : combine(out, y);
  }
  return out.reshape([n, info.outDepth, ...out.shape.slice(1)]);
}

/**
 * The taps of a 2D window over NHWC `x` (TF.js's conv `info`): for each
 * window position `(i, j)` the input each output reads there, [batch,
 * outHeight, outWidth, channels], from the input padded with `fill` (a
 * strided gather per spatial axis), and the input row and column each
 * output position reads (within the input or not), row-major as TF.js's
 * loops visit them.
 */
function windowTaps(backend, x, info, fill) {
  const { top, left } = info.padInfo;
  const [, h, w] = x.shape;
  const along = (out, stride, k, dilation, before) => Array.from({ length: out }, (_, o) => o * stride + k * dilation - before);
  const rowsAt = (i) => along(info.outHeight, info.strideHeight, i, info.dilationHeight, top);
  const colsAt = (j) => along(info.outWidth, info.strideWidth, j, info.dilationWidth, left);
  const lastRow = Math.max(h, ...rowsAt(info.filterHeight - 1).map((r) => r + 1));
  const lastCol = Math.max(w, ...colsAt(info.filterWidth - 1).map((c) => c + 1));
  const padded = x.pad([[0, 0], [top, lastRow - h], [left, lastCol - w], [0, 0]], fill);
  const taps = [];
  for (let i = 0; i < info.filterHeight; i += 1) {
    const rows = rowsAt(i);
    const band = padded.gather(positions(backend, rows.map((r) => r + top)), 1);
    for (let j = 0; j < info.filterWidth; j += 1) {
      const cols = colsAt(j);
      taps.push({ i, j, rows, cols, values: band.gather(positions(backend, cols.map((c) => c + left)), 2) });
    }
  }
  return taps;
}

/**
 * TF.js's `dilation2d`: the largest of each window's inputs plus the
 * filter's value at that tap, taps outside the input skipped.
 */
function dilation2d(backend, x, filter, { strides, pad, dilations }) {
  const info = backend_util.computeDilation2DInfo(x.shape, filter.shape, strides, pad, 'NHWC', dilations);
  const taps = windowTaps(backend, x, info, -Infinity);
  const c = filter.shape[2];
  return taps.map(({ i, j, values }) => values.add(filter.slice([i, j, 0], [1, 1, c]).reshape([c])))
    .reduce((best, v) => best.maximum(v));
}

/**
 * TF.js's `maxPoolWithArgmax`: each window's largest input and its flat
 * position in the input (with the batch when `includeBatchInIndex`), the
 * first largest in TF.js's visiting order.
 */
function maxPoolWithArgmax(backend, x, { filterSize, strides, pad, includeBatchInIndex }) {
  const info = backend_util.computePool2DInfo(x.shape, filterSize, strides, [1, 1], pad);
  const [b, h, w, c] = x.shape;
  // A NaN is never larger, so it is skipped, as TF.js's loop skips it.
  let best = backend.device.full(info.outShape, -Infinity, 'float32');
  let where = null;
  for (const { rows, cols, values } of windowTaps(backend, x, info, -Infinity)) {
    const at = rows.flatMap((r) => cols.map((col) => (r * w + col) * c));
    const flat = backend.device.tensor(Int32Array.from(at), [1, rows.length, cols.length, 1], 'int32')
      .add(backend.device.arange(0, c, 1, 'int32').reshape([1, 1, 1, c]));
    const index = includeBatchInIndex
      ? flat.add(backend.device.arange(0, b, 1, 'int32').mul(h * w * c).reshape([b, 1, 1, 1]))
      : flat.broadcastTo([b, rows.length, cols.length, c]);
    const larger = values.greater(best);
    best = select(backend, larger, values, best);
    where = where === null ? index : select(backend, larger, index, where);
  }
  return [best, where];
}

function conv3d(backend, x, filter, { strides, pad, dilations }) {
  const info = backend_util.computeConv3DInfo(x.shape, filter.shape, strides, dilations ?? 1, pad);
  const [, fh, fw, ci, co] = filter.shape;
  return depthTaps(backend, x, info, 0, (images, pads, kd) =>
    images.conv2d(filter.slice([kd, 0, 0, 0, 0], [1, fh, fw, ci, co]).reshape([fh, fw, ci, co]),
      [info.strideHeight, info.strideWidth], pads, 'NHWC', [info.dilationHeight, info.dilationWidth]),
  (a, b) => a.add(b));
}

/**
 * `maxPool3d` or `avgPool3d` as TF.js computes them: an average over the
 * taps inside the input, so the sum of the depth taps' 2D averages is
 * divided by how many depth taps each output depth has inside (each depth
 * tap's 2D average counts the same height and width taps).
 */
function pool3d(backend, x, attrs, max) {
  const info = backend_util.computePool3DInfo(x.shape, attrs.filterSize, attrs.strides, 1, attrs.pad, attrs.dimRoundingMode);
  // A window wider than the input: TF.js gives an empty output.
  if (info.outShape.includes(0)) return x.slice([0, 0, 0, 0, 0], info.outShape);
  const window = [info.filterHeight, info.filterWidth];
  const strides = [info.strideHeight, info.strideWidth];
  if (max) {
    return depthTaps(backend, x, info, -Infinity, (images, pads) => images.maxPool(window, strides, pads),
      (a, b) => a.maximum(b));
  }
  const sum = depthTaps(backend, x, info, 0, (images, pads) => images.avgPool(window, strides, pads), (a, b) => a.add(b));
  const inside = Array.from({ length: info.outDepth }, (_, od) => {
    const first = od * info.strideDepth - info.padInfo.front;
    const count = Array.from({ length: info.filterDepth }, (_, kd) => first + kd).filter((z) => z >= 0 && z < x.shape[1]).length;
    return Math.max(count, 1); // A window wholly in the padding averages to 0, as TF.js's does.
  });
  return sum.div(backend.device.tensor(Float32Array.from(inside), [1, info.outDepth, 1, 1, 1]));
}

/**
 * TF.js's `AvgPool3DGrad`, which divides by the whole window as its 2D one
 * does (see `avgPoolGrad`): the gradient of an average over the
 * zero-padded input, every window whole.
 */
function avgPool3dGrad(backend, x, dy, attrs) {
  const info = backend_util.computePool3DInfo(x.shape, attrs.filterSize, attrs.strides, 1, attrs.pad, attrs.dimRoundingMode);
  const { front, top, left } = info.padInfo;
  const [, d, h, w] = x.shape;
  const sides = [[0, 0],
    [front, after(info.outDepth, info.strideDepth, info.filterDepth, d, front)],
    [top, after(info.outHeight, info.strideHeight, info.filterHeight, h, top)],
    [left, after(info.outWidth, info.strideWidth, info.filterWidth, w, left)], [0, 0]];
  const whole = { filterSize: attrs.filterSize, strides: attrs.strides, pad: 'valid' };
  return backprop((v) => pool3d(backend, v.pad(sides, 0), whole, false), x, dy);
}

/**
 * `dy` as TF.js's `Conv2DBackpropInput` reads it: TF.js takes any `dy` (one
 * of a shape the input cannot give, from `conv2dTranspose`, included) and
 * reads it within the output shape the convolution of `inputShape` has,
 * so `dy` is cut to that shape (or padded with zeros up to it).
 */
function fitDy(dy, inputShape, filterShape, { strides, pad, dataFormat, dilations, dimRoundingMode }) {
  const format = backend_util.convertConv2DDataFormat(dataFormat ?? 'NHWC');
  const { outShape } = backend_util.computeConv2DInfo(inputShape, filterShape, strides, dilations ?? 1, pad, dimRoundingMode, false, format);
  if (util.arraysEqual(outShape, dy.shape)) return dy;
  const kept = dy.shape.map((d, k) => Math.min(d, outShape[k]));
  return dy.slice(kept.map(() => 0), kept).pad(kept.map((d, k) => [0, outShape[k] - d]), 0);
}

function conv2d(x, filter, attrs) {
  const { strides, dataFormat, dilations } = attrs;
  return x.conv2d(filter, strides, padsOf(x.shape, filter.shape, attrs), dataFormat, dilations);
}

function depthwise(x, filter, attrs) {
  const { strides, dataFormat, dilations } = attrs;
  return x.depthwiseConv2d(filter, strides, padsOf(x.shape, filter.shape, attrs), dataFormat, dilations);
}

/**
 * `maxPool` or `avgPool` as TF.js's backends compute them, including their
 * shortcut: a 1x1 window whose output has the input's shape is the input,
 * whatever the pad (a strided 1x1 window over a padded input would
 * otherwise start in the padding).
 */
function pool(x, attrs, max) {
  const { filterSize, strides } = attrs;
  const { outShape } = backend_util.computePool2DInfo(x.shape, filterSize, strides, 1, attrs.pad, attrs.dimRoundingMode);
  if (pair(filterSize).every((f) => f === 1) && util.arraysEqual(outShape, x.shape)) return x.reshape(x.shape);
  // A window wider than the input: TF.js gives an empty output.
  if (outShape.includes(0)) return x.slice([0, 0, 0, 0], outShape);
  const pads = padsOf(x.shape, pair(filterSize), { ...attrs, dilations: 1 });
  return max ? x.maxPool(filterSize, strides, pads) : x.avgPool(filterSize, strides, pads);
}

/**
 * The gradient of `f` at `at` toward `dy`: how the backprop kernels are
 * computed, by our autograd's own backward kernels. A convolution is linear
 * in each operand, so its gradient toward one does not depend on the value
 * of that operand: a zero stand-in of its shape serves.
 */
function backprop(f, at, dy) {
  const [grad] = grads(f)([at], dy);
  return grad;
}

/**
 * A product of `a` and `b` in TF.js's dtype: our matmul multiplies floats,
 * and TF.js's backends compute an int32 product in floats too (exact while
 * the sums stay within 2^24).
 */
function matmul(a, b, transposeA, transposeB) {
  const dtype = upcastType(a.dtype, b.dtype);
  if (dtype === 'float32') return a.matmul(b, transposeA, transposeB);
  return a.cast('float32').matmul(b.cast('float32'), transposeA, transposeB).cast(dtype);
}

/**
 * TF.js's `range`, quirks included: a decreasing range with the default
 * step of 1 counts down, with any other positive step it is empty.
 */
function range(device, start, stop, step, dtype) {
  WebfusionBackend.dtype(dtype, 'Range');
  const empty = start === stop || (start < stop && step < 0) || (stop < start && step > 1);
  const n = empty ? 0 : Math.abs(Math.ceil((stop - start) / step));
  const by = stop < start && step === 1 ? -1 : step;
  if (n === 0) return device.zeros([0], dtype);
  const direct = device.arange(start, start + n * by, by, dtype);
  if (direct.shape[0] === n) return direct;
  // Float steps whose count rounds the other way: count, then scale.
  return device.arange(0, n, 1).mul(by).add(start).cast(dtype);
}

/**
 * A seed for our ops from TF.js's, which may be any number (TF.js hashes its
 * text): ours are integers, so a fractional or negative one is folded from
 * its float64 bits, the same seed always giving the same integer.
 */
function seedOf(seed) {
  if (seed == null || (Number.isSafeInteger(seed) && seed >= 0)) return seed ?? undefined;
  const [lo, hi] = new Uint32Array(new Float64Array([seed]).buffer);
  return (hi & 0x1fffff) * 2 ** 32 + lo;
}

/** Int32 indices the kernel computed from shapes and attributes (never from values). */
const positions = (backend, list) => backend.device.tensor(Int32Array.from(list), [list.length], 'int32');

/** `x` at `list` along `axis`: how the kernels that reorder or skip along an axis do it. */
const take = (backend, x, axis, list) => x.gather(positions(backend, list), axis);

const count = (n, f) => Array.from({ length: n }, (_, i) => f(i));

/**
 * TF.js's `stridedSlice`: its own `sliceInfo` reads the masks. A run of
 * stride 1 (or of one element) is a `slice`, a view, which the host
 * computes for values it holds (a graph model's `StridedSlice` of a
 * `Shape` then reads synchronously); any other stride is a gather along
 * its axis, first, at the input's positions.
 */
function stridedSlice(backend, x, attrs) {
  const info = slice_util.sliceInfo(x.shape, attrs.begin, attrs.end, attrs.strides, attrs.beginMask,
    attrs.endMask, attrs.ellipsisMask, attrs.newAxisMask, attrs.shrinkAxisMask);
  const sizes = x.shape.map((_, axis) =>
    Math.max(0, Math.ceil((info.end[axis] - info.begin[axis]) / info.strides[axis])));
  if (sizes.some((n) => n === 0)) return backend.device.zeros(info.finalShape, x.dtype);
  const run = (axis) => info.strides[axis] === 1 || sizes[axis] === 1;
  let y = x;
  sizes.forEach((n, axis) => {
    const [begin, stride] = [info.begin[axis], info.strides[axis]];
    if (!run(axis)) y = take(backend, y, axis, count(n, (i) => begin + i * stride));
  });
  const begin = sizes.map((n, axis) => (run(axis) ? info.begin[axis] : 0));
  const { shape } = y;
  if (sizes.some((n, axis) => n !== shape[axis] || begin[axis] !== 0)) y = y.slice(begin, sizes);
  return y.reshape(info.finalShape);
}

/**
 * The flat positions `indices` ([n, k], int32) name in the first k dims of
 * `shape` (`strides` theirs, in slices), each index checked against its
 * dim: a gather of `0..dim` at it, the index itself inside, a failure of
 * kind `index` naming it and its dim outside, where TF.js refuses it
 * ("Invalid indices"). Unchecked, `[0, 7]` in dims `[3, 6]` would land in
 * the next row, and a position past the end would be dropped unseen.
 */
function flatPositions(backend, indices, shape, strides) {
  const [n, k] = indices.shape;
  if (k === 0) return backend.device.zeros([n], 'int32');
  const columns = [];
  for (let j = 0; j < k; j += 1) {
    const column = indices.slice([0, j], [n, 1]).reshape([n]);
    columns.push(backend.device.arange(0, shape[j], 1, 'int32').gather(column, 0));
  }
  return backend.device.stack(columns, 1).mul(positions(backend, strides)).sum(1);
}

/**
 * TF.js's `scatterNd` of `updates` at `indices` into zeros of `shape`, and
 * where it wrote (bool). Duplicate indices add up, as TF.js's ScatterNd
 * does. A single update value (SparseToDense's scalar) goes to every index.
 */
function scatterNd(backend, indices, updates, shape) {
  const { sliceRank, numUpdates, sliceSize, strides, outputSize } =
    scatter_util.calculateShapes(updates, indices, shape);
  const flat = flatPositions(backend, indices.reshape([numUpdates, sliceRank]), shape, strides);
  const rows = outputSize / sliceSize;
  const spread = (v) => v.cast('float32').reshape([v.size]).broadcastTo([numUpdates * sliceSize])
    .reshape([numUpdates, sliceSize]).unsortedSegmentSum(flat, rows).reshape(shape);
  return {
    values: spread(updates).cast(updates.dtype),
    written: spread(backend.device.ones([1], 'float32')).greater(0),
  };
}

/** TF.js's `mirrorPad`: each padded axis gathered at its mirrored positions. */
function mirrorPad(backend, x, paddings, mode) {
  const edge = mode === 'reflect' ? 0 : 1;
  return paddings.reduce((y, [before, after], axis) => {
    if (before === 0 && after === 0) return y;
    const n = x.shape[axis];
    const at = (j) => (j < 0 ? -j - edge : j >= n ? 2 * n - 2 + edge - j : j);
    return take(backend, y, axis, count(before + n + after, (i) => at(i - before)));
  }, x);
}

const ERF = [backend_util.ERF_P, backend_util.ERF_A1, backend_util.ERF_A2, backend_util.ERF_A3,
  backend_util.ERF_A4, backend_util.ERF_A5];

/** TF.js's `erf`: the same Abramowitz-Stegun approximation its backends compute. */
function erf(x, backend) {
  const [p, a1, a2, a3, a4, a5] = ERF;
  const v = x.abs();
  const t = scalar(backend, 1).div(v.mul(p).add(1));
  const poly = t.mul(a5).add(a4).mul(t).add(a3).mul(t).add(a2).mul(t).add(a1).mul(t);
  const r = scalar(backend, 1).sub(poly.mul(v.square().neg().exp()));
  return select(backend, x.less(0), r.neg(), r);
}

/**
 * atan of `x`, from our ops (WGSL's atan is not one of them): the argument
 * is folded into [0, tan(pi/8)] (by |x| and 1/|x| about pi/2, and by
 * (z - 1)/(z + 1) about pi/4), where six terms of the series are within
 * 1e-6, and the folds are undone.
 */
function atan(x, backend) {
  const a = x.abs();
  const big = a.greater(1);
  const z = select(backend, big, scalar(backend, 1).div(a), a);
  const mid = z.greater(Math.SQRT2 - 1);
  const u = select(backend, mid, z.sub(1).div(z.add(1)), z);
  const u2 = u.square();
  const series = u.mul(scalar(backend, 1).sub(u2.mul(scalar(backend, 1 / 3)
    .sub(u2.mul(scalar(backend, 1 / 5).sub(u2.mul(scalar(backend, 1 / 7)
      .sub(u2.mul(scalar(backend, 1 / 9).sub(u2.mul(1 / 11)))))))))));
  const core = select(backend, mid, series.add(Math.PI / 4), series);
  const folded = select(backend, big, scalar(backend, Math.PI / 2).sub(core), core);
  return select(backend, x.less(0), folded.neg(), folded);
}

/** atan2(y, x) by quadrant, as TF.js's backends give it (atan2(0, 0) = 0). */
function atan2(y, x, backend) {
  const base = atan(y.div(x), backend);
  const pi = select(backend, y.less(0), scalar(backend, -Math.PI), scalar(backend, Math.PI));
  const left = x.less(0);
  const onAxis = x.equal(0);
  const vertical = select(backend, y.greater(0), scalar(backend, Math.PI / 2),
    select(backend, y.less(0), scalar(backend, -Math.PI / 2), scalar(backend, 0)));
  return select(backend, onAxis, vertical, select(backend, left, base.add(pi), base));
}

const reduce = (name, axisAttr = 'axis') =>
  unary((x, _b, attrs) => x[name](attrs[axisAttr], attrs.keepDims));

/** Kernel name -> kernel function, as `registerKernel` takes them. */
export const kernels = {
  // Elementwise, one input.
  Abs: method('abs'),
  Neg: partwise(method('neg')),
  Exp: method('exp'),
  Log: method('log'),
  Sqrt: method('sqrt'),
  Rsqrt: method('rsqrt'),
  Square: method('square'),
  Relu: method('relu'),
  Sigmoid: method('sigmoid'),
  Tanh: method('tanh'),
  Sin: method('sin'),
  Cos: method('cos'),
  Tan: method('tan'),
  LogicalNot: method('logicalNot'),
  // The same data id, shared (as TF.js's own backends do): TF.js's engine
  // clones this way, and counts a new data id from a clone as a leak.
  Identity: ({ inputs: { x }, backend }) => {
    backend.incRef(x.dataId);
    return { dataId: x.dataId, shape: x.shape, dtype: x.dtype };
  },
  Relu6: unary((x) => x.clamp(0, 6)),
  Elu: unary(elu),
  EluGrad: kernel(({ inputs: { dy, y }, t, backend }) =>
    select(backend, t(y).greater(0), t(dy), t(dy).mul(t(y).add(1)))),
  Selu: unary((x, backend) =>
    select(backend, x.greater(0), x.mul(SELU_SCALE), x.exp().sub(1).mul(SELU_SCALE * SELU_ALPHA))),
  LeakyRelu: unary((x, backend, { alpha }) => leakyRelu(x, backend, alpha)),
  Prelu: kernel(({ inputs: { x, alpha }, t, backend }) => prelu(t(x), t(alpha), backend)),
  Step: unary((x, backend, { alpha }) => step(x, backend, alpha).cast(x.dtype)),
  Softplus: unary(softplus),
  Reciprocal: unary((x, backend) => scalar(backend, 1).div(x)),
  Expm1: unary((x) => x.exp().sub(1)),
  Log1p: unary((x) => x.add(1).log()),
  Floor: unary((x) => (x.dtype === 'float32' ? x.floor() : x.reshape(x.shape))),
  Ceil: unary((x) => (x.dtype === 'float32' ? x.neg().floor().neg() : x.reshape(x.shape))),
  Round: unary(round),
  Sign: unary((x) => x.greater(0).cast(x.dtype).sub(x.less(0).cast(x.dtype))),
  IsNan: unary(isNaN),
  IsInf: unary((x) => x.abs().equal(Infinity)),
  IsFinite: unary((x) => x.sub(x).equal(0)),
  Sinh: unary((x) => x.exp().sub(x.neg().exp()).mul(0.5)),
  Cosh: unary((x) => x.exp().add(x.neg().exp()).mul(0.5)),
  Asinh: unary((x) => x.add(x.square().add(1).sqrt()).log()),
  Acosh: unary((x) => x.add(x.square().sub(1).sqrt()).log()),
  Atanh: unary((x, backend) => scalar(backend, 1).add(x).div(scalar(backend, 1).sub(x)).log().mul(0.5)),
  Erf: unary(erf),
  Atan: unary(atan),
  Asin: unary((x, backend) => atan2(x, scalar(backend, 1).sub(x.square()).sqrt(), backend)),
  Acos: unary((x, backend) => atan2(scalar(backend, 1).sub(x.square()).sqrt(), x, backend)),
  Atan2: kernel(({ inputs: { a, b }, t, backend }) => atan2(t(a), t(b), backend)),
  Cast: complex(kernel(({ inputs: { x }, t, backend, attrs: { dtype } }) => (dtype === 'complex64'
    ? { real: t(x).cast('float32'), imag: backend.device.zeros(x.shape, 'float32') }
    : t(x).cast(WebfusionBackend.dtype(dtype, 'Cast')))), ({ inputs: { x }, c, attrs: { dtype } }) => {
    // A complex64 tensor cast to a real dtype keeps its real part, as TF.js's does.
    const { real, imag } = c(x);
    if (dtype === 'complex64') return { real: real.reshape(x.shape), imag: imag.reshape(x.shape) };
    return real.cast(WebfusionBackend.dtype(dtype, 'Cast'));
  }),
  Complex: kernel(({ inputs: { real, imag }, t }) => ({ real: t(real).reshape(real.shape), imag: t(imag).reshape(imag.shape) })),
  Real: complex(null, ({ inputs: { input }, c }) => c(input).real.reshape(input.shape)),
  Imag: complex(null, ({ inputs: { input }, c }) => c(input).imag.reshape(input.shape)),
  // |z| scaled by its larger part, so squares of parts near 1e-30 do not
  // underflow (nor near 1e30 overflow).
  ComplexAbs: complex(null, ({ inputs: { x }, c, backend }) => {
    const { real, imag } = c(x);
    const larger = real.abs().maximum(imag.abs());
    const scale = select(backend, larger.greater(0), larger, scalar(backend, 1));
    return real.div(scale).square().add(imag.div(scale).square()).sqrt().mul(larger);
  }),
  FFT: complex(null, ({ inputs: { input }, c, backend }) => fourier(backend, c(input), false)),
  IFFT: complex(null, ({ inputs: { input }, c, backend }) => fourier(backend, c(input), true)),
  ClipByValue: unary((x, _b, { clipValueMin, clipValueMax }) => x.clamp(clipValueMin, clipValueMax)),

  // Elementwise, two inputs (TF.js's ops have made their dtypes agree).
  Add: partwise(binaryMethod('add', true)),
  Sub: partwise(binaryMethod('sub')),
  Multiply: complex(binaryMethod('mul', true), ({ inputs: { a, b }, c }) => {
    const [x, y] = [c(a), c(b)];
    return { real: x.real.mul(y.real).sub(x.imag.mul(y.imag)), imag: x.real.mul(y.imag).add(x.imag.mul(y.real)) };
  }),
  RealDiv: complex(binaryMethod('div'), ({ inputs: { a, b }, c }) => {
    const [x, y] = [c(a), c(b)];
    const size = y.real.square().add(y.imag.square());
    return {
      real: x.real.mul(y.real).add(x.imag.mul(y.imag)).div(size),
      imag: x.imag.mul(y.real).sub(x.real.mul(y.imag)).div(size),
    };
  }),
  Pow: binaryMethod('pow'),
  Maximum: binaryMethod('maximum', true),
  Minimum: binaryMethod('minimum', true),
  Mod: binaryMethod('mod'),
  // int32 whatever the inputs, as TF.js's backends give it.
  FloorDiv: binaryMethod('floorDiv'),
  Equal: strings(binaryMethod('equal', true), compareStrings((a, b) => a === b)),
  NotEqual: strings(binary((a, b) => a.equal(b).logicalNot(), true), compareStrings((a, b) => a !== b)),
  Greater: strings(binaryMethod('greater'), compareStrings((a, b) => a > b)),
  GreaterEqual: strings(binaryMethod('greaterEqual'), compareStrings((a, b) => a >= b)),
  Less: strings(binaryMethod('less'), compareStrings((a, b) => a < b)),
  LessEqual: strings(binaryMethod('lessEqual'), compareStrings((a, b) => a <= b)),
  LogicalAnd: binaryMethod('logicalAnd'),
  LogicalOr: binaryMethod('logicalOr'),
  LogicalXor: binaryMethod('logicalXor'),
  BitwiseAnd: binaryMethod('bitwiseAnd'),
  SquaredDifference: binary((a, b) => a.sub(b).square(), true),
  AddN: kernel(({ inputs, t }) => inputs.map(t).reduce((sum, x) => sum.add(x))),
  Select: kernel(({ inputs: { condition, t: a, e }, t, backend }) => select(backend, t(condition), t(a), t(e))),

  // Reductions and their kin.
  Sum: reduce('sum'),
  Mean: reduce('mean'),
  Prod: reduce('prod'),
  Max: reduce('max', 'reductionIndices'),
  Min: reduce('min'),
  // Counted, not a max or a min: the max of no elements is the lowest
  // int32, which read as true (`any` of an empty tensor; outside testing).
  // `all` of none is true, as in TF and NumPy (TF.js's CPU backend says false).
  All: unary((x, _b, { axis, keepDims }) => x.logicalNot().cast('int32').sum(axis, keepDims).equal(0)),
  Any: unary((x, _b, { axis, keepDims }) => x.cast('int32').sum(axis, keepDims).greater(0)),
  ArgMax: unary((x, _b, { axis }) => x.argMax(axis)),
  ArgMin: unary((x, _b, { axis }) => x.argMin(axis)),
  Softmax: kernel(({ inputs: { logits }, t, attrs: { dim } }) => t(logits).softmax(dim)),
  LogSoftmax: kernel(({ inputs: { logits }, t, attrs: { axis } }) => t(logits).logSoftmax(axis)),
  Cumsum: unary((x, _b, { axis, exclusive, reverse }) => x.cumsum(axis, exclusive, reverse)),
  Cumprod: unary((x, _b, { axis, exclusive, reverse }) => x.cumprod(axis, exclusive, reverse)),
  TopK: unary((x, _b, { k, sorted }) => {
    const { values, indices } = x.topk(k, sorted);
    return [values, indices];
  }),
  // Our segment sum is of floats: an int32's (or a bool's) is summed as
  // floats, exact to 2^24, and is int32, as TF.js's GPU backends give it.
  UnsortedSegmentSum: kernel(({ inputs: { x, segmentIds }, t, attrs: { numSegments } }) => {
    const sums = t(x).cast('float32').unsortedSegmentSum(t(segmentIds), numSegments);
    return x.dtype === 'float32' ? sums : sums.cast('int32');
  }),
  SparseSegmentSum: kernel(({ inputs, backend }) => sparseSegment(backend, inputs, false)),
  SparseSegmentMean: kernel(({ inputs, backend }) => sparseSegment(backend, inputs, true)),

  // Products.
  BatchMatMul: kernel(({ inputs: { a, b }, t, attrs: { transposeA, transposeB } }) =>
    matmul(t(a), t(b), transposeA, transposeB)),
  _FusedMatMul: kernel(({ inputs: { a, b, bias, preluActivationWeights }, t, backend, attrs }) => {
    let y = matmul(t(a), t(b), attrs.transposeA, attrs.transposeB);
    if (bias != null) y = y.add(t(bias));
    return activate(y, backend, attrs.activation, t(preluActivationWeights), attrs.leakyreluAlpha, '_FusedMatMul');
  }),

  // Convolutions and pools.
  Conv2D: kernel(({ inputs: { x, filter }, t, attrs }) => conv2d(t(x), t(filter), attrs)),
  FusedConv2D: kernel(({ inputs: { x, filter, bias, preluActivationWeights }, t, backend, attrs }) => {
    let y = conv2d(t(x), t(filter), attrs);
    const perChannel = (v) => channels(v, attrs.dataFormat);
    if (bias != null) y = y.add(perChannel(t(bias)));
    const prelu = t(preluActivationWeights);
    return activate(y, backend, attrs.activation, prelu && perChannel(prelu), attrs.leakyreluAlpha, 'FusedConv2D');
  }),
  DepthwiseConv2dNative: kernel(({ inputs: { x, filter }, t, attrs }) =>
    depthwise(t(x), t(filter), attrs)),
  FusedDepthwiseConv2D: kernel(({ inputs: { x, filter, bias, preluActivationWeights }, t, backend, attrs }) => {
    let y = depthwise(t(x), t(filter), attrs);
    const perChannel = (v) => channels(v, attrs.dataFormat);
    if (bias != null) y = y.add(perChannel(t(bias)));
    const prelu = t(preluActivationWeights);
    return activate(y, backend, attrs.activation, prelu && perChannel(prelu), attrs.leakyreluAlpha, 'FusedDepthwiseConv2D');
  }),
  Conv2DBackpropInput: kernel(({ inputs: { dy, filter }, t, backend, attrs }) => {
    const f = (x) => conv2d(x, t(filter), attrs);
    return backprop(f, backend.device.zeros(attrs.inputShape, 'float32'), fitDy(t(dy), attrs.inputShape, filter.shape, attrs));
  }),
  Conv2DBackpropFilter: kernel(({ inputs: { x, dy }, t, backend, attrs }) => {
    const f = (w) => conv2d(t(x), w, attrs);
    return backprop(f, backend.device.zeros(attrs.filterShape, 'float32'), t(dy));
  }),
  DepthwiseConv2dNativeBackpropInput: kernel(({ inputs: { dy, filter }, t, backend, attrs }) => {
    const f = (x) => depthwise(x, t(filter), attrs);
    return backprop(f, backend.device.zeros(attrs.inputShape, 'float32'), t(dy));
  }),
  DepthwiseConv2dNativeBackpropFilter: kernel(({ inputs: { x, dy }, t, backend, attrs }) => {
    const f = (w) => depthwise(t(x), w, attrs);
    return backprop(f, backend.device.zeros(attrs.filterShape, 'float32'), t(dy));
  }),
  MaxPool: unary((x, _b, attrs) => pool(x, attrs, true)),
  AvgPool: unary((x, _b, attrs) => pool(x, attrs, false)),
  MaxPoolGrad: kernel(({ inputs: { dy, input }, t, attrs }) => backprop((x) => pool(x, attrs, true), t(input), t(dy))),
  AvgPoolGrad: kernel(({ inputs: { dy, input }, t, attrs }) => avgPoolGrad(t(input), t(dy), attrs)),
  Conv3D: kernel(({ inputs: { x, filter }, t, backend, attrs }) => conv3d(backend, t(x), t(filter), attrs)),
  Conv3DBackpropInputV2: kernel(({ inputs: { dy, filter }, t, backend, attrs }) =>
    backprop((x) => conv3d(backend, x, t(filter), attrs), backend.device.zeros(attrs.inputShape, 'float32'), t(dy))),
  Conv3DBackpropFilterV2: kernel(({ inputs: { x, dy }, t, backend, attrs }) =>
    backprop((w) => conv3d(backend, t(x), w, attrs), backend.device.zeros(attrs.filterShape, 'float32'), t(dy))),
  MaxPool3D: unary((x, backend, attrs) => pool3d(backend, x, attrs, true)),
  AvgPool3D: unary((x, backend, attrs) => pool3d(backend, x, attrs, false)),
  MaxPool3DGrad: kernel(({ inputs: { dy, input }, t, backend, attrs }) =>
    backprop((x) => pool3d(backend, x, attrs, true), t(input), t(dy))),
  AvgPool3DGrad: kernel(({ inputs: { dy, input }, t, backend, attrs }) => avgPool3dGrad(backend, t(input), t(dy), attrs)),
  Dilation2D: kernel(({ inputs: { x, filter }, t, backend, attrs }) => dilation2d(backend, t(x), t(filter), attrs)),
  Dilation2DBackpropInput: kernel(({ inputs: { x, filter, dy }, t, backend, attrs }) =>
    backprop((v) => dilation2d(backend, v, t(filter), attrs), t(x), t(dy))),
  Dilation2DBackpropFilter: kernel(({ inputs: { x, filter, dy }, t, backend, attrs }) =>
    backprop((f) => dilation2d(backend, t(x), f, attrs), t(filter), t(dy))),
  MaxPoolWithArgmax: unary((x, backend, attrs) => maxPoolWithArgmax(backend, x, attrs)),
  LRN: unary((x, backend, attrs) => lrn(backend, x, attrs)),
  LRNGrad: kernel(({ inputs: { x, dy }, t, backend, attrs }) => backprop((v) => lrn(backend, v, attrs), t(x), t(dy))),
  FusedBatchNorm: kernel(({ inputs: { x, mean, variance, offset, scale }, t, attrs: { varianceEpsilon } }) =>
    t(x).batchNorm(t(mean), t(variance), t(offset), t(scale), varianceEpsilon)),
  ResizeBilinear: kernel(({ inputs: { images }, t, attrs: { size, alignCorners, halfPixelCenters } }) =>
    t(images).resizeBilinear(size, alignCorners, halfPixelCenters)),
  ResizeNearestNeighbor: kernel(({ inputs: { images }, t, attrs: { size, alignCorners, halfPixelCenters } }) =>
    t(images).resizeNearestNeighbor(size, alignCorners, halfPixelCenters)),
  // Their gradients, as our autograd takes them of the resize itself.
  ResizeBilinearGrad: kernel(({ inputs: { images, dy }, t, attrs: { alignCorners, halfPixelCenters } }) =>
    backprop((x) => x.resizeBilinear(dy.shape.slice(1, 3), alignCorners, halfPixelCenters), t(images), t(dy))),
  ResizeNearestNeighborGrad: kernel(({ inputs: { images, dy }, t, attrs: { alignCorners, halfPixelCenters } }) =>
    backprop((x) => x.resizeNearestNeighbor(dy.shape.slice(1, 3), alignCorners, halfPixelCenters), t(images), t(dy))),
  CropAndResize: kernel(({ inputs: { image, boxes, boxInd }, t, backend, attrs: { cropSize, method, extrapolationValue } }) =>
    cropAndResize(backend, t(image), t(boxes), t(boxInd), cropSize, method, extrapolationValue)),
  Transform: kernel(({ inputs: { image, transforms }, t, backend, attrs }) =>
    transform(backend, t(image), t(transforms), attrs)),
  RotateWithOffset: kernel(({ inputs: { image }, t, backend, attrs }) => rotateWithOffset(backend, t(image), attrs)),
  FlipLeftRight: kernel(({ inputs: { image }, t, backend }) => {
    const width = image.shape[2];
    return take(backend, t(image), 2, count(width, (i) => width - 1 - i));
  }),

  // Shapes and views.
  Reshape: strings(partwise(unary((x, _b, { shape }) => x.reshape(shape))), ({ inputs: { x }, v, attrs: { shape } }) =>
    ({ values: v(x), shape: util.inferFromImplicitShape(shape, util.sizeFromShape(x.shape)) })),
  Transpose: partwise(unary((x, _b, { perm }) => x.transpose(perm))),
  Slice: strings(partwise(unary((x, _b, { begin, size }) => {
    const [start, length] = slice_util.parseSliceParams(x, begin, size);
    return x.slice(start, length);
  })), ({ inputs: { x }, v, attrs: { begin, size } }) => {
    const [start, length] = slice_util.parseSliceParams(x, begin, size);
    const at = reader(v(x), x.shape);
    return { values: build(length, (loc) => at(loc.map((l, k) => l + start[k]))), shape: length };
  }),
  ExpandDims: strings(partwise(kernel(({ inputs: { input }, t, attrs: { dim } }) => t(input).expandDims(dim))),
    ({ inputs: { input }, v, attrs: { dim } }) => {
      const at = dim < 0 ? dim + input.shape.length + 1 : dim;
      return { values: v(input), shape: [...input.shape.slice(0, at), 1, ...input.shape.slice(at)] };
    }),
  BroadcastTo: unary((x, _b, { shape }) => x.broadcastTo(shape)),
  Tile: strings(unary((x, _b, { reps }) => x.tile(reps)), ({ inputs: { x }, v, attrs: { reps } }) => {
    const at = reader(v(x), x.shape);
    return { values: build(x.shape.map((d, k) => d * reps[k]), (loc) => at(loc.map((l, k) => l % x.shape[k]))), shape: x.shape.map((d, k) => d * reps[k]) };
  }),
  PadV2: unary((x, _b, { paddings, constantValue }) => x.pad(paddings, stored(constantValue, x.dtype))),
  Concat: strings(partwise(kernel(({ inputs, t, backend, attrs: { axis } }) => backend.device.cat(inputs.map(t), axis))),
    ({ inputs, v, attrs: { axis } }) => {
      const a = util.parseAxisParam(axis, inputs[0].shape)[0];
      const shape = backend_util.computeOutShape(inputs.map((x) => x.shape), a);
      const parts = inputs.map((x) => ({ at: reader(v(x), x.shape), size: x.shape[a] }));
      return {
        values: build(shape, (loc) => {
          let i = loc[a];
          const part = parts.find(({ size }) => (i < size ? true : ((i -= size), false)));
          return part.at(loc.map((l, k) => (k === a ? i : l)));
        }),
        shape,
      };
    }),
  Pack: strings(kernel(({ inputs, t, backend, attrs: { axis } }) => {
    if (inputs.some((x) => x.dtype !== inputs[0].dtype)) {
      throw new Error('All tensors passed to stack must have matching dtypes');
    }
    return backend.device.stack(inputs.map(t), axis);
  }), ({ inputs, v, attrs: { axis } }) => {
    if (inputs.some((x) => x.dtype !== 'string')) throw new Error('All tensors passed to stack must have matching dtypes');
    const a = axis < 0 ? axis + inputs[0].shape.length + 1 : axis;
    const shape = [...inputs[0].shape.slice(0, a), inputs.length, ...inputs[0].shape.slice(a)];
    const readers = inputs.map((x) => reader(v(x), x.shape));
    return { values: build(shape, (loc) => readers[loc[a]]([...loc.slice(0, a), ...loc.slice(a + 1)])), shape };
  }),
  Unpack: strings(kernel(({ inputs: { value }, t, attrs: { axis } }) => {
    const x = t(value);
    // An axis of 0 unstacks into no tensors (split refuses 0 pieces).
    if (x.shape.at(axis) === 0) return [];
    return x.split(x.shape.at(axis), axis).map((part) => part.squeeze([axis]));
  }), ({ inputs: { value }, v, attrs: { axis } }) => {
    const a = util.parseAxisParam(axis, value.shape)[0];
    const at = reader(v(value), value.shape);
    const shape = value.shape.filter((_, k) => k !== a);
    return Array.from({ length: value.shape[a] }, (_, i) =>
      ({ values: build(shape, (loc) => at([...loc.slice(0, a), i, ...loc.slice(a)])), shape }));
  }),
  SplitV: unary((x, _b, { numOrSizeSplits, axis }) => x.split(numOrSizeSplits, axis)),
  StridedSlice: partwise(unary((x, backend, attrs) => stridedSlice(backend, x, attrs))),
  Reverse: unary((x, backend, { dims }) => util.parseAxisParam(dims, x.shape).reduce((y, axis) => {
    const n = x.shape[axis];
    return take(backend, y, axis, count(n, (i) => n - 1 - i));
  }, x)),
  MirrorPad: unary((x, backend, { paddings, mode }) => mirrorPad(backend, x, paddings, mode)),
  SpaceToBatchND: unary((x, _b, { blockShape, paddings }) => {
    const prod = blockShape.reduce((a, b) => a * b, 1);
    const complete = [[0, 0], ...paddings, ...count(x.shape.length - 1 - blockShape.length, () => [0, 0])];
    const padded = x.pad(complete, 0);
    const reshaped = backend_util.getReshaped(padded.shape, blockShape, prod, false);
    const perm = backend_util.getPermuted(reshaped.length, blockShape.length, false);
    const flat = backend_util.getReshapedPermuted(padded.shape, blockShape, prod, false);
    return padded.reshape(reshaped).transpose(perm).reshape(flat);
  }),
  BatchToSpaceND: unary((x, _b, { blockShape, crops }) => {
    const prod = blockShape.reduce((a, b) => a * b, 1);
    const reshaped = backend_util.getReshaped(x.shape, blockShape, prod);
    const perm = backend_util.getPermuted(reshaped.length, blockShape.length);
    const reshapedPermuted = backend_util.getReshapedPermuted(x.shape, blockShape, prod);
    const begin = backend_util.getSliceBeginCoords(crops, blockShape.length);
    const size = backend_util.getSliceSize(reshapedPermuted, crops, blockShape.length);
    const y = x.reshape(reshaped).transpose(perm).reshape(reshapedPermuted);
    return y.slice(...slice_util.parseSliceParams(y, begin, size));
  }),
  DepthToSpace: unary((x, _b, { blockSize: bs, dataFormat }) => {
    if (dataFormat !== 'NHWC') throw new Error(`DepthToSpace: webfusion computes NHWC only, got ${dataFormat}`);
    const [b, h, w, c] = x.shape;
    return x.reshape([b, h, w, bs, bs, c / (bs * bs)]).transpose([0, 1, 3, 2, 4, 5])
      .reshape([b, h * bs, w * bs, c / (bs * bs)]);
  }),
  Diag: unary((x, backend) => {
    const n = x.size;
    const rows = backend.device.arange(0, n, 1, 'int32');
    const eye = rows.reshape([n, 1]).equal(rows.reshape([1, n]));
    const diagonal = select(backend, eye, x.reshape([n, 1]).broadcastTo([n, n]), backend.device.zeros([n, n], x.dtype));
    return diagonal.reshape([...x.shape, ...x.shape]);
  }),
  // Each index row becomes a flat row number (by TF.js's own strides), and
  // the rows are gathered from the table seen as rows of one slice each.
  GatherNd: kernel(({ inputs: { params, indices }, t, backend }) => {
    const [shape, slices, sliceSize, strides] = gather_util.prepareAndValidate(params, indices);
    const k = indices.shape.at(-1);
    const rows = params.shape.slice(0, k).reduce((a, b) => a * b, 1);
    const flat = flatPositions(backend, t(indices).reshape([slices, k]), params.shape, strides);
    return t(params).reshape([rows, sliceSize]).gather(flat, 0).reshape(shape);
  }),
  ScatterNd: kernel(({ inputs: { indices, updates }, t, backend, attrs: { shape } }) =>
    scatterNd(backend, t(indices), t(updates), shape).values),
  // An update replaces, so where an index wrote, its value; elsewhere the
  // default or the tensor's own.
  SparseToDense: strings(kernel(({ inputs: { sparseIndices, sparseValues, defaultValue }, t, backend, attrs: { outputShape } }) => {
    const { values, written } = scatterNd(backend, t(sparseIndices), t(sparseValues), outputShape);
    return select(backend, written, values, t(defaultValue));
  }), ({ inputs: { sparseIndices, sparseValues, defaultValue }, v, attrs: { outputShape } }) => {
    const { sliceRank, numUpdates, sliceSize, strides } = scatter_util.calculateShapes(sparseValues, sparseIndices, outputShape);
    const [indices, updates] = [v(sparseIndices), v(sparseValues)];
    const values = new Array(util.sizeFromShape(outputShape)).fill(v(defaultValue)[0]);
    for (let i = 0; i < numUpdates; i += 1) {
      let row = 0;
      for (let j = 0; j < sliceRank; j += 1) {
        const index = indices[i * sliceRank + j];
        if (!(index >= 0 && index < outputShape[j])) {
          throw new Error(`sparseToDense: index ${index} at [${i}, ${j}] of the indices is outside [0, ${outputShape[j]}), dim ${j} of [${outputShape}]`);
        }
        row += index * strides[j];
      }
      for (let k = 0; k < sliceSize; k += 1) values[row * sliceSize + k] = updates.length === 1 ? updates[0] : updates[i * sliceSize + k];
    }
    return { values, shape: outputShape };
  }),
  TensorScatterUpdate: kernel(({ inputs: { tensor, indices, updates }, t, backend }) => {
    const { values, written } = scatterNd(backend, t(indices), t(updates), tensor.shape);
    return select(backend, written, values, t(tensor));
  }),
  Einsum: kernel(({ inputs, t, attrs: { equation } }) => einsum(inputs.map(t), equation)),
  // The count of values before each one: `left` those below it, `right`
  // those at or below it.
  SearchSorted: kernel(({ inputs: { sortedSequence, values }, t, attrs: { side } }) => {
    const [b, n] = sortedSequence.shape;
    const before = t(sortedSequence).reshape([b, 1, n]);
    const v = t(values).reshape([b, values.shape[1], 1]);
    return (side === 'left' ? before.less(v) : before.lessEqual(v)).cast('int32').sum(2, false);
  }),
  // `Bincount` counts every value of `x`, whatever its rank (TF.js's
  // `threshold` hands it an image); `DenseBincount` each row of a matrix.
  Bincount: kernel(({ inputs: { x, weights }, t, backend, attrs: { size } }) => {
    const flat = (v) => v.reshape([util.sizeFromShape(v.shape)]);
    return bincount(backend, flat(t(x)), flat(t(weights)), size, false);
  }),
  DenseBincount: kernel(({ inputs: { x, weights }, t, backend, attrs: { size, binaryOutput } }) =>
    bincount(backend, t(x), t(weights), size, binaryOutput)),
  // Shapes given as values: answered from the values the page gave.
  BroadcastArgs: kernel(({ inputs: { s0, s1 }, backend }) => {
    const shape = backend_util.assertAndGetBroadcastShape(
      Array.from(backend.readSync(s0.dataId)), Array.from(backend.readSync(s1.dataId)));
    return backend.device.tensor(Int32Array.from(shape), [shape.length], 'int32');
  }),
  GatherV2: kernel(({ inputs: { x, indices }, t, backend, attrs: { axis, batchDims } }) => {
    // TF.js's checks, for its messages; ours stand behind them.
    backend_util.segment_util.collectGatherOpShapeInfo(x, indices, axis, batchDims);
    // Indices the page gave are checked here, as TF.js's CPU checks them;
    // computed ones by our kernel, which fails the result.
    const given = backend.given(indices);
    const size = x.shape[util.parseAxisParam(axis, x.shape)[0]];
    const bad = given == null ? undefined : given.find((i) => i < 0 || i >= size);
    if (bad !== undefined) throw new Error(`GatherV2: the index value ${bad} is not in [0, ${size - 1}]`);
    return t(x).gather(t(indices), axis, batchDims);
  }),
  OneHot: kernel(({ inputs: { indices }, t, attrs: { depth, onValue, offValue, dtype } }) =>
    t(indices).oneHot(depth, stored(onValue, dtype), stored(offValue, dtype), WebfusionBackend.dtype(dtype, 'OneHot'))),

  // Made from nothing, or from a shape.
  Fill: strings(kernel(({ backend, attrs: { shape, value, dtype } }) =>
    backend.device.full(shape, stored(value, dtype), WebfusionBackend.dtype(dtype, 'Fill'))), ({ attrs: { shape, value } }) =>
    ({ values: build(shape, () => util.encodeString(value)), shape })),
  Unique: ({ inputs: { x }, backend, attrs: { axis } }) => unique(backend, x, axis),
  RaggedRange: ({ inputs, backend }) => raggedRange(backend, inputs),
  RaggedGather: ({ inputs, backend }) => raggedGather(backend, inputs),
  RaggedTensorToTensor: ({ inputs, backend, attrs }) => raggedTensorToTensor(backend, inputs, attrs),
  StringNGrams: ({ inputs, backend, attrs }) => stringNGrams(backend, inputs, attrs),
  StringSplit: ({ inputs, backend, attrs }) => stringSplit(backend, inputs, attrs),
  SparseReshape: ({ inputs, backend }) => sparseReshape(backend, inputs),
  SparseFillEmptyRows: ({ inputs, backend }) => sparseFillEmptyRows(backend, inputs),
  // Each string's bucket by TF.js's own 64-bit fingerprint.
  StringToHashBucketFast: ({ inputs: { input }, backend, attrs: { numBuckets } }) => backend.hostTensor(
    Int32Array.from(backend.given(input), (s) => util.fingerPrint64(s).modulo(numBuckets).getLowBitsUnsigned()),
    input.shape, 'int32'),
  StaticRegexReplace: ({ inputs: { x }, backend, attrs: { pattern, rewrite, replaceGlobal } }) => {
    const regex = new RegExp(pattern, replaceGlobal ? 'g' : '');
    const replaced = backend.given(x).map((s) => util.encodeString(util.decodeString(s).replace(regex, rewrite)));
    return backend.hostTensor(replaced, x.shape, 'string');
  },
  NonMaxSuppressionV3: ({ inputs, backend, attrs }) => nonMaxSuppression(backend, inputs, attrs, 3),
  NonMaxSuppressionV4: ({ inputs, backend, attrs }) => nonMaxSuppression(backend, inputs, attrs, 4),
  NonMaxSuppressionV5: ({ inputs, backend, attrs }) => nonMaxSuppression(backend, inputs, attrs, 5),
  Draw: ({ inputs: { image }, backend, attrs }) => draw(backend, image, attrs),
  ZerosLike: complex(unary((x, backend) => backend.device.zeros(x.shape, x.dtype)), ({ inputs: { x }, backend }) =>
    ({ real: backend.device.zeros(x.shape, 'float32'), imag: backend.device.zeros(x.shape, 'float32') })),
  OnesLike: complex(unary((x, backend) => backend.device.ones(x.shape, x.dtype)), ({ inputs: { x }, backend }) =>
    ({ real: backend.device.ones(x.shape, 'float32'), imag: backend.device.zeros(x.shape, 'float32') })),
  LinSpace: kernel(({ backend, attrs: { start, stop, num } }) =>
    backend.device.arange(0, num, 1).mul(num > 1 ? (stop - start) / (num - 1) : 0).add(start)),
  Range: kernel(({ backend, attrs: { start, stop, step: by, dtype } }) => range(backend.device, start, stop, by, dtype)),
  Multinomial: kernel(({ inputs: { logits }, t, attrs: { numSamples, seed, normalized } }) =>
    t(logits).multinomial(numSamples, seedOf(seed), normalized)),
};
