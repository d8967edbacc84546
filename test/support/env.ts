import { randomBytes } from 'node:crypto';

// Where the real services of the test run are. scripts/test.sh starts s3rver and exports its URL.
export const TEST_PG_URL = process.env.TEST_DATABASE_ADMIN_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres';
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
export const TEST_S3_ENDPOINT = process.env.TEST_S3_ENDPOINT ?? 'http://127.0.0.1:4569';
export const TEST_SIGNING_SECRET = 'test-signing-secret-0123456789';
export const TEST_ROUTER_SECRET = 'test-router-secret-0123456789';

/** A name no other suite uses: databases, Redis prefixes and buckets are per suite. */
export function uniqueName(prefix: string): string {
  return `${prefix}_${process.pid}_${randomBytes(4).toString('hex')}`;
}

export function databaseUrl(name: string, adminUrl = TEST_PG_URL): string {
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return url.toString();
}
