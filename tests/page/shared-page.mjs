// One fixture page for a whole test file: opened (webfusion initialised)
// before its tests, closed after them. Test files that run every test in one
// page share this rather than each repeating it.
import { before, after } from 'node:test';
import { launch, serveFixture, urlOf } from './browser.mjs';

/**
 * Returns `run(fn, arg)`, which runs `fn(webfusionModule, arg)` in the page
 * and resolves to its result, and `page()`, the page itself.
 */
export function sharedPage() {
  let browser;
  let server;
  let page;
  before(async () => {
    browser = await launch();
    server = await serveFixture();
    page = await browser.newPage();
    await page.goto(urlOf(server));
    await page.evaluate(async () => (await import('webfusion')).default());
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
