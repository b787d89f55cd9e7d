#!/usr/bin/env bash
# Builds the release npm package into pkg/: the wasm module, optimised for
# speed by binaryen's wasm-opt, its minified JS glue and TypeScript types. With weak
# references, a Rust closure handed to JS (`grads(f)`'s function) is freed
# when the collector takes it. Also run by
# `npm pack` and `npm publish` (prepack), so a package is never packed from
# a clone without its module. Optimised for speed, not size: every op a
# program registers runs through this module on the CPU (README.md has
# what it cost; this script prints the sizes each build).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

for tool in cargo wasm-bindgen node_modules/.bin/wasm-opt; do
  if ! command -v "$tool" >/dev/null; then
    echo "[build] $tool is missing: run 'bash scripts/setup.sh' (or npm test) first" >&2
    exit 1
  fi
done

cargo build --release --lib --target wasm32-unknown-unknown
module="${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/release/webfusion.wasm"
# Floats in messages are written by JS (`error::number`): one `{}` of a
# float elsewhere brings back core's float formatting, 20 KB of wasm (its
# functions' names are in the module before wasm-opt).
if grep -q flt2dec "$module"; then
  echo "[build] core's float formatting is in the module: write floats in messages with error::number or number_f32" >&2
  exit 1
fi
rm -rf pkg
wasm-bindgen --target web --weak-refs --out-dir pkg "$module"
before=$(stat -c %s pkg/webfusion_bg.wasm)
# The features rustc's wasm32 target emits by default.
#
# `--low-memory-unused`: binaryen may assume nothing reads or writes the
# first 1 KB of memory, and folds a pointer's constant additions into its
# loads' and stores' offsets (4 KB of the module, 1.3 KB gzip). rust-lld
# lays the stack first, below the data at 1 MiB, so that 1 KB is the
# bottom of the 1 MiB stack, reached only by a stack about to overflow,
# whose access then traps instead of going on. The check after the build
# stops it should the data ever start lower.
node_modules/.bin/wasm-opt -O3 --low-memory-unused \
  --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
  --enable-mutable-globals --enable-reference-types --enable-multivalue \
  pkg/webfusion_bg.wasm -o pkg/webfusion_bg.wasm
after=$(stat -c %s pkg/webfusion_bg.wasm)
lowest=$(node_modules/.bin/wasm-dis pkg/webfusion_bg.wasm | sed -n 's/^ (data [^ ]* (i32.const \([0-9]*\)).*/\1/p' | sort -n | head -1)
if [ -z "$lowest" ] || [ "$lowest" -lt 1024 ]; then
  echo "[build] the module's data starts at ${lowest:-no offset found}, inside the 1 KB --low-memory-unused keeps free: drop that flag" >&2
  exit 1
