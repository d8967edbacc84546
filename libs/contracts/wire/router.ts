import { z } from 'zod';
import { ROUTER_BUCKETS } from '../router.js';
import { IDEMPOTENCY_KEY } from '../ids.js';
import { additive, checkedLater, component, parsedFromText } from './components.js';

// The model router's shapes (/v1/models), as Comfy's public router documents name them.

const SEGMENT = /^[a-z0-9]+([._-][a-z0-9]+)*$/;

export const RouterProviderSegmentSchema = component('RouterProviderSegment', z.string().regex(SEGMENT).max(64));
export const RouterModelSegmentSchema = component('RouterModelSegment', z.string().regex(SEGMENT).max(128));
export const RouterModelIdSchema = component('RouterModelId', z.string().regex(/^[a-z0-9]+([._-][a-z0-9]+)*\/[a-z0-9]+([._-][a-z0-9]+)*$/).max(193));
export const RouterPageCursorSchema = component(
  'RouterPageCursor',
  z.string().regex(/^[A-Za-z0-9._~+/=-]+$/).min(1).max(512).describe('Opaque; only round-trip it.'),
);
export const RouterErrorTypeSchema = component(
  'RouterErrorType',
  z.enum(ROUTER_BUCKETS).describe('Closed set of 15 buckets; treat an unrecognized one as `internal_error`.'),
);
export const RouterChargesOnPolicyRejectionSchema = component(
  'RouterChargesOnPolicyRejection',
  z
    .enum(['yes', 'no', 'unknown'])
    .describe(
      'Whether a call the model refuses on content-policy grounds is still charged; `unknown` where the provider bills some refusals (of what it generated) and not others (of the input).',
    ),
);
export const RouterModelBillingSchema = component('RouterModelBilling', z.object({ charges_on_policy_rejection: RouterChargesOnPolicyRejectionSchema }));
export const RouterModelListEntrySchema = component(
  'RouterModelListEntry',
  z.object({ id: RouterModelIdSchema, provider: RouterProviderSegmentSchema, model: RouterModelSegmentSchema, billing: RouterModelBillingSchema }),
);
export const RouterModelDetailSchema = component(
  'RouterModelDetail',
  RouterModelListEntrySchema.extend({ input_schema_url: z.url().regex(/^https:\/\//).max(2048).optional() }),
);
export const RouterModelListResponseSchema = component(
  'RouterModelListResponse',
  z.object({
    data: z.array(RouterModelListEntrySchema),
    has_more: z.boolean().describe('Keep walking while true.'),
    next_cursor: RouterPageCursorSchema.optional(),
    limit: z.int().min(1).max(100),
  }),
);
export const ROUTER_DEFAULT_PAGE_LIMIT = 20;
export const ROUTER_MAX_PAGE_LIMIT = 100;

const ROUTER_LIMIT_REFUSED = 'limit must be an integer.';

/**
 * The catalog page's query, from its text on the wire. `limit`: the last of repeated values, an
 * optionally signed integer (spaces around it allowed), clamped; the document shows the integer.
 * `cursor`: one string here, documented as RouterPageCursor; its signature is checked by the list.
 */
export const RouterModelListQuerySchema = z.object({
  cursor: checkedLater(z.string({ error: "Pass one cursor, the previous page's next_cursor." }), 'RouterPageCursor')
    .optional()
    .describe("The previous page's `next_cursor`."),
  limit: z
    .preprocess(
      (value) => (Array.isArray(value) ? value[value.length - 1] : value),
      z
        .string({ error: ROUTER_LIMIT_REFUSED })
        .trim()
        .regex(/^[+-]?\d+$/, ROUTER_LIMIT_REFUSED)
        .transform((text) => {
          const n = Number(text);
          return n <= 0 ? ROUTER_DEFAULT_PAGE_LIMIT : Math.min(n, ROUTER_MAX_PAGE_LIMIT);
        })
        .pipe(z.int()),
    )
    .optional()
    .describe(`Clamped to ${ROUTER_MAX_PAGE_LIMIT}, zero or negative selects the default (${ROUTER_DEFAULT_PAGE_LIMIT}).`),
});
export const RouterModelInputSchema = component('RouterModelInput', z.record(z.string(), z.unknown()).describe("The partner model's native JSON input, forwarded unchanged."));
export const RouterModelOutputSchema = component('RouterModelOutput', z.record(z.string(), z.unknown()).describe("The partner model's native output, returned unchanged."));
export const RouterModelInputSchemaDocumentSchema = component(
  'RouterModelInputSchemaDocument',
  z.record(z.string(), z.unknown()).describe('A standalone OpenAPI document for the body the call route accepts.'),
);
export const RouterErrorResponseSchema = component(
  'RouterErrorResponse',
  z.object({ detail: z.string().describe('Human-readable, safe to show; not for parsing.'), error_type: RouterErrorTypeSchema }),
);
export const RouterValidationErrorDetailSchema = component(
  'RouterValidationErrorDetail',
  z.object({
    loc: z.array(z.union([z.string(), z.number()])),
    msg: z.string(),
    type: z.string().describe('Provider-specific reason, passed through (an open string).'),
    ctx: z.record(z.string(), z.unknown()).optional(),
    input: z.unknown().optional(),
  }),
);
export const RouterValidationErrorResponseSchema = component('RouterValidationErrorResponse', z.object({ detail: z.array(RouterValidationErrorDetailSchema) }));

const IDEMPOTENCY_KEY_REFUSED = 'Idempotency-Key must be 1 to 255 visible ASCII characters.';

/** Header of the call route: what makes a retry safe (records kept 24 h). A repeated header reads as its values joined. */
export const RouterIdempotencyKeySchema = z
  .preprocess((value) => (Array.isArray(value) ? value.join(',') : value), z.string({ error: IDEMPOTENCY_KEY_REFUSED }).regex(IDEMPOTENCY_KEY, IDEMPOTENCY_KEY_REFUSED))
  .optional()
  .describe(additive("as the public router: a retry with the same key replays the first call's result."));

/**
 * `If-None-Match` of a model's input schema (RFC 9110): `*`, or the entity tags listed, weak ones
 * as their opaque tag. Text that names no tag matches nothing; it is never refused.
 */
export const RouterIfNoneMatchSchema = parsedFromText(
  z
    .preprocess(
      (value) => (Array.isArray(value) ? value.join(',') : value),
      z
        .string()
        .transform((text): '*' | string[] => (text.trim() === '*' ? '*' : (text.match(/(?:W\/)?"[^"]*"/g) ?? []).map((tag) => tag.replace(/^W\//, ''))))
        .pipe(z.union([z.literal('*'), z.array(z.string())])),
    )
    .optional()
    .describe('An ETag from an earlier 200; `*` matches any.'),
);
