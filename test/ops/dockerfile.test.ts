import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from '@jest/globals';
import { ROLE_ENTRIES, ROOT, read, sourceExists } from './support.js';
import { SERVICE_NODE_FLAGS } from '#libs/runtime';

interface Instruction {
  op: string;
  args: string;
}
interface Stage {
  name: string;
  from: string;
  instructions: Instruction[];
}

/** Splits a Dockerfile into stages of instructions, joining continued lines and dropping comments. */
function parseDockerfile(text: string): Stage[] {
  const logical: string[] = [];
  let current = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    // Comment lines are removed before continuation, as Docker does.
    if (line.startsWith('#') || (line === '' && current === '')) continue;
    if (line.endsWith('\\')) {
      current += `${line.slice(0, -1)} `;
      continue;
    }
    logical.push(current + line);
    current = '';
  }
  const stages: Stage[] = [];
  for (const l of logical) {
    const [, op = '', args = ''] = /^(\S+)\s*(.*)$/.exec(l) ?? [];
    if (op.toUpperCase() === 'FROM') {
      const m = /^(\S+)(?:\s+AS\s+(\S+))?/i.exec(args)!;
      stages.push({ from: m[1]!, name: m[2] ?? String(stages.length), instructions: [] });
    } else if (stages.length > 0) {
      stages.at(-1)!.instructions.push({ op: op.toUpperCase(), args });
    }
  }
  return stages;
}

const stages = parseDockerfile(read('Dockerfile'));
const final = stages.at(-1)!;
const ops = (stage: Stage, op: string) => stage.instructions.filter((i) => i.op === op).map((i) => i.args);
const copyFrom = (stage: Stage) =>
  ops(stage, 'COPY').map((args) => {
    const from = /--from=(\S+)/.exec(args)?.[1];
    const paths = args.split(/\s+/).filter((w) => !w.startsWith('--'));
    return { from, sources: paths.slice(0, -1), dest: paths.at(-1)! };
  });

describe('Dockerfile', () => {
  it('builds in stages and ends on a slim Node 24 runtime', () => {
    expect(stages.length).toBeGreaterThanOrEqual(3);
    expect(read('Dockerfile')).toMatch(/ARG NODE_IMAGE=node:24-bookworm-slim/);
    expect(final.from).toBe('${NODE_IMAGE}');
  });

  it('compiles with the generated Prisma client, and checks every role entry point exists', () => {
    const build = stages.find((s) => ops(s, 'RUN').some((r) => r.includes('tsc -p tsconfig.build.json')));
    expect(build).toBeDefined();
    const run = ops(build!, 'RUN').join(' ');
    expect(run.indexOf('node scripts/prisma-generate.mjs')).toBeGreaterThanOrEqual(0);
    expect(run.indexOf('node scripts/prisma-generate.mjs')).toBeLessThan(run.indexOf('tsc -p tsconfig.build.json'));
    for (const entry of Object.values(ROLE_ENTRIES)) {
      expect(run).toContain(`test -f ${entry}`);
      expect(sourceExists(entry)).toBe(true);
    }
  });

  it('runs the final stage as a non-root user', () => {
    const users = ops(final, 'USER');
    expect(users.length).toBeGreaterThan(0);
    expect(users.at(-1)).not.toMatch(/^(root|0)(:|$)/);
    // Nothing after USER switches back.
    const lastUser = final.instructions.map((i) => i.op).lastIndexOf('USER');
    expect(final.instructions.slice(lastUser + 1).filter((i) => i.op === 'RUN')).toEqual([]);
  });

  it('ships production dependencies only', () => {
    const copies = copyFrom(final);
    const nodeModules = copies.filter((c) => c.sources.some((s) => s.includes('node_modules')));
    expect(nodeModules).toHaveLength(1);
    const source = stages.find((s) => s.name === nodeModules[0]!.from)!;
    expect(source).toBeDefined();
    // The stage that installs them starts fresh (not from the build stage) and omits dev packages.
    expect(stages.some((s) => s.name === source.from)).toBe(false);
    const installs = ops(source, 'RUN').filter((r) => /npm (ci|install)/.test(r));
    expect(installs.length).toBeGreaterThan(0);
    for (const r of installs) expect(r).toMatch(/--omit=dev/);
    // The final stage itself installs nothing with npm.
    expect(ops(final, 'RUN').filter((r) => /\bnpm\b/.test(r))).toEqual([]);
  });

  it('copies what the processes read at run time', () => {
    const dests = copyFrom(final).flatMap((c) => c.sources.map((s) => `${s}`));
    for (const needed of ['/app/dist', '/app/prisma/migrations', '/app/apps/api/src/router/catalog/data', 'package.json', 'docker/entrypoint.sh', 'docker/healthcheck.mjs']) {
      expect(dests).toContain(needed);
    }
    expect(ops(final, 'WORKDIR')).toEqual(['/app']);
  });

  it('starts through tini and the role entrypoint', () => {
    expect(JSON.parse(ops(final, 'ENTRYPOINT')[0]!)).toEqual(['/usr/bin/tini', '--', '/app/docker/entrypoint.sh']);
    expect(JSON.parse(ops(final, 'CMD')[0]!)).toEqual(['api']);
    const env = ops(final, 'ENV').join(' ');
    // Inside a container every server must listen beyond loopback.
    for (const v of ['API_HOST=0.0.0.0', 'WORKER_HOST=0.0.0.0', 'WEBHOOK_HOST=0.0.0.0', 'SIM_ENGINE_HOST=0.0.0.0', 'NODE_ENV=production']) expect(env).toContain(v);
  });
});

