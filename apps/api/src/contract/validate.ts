import type { z } from 'zod';

/**
 * Parses `value` with an operation's schema; a failure leaves as the surface's own validation
 * error, built by `refuse` from zod's issues (each surface words and codes them its own way).
 */
export function parseWith<T extends z.ZodType>(schema: T, value: unknown, refuse: (issues: z.core.$ZodIssue[]) => Error): z.output<T> {
  const result = schema.safeParse(value);
  if (!result.success) throw refuse(result.error.issues);
  return result.data;
}
