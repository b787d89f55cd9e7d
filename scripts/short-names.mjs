// Gives the names between the wasm module and its glue short forms, in the
// module, the glue and the module's types alike. wasm-bindgen names each
// import after the JS it calls plus a hash
// (`__wbg_get_unchecked_e6325ad374eff861`): 207 such names, 10.6 KB in the
// module and again in the glue, and their hashes do not compress (6 KB of
// the two files' gzip). Its exports are named after the methods
// (`tensor_batchNorm`), 2.8 KB more, and the glue names them at each call.
// Nothing else reads these names: the glue hands its object to
// `WebAssembly.instantiate` and calls the exports through the one object
// the instance gives it; the module calls each import by its index.
// `memory` and `__wbindgen_start` keep theirs (the object `init()` returns
// is the exports, and those two are what a page may know of it), as does an
// export the glue never calls.
//
// Run by scripts/build.sh on the package it built:
//   node scripts/short-names.mjs pkg/webfusion_bg.wasm pkg/webfusion.js pkg/webfusion_bg.wasm.d.ts
// It fails (exit 1) unless every renamed import is one key of the glue's
// object and every renamed export is called through the exports object
// alone, so a glue written another way stops the build, not the page.
import { readFileSync, writeFileSync } from 'node:fs';

const [wasmFile, glueFile, typesFile] = process.argv.slice(2);
const GLUE_MODULE = './webfusion_bg.js';
const KEPT_EXPORTS = new Set(['memory', '__wbindgen_start']);
const fail = (message) => {
  console.error(`[build] short-names: ${message}`);
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
let types = readFileSync(typesFile, 'utf8');
const escape = (name) => name.replaceAll('$', '\\$');

// The glue's one object of the instance's exports: `<it>.__wbindgen_start()`.
const exportsObject = glue.match(/(?<![\w$.])([A-Za-z_$][\w$]*)\.__wbindgen_start\(/)?.[1];
if (exportsObject === undefined) fail('the glue never calls __wbindgen_start: where are the exports?');
const calls = (name) => new RegExp(`(?<![\\w$.])${escape(exportsObject)}\\.${escape(name)}(?![\\w$])`, 'g');

const renamedImports = new Map();
const renamedExports = new Map();
const sections = [wasm.subarray(0, 8)];
let at = 8;
while (at < wasm.length) {
  const id = wasm[at];
  const [size, bodyAt] = readU32(wasm, at + 1);
  const end = bodyAt + size;
  if (id !== 2 && id !== 7) {
    sections.push(wasm.subarray(at, end));
    at = end;
    continue;
  }
  let [count, cursor] = readU32(wasm, bodyAt);
  const body = writeU32(count);
  for (let i = 0; i < count; i++) {
    let length;
    let module = null;
    if (id === 2) {
      [length, cursor] = readU32(wasm, cursor);
      module = wasm.subarray(cursor, cursor + length);
      cursor += length;
    }
    [length, cursor] = readU32(wasm, cursor);
    let name = wasm.subarray(cursor, cursor + length).toString();
    cursor += length;
    const descriptorAt = cursor;
    if (id === 2) {
      cursor = skipDescriptor(wasm, cursor);
      if (module.toString() === GLUE_MODULE) {
        if (!renamedImports.has(name)) renamedImports.set(name, shortName(renamedImports.size));
        name = renamedImports.get(name);
      }
      body.push(...writeU32(module.length), ...module);
    } else {
      cursor = readU32(wasm, cursor + 1)[1]; // the kind, then the index
      if (!KEPT_EXPORTS.has(name) && calls(name).test(glue)) {
        renamedExports.set(name, shortName(renamedExports.size));
        name = renamedExports.get(name);
      }
    }
    const nameBytes = Buffer.from(name);
    body.push(...writeU32(nameBytes.length), ...nameBytes, ...wasm.subarray(descriptorAt, cursor));
  }
  if (cursor !== end) fail(`section ${id} has bytes after its entries`);
  sections.push(Buffer.from([id, ...writeU32(body.length), ...body]));
  at = end;
}

for (const [long, short] of renamedImports) {
  const key = new RegExp(`([{,])${escape(long)}:`, 'g');
  const found = glue.match(key)?.length ?? 0;
  if (found !== 1) fail(`the import ${long} is ${found} keys of the glue, not one`);
  glue = glue.replace(key, `$1${short}:`);
}
for (const [long, short] of renamedExports) {
  glue = glue.replace(calls(long), `${exportsObject}.${short}`);
  if (glue.includes(`"${long}"`) || glue.includes(`'${long}'`)) fail(`the glue names the export ${long} in a string: it may reach it another way`);
  const declared = new RegExp(`^export const ${escape(long)}:`, 'm');
  if (!declared.test(types)) fail(`${typesFile} does not declare the export ${long}`);
  types = types.replace(declared, `export const ${short}:`);
}
writeFileSync(wasmFile, Buffer.concat(sections));
writeFileSync(glueFile, glue);
writeFileSync(typesFile, types);
console.log(`[build] short names for ${renamedImports.size} imports and ${renamedExports.size} exports`);
