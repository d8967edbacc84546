// Jest global teardown: writes .data/reliability.md (ignored by git) from the rows the reliability
// suites left in .data/reliability/. Sections a partial run did not touch keep their last recorded
// rows and date. docs/reliability.md, the committed one, is updated by hand from it when figures change.
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DIR = path.join(ROOT, '.data', 'reliability');

export default function writeReliabilityReport() {
  if (!existsSync(DIR)) return;
  const sections = readdirSync(DIR)
    .filter((f) => f.endsWith('.json'))
    .map((f) => JSON.parse(readFileSync(path.join(DIR, f), 'utf8')))
    .sort((a, b) => a.order - b.order);
  if (sections.length === 0) return;
  const cell = (s) => String(s).replace(/\|/g, '\\|').replace(/\n/g, ' ');
  const lines = [
    '# Reliability and security',
    '',
    'Written by the test suite (`npm test`, the suites under `test/reliability/`) on every run.',
    'Each row is one fault or kind of input, how many times it was tried against the real processes',
    '(api, worker, sim-engine over PostgreSQL, Redis and an S3-compatible server), and what was observed.',
    'The longer soak is `npm run soak` (see docs/operations.md).',
    '',
    `Machine: ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}.`,
    '',
  ];
  for (const s of sections) {
    lines.push(`## ${s.section}`, '', `Last run ${s.at.slice(0, 16).replace('T', ' ')} UTC.`, '');
    lines.push('| Fault or input | Tried | Outcome | Held |', '| --- | ---: | --- | :---: |');
    for (const r of s.rows) lines.push(`| ${cell(r.tried)} | ${r.count} | ${cell(r.outcome)} | ${r.held ? 'yes' : '**no**'} |`);
    lines.push('');
  }
  writeFileSync(path.join(ROOT, '.data', 'reliability.md'), lines.join('\n'));
}
