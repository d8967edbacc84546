import { STATUS_CODES as HTTP_REASONS } from 'node:http';
import type { Duplex } from 'node:stream';
import type { FastifyRequest } from 'fastify';
import { ApiError, ERROR_STATUS, type ErrorCode } from '#libs/contracts';
import { mountedRenderer } from './error-renderer.js';

// What anything thrown means for the client (status, code, message), whatever surface answers it:
// the surface's renderer (error-renderer.ts) then gives it its shape. Errors can reach us from Nest
// (the exception filter) or from Fastify before a handler runs (body parsing, unknown routes).

export interface ErrorShape {
  status: number;
  code: string;
  message: string;
  details?: Record<string, unknown>;
  headers?: Record<string, string>;
}

const STATUS_CODES: Record<number, ErrorCode> = {
  400: 'invalid_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  405: 'method_not_allowed',
  406: 'invalid_request',
  409: 'invalid_request',
  411: 'invalid_request',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  416: 'range_not_satisfiable',
  422: 'invalid_request',
  429: 'rate_limited',
  501: 'not_implemented',
  503: 'service_unavailable',
};

const FRIENDLY: Partial<Record<ErrorCode, string>> = {
  unauthorized: 'Missing or invalid credentials.',
  forbidden: 'You are not allowed to do this.',
  not_found: 'Not found.',
  method_not_allowed: 'Method not allowed on this route.',
  payload_too_large: 'The request body is larger than allowed.',
  unsupported_media_type: 'Unsupported content type for this route.',
  range_not_satisfiable: 'The requested range is not satisfiable.',
  service_unavailable: 'A dependency is temporarily unavailable; retry shortly.',
};

interface ErrorLike {
  statusCode?: number;
  status?: number;
  code?: string;
  name?: string;
  message?: string;
  getStatus?: () => number;
  getResponse?: () => unknown;
}

// Redis (ioredis), PostgreSQL (pg under Prisma's adapter, whose messages Prisma passes on) and
// sockets: refused, reset or dropped connections, a pool that cannot connect, a server restarting.
const TRANSIENT = new RegExp(
  [
    'ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|connect ECONN|Stream isn\'t writeable|Connection is closed',
    "Can't reach database|P1001|P1017|Server has closed the connection|Connection terminated|not queryable",
    'timeout exceeded when trying to connect|terminating connection due to administrator command',
    'the database system is (starting up|shutting down|in recovery mode)|\\b(57P01|57P03|08001|08003|08006)\\b',
  ].join('|'),
  'i',
);

/** A dependency that is down or failing, not a fault of ours or the client's: worth a retry. */
function isTransient(e: ErrorLike & { $metadata?: { httpStatusCode?: number } }): boolean {
  // The S3 SDK: a request that timed out (S3_REQUEST_TIMEOUT_MS), or the store answering 5xx.
  if (e.name === 'TimeoutError' || (e.$metadata?.httpStatusCode ?? 0) >= 500) return true;
  return TRANSIENT.test(`${e.code ?? ''} ${e.message ?? ''}`);
}

/** Maps anything thrown to the shape we send; `null` status 500 means "unexpected". */
export function toErrorShape(err: unknown): ErrorShape & { unexpected: boolean } {
  if (err instanceof ApiError) {
    return { status: err.status, code: err.code, message: err.message, details: err.details, headers: err.headers, unexpected: false };
  }
  const e = (err ?? {}) as ErrorLike;
  const status = typeof e.getStatus === 'function' ? e.getStatus() : (e.statusCode ?? e.status);
  if (typeof status === 'number' && status >= 400 && status < 500) {
    let code: ErrorCode = STATUS_CODES[status] ?? 'invalid_request';
    let message = FRIENDLY[code] ?? 'The request is invalid.';
    if (status === 400 && (e.name === 'SyntaxError' || /JSON/i.test(e.code ?? '') || /JSON/.test(e.message ?? ''))) {
      code = 'invalid_json';
      message = 'The request body is not valid JSON.';
    } else if (status === 400 || status === 406 || status === 422) {
      message = sanitize(e.message) ?? message;
    }
    return { status, code, message, unexpected: false };
  }
  if (isTransient(e)) {
    return { status: 503, code: 'service_unavailable', message: FRIENDLY.service_unavailable!, headers: { 'retry-after': '1' }, unexpected: true };
  }
  return { status: ERROR_STATUS.upstream_error, code: 'upstream_error', message: 'Something went wrong on our side. Retry later.', unexpected: true };
}

function sanitize(message: string | undefined): string | undefined {
  if (!message) return undefined;
  // Fastify and Nest messages are safe to show, but keep them short and single-line.
  return message.replace(/\s+/g, ' ').slice(0, 300);
}

/**
 * The client hung up while its request was still being read (a cut-off upload, a slow sender past
 * its deadline): the error is the client's, and there is no one left to answer.
 */
export function clientHungUp(request: FastifyRequest, err: unknown): boolean {
  const e = (err ?? {}) as ErrorLike;
  // The connection, not the request stream: a request whose body was read to the end is destroyed
  // too, and an ECONNRESET from a dependency (S3, the engine) must still get its 503.
  const socket = request.raw.socket as { destroyed?: boolean } | null;
  const gone = !socket || socket.destroyed === true;
  return gone && (e.message === 'aborted' || e.code === 'ECONNRESET' || e.code === 'ERR_STREAM_PREMATURE_CLOSE');
}

/** Errors Fastify's router raises before a route is found (its `frameworkErrors`). */
export function frameworkErrorShape(err: { code?: string }): ErrorShape {
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') return { status: 414, code: 'invalid_request', message: 'A path segment is too long.' };
  if (err.code === 'FST_ERR_BAD_URL') return { status: 400, code: 'invalid_request', message: 'The URL is not valid (bad percent-encoding).' };
  return { status: 400, code: 'invalid_request', message: 'The request is invalid.' };
}

/** The path of the request line the parser refused, when it kept the bytes it was reading. */
function rawRequestPath(err: { rawPacket?: unknown }): string | null {
  if (!Buffer.isBuffer(err.rawPacket)) return null;
  return /^[A-Z]+ (\/\S*)/.exec(err.rawPacket.subarray(0, 2048).toString('latin1'))?.[1] ?? null;
}

/**
 * Node's `clientError`: bytes that are not HTTP, headers too large, or a client that did not send
 * its request in time. There is no request to answer through, so the reply is written to the
 * socket directly, in the shape of the surface mounted at its path (when the parser kept it), and
 * the connection closed. `this` is the Fastify instance Fastify binds the handler to.
 */
export function rejectMalformedClient(this: object | undefined, err: Error & { code?: string; rawPacket?: unknown }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const shape: ErrorShape =
    err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? { status: 408, code: 'request_timeout', message: 'The request was not received in time.' }
      : err.code === 'HPE_HEADER_OVERFLOW'
        ? { status: 431, code: 'invalid_request', message: 'The request headers are too large.' }
        : { status: 400, code: 'invalid_request', message: 'The request is not valid HTTP.' };
  const { headers, body } = mountedRenderer(this, rawRequestPath(err) ?? '').raw(shape);
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('');
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${shape.status} ${HTTP_REASONS[shape.status]}\r\n${lines}Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}
