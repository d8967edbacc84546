import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { mintRouterToken } from '#libs/auth';
import type { AccountLimitsPatch } from '#libs/accounts';
import { call, type Reply } from '../support/http.js';
import { ROOT, type RunningProcess } from '../support/processes.js';
import { TEST_ROUTER_SECRET, TestStack } from '../support/stack.js';
import { startPartners, type Partners } from './fake-partners.js';

// One router test world: a TestStack (own database and Redis prefix), the three fake partners,
// and a catalog for tests derived from the shipped one (same models and schema documents, shorter
// provider deadlines and poll intervals so timeouts can be provoked in a test's time).

export const CATALOG_DIR = path.join(ROOT, 'apps/api/src/router/catalog/data');
export const SHIPPED_CATALOG = path.join(CATALOG_DIR, 'catalog.json');

interface CatalogFileEntry {
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
  readonly stack = new TestStack();
  partners!: Partners;
  api!: RunningProcess;
  catalogFile = '';

  async open(env: Record<string, string> = {}, change?: (models: CatalogFileEntry[]) => CatalogFileEntry[]): Promise<this> {
    await this.stack.open();
    this.partners = await startPartners();
    this.catalogFile = writeCatalog(this.stack.blobDir, change);
    this.api = await this.startApi(env);
    return this;
  }

  /** Another API process of this world (same database, Redis prefix and partners). */
  startApi(env: Record<string, string> = {}): Promise<RunningProcess> {
    return this.stack.startApi({ ROUTER_CATALOG_FILE: this.catalogFile, ROUTER_UPSTREAM_BASE_URLS: this.partners.upstreamEnv, ...env });
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

  async close(): Promise<void> {
    await this.partners?.stop();
    await this.stack.close();
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
