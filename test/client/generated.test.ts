import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ROOT } from '../support/processes.js';

// The client's types are generated from the committed document (`npm run client:generate`); a
// document changed without regenerating them fails here, so the client never drifts from it.

const GENERATED = 'clients/typescript/src/generated/openapi.d.ts';

describe('clients/typescript generated types', () => {
  it('are what openapi-typescript makes of openapi/openapi.json today', () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'cc-client-'));
    try {
      const fresh = path.join(dir, 'openapi.d.ts');
      const cli = path.join(ROOT, 'node_modules/openapi-typescript/bin/cli.js');
      const run = spawnSync(process.execPath, [cli, 'openapi/openapi.json', '-o', fresh], { cwd: ROOT, encoding: 'utf8' });
      expect(run.stderr).not.toMatch(/error/i);
      expect(run.status).toBe(0);
      const stale = readFileSync(path.join(ROOT, GENERATED), 'utf8') !== readFileSync(fresh, 'utf8');
      expect(stale ? `${GENERATED} is stale: run \`npm run client:generate\`` : 'up to date').toBe('up to date');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
