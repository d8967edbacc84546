import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from '@jest/globals';
import { ROLE_ENTRIES, ROOT } from './support.js';

// The long-running roles and the migration step read the same configuration. A bad value must stop
// each with the variable's name and EX_CONFIG (78), the same way, so an orchestrator's logs say
// what to fix instead of showing a stack trace.
describe('roles started with a bad setting', () => {
  it.each(['api', 'worker', 'webhooks', 'migrate'] as const)('%s names the variable and exits 78', (role) => {
    const r = spawnSync(process.execPath, [path.join(ROOT, ROLE_ENTRIES[role])], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: 'mysql://somewhere/db' },
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect({ role, status: r.status }).toEqual({ role, status: 78 });
    expect(r.stderr).toContain('DATABASE_URL: must be a URL');
    expect(r.stderr).not.toMatch(/\n\s+at /);
  });
});
