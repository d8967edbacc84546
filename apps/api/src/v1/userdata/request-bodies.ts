import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyRequest } from 'fastify';

const RAW_FILE = 'application/x-comfy-user-file';
const SENT_TYPE = Symbol('userFileContentType');

type RawWithType = IncomingMessage & { [SENT_TYPE]?: string };

/** A user-data body longer than a file may be; the route answers 413 once the caller is known. */
export class OversizedFile {
  constructor(readonly declaredBytes: number | null) {}
}

/** The content type the client declared for a user-data file it sent. */
export function sentContentType(request: FastifyRequest): string {
  return (request.raw as RawWithType)[SENT_TYPE] ?? '';
}

/** The bytes of a user-data body: an empty body is an empty file. */
export function fileBytes(body: unknown): Buffer | OversizedFile {
  if (body instanceof OversizedFile) return body;
  return Buffer.isBuffer(body) ? body : Buffer.alloc(0);
}

/**
 * The engine reads these bodies itself, whatever the client declared: a user-data file is stored
 * byte for byte (`request.read()`), settings and the rest are JSON (`request.json()`), which the
 * front end sends as `text/plain` or with no type at all. Before routing, a user-data upload is
 * marked for the raw reader below (its declared type kept for the file) and the JSON routes read
 * as text, which the routes parse and refuse with a clear 400 when it is not JSON.
 */
export function installEngineBodies(fastify: FastifyInstance, basePath: string, maxFileBytes: number): void {
  const userdata = `${basePath}/api/userdata/`;
  const json = new Set([`${basePath}/api/settings`, `${basePath}/api/users`, `${basePath}/api/internal/logs/subscribe`]);
  const settingPrefix = `${basePath}/api/settings/`;
  // A callback hook, not an async one: it runs on every request.
  fastify.addHook('onRequest', (request, _reply, done) => {
    if (request.method === 'POST' || request.method === 'PATCH') {
      const path = request.url.split('?')[0]!;
      const headers = request.raw.headers;
      if (request.method === 'POST' && path.startsWith(userdata)) {
        (request.raw as RawWithType)[SENT_TYPE] = headers['content-type'] ?? '';
        headers['content-type'] = RAW_FILE;
      } else if (json.has(path) || (request.method === 'POST' && path.startsWith(settingPrefix))) {
        headers['content-type'] = 'text/plain; charset=utf-8';
      }
    }
    done();
  });
  // Read here rather than by Fastify's size-limited reader: a body over the limit must reach the
  // route (which answers 413 after authentication, in the engine's terms), not fail as a framework error.
  fastify.addContentTypeParser(RAW_FILE, (request, payload, done) => {
    const declared = Number(request.headers['content-length']);
    if (Number.isFinite(declared) && declared > maxFileBytes) {
      payload.resume();
      return done(null, new OversizedFile(declared));
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let finished = false;
    const finish = (err: Error | null, body?: unknown) => {
      if (finished) return;
      finished = true;
      done(err, body);
    };
    payload.on('data', (chunk: Buffer) => {
      if (finished) return;
      size += chunk.length;
      if (size > maxFileBytes) {
        chunks.length = 0;
        // The rest is read and dropped; the answer closes the connection.
        return finish(null, new OversizedFile(null));
      }
      chunks.push(chunk);
    });
    payload.on('end', () => finish(null, Buffer.concat(chunks)));
    payload.on('error', (err) => finish(err));
  });
}
