#!/usr/bin/env bash
# Installs dependencies, generates the Prisma client and builds every app into dist/.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/node-runtime.sh
# `npm install` honours package-lock.json; `npm ci` here rejects the lock for lacking other
# platforms' optional binaries (napi-rs, swc), which npm itself does not write into it.
# --no-save: installing never rewrites the tracked package-lock.json (npm would add those
# binaries' entries to it); `npm start` leaves the checkout as it found it.
if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm install --no-save --no-audit --no-fund --loglevel=error
fi
node scripts/prisma-generate.mjs
npx tsc -p tsconfig.build.json
