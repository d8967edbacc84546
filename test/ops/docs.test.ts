import { describe, expect, it } from '@jest/globals';
import { read } from './support.js';

// How docs/operations.md names each dependency a readiness probe checks.
const DOC_NAMES: Record<string, string> = { engine: 'engine', postgres: 'PostgreSQL', redis: 'Redis', storage: 'storage', listen: 'listens' };

/** The checks a readiness probe runs, by the names its JSON answer uses. */
function apiReadyChecks(): string[] {
  return [...read('apps/api/src/health/health.controller.ts').matchAll(/check\('([a-z]+)'/g)].map((m) => m[1]!);
}
/** The keys `readiness()` of a process class returns, one per line. */
function readinessKeys(file: string): string[] {
  const source = read(file);
  const body = /private async readiness\(\)[^{]*\{([\s\S]*?)\n {2}\}/.exec(source)?.[1];
  if (!body) throw new Error(`readiness() not found in ${file}`);
  return [...body.matchAll(/^\s+([a-z]+):/gm)].map((m) => m[1]!);
}
const workerReadyChecks = () => readinessKeys('apps/worker/src/worker-process.ts');
const webhooksReadyChecks = () => readinessKeys('apps/webhooks/src/webhooks-process.ts');

function probeRow(role: string): string {
  const row = read('docs/operations.md').split('\n').find((l) => l.startsWith(`| ${role} `));
  if (!row) throw new Error(`docs/operations.md has no probe row for ${role}`);
  return row;
}

describe('docs/operations.md', () => {
  it.each([
    ['api', apiReadyChecks],
    ['worker', workerReadyChecks],
    ['webhooks', webhooksReadyChecks],
  ])('lists every dependency the %s readiness probe checks', (role, checks) => {
    const names = checks();
    expect(names.length).toBeGreaterThanOrEqual(2);
    const ready = probeRow(role).split('|')[4]!;
    for (const name of names) expect({ role, name, listed: ready.includes(DOC_NAMES[name] ?? name) }).toEqual({ role, name, listed: true });
  });
});
