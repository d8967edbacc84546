import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { uniqueName } from './env.js';

/**
 * Private PostgreSQL and Redis servers, and a fault-injecting TCP proxy, for the suites that
 * restart or break services: the shared ones on 5432/6379 serve every other suite and must stay up.
 */

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function pgBin(tool: string): string {
  const root = '/usr/lib/postgresql';
  const version = readdirSync(root).sort((a, b) => Number(b) - Number(a))[0];
  return `${root}/${version}/bin/${tool}`;
}

/** Runs a PostgreSQL tool as the postgres user when we are root (initdb refuses to run as root). */
function asPostgres(tool: string, args: string[]): void {
  const root = process.getuid?.() === 0;
  const result = root ? spawnSync('runuser', ['-u', 'postgres', '--', pgBin(tool), ...args], { encoding: 'utf8' }) : spawnSync(pgBin(tool), args, { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`${tool} ${args.join(' ')} failed: ${result.stderr || result.stdout}`);
}

/** Resolves once the child prints `text` on stdout; fails if it exits or stays silent past `timeoutMs`. */
function printed(child: ChildProcess, text: string, what: string, timeoutMs: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} did not start`)), timeoutMs);
    child.stdout!.on('data', (d: Buffer) => {
      if (d.toString().includes(text)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => reject(new Error(`${what} exited with ${code}`)));
  });
}

export class PrivatePostgres {
  readonly dir = `/tmp/${uniqueName('cct_pg')}`;
  port = 0;

  get adminUrl(): string {
    return `postgresql://postgres@127.0.0.1:${this.port}/postgres`;
  }

  async init(): Promise<this> {
    this.port = await freePort();
    mkdirSync(this.dir, { recursive: true });
    if (process.getuid?.() === 0) spawnSync('chown', ['postgres:postgres', this.dir]);
    asPostgres('initdb', ['-D', `${this.dir}/data`, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8']);
    this.start();
    return this;
  }

  start(): void {
    const options = `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c max_connections=200`;
    asPostgres('pg_ctl', ['-D', `${this.dir}/data`, '-o', options, '-l', `${this.dir}/log`, '-w', 'start']);
  }

  /** `immediate` is a crash as far as clients can tell: every connection drops at once. */
  stop(mode: 'fast' | 'immediate' = 'fast'): void {
    asPostgres('pg_ctl', ['-D', `${this.dir}/data`, '-m', mode, '-w', 'stop']);
  }

  destroy(): void {
    if (existsSync(`${this.dir}/data/postmaster.pid`)) this.stop('immediate');
    rmSync(this.dir, { recursive: true, force: true });
  }
}

export class PrivateRedis {
  port = 0;
  private child: ChildProcess | null = null;

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async init(): Promise<this> {
    this.port = await freePort();
    await this.start();
    return this;
  }

  /** Like the machine's own Redis: no persistence, so a restart loses everything it held. */
  async start(): Promise<void> {
    const child = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--maxmemory-policy', 'noeviction'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    await printed(child, 'Ready to accept connections', 'redis-server', 10_000);
  }

  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }
}

export type ProxyMode = 'pass' | 'refuse' | 'blackhole';

/**
 * A TCP proxy to a real server whose behaviour a test switches: `pass` forwards, `refuse` drops
 * every connection (and cuts the open ones mid-transfer), `blackhole` accepts and never answers.
 */
export class FaultProxy {
  port = 0;
  mode: ProxyMode = 'pass';
  /** Connections cut or swallowed since the proxy started. */
  faults = 0;
  private server: Server | null = null;
  private readonly open = new Set<Socket>();

  constructor(
    private readonly targetHost: string,
    private readonly targetPort: number,
  ) {}

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(): Promise<this> {
    this.server = createServer((client) => this.accept(client));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as { port: number }).port;
    return this;
  }

  setMode(mode: ProxyMode): void {
    this.mode = mode;
    if (mode === 'refuse') {
      for (const s of this.open) s.destroy();
    }
  }

  private accept(client: Socket): void {
    client.on('error', () => undefined);
    if (this.mode === 'refuse') {
      this.faults++;
      client.destroy();
      return;
    }
    if (this.mode === 'blackhole') {
      this.faults++;
      this.open.add(client);
      client.on('close', () => this.open.delete(client));
      return;
    }
    const upstream = connect(this.targetPort, this.targetHost);
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
    this.open.add(client);
    this.open.add(upstream);
    const forget = () => {
      if (this.open.delete(client) && this.mode === 'refuse') this.faults++;
      this.open.delete(upstream);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', forget);
    upstream.on('close', forget);
    client.pipe(upstream);
    upstream.pipe(client);
  }

  async close(): Promise<void> {
    for (const s of this.open) s.destroy();
    await new Promise((resolve) => this.server?.close(resolve));
  }
}

/**
 * An S3-compatible server of the suite's own (scripts/s3-test-server.mjs on a free port), for
 * suites that need the multipart calls that script adds to s3rver (resumable uploads), whatever
 * server TEST_S3_ENDPOINT names.
 */
export class PrivateS3 {
  port = 0;
  private child: ChildProcess | null = null;
  private readonly dir = `/tmp/${uniqueName('cct_s3')}`;

  get endpoint(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** `env`: the server's own settings, e.g. S3RVER_MAX_COPY_BYTES. */
  async start(env: Record<string, string> = {}): Promise<this> {
    this.port = await freePort();
    mkdirSync(this.dir, { recursive: true });
    const child = spawn(process.execPath, ['scripts/s3-test-server.mjs'], { env: { ...process.env, ...env, S3RVER_PORT: String(this.port), S3RVER_DIR: this.dir }, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    await printed(child, '"listening"', 'the S3 test server', 15_000);
    return this;
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (child && child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
