// The benchmark page, opened for a script that measures in it
// (`bench.mjs`, `startup.mjs`): the built package, the peers' packages and
// bench/ served, headless Chromium (WebGPU on) on it, its errors printed.
import { join } from 'node:path';
import { launch, repo, serveFixture, urlOf } from '../tests/page/browser.mjs';

/** Resolves to `{ page, close }` once the page's libraries are loaded. */
export async function openBenchPage() {
  const server = await serveFixture({
    '/pkg/': join(repo, 'pkg'),
    '/tfjs/': join(repo, 'tfjs'),
    '/node_modules/': join(repo, 'node_modules'),
    '/www/': join(repo, 'www'),
    '/': join(repo, 'bench'),
  });
  const browser = await launch();
  const close = async () => {
    await browser.close();
    server.close();
  };
  try {
    const page = await browser.newPage();
    page.on('console', (m) => { if (m.type() === 'error') console.error(`[page] ${m.text()}`); });
    await page.goto(urlOf(server));
    await page.waitForSelector('body[data-ready]', { state: 'attached', timeout: 60_000 });
    return { page, close };
  } catch (e) {
    await close();
    throw e;
  }
}
