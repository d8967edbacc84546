#!/usr/bin/env bash
# Installs dependencies, generates the Prisma client and builds every app into dist/ (the tenant
# console, apps/console, into dist/console, which the API serves at /console/).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/node-runtime.sh
# Installs what package-lock.json pins, and never rewrites it (`--no-save`): `npm start` and
# `npm test` must leave the working tree as they found it. Not `npm ci`: it refuses this lock, which
# cannot name the other platforms' builds @napi-rs/blake-hash declares, as the registry has none of
# that version (npm skips them when it writes the lock, and `npm ci` then calls the lock stale).
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm install --no-save --no-audit --no-fund --loglevel=error
fi
node scripts/prisma-generate.mjs
npx tsc -p tsconfig.build.json
npx vite build apps/console
