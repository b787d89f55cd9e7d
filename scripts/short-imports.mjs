// Gives the wasm module's imports from its glue short names, in the module
// and in the glue's import object alike. wasm-bindgen names each import
// after the JS it calls plus a hash (`__wbg_get_unchecked_e6325ad374eff861`):
// 207 such names, 10.6 KB in the module and again in the glue, and their
// hashes do not compress (6 KB of the two files' gzip). Nothing else reads
// these names: the glue hands its object to `WebAssembly.instantiate`, and
// the module calls each import by its index.
//
// Run by scripts/build.sh on the package it built:
//   node scripts/short-imports.mjs pkg/webfusion_bg.wasm pkg/webfusion.js
// It fails (exit 1) unless every renamed import is one key of the glue's
// object, so a glue written another way stops the build, not the page.
import { readFileSync, writeFileSync } from 'node:fs';

const [wasmFile, glueFile] = process.argv.slice(2);
const GLUE_MODULE = './webfusion_bg.js';
const fail = (message) => {
  console.error(`[build] short-imports: ${message}`);
  process.exit(1);
};

function readU32(bytes, at) {
  let value = 0;
  let shift = 0;
  let byte;
  do {
    byte = bytes[at++];
    value |= (byte & 0x7f) << shift;
    shift += 7;
  } while (byte & 0x80);
  return [value >>> 0, at];
}

function writeU32(value) {
  const out = [];
  do {
    let byte = value & 0x7f;
    value >>>= 7;
    if (value !== 0) byte |= 0x80;
    out.push(byte);
  } while (value !== 0);
  return out;
}

/** The `index`th short name: `a` .. `Z`, `_`, `$`, then two characters. */
function shortName(index) {
  const alphabet = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_$';
  let name = '';
  do {
    name += alphabet[index % alphabet.length];
    index = Math.floor(index / alphabet.length);
  } while (index > 0);
  return name;
}

/** Where an import's descriptor (its kind and type) ends. */
function skipDescriptor(bytes, at) {
  const kind = bytes[at++];
  const limits = (from) => {
    const flags = bytes[from++];
    let next;
    [, next] = readU32(bytes, from);
    if (flags & 1) [, next] = readU32(bytes, next);
    return next;
  };
  switch (kind) {
    case 0: // function: a type index
      return readU32(bytes, at)[1];
    case 1: // table: a reference type, then limits
      return limits(at + 1);
    case 2: // memory: limits
      return limits(at);
    case 3: // global: a value type and mutability
      return at + 2;
    default:
      return fail(`an import of kind ${kind}, which this script does not know`);
  }
}

const wasm = readFileSync(wasmFile);
let glue = readFileSync(glueFile, 'utf8');
const renamed = new Map();
const sections = [wasm.subarray(0, 8)];
let at = 8;
while (at < wasm.length) {
  const id = wasm[at];
  const [size, bodyAt] = readU32(wasm, at + 1);
  const end = bodyAt + size;
  if (id !== 2) {
    sections.push(wasm.subarray(at, end));
    at = end;
    continue;
  }
  let [count, cursor] = readU32(wasm, bodyAt);
  const body = writeU32(count);
  for (let i = 0; i < count; i++) {
    let length;
    [length, cursor] = readU32(wasm, cursor);
    const module = wasm.subarray(cursor, cursor + length);
    cursor += length;
    [length, cursor] = readU32(wasm, cursor);
    let name = wasm.subarray(cursor, cursor + length).toString();
    cursor += length;
    const descriptorAt = cursor;
    cursor = skipDescriptor(wasm, cursor);
    if (module.toString() === GLUE_MODULE) {
      if (!renamed.has(name)) renamed.set(name, shortName(renamed.size));
      name = renamed.get(name);
    }
    const nameBytes = Buffer.from(name);
    body.push(...writeU32(module.length), ...module, ...writeU32(nameBytes.length), ...nameBytes);
    body.push(...wasm.subarray(descriptorAt, cursor));
  }
  if (cursor !== end) fail('the import section has bytes after its imports');
  sections.push(Buffer.from([2, ...writeU32(body.length), ...body]));
  at = end;
}

for (const [long, short] of renamed) {
  const key = new RegExp(`([{,])${long.replaceAll('$', '\\$')}:`, 'g');
  const found = glue.match(key)?.length ?? 0;
  if (found !== 1) fail(`the import ${long} is ${found} keys of the glue, not one`);
  glue = glue.replace(key, `$1${short}:`);
}
writeFileSync(wasmFile, Buffer.concat(sections));
writeFileSync(glueFile, glue);
console.log(`[build] ${renamed.size} imports renamed short in the module and the glue`);
