// Runs TF.js's own op tests (the compiled ones its npm package ships) in a
// page, against the backend the page's URL names (`?backend=webfusion` or
// `?backend=webgpu`), the way TF.js runs them against its WebGPU backend:
// jasmine's globals, the one test environment, every kernel, gradient and
// chained op registered. It must be imported before the test files: they
// read the test environments as they are evaluated.
//
// The results land on `window.tfjsTests`: one record per spec with the file
// it came from, its status, and its first failure's message. Which file a
// spec came from is known because the generated entry evaluates a module
// calling `setFile(name)` just before each test file, and every top-level
// `describe` is remembered with the file being evaluated then.
import jasmineRequire from 'jasmine-core/lib/jasmine-core/jasmine.js';
import * as tf from '@tensorflow/tfjs-core';
import '@tensorflow/tfjs-core/dist/public/chained_ops/register_all_chained_ops';
import '@tensorflow/tfjs-core/dist/register_all_gradients';
import { setTestEnvs } from '@tensorflow/tfjs-core/dist/jasmine_util';
import '@tensorflow/tfjs-backend-webgpu';
import { createBackend } from '../../tfjs/index.js';

const jasmine = jasmineRequire.core(jasmineRequire);
const env = jasmine.getEnv();
Object.assign(globalThis, jasmineRequire.interface(jasmine, env));
jasmine.DEFAULT_TIMEOUT_INTERVAL = 60000;
env.configure({ random: false, stopOnSpecFailure: false });

const params = new URL(location.href).searchParams;
const backendName = params.get('backend') ?? 'webfusion';
// Kernels only, on both backends, unless the URL asks for `host`: TF.js's
// tests are small, and on a default device our small work runs in wasm on
// the host, testing no kernel. TF.js runs its WebGPU backend's tests the
// same way, with its forwarding of small work to its CPU backend off
// (`backend_webgpu_test_registry.ts`). With `host`, webfusion's device is
// a default one, as a user's is, and the tests hold the host's arithmetic
// to TF.js's.
const host = params.has('host');
tf.removeBackend('webfusion');
tf.registerBackend('webfusion', () => createBackend(host ? {} : { hostMaxElements: 0 }), 1);
const flags = backendName === 'webgpu' ? { WEBGPU_CPU_FORWARD: host } : {};
setTestEnvs([{ name: backendName, backendName, flags, isDataSync: false }]);

let file = null;
const fileOfSuite = new Map();
/** Names the test file the next top-level `describe`s belong to. */
export function setFile(name) {
  file = name;
}
let depth = 0;
const describe = globalThis.describe;
globalThis.describe = (name, body) => {
  if (depth === 0) fileOfSuite.set(name, file);
  depth += 1;
  try {
    return describe(name, body);
  } finally {
    depth -= 1;
  }
};

const results = [];
const suites = [];
env.addReporter({
  suiteStarted: (suite) => suites.push(suite.description),
  suiteDone: () => suites.pop(),
  specDone(spec) {
    const failure = spec.failedExpectations[0];
    results.push({
      file: fileOfSuite.get(suites[0]) ?? '(unknown)',
      name: spec.fullName,
      status: spec.status,
      message: failure ? String(failure.message).slice(0, 400) : null,
    });
  },
  jasmineDone: (done) => {
    window.tfjsTests = { results, overall: done.overallStatus };
  },
});
/** Runs every spec registered; called by the entry after the test files. */
export function run() {
  env.execute();
}
