// The demo's static server (scripts/serve.mjs) against requests a browser
// would never send but anyone can: malformed escapes and paths that climb
// out of a mount. It runs in a child process, as `npm start` runs it, so a
// request that kills it shows as a dead process, not as an error thrown into
// this test's own process.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { request } from 'node:http';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { repo } from './browser.mjs';

const SECRET = 'the sibling folder must never be served';

let dir;
let child;
let port;
before(async () => {
  // `www` is mounted at `/` and `pkg` at `/pkg/`; `www-x` and `pkg-x` sit
  // beside them, named so that their paths start with the mounted ones.
  dir = mkdtempSync(join(tmpdir(), 'webfusion-serve-'));
  for (const name of ['www', 'www-x', 'pkg', 'pkg-x']) mkdirSync(join(dir, name));
  writeFileSync(join(dir, 'www/index.html'), 'the index');
  writeFileSync(join(dir, 'pkg/module.js'), 'export {};');
  writeFileSync(join(dir, 'www-x/secret.txt'), SECRET);
  writeFileSync(join(dir, 'pkg-x/secret.txt'), SECRET);
  const mounts = { '/pkg/': join(dir, 'pkg'), '/': join(dir, 'www') };
  const program = `
    const { serve } = await import(${JSON.stringify(pathToFileURL(join(repo, 'scripts/serve.mjs')).href)});
    const server = await serve({ port: 0, mounts: ${JSON.stringify(mounts)} });
    console.log(server.address().port);
  `;
  child = spawn(process.execPath, ['--input-type=module', '-e', program], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = await once(child.stdout, 'data');
  port = Number(String(line).trim());
});
after(() => {
  child?.kill();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** GETs `path` exactly as written (no client-side normalising): `{ status, body }`. */
function get(path) {
  return new Promise((done, fail) => {
    request({ host: '127.0.0.1', port, path }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => { body += chunk; });
      res.on('end', () => done({ status: res.statusCode, body }));
    }).on('error', fail).end();
  });
}

test('a malformed escape is answered 400 and the server keeps serving', async () => {
  for (const path of ['/%E0%A4%A', '/%', '/pkg/%zz']) {
    assert.equal((await get(path)).status, 400, path);
  }
  assert.equal(child.exitCode, null, 'the server process is still running');
  assert.deepEqual(await get('/index.html'), { status: 200, body: 'the index' });
});

test('a path that climbs out of its mount into a sibling folder whose name extends the mount is refused', async () => {
  for (const path of ['/..%2fwww-x/secret.txt', '/..%2Fwww-x%2Fsecret.txt', '/pkg/..%2fpkg-x/secret.txt', '/pkg/..%2f..%2fpkg-x/secret.txt']) {
    const { status, body } = await get(path);
    assert.ok(status === 403 || status === 404, `${path}: ${status}`);
    assert.ok(!body.includes(SECRET), `${path} served the sibling's file`);
  }
  // Each mount is its own root: /pkg/ cannot climb into www either.
  assert.equal((await get('/pkg/..%2fwww/index.html')).status, 403);
  // What the mounts hold is still served, a mount's own folder included.
  assert.deepEqual(await get('/'), { status: 200, body: 'the index' });
  assert.deepEqual(await get('/pkg/module.js'), { status: 200, body: 'export {};' });
});
