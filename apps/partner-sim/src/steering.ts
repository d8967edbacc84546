// How a request steers the simulator: directives written anywhere in its text fields, e.g. a
// prompt "a cat [[slow:800]] [[refuse]]". Every provider understands the same words and answers
// each in its own native way (see README.md):
//   slow:N         the generation takes N ms (a synchronous provider answers after N ms)
//   hang           the provider never answers the submission (or the call)
//   refuse         input moderation: the provider refuses the request on content-policy grounds
//   refuse-output  output moderation: the provider generated, then withheld or flagged the result
//   invalid        the provider's own validation error, in its own shape
//   fail           the provider's own failure (a 500, or a generation that ends failed)
//   busy           503, overloaded
//   ratelimit      429, the router's account is over the provider's rate limit
//   nocredit       the router's account at the provider has no credit left
//   denied         the provider refuses the credentials (even right ones), naming the key it got
//   garbage        200 with a body that is not what the provider documents (not JSON, truncated)
//   html           200 text/html, a gateway's error page
//   empty          200 with no body
//   gw504          504 from the provider's gateway
//   weird          a generation state the provider never documented
//   lost           a status poll that no longer knows the generation
//   throttled:N    (runway) the task waits N ms as THROTTLED before it runs
//   size:N         result media of N bytes
//   mediafail      the result media URL answers 404
//   json           (elevenlabs) 200 with a JSON document instead of audio

export type Steering = ReadonlyMap<string, number>;

const DIRECTIVE = /\[\[([a-z0-9-]+)(?::(\d+))?\]\]/g;

/** Directives found in every string of a JSON value (or of form fields). */
export function steeringOf(values: unknown): Steering {
  const found = new Map<string, number>();
  const visit = (v: unknown, depth: number): void => {
    if (depth > 32) return;
    if (typeof v === 'string') {
      for (const m of v.matchAll(DIRECTIVE)) found.set(m[1]!, m[2] ? Number(m[2]) : 0);
    } else if (Array.isArray(v)) {
      for (const item of v) visit(item, depth + 1);
    } else if (v && typeof v === 'object') {
      for (const item of Object.values(v)) visit(item, depth + 1);
    }
  };
  visit(values, 0);
  return found;
}
