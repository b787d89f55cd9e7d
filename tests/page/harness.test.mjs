// The page tests' own harness (browser.mjs, shared-page.mjs) holds its
// promise: a page that reports an error fails the test that opened it,
// unless the caller says why it expects errors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { inPage, launch, repo, serveFixture } from './browser.mjs';

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

test('inPage rejects when the page left a rejection unhandled, though fn returned', async () => {
  await assert.rejects(
    inPage(browser, server, async () => {
      Promise.reject(new Error('nobody awaited this'));
      return 'returned';
    }),
    (e) => e.name === 'AssertionError' && /uncaught: Error: nobody awaited this/.test(e.message),
  );
});

test('inPage rejects when the page threw from a callback or wrote a console error', async () => {
  await assert.rejects(
    inPage(browser, server, async () => {
      setTimeout(() => { throw new RangeError('from a timer'); }, 0);
      await new Promise((resolve) => setTimeout(resolve, 0));
    }),
    /uncaught: RangeError: from a timer/,
  );
  await assert.rejects(inPage(browser, server, async () => console.error('said so')), /console\.error: said so/);
});

test('inPage returns the errors to a caller that says why it expects them, and refuses an opt-out without a reason', async () => {
  const { result, errors } = await inPage(browser, server, async () => {
    Promise.reject(new Error('expected'));
    return 7;
  }, undefined, { expectErrors: 'this test leaves a rejection on purpose' });
  assert.equal(result, 7);
  assert.deepEqual(errors, ['uncaught: Error: expected']);
  await assert.rejects(inPage(browser, server, async () => 1, undefined, { expectErrors: '' }), TypeError);
});

test('a page without errors resolves with its result and no errors', async () => {
  assert.deepEqual(await inPage(browser, server, async ({ Device }) => {
    const gpu = await Device.request();
    return Array.from(await gpu.tensor([1, 2]).add(1).data());
  }), { result: [2, 3], errors: [] });
});

test('a shared page fails the test during which it reported an error, and only that test', async () => {
  // A test file of three tests on a shared page, the middle one leaving a
  // rejection unhandled, run by its own test runner.
  const dir = mkdtempSync(join(tmpdir(), 'webfusion-harness-'));
  try {
    const file = join(dir, 'shared.test.mjs');
    const shared = pathToFileURL(join(repo, 'tests/page/shared-page.mjs')).href;
    writeFileSync(file, `
      import { test } from 'node:test';
      import { sharedPage } from ${JSON.stringify(shared)};
      const { run } = sharedPage();
      test('before it', () => run(async () => 1));
      test('leaves a rejection', () => run(async () => { Promise.reject(new Error('left behind')); }));
      test('after it', () => run(async () => 2));
    `);
    // Without the variable that tells a runner it reports to a parent runner.
    const { NODE_TEST_CONTEXT, ...env } = process.env;
    const child = spawnSync(process.execPath, ['--test', '--test-reporter=tap', file], { encoding: 'utf8', env });
    const outcomes = [...child.stdout.matchAll(/^(ok|not ok) \d+ - (.*)$/gm)].map(([, ok, name]) => `${ok} - ${name}`);
    assert.deepEqual(outcomes, ['ok - before it', 'not ok - leaves a rejection', 'ok - after it'], child.stdout);
    assert.match(child.stdout, /uncaught: Error: left behind/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
