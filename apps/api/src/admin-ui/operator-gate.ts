import { createHmac, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';
import { sendError } from '../http/error-body.js';

export const OPERATOR_COOKIE = 'cc_operator';
const SESSION_SECONDS = 12 * 3600;

function mac(secret: string, token: string): Buffer {
  return createHmac('sha256', secret).update(`operator-session:${token}`).digest();
}

function sameMac(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}

function cookieValue(header: string | undefined, name: string): string | null {
  for (const part of (header ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return null;
}

/**
 * Lets a request through to the operator pages when it proves the operator token:
 * `Authorization: Bearer <OPERATOR_TOKEN>` (scripts), or a session cookie that a browser gets by
 * opening the page once with `?token=<OPERATOR_TOKEN>`. The cookie holds an HMAC of the token, not
 * the token, and the redirect drops the token from the address bar (and from later Referer headers).
 * Anything else is a 401 ErrorEnvelope.
 */
export function operatorGate(config: Config, pathPrefix: string) {
  const expected = mac(config.signingSecret, config.operatorToken);
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const header = request.headers.authorization;
    if (header?.startsWith('Bearer ') && sameMac(mac(config.signingSecret, header.slice(7).trim()), expected)) return;
    const cookie = cookieValue(request.headers.cookie, OPERATOR_COOKIE);
    if (cookie && /^[0-9a-f]{64}$/.test(cookie) && sameMac(Buffer.from(cookie, 'hex'), expected)) return;

    const url = new URL(request.url, 'http://local');
    const token = url.searchParams.get('token');
    if (token !== null && sameMac(mac(config.signingSecret, token), expected)) {
      url.searchParams.delete('token');
      const secure = request.protocol === 'https' || request.headers['x-forwarded-proto'] === 'https' ? '; Secure' : '';
      reply.header('set-cookie', `${OPERATOR_COOKIE}=${expected.toString('hex')}; Path=${pathPrefix}; HttpOnly; SameSite=Strict; Max-Age=${SESSION_SECONDS}${secure}`);
      reply.header('cache-control', 'no-store');
      await reply.redirect(`${url.pathname}${url.search}`, 303);
      return;
    }
    await sendError(
      request,
      reply,
      { status: 401, code: 'unauthorized', message: 'The operator token is missing or wrong.', headers: { 'www-authenticate': 'Bearer realm="operator"' } },
      config.api.basePath,
    );
  };
}
