import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { mintRouterToken } from '#libs/auth';
import type { AccountLimitsPatch } from '#libs/accounts';
import { call, type Reply } from '../support/http.js';
import { ROOT, type RunningProcess } from '../support/processes.js';
import { TEST_ROUTER_SECRET, TestStack } from '../support/stack.js';
import { startPartnerSim, type PartnerSim } from '../../apps/partner-sim/src/server.js';

// One router test world: a TestStack (own database and Redis prefix), the partner simulator
// (every provider of the catalog, on loopback, generations 200 times faster than the real ones),
// and a catalog for tests derived from the shipped one (same models and schema documents, shorter
// provider deadlines and poll intervals so timeouts can be provoked in a test's time).

/** Generations in tests take this share of their real time (a 60 s video: 300 ms). */
export const TEST_TIME_SCALE = 0.005;

export const CATALOG_DIR = path.join(ROOT, 'apps/api/src/router/catalog/data');
export const SHIPPED_CATALOG = path.join(CATALOG_DIR, 'catalog.json');

export interface CatalogFileEntry {
  id: string;
  input_schema: string;
  timeout_ms?: number;
  poll_interval_ms?: number;
  [field: string]: unknown;
}

export function shippedModels(): CatalogFileEntry[] {
  return (JSON.parse(readFileSync(SHIPPED_CATALOG, 'utf8')) as { models: CatalogFileEntry[] }).models;
}

/** Writes a catalog with absolute schema paths; `change` edits the entries (timeouts, removals). */
export function writeCatalog(dir: string, change: (models: CatalogFileEntry[]) => CatalogFileEntry[] = (m) => m): string {
  mkdirSync(dir, { recursive: true });
  const models = change(
    shippedModels().map((m) => ({
      ...m,
      input_schema: path.join(CATALOG_DIR, m.input_schema),
      timeout_ms: 5_000,
      ...(m.poll_interval_ms !== undefined ? { poll_interval_ms: 20 } : {}),
    })),
  );
  const file = path.join(dir, `catalog-${Date.now()}-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(file, JSON.stringify({ models }, null, 2));
  return file;
}

export interface Workspace {
  id: string;
  token: string;
}

export class RouterWorld {
  readonly stack: TestStack;
  sim!: PartnerSim;
  api!: RunningProcess;
  catalogFile = '';

  constructor(storage: 'local' | 's3' = 'local') {
    this.stack = new TestStack(storage);
  }

  async open(env: Record<string, string> = {}, change?: (models: CatalogFileEntry[]) => CatalogFileEntry[]): Promise<this> {
    await this.stack.open();
    this.sim = await startPartnerSim({ timeScale: TEST_TIME_SCALE });
    this.catalogFile = writeCatalog(this.stack.blobDir, change);
    this.api = await this.startApi(env);
    return this;
  }

  /** Another API process of this world (same database, Redis prefix and simulator). */
  startApi(env: Record<string, string> = {}): Promise<RunningProcess> {
    return this.stack.startApi({ ROUTER_CATALOG_FILE: this.catalogFile, ...this.sim.routerEnv(), ...env });
  }

  /** Price of a model of the shipped catalog, in cents (= credits). */
  price(model: string): bigint {
    return BigInt(shippedModels().find((m) => m.id === model)!.price_cents as number);
  }

  async workspace(settings: AccountLimitsPatch = {}, credits = 1_000_000n): Promise<Workspace> {
    const { id } = await this.stack.account({ credits });
    await this.stack.accounts.setLimits(id, {
      routerEnabled: true,
      routerMaxConcurrent: 64,
      routerSpendCapCents: 100_000,
      routerWindowCalls: 100_000,
      routerWindowSeconds: 3600,
      ...settings,
    });
    return { id, token: await mintRouterToken(TEST_ROUTER_SECRET, id) };
  }

  post(token: string, model: string, body: unknown, headers: Record<string, string> = {}, api = this.api, signal?: AbortSignal): Promise<Reply> {
    return call(`${api.url}/v1/models/${model}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
      body: typeof body === 'string' ? body : JSON.stringify(body),
      signal,
    });
  }

  get(token: string | null, pathAndQuery: string, headers: Record<string, string> = {}, api = this.api): Promise<Reply> {
    return call(`${api.url}${pathAndQuery}`, { headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers } });
  }

  /** Closes the world; an API that died on its own meanwhile fails the suite with its last words. */
  async close(): Promise<void> {
    const died = this.api && (this.api.child.exitCode !== null || this.api.child.signalCode !== null) && !this.stoppedOnPurpose.has(this.api);
    const lastWords = died ? this.api.output.slice(-30).join('\n') : '';
    await this.sim?.stop();
    await this.stack.close();
    if (died) throw new Error(`the API process died during the suite:\n${lastWords}`);
  }

  private readonly stoppedOnPurpose = new Set<RunningProcess>();

  /** Stops this world's main API on purpose (a test replacing it). */
  async stopApi(): Promise<void> {
    this.stoppedOnPurpose.add(this.api);
    await this.api.stop();
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Asserts a RouterErrorResponse with its status, bucket and headers. */
export function expectRouterError(reply: Reply, status: number, bucket: string): void {
  const summary = `${reply.status} ${reply.text.slice(0, 300)}`;
  expect(`${reply.status}:${reply.headers.get('x-service-error-type')}`).toBe(`${status}:${bucket}`);
  expect(reply.headers.get('x-service-request-id')).toMatch(UUID);
  expect(reply.headers.get('content-type')).toMatch(/^application\/json/);
  expect(typeof reply.body).toBe('object');
  expect(Object.keys(reply.body as object).sort()).toEqual(['detail', 'error_type']);
  expect({ error_type: reply.body.error_type, detailType: typeof reply.body.detail, summary }).toEqual({ error_type: bucket, detailType: 'string', summary });
}

/** Asserts a 422 RouterValidationErrorResponse and returns its entries. */
export function expectValidation(reply: Reply, bucket: string): { loc: unknown[]; msg: string; type: string; ctx?: unknown; input?: unknown }[] {
  expect(`${reply.status}:${reply.headers.get('x-service-error-type')}`).toBe(`422:${bucket}`);
  expect(reply.headers.get('x-service-request-id')).toMatch(UUID);
  expect(Object.keys(reply.body as object)).toEqual(['detail']);
  expect(Array.isArray(reply.body.detail)).toBe(true);
  for (const entry of reply.body.detail) {
    expect(Array.isArray(entry.loc)).toBe(true);
    expect(typeof entry.msg).toBe('string');
    expect(typeof entry.type).toBe('string');
  }
  return reply.body.detail;
}

export function expectRequestId(reply: Reply): string {
  const id = reply.headers.get('x-service-request-id');
  expect(id).toMatch(UUID);
  return id!;
}

/** Polls until `check` returns a value (not undefined/null/false) or the time runs out. */
export async function eventually<T>(check: () => Promise<T | null | undefined | false>, timeoutMs = 10_000): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== null && value !== undefined && value !== false) return value;
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** A valid standalone schema document for a model the test adds straight to the database. */
export function tinySchemaDocument(id: string): string {
  return JSON.stringify({
    openapi: '3.1.0',
    info: { title: id, version: '1' },
    paths: { [`/v1/models/${id}`]: { post: { requestBody: { required: true, content: { 'application/json': { schema: { type: 'object' } } } }, responses: { '200': { description: 'ok' } } } } },
  });
}
