// Takes docs/demo.png, the README's picture of the demo mid-training: the
// page trains for a while, a step is broken with an injected GPU fault,
// and one step is profiled (its first fused kernel opened). Then
// docs/text-mode.png: the text mode after `TEXT_STEPS` steps (default 300)
// of the character transformer, its samples and attention maps drawn. Prints the
// tasks over 50 ms the page ran while it played: the page's smoothness,
// measured here rather than asserted in a test.
// Run after a build: `node scripts/screenshot.mjs`.
import { join } from 'node:path';
import { launch, repo, urlOf } from '../tests/page/browser.mjs';
import { serve } from './serve.mjs';

const browser = await launch();
const server = await serve({ port: 0 });
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  await page.goto(urlOf(server));
  await page.waitForSelector('body[data-state=ready]', { timeout: 60_000 });
  await page.waitForFunction(() => window.demo.state.step >= 400, null, { timeout: 300_000 });
  await page.evaluate(() => window.demo.setPlaying(false));
  // The page's thread, while it played: tasks over 50 ms after the first
  // batch (which compiles the kernels).
  const long = await page.evaluate(() => window.demo.state.longTasks.filter((t) => t.step > 0));
  console.log(`tasks over 50 ms while playing 400 steps, after the first batch: ${JSON.stringify(long)}`);
  await page.click('#break-fault');
  await page.waitForSelector('#outcome[data-state=done]', { timeout: 120_000 });
  await page.click('#profile');
  await page.waitForSelector('#ran[data-state=done]');
  await page.evaluate(() => {
    const fused = [...document.querySelectorAll('#kernels li')].find((li) => Number(li.dataset.ops) > 2);
    fused?.querySelector('details')?.setAttribute('open', '');
  });
  await page.screenshot({ path: join(repo, 'docs/demo.png'), fullPage: true });
  console.log('wrote docs/demo.png');

  const steps = Number(process.env.TEXT_STEPS ?? 300);
  await page.goto(`${urlOf(server)}text.html?paused`);
  await page.waitForSelector('body[data-state=ready]', { timeout: 120_000 });
  await page.evaluate((n) => window.textDemo.train(n), steps);
  await page.evaluate(() => window.textDemo.observe());
  await page.screenshot({ path: join(repo, 'docs/text-mode.png'), fullPage: true });
  console.log(`wrote docs/text-mode.png (after ${steps} steps)`);
} finally {
  await browser.close();
  server.close();
}
