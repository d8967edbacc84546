import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from '@jest/globals';
import { ROOT } from './support.js';

// .ci/run on a machine whose services do not come up: stand-in commands on PATH play the machine,
// and `npm` leaves a mark if the suite was started anyway.
describe('.ci/run', () => {
  let dir = '';
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true });
    dir = '';
  });

  function run(stubs: Record<string, string>, root = ROOT) {
    dir ||= mkdtempSync(path.join(tmpdir(), 'ci-run-'));
    const all: Record<string, string> = { b3sum: 'exit 0', kubectl: 'exit 0', 'redis-server': 'exit 0', 'redis-cli': 'exit 0', pg_ctlcluster: 'exit 0', 'pg_isready': 'exit 0', sleep: 'exit 0', 'apt-get': 'exit 0', npm: `touch ${dir}/npm-ran`, ...stubs };
    for (const [name, body] of Object.entries(all)) writeFileSync(path.join(dir, name), `#!/bin/sh\n${body}\n`, { mode: 0o755 });
    const r = spawnSync('bash', [path.join(root, '.ci/run')], { env: { PATH: `${dir}:/usr/bin:/bin` }, encoding: 'utf8', timeout: 30_000 });
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

  // A checkout of its own, so the suite stand-in can change a tracked file without touching ours.
  function checkout(): string {
    dir = mkdtempSync(path.join(tmpdir(), 'ci-run-'));
    const repo = path.join(dir, 'repo');
    mkdirSync(path.join(repo, '.ci'), { recursive: true });
    copyFileSync(path.join(ROOT, '.ci/run'), path.join(repo, '.ci/run'));
    writeFileSync(path.join(repo, 'package-lock.json'), '{}\n');
    const git = (...args: string[]) => execFileSync('git', ['-c', 'user.name=ci', '-c', 'user.email=ci@localhost', ...args], { cwd: repo, stdio: 'pipe' });
    git('init', '-q');
    git('add', '.');
    git('commit', '-q', '-m', 'start');
    // A developer's own edit, there before the run: not the suite's doing.
    writeFileSync(path.join(repo, '.ci/run'), '# edited\n', { flag: 'a' });
    return repo;
  }

  it('fails, naming the file, when the suite changes a tracked file', () => {
    const repo = checkout();
    expect(run({ npm: 'echo changed >> package-lock.json' }, repo)).toEqual({ status: 1, stderr: 'npm test changed tracked files:\n M .ci/run\n M package-lock.json\n', npmRan: false });
  });

  it('passes when the suite leaves tracked files alone, whatever it adds beside them', () => {
    const repo = checkout();
    expect(run({ npm: 'touch .data-new-file' }, repo)).toEqual({ status: 0, stderr: '', npmRan: false });
  });
});
