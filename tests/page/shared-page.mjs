// One fixture page for a whole test file: opened (webfusion initialised)
// before its tests, closed after them. Test files that run every test in one
// page share this rather than each repeating it.
//
// Each test is checked on its own, whatever ran before it: it fails if the
// page reported an error (an uncaught exception, an unhandled rejection, a
// console error) or the module panicked while it ran. A check that only a
// last test made would hold only when that test runs last.
import { before, after, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { assertNoPageErrors, launch, pageErrors, serveFixture, urlOf } from './browser.mjs';

/**
 * Returns `run(fn, arg)`, which runs `fn(webfusionModule, arg)` in the page
 * and resolves to its result, and `page()`, the page itself.
 */
export function sharedPage() {
  let browser;
  let server;
  let page;
  let reported;
  let panicsBefore = 0;
  const panics = () => page.evaluate(async () => (await import('webfusion')).panicCount());
  before(async () => {
    browser = await launch();
    server = await serveFixture();
    page = await browser.newPage();
    reported = pageErrors(page);
    await page.goto(urlOf(server));
    await page.evaluate(async () => (await import('webfusion')).default());
    assertNoPageErrors(await reported.take(), 'the shared page, loading');
  });
  beforeEach(async () => {
    panicsBefore = await panics();
  });
  afterEach(async () => {
    assertNoPageErrors(await reported.take(), 'the shared page');
    assert.equal(await panics(), panicsBefore, 'the module panicked during this test');
  });
  after(async () => {
    await browser?.close();
    server?.close();
  });
  const run = (fn, arg) =>
    page.evaluate(
      async ([source, arg]) => {
        const wf = await import('webfusion');
        // eslint-disable-next-line no-new-func
        return new Function(`return (${source})`)()(wf, arg);
      },
      [fn.toString(), arg],
    );
  return { run, page: () => page };
}
