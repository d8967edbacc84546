// `prisma generate` needs no schema engine, but Prisma 7's CLI insists on finding one and would
// try to download it; pointing it at any existing file lets generation run offline.
import { execFileSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const placeholder = path.join(os.tmpdir(), 'prisma-schema-engine-placeholder');
if (!existsSync(placeholder)) writeFileSync(placeholder, '');
execFileSync(process.execPath, ['node_modules/prisma/build/index.js', 'generate'], {
  stdio: ['ignore', 'ignore', 'inherit'],
  env: {
    ...process.env,
    PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? placeholder,
    PRISMA_HIDE_UPDATE_MESSAGE: '1',
    CHECKPOINT_DISABLE: '1',
  },
});
