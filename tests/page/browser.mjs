// Shared set-up of the page tests: Debian's Chromium driven by
// playwright-core (never a downloaded browser), with WebGPU on.
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
 * Opens the fixture page and runs `fn` inside it with the package imported
 * (`fn` receives the module's exports after `init()`). Console errors and
 * uncaught page errors are collected and returned with the result.
 */
export async function inPage(browser, server, fn, arg) {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
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
  await page.close();
  return { result, errors };
}