describe('.dockerignore', () => {
  const patterns = read('.dockerignore')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const ignored = (p: string) => {
    let result = false;
    for (const pattern of patterns) {
      const negate = pattern.startsWith('!');
      const body = negate ? pattern.slice(1) : pattern;
      const re = new RegExp(`^${body.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*\*\//g, '(.*/)?').replace(/\*/g, '[^/]*')}(/.*)?$`);
      if (re.test(p)) result = !negate;
    }
    return result;
  };

  it('keeps local state and build output out of the context', () => {
    for (const p of ['node_modules', 'scripts/node-runtime/node_modules', 'dist', '.env', '.data', 'libs/db/generated', '.git']) expect({ p, ignored: ignored(p) }).toEqual({ p, ignored: true });
  });

  it('keeps everything the build reads', () => {
    const needed = [
      'package.json',
      'package-lock.json',
      'tsconfig.json',
      'tsconfig.build.json',
      'prisma.config.ts',
      'prisma/schema.prisma',
      'prisma/migrations',
      'scripts/prisma-generate.mjs',
      'apps/api/src/main.ts',
      'libs/db/migrate-cli.ts',
      'apps/api/src/router/catalog/data/catalog.json',
      'docker/entrypoint.sh',
      'docker/healthcheck.mjs',
    ];
    for (const p of needed) expect({ p, ignored: ignored(p) }).toEqual({ p, ignored: false });
  });
});

describe('docker/entrypoint.sh', () => {
  // A stand-in for node that prints where it ran and what it was given.
  const fakeBin = mkdtempSync(path.join(tmpdir(), 'entrypoint-test-'));
  writeFileSync(path.join(fakeBin, 'node'), '#!/bin/sh\nprintf "%s\\n" "$PWD" "$@"\n');
  chmodSync(path.join(fakeBin, 'node'), 0o755);
  afterAll(() => rmSync(fakeBin, { recursive: true, force: true }));

  const run = (args: string[]) =>
    spawnSync('sh', [path.join(ROOT, 'docker/entrypoint.sh'), ...args], {
      cwd: tmpdir(),
      env: { PATH: `${fakeBin}${path.delimiter}${process.env.PATH ?? ''}` },
      encoding: 'utf8',
    });

  it('handles exactly the image roles', () => {
    const script = read('docker/entrypoint.sh');
    const labels = [...script.matchAll(/^\s*([a-z-]+)\)\s+exec node (?:\$SERVICE_NODE_FLAGS )?(\S+)/gm)].map((m) => [m[1], m[2]]);
    expect(Object.fromEntries(labels)).toEqual(ROLE_ENTRIES);
  });

  // The services get the V8 flags every other launcher gives them; one-off commands do not need them.
  const SERVICES = ['api', 'worker', 'webhooks', 'sim-engine'];

  it.each(Object.entries(ROLE_ENTRIES))('runs %s as node %s from the application root, passing arguments on', (role, entry) => {
    const result = run([role, 'accounts', 'list', '--json']);
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    const flags = SERVICES.includes(role) ? SERVICE_NODE_FLAGS : [];
    expect(result.stdout.trim().split('\n')).toEqual([path.resolve(ROOT), ...flags, entry, 'accounts', 'list', '--json']);
  });

  it('refuses an unknown role and a missing one with a usage message', () => {
    for (const args of [['scheduler'], []]) {
      const result = run(args);
      expect(result.status).toBe(64);
      expect(result.stderr).toMatch(/usage: .*api\|worker\|webhooks\|sim-engine\|migrate\|admin/);
      expect(result.stdout).toBe('');
    }
  });
});

describe('docker/healthcheck.mjs', () => {
  const check = (url: string) =>
    new Promise<number | null>((resolve) => {
      const child = spawn(process.execPath, [path.join(ROOT, 'docker/healthcheck.mjs'), url, '1000'], { stdio: 'ignore' });
      child.on('exit', (code) => resolve(code));
    });

  it('passes on 2xx and fails on an error status or no answer', async () => {
    const server = createServer((req, res) => {
      res.writeHead(req.url === '/readyz' ? 200 : 503).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      expect(await check(`http://127.0.0.1:${port}/readyz`)).toBe(0);
      expect(await check(`http://127.0.0.1:${port}/other`)).toBe(1);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
    expect(await check(`http://127.0.0.1:${port}/readyz`)).toBe(1);
  });
});
