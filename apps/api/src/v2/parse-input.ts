import type { z } from 'zod';
import { ApiError } from '#libs/contracts';
import { parseWith } from '../contract/index.js';

/**
 * A v2 query, header or JSON body, parsed by the schema its operation declares. The schemas word
 * each refusal, so the first one is the message of the `invalid_request` (with `details`, when given).
 */
export function parseV2Input<T extends z.ZodType>(schema: T, value: unknown, details?: Record<string, unknown>): z.output<T> {
  return parseWith(schema, value, (issues) => ApiError.invalid(issues[0]!.message, details));
}
