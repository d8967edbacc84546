import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { ROOT } from './support.js';

// .ci/run on a machine whose services do not come up: stand-in commands on PATH play the machine,
// and `npm` leaves a mark if the suite was started anyway.
describe('.ci/run', () => {
  let dir = '';
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  function run(stubs: Record<string, string>) {
    dir = mkdtempSync(path.join(tmpdir(), 'ci-run-'));
    const all: Record<string, string> = { b3sum: 'exit 0', kubectl: 'exit 0', 'redis-server': 'exit 0', 'redis-cli': 'exit 0', pg_ctlcluster: 'exit 0', 'pg_isready': 'exit 0', sleep: 'exit 0', 'apt-get': 'exit 0', npm: `touch ${dir}/npm-ran`, ...stubs };
    for (const [name, body] of Object.entries(all)) writeFileSync(path.join(dir, name), `#!/bin/sh\n${body}\n`, { mode: 0o755 });
    const r = spawnSync('bash', [path.join(ROOT, '.ci/run')], { env: { PATH: `${dir}:/usr/bin:/bin` }, encoding: 'utf8', timeout: 30_000 });
    return { status: r.status, stderr: r.stderr, npmRan: existsSync(`${dir}/npm-ran`) };
  }

  it('starts the suite when PostgreSQL and Redis answer', () => {
    expect(run({})).toEqual({ status: 0, stderr: '', npmRan: true });
  });

  it('stops, naming it, when PostgreSQL does not come up', () => {
    expect(run({ pg_isready: 'exit 2' })).toEqual({ status: 1, stderr: 'PostgreSQL did not start on 127.0.0.1:5432\n', npmRan: false });
  });

  it('stops, naming it, when Redis does not come up', () => {
    expect(run({ 'redis-cli': 'exit 1' })).toEqual({ status: 1, stderr: 'Redis did not start on 127.0.0.1:6379\n', npmRan: false });
  });
});
