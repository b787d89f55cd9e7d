// Shared set-up of the page tests: Debian's Chromium driven by
// playwright-core (never a downloaded browser), with WebGPU on.
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { serve } from '../../scripts/serve.mjs';

export const repo = resolve(fileURLToPath(import.meta.url), '../../..');

const QUIET = [
  '--no-sandbox', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync',
];

/**
 * Launches headless Chromium; `webgpu: false` leaves WebGPU's flag off,
 * `gc: true` gives pages `gc()` so a test can watch objects being collected.
 */
export function launch({ webgpu = true, gc = false } = {}) {
  return chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: [
      ...(webgpu ? ['--enable-unsafe-webgpu'] : []),
      ...(gc ? ['--js-flags=--expose-gc'] : []),
      ...QUIET,
    ],
  });
}

/** A server for `mounts`, defaulting to the built package and the test fixture page. */
export function serveFixture(mounts) {
  return serve({
    port: 0,
    mounts: mounts ?? { '/pkg/': join(repo, 'pkg'), '/': join(repo, 'tests/page/fixture') },
  });
}

export const urlOf = (server) => `http://127.0.0.1:${server.address().port}/`;

/**
 * Collects what `page` reports as errors: uncaught exceptions and unhandled
 * rejections (`pageerror`) and `console.error` messages. Returns
 * `take()`, which waits one task turn in the page (Chromium reports a
 * rejection nobody handled in a task after the one that left it) and then
 * returns, and forgets, what arrived since the last call.
 */
export function pageErrors(page) {
  let errors = [];
  page.on('pageerror', (e) => errors.push(`uncaught: ${e}`));
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(`console.error: ${message.text()}`);
  });
  return {
    async take() {
      await page.evaluate(() => new Promise((resolve) => setTimeout(resolve, 0)));
      const taken = errors;
      errors = [];
      return taken;
    },
  };
}

/**
 * Fails (throws an AssertionError listing them) when `errors` is not empty:
 * a test whose page threw behind its back must not pass on what it returned.
 */
export function assertNoPageErrors(errors, where = 'the page') {
  assert.deepEqual(errors, [], `${where} reported errors:\n${errors.join('\n')}`);
}

/**
 * Opens the fixture page and runs `fn` inside it with the package imported
 * (`fn` receives the module's exports after `init()`), and closes the page.
 * Resolves to `{ result, errors }`. It rejects when the page reported an
 * error (an uncaught exception, an unhandled rejection, a console error)
 * while it was open, so no caller can drop them; a caller whose page is
 * meant to report errors says why in `{ expectErrors: 'reason' }`, and then
 * gets them in `errors` to check itself.
 */
export async function inPage(browser, server, fn, arg, { expectErrors } = {}) {
  if (expectErrors !== undefined && (typeof expectErrors !== 'string' || expectErrors.trim() === '')) {
    throw new TypeError('inPage: expectErrors must be the reason the page is expected to report errors');
  }
  const page = await browser.newPage();
  try {
    const reported = pageErrors(page);
    await page.goto(urlOf(server));
    const result = await page.evaluate(
      async ([source, arg]) => {
        const wf = await import('webfusion');
        await wf.default();
        // eslint-disable-next-line no-new-func
        const run = new Function(`return (${source})`)();
        return run(wf, arg);
      },
      [fn.toString(), arg],
    );
    const errors = await reported.take();
    if (expectErrors === undefined) assertNoPageErrors(errors);
    return { result, errors };
  } finally {
    await page.close();
  }
}
