// A minimal ONNX model writer (protobuf wire format), enough to hand ONNX
// Runtime Web the same graphs the benchmark runs on the other libraries.

class Writer {
  constructor() { this.bytes = []; }
  varint(v) {
    let n = BigInt(v);
    if (n < 0n) n += 1n << 64n;
    do {
      let byte = Number(n & 0x7fn);
      n >>= 7n;
      if (n > 0n) byte |= 0x80;
      this.bytes.push(byte);
    } while (n > 0n);
    return this;
  }
  key(field, wire) { return this.varint((field << 3) | wire); }
  int(field, v) { return this.key(field, 0).varint(v); }
  float(field, v) {
    this.key(field, 5);
    const b = new Uint8Array(new Float32Array([v]).buffer);
    this.bytes.push(...b);
    return this;
  }
  bytesField(field, data) {
    this.key(field, 2).varint(data.length);
    for (let i = 0; i < data.length; i += 65536) this.bytes.push(...data.subarray(i, i + 65536));
    return this;
  }
  string(field, s) { return this.bytesField(field, new TextEncoder().encode(s)); }
  message(field, writer) { return this.bytesField(field, writer.finish()); }
  finish() { return Uint8Array.from(this.bytes); }
}

function valueInfo(name, dims) {
  const dimsW = new Writer();
  for (const d of dims) dimsW.message(1, new Writer().int(1, d));
  const tensorType = new Writer().int(1, 1).message(2, dimsW);
  return new Writer().string(1, name).message(2, new Writer().message(1, tensorType));
}

function tensorProto(name, dims, values, dataType = 1) {
  const w = new Writer();
  for (const d of dims) w.int(1, d);
  w.int(2, dataType).string(8, name);
  const raw = dataType === 7
    ? new Uint8Array(new BigInt64Array(values.map(BigInt)).buffer)
    : new Uint8Array(Float32Array.from(values).buffer);
  return w.bytesField(9, raw);
}

/**
 * Builds a model. `graph` = { inputs: [[name, dims]], outputs: [[name, dims]],
 * initializers: [[name, dims, values, dataType?]], nodes: [[opType, inputs,
 * outputs, attributes?]] } with attributes { name: int | float | int[] }.
 */
export function onnxModel(graph) {
  const g = new Writer();
  graph.nodes.forEach(([op, inputs, outputs, attributes = {}], i) => {
    const n = new Writer();
    for (const x of inputs) n.string(1, x);
    for (const y of outputs) n.string(2, y);
    n.string(3, `n${i}`).string(4, op);
    for (const [name, value] of Object.entries(attributes)) {
      const a = new Writer().string(1, name);
      if (Array.isArray(value)) {
        for (const v of value) a.int(8, v);
        a.int(20, 7);
      } else if (Number.isInteger(value)) {
        a.int(3, value).int(20, 2);
      } else {
        a.float(2, value).int(20, 1);
      }
      n.message(5, a);
    }
    g.message(1, n);
  });
  g.string(2, 'bench');
  for (const [name, dims, values, type] of graph.initializers ?? []) g.message(5, tensorProto(name, dims, values, type));
  for (const [name, dims] of graph.inputs) g.message(11, valueInfo(name, dims));
  for (const [name, dims] of graph.outputs) g.message(12, valueInfo(name, dims));
  return new Writer()
    .int(1, 8)
    .string(2, 'webfusion-bench')
    .message(7, g)
    .message(8, new Writer().string(1, '').int(2, 17))
    .finish();
}
