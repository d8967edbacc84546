import type { Job } from '#libs/db';

/** A `jobs` row from raw SQL in the shape Prisma gives it (snake_case columns to camelCase). */
export function jobFromRow(row: Record<string, unknown>): Job {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(row)) out[k.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase())] = v;
  return out as unknown as Job;
}
