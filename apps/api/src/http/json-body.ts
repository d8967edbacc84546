import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import type { FastifyBodyParser, FastifyRequest, RawServerDefault } from 'fastify';
import secureJson from 'secure-json-parse';
import { ApiError, losslessReviver, mayHoldLongIntegers } from '#libs/contracts';
import { routeFlag } from './route-flags.js';

/**
 * Deepest nesting of arrays and objects a JSON body may have. JSON.parse copes with any depth,
 * but JSON.stringify, structuredClone and every recursive walk after it overflow the stack a few
 * thousand levels down; no workflow, model input or engine body comes near this.
 */
export const MAX_JSON_DEPTH = 256;

/** Whether JSON text nests deeper than `max`; a linear scan that skips over strings. */
export function jsonNestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

export function tooDeepError(): ApiError {
  return ApiError.invalid(`The JSON body nests deeper than ${MAX_JSON_DEPTH} levels.`);
}

/**
 * A JSON body that could not be parsed, handed to the route as its body instead of failing the
 * request. Fastify parses before Nest's guards run, so a parse error would otherwise answer before
 * authentication (an unauthenticated caller would hear about its body, not its credential), and
 * for a router call before the call exists (no usage record). The route raises it once the caller
 * is known: `requireJsonObject` for v2, the call itself for the router. A route that reads no body
 * (a cancel) ignores it, as it ignores any body.
 */
export class UnparsableBody {
  constructor(readonly error: Error) {}
}

const RAW_JSON = Symbol('rawJsonBody');

/**
 * The exact bytes of a router call's JSON body, kept by the parser: the partner receives the
 * caller's JSON unchanged, not a re-serialization of it. Other routes keep only the parsed value.
 */
export function rawJsonBody(request: FastifyRequest): Buffer | undefined {
  return (request as FastifyRequest & { [RAW_JSON]?: Buffer })[RAW_JSON];
}

/**
 * The JSON body parser of every route: Fastify's own (prototype-poisoning checks, body limit)
 * behind a depth check, so an absurdly nested body is a 400 in the contract's shape instead of a
 * stack overflow later. Registered through Nest so that Nest does not add its default one.
 */
export function installJsonDepthLimit(app: NestFastifyApplication, bodyLimit: number): void {
  const parse = app.getHttpAdapter().getInstance().getDefaultJsonParser('error', 'error');
  const parser: FastifyBodyParser<Buffer, RawServerDefault> = (request, body, done) => {
    const text = body.toString('utf8');
    // No body at all, though declared JSON (many clients send their JSON headers on every POST):
    // as if none was declared. A bodyless operation (cancel) then works; one that needs a body
    // refuses it in its own words.
    if (text.length === 0) return done(null, undefined);
    if (routeFlag(request, 'keepsRawJson') === true) (request as FastifyRequest & { [RAW_JSON]?: Buffer })[RAW_JSON] = body;
    const fail = (err: Error) => done(null, new UnparsableBody(err));
    if (jsonNestsDeeperThan(text, MAX_JSON_DEPTH)) return fail(tooDeepError());
    // Integers beyond 2^53 (the engine's seeds) keep every digit; the same poisoning checks apply.
    if (mayHoldLongIntegers(text)) {
      try {
        return done(null, secureJson.parse(text, losslessReviver as (key: string, value: unknown) => unknown, { protoAction: 'error', constructorAction: 'error' }));
      } catch {
        // Fastify's own parser below answers malformed JSON in its usual words.
      }
    }
    return parse(request, text, (err, value) => (err ? fail(isJson(text) ? poisonedError() : err) : done(null, value)));
  };
  // Every JSON media type (`application/json`, `application/vnd.api+json`, ...) goes to this parser.
  app.useBodyParser<RawServerDefault>('application/json', { bodyLimit }, parser);
  app.useBodyParser<RawServerDefault>(SUFFIXED_JSON, { bodyLimit }, parser);
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/** What the parser refuses in valid JSON: keys that would poison the objects built from it. */
function poisonedError(): ApiError {
  return new ApiError('invalid_json', 'The request body holds a __proto__ or constructor.prototype key, which is not accepted.');
}

const SUFFIXED_JSON = /^application\/[\w.+-]+\+json\s*(;|$)/i;
const JSON_TYPE = /^application\/([\w.+-]+\+)?json\s*(;|$)/i;

/** `application/json` or a `+json` type, parameters allowed. */
export function isJsonContentType(type: string | undefined): boolean {
  return JSON_TYPE.test((type ?? '').trim());
}

/** v2 JSON routes: the body must be declared as JSON and be an object. */
export function requireJsonObject(request: FastifyRequest, body: unknown): Record<string, unknown> {
  if (!isJsonContentType(request.headers['content-type'])) {
    throw new ApiError('unsupported_media_type', 'Send the body as application/json.');
  }
  if (body instanceof UnparsableBody) throw body.error;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw ApiError.invalid('The body must be a JSON object.');
  return body as Record<string, unknown>;
}
