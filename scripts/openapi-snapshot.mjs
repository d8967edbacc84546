// Writes openapi/openapi.json: the document the built API serves at GET /openapi.json, taken by
// booting the app in-process (never listening) and asking it, with no BASE_PATH so the server is
// `/`. Run after `npx tsc -p tsconfig.build.json`. A stop-gap until the document is generated from
// the schemas themselves (issue #27 §1-2); the typed client is generated from this file
// (`npm run client:generate`).
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const OUT = `${ROOT}openapi/openapi.json`;

const { loadConfig } = await import(`${ROOT}dist/libs/config/index.js`);
const { createApi } = await import(`${ROOT}dist/apps/api/src/app.js`);
const { applyMigrations, dropDatabase, ensureDatabase } = await import(`${ROOT}dist/libs/db/index.js`);

// The app loads its router catalog into the database on boot: a throwaway database and Redis
// prefix keep that away from any real one. The document depends on no setting but the mount
// prefix (none here, so its server is `/`).
const name = `openapi_snapshot_${process.pid}`;
const admin = new URL(process.env.SNAPSHOT_DATABASE_ADMIN_URL ?? 'postgresql://postgres@127.0.0.1:5432/postgres');
admin.pathname = `/${name}`;
const databaseUrl = admin.toString();
const env = { ...process.env, LOG_LEVEL: 'silent', BASE_PATH: '', NODE_ENV: 'test', DATABASE_URL: databaseUrl, REDIS_PREFIX: name };
await ensureDatabase(databaseUrl);
await applyMigrations(databaseUrl);

const app = await createApi(loadConfig(env));
await app.init();
const fastify = app.getHttpAdapter().getInstance();
await fastify.ready();
const res = await fastify.inject({ method: 'GET', url: '/openapi.json' });
if (res.statusCode !== 200) throw new Error(`GET /openapi.json answered ${res.statusCode}: ${res.body.slice(0, 300)}`);
mkdirSync(`${ROOT}openapi`, { recursive: true });
writeFileSync(OUT, `${JSON.stringify(res.json(), null, 2)}\n`);
await app.close();
await dropDatabase(databaseUrl);
process.stdout.write(`wrote ${OUT}\n`);
process.exit(0);
