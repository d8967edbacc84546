import { z } from 'zod';

// Every wire schema with a name is registered here under its OpenAPI component name: the
// document generator (apps/api/src/contract) turns the registry into `components.schemas` and
// references them by name wherever an operation uses them. Names live only here, never in
// `.meta({ id })`, so zod's global registry holds descriptions and nothing else.

export const COMPONENTS: [id: string, schema: z.ZodType][] = [];

/** Registers `schema` as the component `id` and returns it unchanged. */
export function component<T extends z.ZodType>(id: string, schema: T): T {
  COMPONENTS.push([id, schema]);
  return schema;
}

/** A field a client should show as an addition of this service to Comfy's public v2 contract. */
export const additive = (text: string): string => `Additive: ${text}`;

export const uuid = () => z.guid();
export const dateTime = () => z.iso.datetime();
/** Host-relative links (`/api/v2/jobs/...`), the mount prefix included. */
export const uriReference = () => z.string().meta({ format: 'uri-reference' });
export const int64 = () => z.int().meta({ format: 'int64' });
export const BLAKE3 = /^blake3:[0-9a-f]{64}$/;

/** One page of a list: `has_more` says whether to follow `next_cursor`. */
export function pageOf<T extends z.ZodType>(item: T, cursor: z.ZodType = z.string().describe('Opaque; pass as `cursor` for the next page.')) {
  return z.object({
    data: z.array(item),
    has_more: z.boolean(),
    next_cursor: cursor.optional(),
    limit: z.int().min(1).max(100),
  });
}

const DOCUMENTED_AS = new WeakMap<z.ZodType, string>();

/**
 * A field checked loosely at the edge (its owner validates it in its own words later, such as a
 * workflow) but documented as the component `id`. The generator reads this through `documentedAs`.
 */
export function checkedLater<T extends z.ZodType>(schema: T, id: string): T {
  DOCUMENTED_AS.set(schema, id);
  return schema;
}

export function documentedAs(schema: z.ZodType): string | undefined {
  return DOCUMENTED_AS.get(schema);
}

const DOCUMENTED_AS_TEXT = new WeakSet<z.ZodType>();

/**
 * A query parameter or header read from its text into something else (a comma-separated list, a
 * duration in seconds): documented as the text a client sends (zod's input side), not as what the
 * server makes of it.
 */
export function parsedFromText<T extends z.ZodType>(schema: T): T {
  DOCUMENTED_AS_TEXT.add(schema);
  return schema;
}

export function isParsedFromText(schema: z.ZodType): boolean {
  return DOCUMENTED_AS_TEXT.has(schema);
}
