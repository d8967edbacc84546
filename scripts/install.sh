#!/usr/bin/env bash
# Installs dependencies, generates the Prisma client and builds every app into dist/.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund --loglevel=error
fi
node scripts/prisma-generate.mjs
npx tsc -p tsconfig.build.json
