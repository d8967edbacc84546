import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { ADAPTER_KINDS, type AdapterKind } from '../adapters/adapter.js';
import { compileInputSchema, SchemaDocumentError } from './input-schema.js';
import { isModelId } from './model-id.js';

// The catalog file (catalog/data/catalog.json by default) and the schema documents it names, checked
// as a whole before anything reaches the database: a bad entry stops the API with its name.

// The public router's values: whether a content-policy refusal is charged; `unknown` where the provider's
// billing depends on where it refused (its adapter then says, per call: see SettlementService).
export const CHARGES_ON_POLICY_REJECTION = ['yes', 'no', 'unknown'] as const;

const entrySchema = z
  .object({
    id: z.string().refine(isModelId, 'must be provider/model in lowercase segments (a-z, 0-9, . _ -)'),
    adapter: z.enum(ADAPTER_KINDS),
    upstream_url: z.string().refine((v) => /^https?:\/\//.test(v) && URL.canParse(v), 'must be an http(s) URL'),
    input_schema: z.string().min(1),
    price_cents: z.number().int().min(0),
    charges_on_policy_rejection: z.enum(CHARGES_ON_POLICY_REJECTION),
    timeout_ms: z.number().int().min(1).default(300_000),
    poll_interval_ms: z.number().int().min(1).default(1_000),
  })
  .strict();

const fileSchema = z.object({ models: z.array(entrySchema).min(1) }).passthrough();

export interface CatalogEntry {
  id: string;
  provider: string;
  model: string;
  adapterKind: AdapterKind;
  upstreamUrl: string;
  inputSchema: unknown;
  inputSchemaText: string;
  priceCents: number;
  chargesOnPolicyRejection: string;
  timeoutMs: number;
  pollIntervalMs: number;
}

export class CatalogFileError extends Error {}

/** Swaps the origin of an upstream URL for an operator's base URL (its path is kept as a prefix). */
export function overrideUpstream(url: string, base: string | undefined): string {
  if (!base) return url;
  const original = new URL(url);
  const replacement = new URL(base);
  const prefix = replacement.pathname.replace(/\/+$/, '');
  return `${replacement.origin}${prefix}${original.pathname}${original.search}`;
}

export async function readCatalogFile(file: string, upstreamBaseUrls: Record<string, string>): Promise<CatalogEntry[]> {
  const fullPath = path.resolve(file);
  let raw: unknown;
  try {
    raw = JSON.parse(await readFile(fullPath, 'utf8'));
  } catch (err) {
    throw new CatalogFileError(`Router catalog ${fullPath}: ${(err as Error).message}`);
  }
  const parsed = fileSchema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new CatalogFileError(`Router catalog ${fullPath}:\n  ${problems.join('\n  ')}`);
  }
  const seen = new Set<string>();
  const entries: CatalogEntry[] = [];
  for (const m of parsed.data.models) {
    if (seen.has(m.id)) throw new CatalogFileError(`Router catalog ${fullPath}: ${m.id} is declared twice`);
    seen.add(m.id);
    const schemaPath = path.resolve(path.dirname(fullPath), m.input_schema);
    let text: string;
    try {
      text = await readFile(schemaPath, 'utf8');
      compileInputSchema(text, `/v1/models/${m.id}`);
    } catch (err) {
      const why = err instanceof SchemaDocumentError ? err.message : (err as Error).message;
      throw new CatalogFileError(`Router catalog ${fullPath}: input schema of ${m.id} (${schemaPath}): ${why}`);
    }
    const [provider, model] = m.id.split('/') as [string, string];
    entries.push({
      id: m.id,
      provider,
      model,
      adapterKind: m.adapter,
      upstreamUrl: overrideUpstream(m.upstream_url, upstreamBaseUrls[provider]),
      inputSchema: JSON.parse(text),
      inputSchemaText: text,
      priceCents: m.price_cents,
      chargesOnPolicyRejection: m.charges_on_policy_rejection,
      timeoutMs: m.timeout_ms,
      pollIntervalMs: m.poll_interval_ms,
    });
  }
  return entries;
}
