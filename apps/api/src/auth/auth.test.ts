import type { IncomingMessage } from 'node:http';
import type { Config } from '#libs/config';
import { ApiError } from '#libs/contracts';
import type { Db } from '#libs/db';
import { ApiKeyAuthService } from './api-key-auth.service.js';
import { clientAddress } from './auth-failures.js';

const upgrade = (peer: string, forwarded?: string) => ({ socket: { remoteAddress: peer }, headers: forwarded ? { 'x-forwarded-for': forwarded } : {} }) as unknown as IncomingMessage;

describe('clientAddress (the WebSocket upgrade, as Fastify computes request.ip)', () => {
  it('is the peer unless proxies are trusted', () => {
    expect(clientAddress(upgrade('10.0.0.5', '198.51.100.1'), 0)).toBe('10.0.0.5');
  });

  it('steps back one X-Forwarded-For entry per trusted hop, never past the first', () => {
    const req = upgrade('10.0.0.5', '198.51.100.1, 203.0.113.9');
    expect(clientAddress(req, 1)).toBe('203.0.113.9');
    expect(clientAddress(req, 2)).toBe('198.51.100.1');
    expect(clientAddress(req, 5)).toBe('198.51.100.1');
    expect(clientAddress(upgrade('10.0.0.5'), 1)).toBe('10.0.0.5');
  });
});

describe('ApiKeyAuthService', () => {
  it('answers a failed key lookup with 503, not as a wrong key', async () => {
    const db = { apiKey: { findUnique: () => Promise.reject(new Error("Can't reach database server")) } } as unknown as Db;
    const auth = new ApiKeyAuthService(db, { redisPrefix: 'x' } as Config);
    const key = `cck_Abcdefgh_${'a'.repeat(43)}`;
    await expect(auth.authenticate(key)).rejects.toBeInstanceOf(ApiError);
    await expect(auth.authenticate(key)).rejects.toMatchObject({ code: 'service_unavailable', status: 503 });
  });
});
