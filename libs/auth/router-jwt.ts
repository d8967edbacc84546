import { SignJWT, importSPKI, jwtVerify, type JWTPayload } from 'jose';

type PublicKey = Awaited<ReturnType<typeof importSPKI>>;

export class RouterTokenError extends Error {}

export interface RouterTokenKeys {
  /** HS256 shared secret. */
  secret: string;
  /** RS256 public keys, PEM, several may be concatenated (key rotation). */
  publicKeys: string;
  /**
   * The longest lifetime a token may have (ROUTER_TOKEN_MAX_LIFETIME_SECONDS): a leaked token
   * stops working within it. Tokens must carry `exp`; one without is valid for ever, and refused.
   */
  maxLifetimeSeconds: number;
}

/** The default of ROUTER_TOKEN_MAX_LIFETIME_SECONDS, and what the admin command mints. */
export const DEFAULT_ROUTER_TOKEN_LIFETIME_SECONDS = 30 * 24 * 3600;

/** Operators mint router tokens with the admin command line (HS256). */
export async function mintRouterToken(secret: string, accountId: string, ttlSeconds = DEFAULT_ROUTER_TOKEN_LIFETIME_SECONDS): Promise<string> {
  if (!secret) throw new RouterTokenError('ROUTER_JWT_SECRET is not configured');
  return new SignJWT({})
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(accountId)
    .setIssuedAt()
    .setExpirationTime(Math.floor(Date.now() / 1000) + ttlSeconds)
    .sign(new TextEncoder().encode(secret));
}

const pemCache = new Map<string, Promise<PublicKey[]>>();

function publicKeysOf(pems: string): Promise<PublicKey[]> {
  let found = pemCache.get(pems);
  if (!found) {
    const blocks = pems.match(/-----BEGIN PUBLIC KEY-----[\s\S]+?-----END PUBLIC KEY-----/g) ?? [];
    found = Promise.all(blocks.map((pem) => importSPKI(pem, 'RS256')));
    pemCache.set(pems, found);
  }
  return found;
}

/** Returns the account id (`sub`) of a valid token; throws RouterTokenError otherwise. */
export async function verifyRouterToken(token: string, keys: RouterTokenKeys): Promise<string> {
  let payload: JWTPayload | null = null;
  const header = token.split('.')[0] ?? '';
  let alg = '';
  try {
    alg = (JSON.parse(Buffer.from(header, 'base64url').toString('utf8')) as { alg?: string }).alg ?? '';
  } catch {
    throw new RouterTokenError('malformed token');
  }
  try {
    if (alg === 'HS256' && keys.secret) {
      payload = (await jwtVerify(token, new TextEncoder().encode(keys.secret), { algorithms: ['HS256'] })).payload;
    } else if (alg === 'RS256' && keys.publicKeys) {
      for (const key of await publicKeysOf(keys.publicKeys)) {
        try {
          payload = (await jwtVerify(token, key, { algorithms: ['RS256'] })).payload;
          break;
        } catch {
          // try the next key
        }
      }
    }
  } catch {
    payload = null;
  }
  if (!payload || typeof payload.sub !== 'string' || payload.sub === '') throw new RouterTokenError('invalid token');
  lifetimeWithin(payload, keys.maxLifetimeSeconds);
  return payload.sub;
}

/**
 * A verified token's `exp` (jose has already refused it when past) must exist and lie within the
 * maximum lifetime: counted from now, and from `iat` when the token states one.
 */
function lifetimeWithin(payload: JWTPayload, maxSeconds: number): void {
  if (typeof payload.exp !== 'number') throw new RouterTokenError('token without exp');
  const now = Math.floor(Date.now() / 1000);
  // A minute of tolerance for clocks that disagree about "now" (the token's issuer and this replica).
  if (payload.exp - now > maxSeconds + 60) throw new RouterTokenError('token lives longer than allowed');
  if (typeof payload.iat === 'number' && payload.exp - payload.iat > maxSeconds) throw new RouterTokenError('token lives longer than allowed');
}
