#!/usr/bin/env bash
# Installs, migrates and starts the whole stack locally: sim-engine, worker and API, on the
# embedded defaults (local-directory blob store, simulated engine). Needs PostgreSQL and Redis
# (DATABASE_URL and REDIS_URL, localhost defaults). Ctrl-C stops everything.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/node-runtime.sh
[ -f .env ] && set -a && . ./.env && set +a
bash scripts/install.sh
node dist/libs/db/migrate-cli.js
exec node scripts/start-stack.mjs
