// `npm start`'s page, as a person opening it sees it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { launch, urlOf } from './browser.mjs';
import { serve } from '../../scripts/serve.mjs';

let browser;
let server;
before(async () => {
  browser = await launch();
  server = await serve({ port: 0 });
});
after(async () => {
  await browser?.close();
  server?.close();
});

test('the demo page shows the first slice result 22,44,66', async () => {
  const page = await browser.newPage();
  await page.goto(urlOf(server));
  await page.waitForSelector('body[data-state]', { timeout: 60_000 });
  assert.equal(await page.textContent('#result'), '22,44,66');
  assert.equal(await page.textContent('#shape'), '[3]');
  assert.equal(await page.getAttribute('body', 'data-state'), 'done');
  await page.close();
});
