// The package's TypeScript declarations as a strict TypeScript user meets
// them: tests/types/*.ts (the README example, typed results and errors, and
// bad calls marked `@ts-expect-error`) compile with `tsc --strict` against
// the built package, `webfusion` resolved by name through the package's own
// `exports` (a self-reference), as a consumer's bundler resolves it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { repo } from './browser.mjs';

test('typed code, the README example and TF.js code on the webfusion backend included, compiles under tsc --strict, and bad calls do not', () => {
  const project = mkdtempSync(join(tmpdir(), 'webfusion-types-'));
  try {
    writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({
      compilerOptions: {
        strict: true,
        noEmit: true,
        target: 'es2022',
        module: 'es2022',
        moduleResolution: 'bundler',
        lib: ['es2022', 'dom', 'esnext.disposable'],
        skipLibCheck: false,
        // The project lives in a temporary folder: the type packages TF.js's
        // declarations lean on (@types/long) are the repository's, as a
        // TF.js user's own are theirs.
        typeRoots: [join(repo, 'node_modules/@types')],
        types: ['long', 'offscreencanvas', 'seedrandom'],
      },
      include: [join(repo, 'tests/types/*.ts')],
    }));
    let output = '';
    try {
      output = execFileSync(join(repo, 'node_modules/.bin/tsc'), ['-p', project], { encoding: 'utf8' });
    } catch (e) {
      output = `${e.stdout ?? ''}${e.stderr ?? ''}`;
    }
    assert.equal(output.trim(), '', `tsc --strict reported:\n${output}`);
  } finally {
    rmSync(project, { recursive: true, force: true });
  }
});
