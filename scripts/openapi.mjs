// Writes the committed OpenAPI document (openapi/openapi.json) from the operation tables, without
// starting a server: `npm run openapi` after any change to apps/api/src/contract or libs/contracts.
// test/observability/openapi.e2e.test.ts fails while the served document and this file differ.
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const { buildDocument } = await import(`${ROOT}/dist/apps/api/src/contract/index.js`);

mkdirSync(`${ROOT}/openapi`, { recursive: true });
writeFileSync(`${ROOT}/openapi/openapi.json`, `${JSON.stringify(buildDocument(''), null, 2)}\n`);
process.stdout.write('openapi/openapi.json written\n');
