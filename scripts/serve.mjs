// Serves the demo: www/ at the root, the built package at /pkg/ and the
// plotting library (uPlot, from npm) at /vendor/uplot/.
// `node scripts/serve.mjs` listens on 127.0.0.1:8080 (PORT overrides);
// tests import `serve` and pass port 0 for a free one.
import { createServer } from 'node:http';
import { readFile, stat } from 'node:fs/promises';
import { extname, join, normalize, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = resolve(fileURLToPath(import.meta.url), '../..');

const TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.json': 'application/json',
  '.wasm': 'application/wasm',
  '.css': 'text/css',
  '.ts': 'text/plain',
};

/** Serves `mounts` ({ urlPrefix: directory }) on 127.0.0.1:`port`. */
export function serve({ port = 8080, mounts } = {}) {
  mounts ??= {
    '/pkg/': join(repo, 'pkg'),
    '/vendor/uplot/': join(repo, 'node_modules/uplot/dist'),
    '/': join(repo, 'www'),
  };
  const prefixes = Object.keys(mounts).sort((a, b) => b.length - a.length);
  const server = createServer(async (req, res) => {
    const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    const prefix = prefixes.find((p) => path.startsWith(p));
    const root = mounts[prefix];
    let file = normalize(join(root, path.slice(prefix.length)));
    if (!file.startsWith(root)) {
      res.writeHead(403).end();
      return;
    }
    try {
      if ((await stat(file)).isDirectory()) file = join(file, 'index.html');
      const body = await readFile(file);
      res.writeHead(200, { 'content-type': TYPES[extname(file)] ?? 'application/octet-stream' });
      res.end(body);
    } catch {
      res.writeHead(404).end('not found');
    }
  });
  return new Promise((done) => server.listen(port, '127.0.0.1', () => done(server)));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const server = await serve({ port: Number(process.env.PORT ?? 8080) });
  console.log(`webfusion demo on http://127.0.0.1:${server.address().port}/`);
}
