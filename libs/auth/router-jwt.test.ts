import { generateKeyPairSync } from 'node:crypto';
import { SignJWT } from 'jose';
import { mintRouterToken, RouterTokenError, verifyRouterToken } from './router-jwt.js';

const SECRET = 'router-jwt-unit-secret-0123456789';
const DAY = 24 * 3600;
const keys = { secret: SECRET, publicKeys: '', maxLifetimeSeconds: DAY };
const now = () => Math.floor(Date.now() / 1000);
const hs256 = (claims: { sub?: string; iat?: number; exp?: number }) => {
  let jwt = new SignJWT({}).setProtectedHeader({ alg: 'HS256' }).setSubject(claims.sub ?? 'acct-1');
  if (claims.iat !== undefined) jwt = jwt.setIssuedAt(claims.iat);
  if (claims.exp !== undefined) jwt = jwt.setExpirationTime(claims.exp);
  return jwt.sign(new TextEncoder().encode(SECRET));
};

describe('router tokens', () => {
  it('accepts a token whose exp lies within the maximum lifetime', async () => {
    expect(await verifyRouterToken(await mintRouterToken(SECRET, 'acct-1', DAY), keys)).toBe('acct-1');
    expect(await verifyRouterToken(await hs256({ exp: now() + 60 }), keys)).toBe('acct-1');
  });

  it('refuses a token without exp, however it is signed', async () => {
    await expect(verifyRouterToken(await hs256({ iat: now() }), keys)).rejects.toThrow(new RouterTokenError('token without exp'));
    const { publicKey, privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const rs = await new SignJWT({}).setProtectedHeader({ alg: 'RS256' }).setSubject('acct-1').setIssuedAt().sign(privateKey);
    const pem = publicKey.export({ type: 'spki', format: 'pem' }).toString();
    await expect(verifyRouterToken(rs, { ...keys, publicKeys: pem })).rejects.toThrow(/without exp/);
  });

  it('refuses a token that lives longer than the maximum, from now or from its iat', async () => {
    await expect(verifyRouterToken(await mintRouterToken(SECRET, 'acct-1', DAY + 3600), keys)).rejects.toThrow(/longer than allowed/);
    await expect(verifyRouterToken(await hs256({ exp: now() + 2 * DAY }), keys)).rejects.toThrow(/longer than allowed/);
    // Issued long ago with a long life: little of it is left, yet its lifetime is over the maximum.
    await expect(verifyRouterToken(await hs256({ iat: now() - 10 * DAY, exp: now() + 60 }), keys)).rejects.toThrow(/longer than allowed/);
    // The maximum is the operator's: a larger one admits the same token.
    expect(await verifyRouterToken(await hs256({ exp: now() + 2 * DAY }), { ...keys, maxLifetimeSeconds: 3 * DAY })).toBe('acct-1');
  });

  it('refuses an expired token', async () => {
    await expect(verifyRouterToken(await hs256({ iat: now() - 120, exp: now() - 60 }), keys)).rejects.toThrow(RouterTokenError);
  });
});
