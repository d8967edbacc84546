import { createHmac, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';
import { bearerToken, type AuthFailures } from '../auth/index.js';
import { sendError } from '../http/error-renderer.js';

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
 * Anything else is a 401 ErrorEnvelope. Wrong tokens count against the client's address like any
 * other failed authentication, so the operator token cannot be guessed faster than an API key.
 */
export function operatorGate(config: Config, pathPrefix: string, failures: AuthFailures) {
  const expected = mac(config.signingSecret, config.operatorToken);
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const header = request.headers.authorization;
    const presented = header !== undefined || request.headers.cookie?.includes(`${OPERATOR_COOKIE}=`) || request.url.includes('token=');
    if (presented) {
      const wait = await failures.blockedFor(request.ip);
      if (wait !== null) {
        await sendError(request, reply, { status: 429, code: 'rate_limited', message: failures.message(), headers: { 'retry-after': String(wait) } });
        return;
      }
    }
    const bearer = bearerToken(request.headers);
    if (bearer && sameMac(mac(config.signingSecret, bearer), expected)) return;
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
    if (presented) await failures.failed(request.ip);
    await sendError(
      request,
      reply,
      { status: 401, code: 'unauthorized', message: 'The operator token is missing or wrong.', headers: { 'www-authenticate': 'Bearer realm="operator"' } },
    );
  };
}
