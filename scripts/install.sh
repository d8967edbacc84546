#!/usr/bin/env bash
# Installs dependencies, generates the Prisma client and builds every app into dist/ (the tenant
# console, apps/console, into dist/console, which the API serves at /console/).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/node-runtime.sh
# `npm install` honours package-lock.json; `npm ci` here rejects the lock for lacking other
# platforms' optional binaries (napi-rs, swc), which npm itself does not write into it.
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm install --no-audit --no-fund --loglevel=error
fi
node scripts/prisma-generate.mjs
npx tsc -p tsconfig.build.json
npx vite build apps/console