fi
echo "[build] pkg/webfusion_bg.wasm: $before bytes before wasm-opt, $after after"
# The glue is minified as a bundler would (oxc, through rolldown): a page
# loading the package without one downloads it as shipped, and wasm-bindgen
# writes it for reading (112 KB, 18.3 KB gzip; minified 39 KB, 9.6 KB).
# Names the glue's behaviour rests on survive: its exports and classes,
# import names (object keys), and the wasm's exports; `user_stack` cuts a
# stack by function, not by name.
#
# Before that, a tensor object's finalizer is registered without an
# unregister token. The token is the object itself, and registering with
# one cost 0.4 us a tensor in V8, a fifth of W6's time (1000 small ops,
# each making one tensor object). Only `__destroy_into_raw` uses it, to
# free the struct at once and not again when the object is collected; so
# a tensor's `free()` is made `dispose()` here, in the class itself
# (`registry::redirect_free` does it on the prototype, but only at the
# first tensor object: a `free` read off the class before would be
# wasm-bindgen's), and the tensor's struct is freed by its finalizer alone.
# Should the glue call `__destroy_into_raw` anywhere else (a tensor passed
# to Rust by value), the build stops: the finalizer would free it again.
node --input-type=module -e '
import { minifySync } from "rolldown/experimental";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
const file = "pkg/webfusion.js";
const fail = (message) => { console.error(`[build] ${message}`); process.exit(1); };
const once = (glue, from, to) => {
  if (glue.split(from).length !== 2) fail(`the glue does not have "${from}" once`);
  return glue.replace(from, to);
};
let glue = readFileSync(file, "utf8");
glue = once(glue, "TensorFinalization.register(obj, obj.__wbg_ptr, obj);", "TensorFinalization.register(obj, obj.__wbg_ptr);");
glue = once(glue, "free() {\n        const ptr = this.__destroy_into_raw();\n        wasm.__wbg_tensor_free(ptr, 0);\n    }", "free() {\n        this.dispose();\n    }");
const stray = glue
  .replaceAll("__destroy_into_raw() {", "")
  .replace(/free\(\) \{\s*const ptr = this\.__destroy_into_raw\(\);/g, "");
if (stray.includes("__destroy_into_raw(")) fail("the glue calls __destroy_into_raw outside free(): tensor finalizers need their unregister token back");
const { code, errors } = minifySync("webfusion.js", glue, { module: true });
if (errors.length > 0) fail(`minifying ${file} failed: ${JSON.stringify(errors)}`);
writeFileSync(file, code);
// The snippets (`inline_js`: the browser backend'"'"'s WebGPU calls, the
// registry'"'"'s and the errors'"'"' helpers) ship beside it, minified the same way.
for (const dir of readdirSync("pkg/snippets")) {
  for (const name of readdirSync(`pkg/snippets/${dir}`)) {
    const path = `pkg/snippets/${dir}/${name}`;
    const minified = minifySync(name, readFileSync(path, "utf8"), { module: true });
    if (minified.errors.length > 0) fail(`minifying ${path} failed: ${JSON.stringify(minified.errors)}`);
    writeFileSync(path, minified.code);
  }
}
'
node scripts/short-names.mjs pkg/webfusion_bg.wasm pkg/webfusion.js pkg/webfusion_bg.wasm.d.ts
# What a page downloads, as servers compress it (the README keeps these),
# and the budget it must stay within: the build fails past it. The budget
# is today's size with a little room (issue 23 aims at 150 KB gzip; see
# its notes for where the bytes go): it keeps the module from growing
# unnoticed while it is made smaller, and comes down as it does. Raised
# once, by 2 KB, for the GPU's timestamps in profiles (3.2 KB gzip, most
# of it wgpu's query-set calls and their glue; 1.4 KB was found first).
# Lowered by 1 KB when `Device::with_state`'s prologue stopped being
# copied into each of its callers (3.4 KB gzip), by 0.5 KB when
# `data()` and `array()` came to share their read, and by 12 KB when
# messages stopped formatting floats in Rust (`error::number`), and by
# 8.5 KB when the glue was minified. Raised by 6.5 KB for remembered
# kernels (`codegen::Memo`: a flush's host time 0.68x natively, small
# steps 0.83-0.91x in the browser), most of it the key's writing at each
# generator's call and the map. Raised by 0.2 KB for reductions' lanes
# (`codegen::Lanes`: a GPU's reductions at 256 threads, 0.3-0.7x the time
# on an H100, and subgroups natively; their text is native-only, as
# `codegen::Subgroups` has no value in wasm). Lowered by 1 KB when a
# flush's per-op maps were sized once (the module shrank by 1 KB). Raised
# by 1.6 KB for the fixes of outside testing's findings (1.8 KB gzip):
# most of it the exact float `mod`'s and JS's `pow`'s WGSL text, which
# the module carries as data, the training refusals' messages, a refusal
# decided before a flush touches the GPU, and `topk`'s NaNs. Lowered by
# 1.2 KB when the async methods came to share one boxed future's promise
# (`web::promise`). Raised by 1.6 KB for outside testing's second round
# (1.5 KB gzip): the task that settles pending work while the page idles
# (`Device::release`, 0.5 KB, most of it `spawn_local`'s), the one-hot
# products in slices and the gradient's checked indices, profiles ended
# synchronously, and errors made real `Error`s; and by 0.3 KB for `floor`
# (TF.js's, which the TF.js kernels' floor, ceil, round and resizes need
# now that `floorDiv` is an int32, as in TF.js), and by 0.3 KB for a float
# `floorDiv` exact at whole quotients (`wf_floordiv`) and the last round's
# refusals. Raised by 4.1 KB for synchronous reads of what the host holds
# (`dataSync`, which TF.js's graph models, `print` and tfjs-layers' range
# checks need): joins, folds and argmax on the host (`host::cat`,
# `host::fold`, 1.4 and 3.5 KB before wasm-opt) and the read itself.
# Raised by 0.3 KB for a GPU's large products reading a transposed right
# operand from a row-major copy (`codegen::copies_right_operand`: on an
# H100, 2560 went 85% -> 94% of the plain product). Raised by 1.5 KB for
# outside testing's third round: `checkNumerics` on what a step with
# `skipNonFinite` writes (its op, host and kernel rules and message), the
# skip records' first-and-newest cap, pow's exponent gradient masked as
# TF.js's, max pools with a window in the padding not proven finite, and
# the warm-up's queue flushed first and its step keeping no optimizer state;
# by 0.2 KB for the review of that round (a warm-up's commits held for it to
# write, skip records evicted by the chains of held tensors, a broadcast
# operand never copied). Raised by 0.7 KB for `tan` (TF.js's; its host
# value is `libm`'s float64 tangent, 0.5 KB, which shares its argument
# reduction with the `libm::cos` random normals already use: std's tan
# brought a second copy, 1.3 KB). Raised by 0.4 KB for average pools
# that divide each element by its window's count first, as `mean` does
# (the count's WGSL text), and for outside testing's fifth round:
# `minimize`'s refusals naming it, a refused call disposing what `f`
# returned, and `dataSync`'s refusal of an empty tensor saying so. Raised
# by 0.2 KB for softmax's difference that the numerics checks skip
# (`OpIr::unchecked`, `Device::record_unchecked`), and by 0.2 KB for
# logSumExp's gradient taken from the max (its max and sum), and by 0.2
# KB for outside testing's sixth round (a resize's refusal of an axis
# whose table the host cannot allocate), and by 0.2 KB for pools whose
# loops visit only a window's positions inside the images. Raised by
# 0.5 KB for values from JS copied into wasm memory fallibly (a `RangeError`
# where the page cannot give the room, not an abort) and converted a piece
# at a time, and by 0.2 KB for a read's words copied fallibly. Lowered to
# 330.7 KB with LLVM's inline threshold at 100 (.cargo/config.toml says what
# it cost and what paid for it). Lowered to 329.1 KB with typed arrays of
# 32-bit values converted in place (one copy from JS, none a piece at a time).
# Lowered to 320.3 KB when a tensor's release, the registration site's set
# and restore, and a memo key's append came to be called, not inlined at
# each of their hundreds of sites; and to 314.1 KB with the imports' short
# names (scripts/short-names.mjs), and to 312.6 KB with the exports' too.
# Lowered to 309.3 KB with a device's handle and a record's lookup called
# (`Outlined`, `device::Records`), and to 308.6 KB with an error's
# construction called, and to 305.8 KB with scopes awaited in turn, not
# joined (`runtime::resolved`), to 303.7 KB with reduction axes sorted
# without a sort, and to 301.9 KB with the host's sin and cos in float64
# (`libm`'s, whose reduction the random normals already bring), and to
# 300.8 KB with wgpu's parking_lot locks native only. From here the
# snippets count too (0.9 KB before, minified as the glue is now). Lowered
# to 280.7 KB with WebGPU called directly in the browser, not through wgpu
# (`runtime::browser`). Raised by 0.3 KB for a device's loss noted by a
# closure the promise calls (a cell to look at on every use of the device;
# a poll of the promise there cost 1000 small ops about 1.2%). Raised by
# 0.7 KB for `dataSync()` answering with the values a read brought back,
# as TF.js does (the registry's entry keeps them), and `arraySync()`.
# Lowered to 280.6 KB with binaryen's `--low-memory-unused` (above), and
# raised by 0.3 KB for a profile's submit of more than 2048 launches timed
# in a second query set, an optimizer's refusal naming its lost device,
# and empty values held by the host: with 0.1 KB of room
# (two builds of the same source have differed by a byte of gzip). Raised
# by 0.1 KB for `data()` and `array()` whose every refusal rejects, as
# TF.js's async reads' do (0.1 KB gzip), and by 0.1 KB for outside
# testing's eighth round: -Infinity's fractional powers on the host, the
# sign of two zeros' max and min from their bits (host and WGSL), and an
# int clamp's bounds truncated as TF.js's; and by 0.5 KB for float
# products and running products that are ±0 at a zero however far the
# rest overflows (`Fold::product`: its flags, their WGSL, and the second
# buffer that carries them between a long row's two stages; the scan's
# WGSL).
node -e '
const BUDGET_GZIP = 281700;
const zlib = require("zlib");
const fs = require("fs");
let total = 0;
const snippets = fs.readdirSync("pkg/snippets", { recursive: true })
  .filter((name) => name.endsWith(".js"))
  .map((name) => `pkg/snippets/${name}`);
for (const file of ["pkg/webfusion_bg.wasm", "pkg/webfusion.js", ...snippets]) {
  const bytes = fs.readFileSync(file);
  const gzip = zlib.gzipSync(bytes, { level: 9 }).length;
  const brotli = zlib.brotliCompressSync(bytes).length;
  total += gzip;
  console.log(`[build] ${file}: ${bytes.length} bytes, gzip ${gzip}, brotli ${brotli}`);
}
console.log(`[build] wasm + glue + snippets: gzip ${total} of the budget ${BUDGET_GZIP}`);
if (total > BUDGET_GZIP) {
  console.error(`[build] wasm + glue + snippets are ${total} bytes gzip, past the budget of ${BUDGET_GZIP}: find what grew (twiggy top) before raising it`);
  process.exit(1);
}'
