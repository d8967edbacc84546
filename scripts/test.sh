#!/usr/bin/env bash
# The test suite: `npm test` runs every tier; `npm run test:<tier>` one of them (unit, db, e2e,
# reliability; see jest.config.js). Installs what it needs, builds, starts the S3-compatible test
# server for the tiers that use it, and runs Jest; further arguments go to Jest.
# The db, e2e and reliability tiers need PostgreSQL and Redis (see README); every suite makes its
# own database and key prefix.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/node-runtime.sh

tier=""
case "${1:-}" in unit|db|e2e|reliability) tier="$1"; shift ;; esac

if [ "$tier" = unit ]; then
  # No services and no build: Jest compiles what it runs.
  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm install --no-save --no-audit --no-fund --loglevel=error
  fi
  node scripts/prisma-generate.mjs >/dev/null
  exec node --experimental-vm-modules --no-warnings=ExperimentalWarning node_modules/jest/bin/jest.js --selectProjects unit "$@"
fi

bash scripts/install.sh
if [ -z "$tier" ]; then
  # Types and lint first: cheap, and a failure there is a failure of the suite.
  npx tsc -p tsconfig.json --noEmit
  npx tsc -p apps/console --noEmit
  npx eslint .
fi

# The asset tests compare our hashes with the reference b3sum tool; the browser suites drive
# Debian's Chromium (no browser is downloaded); the webhook suite runs docs/api.md's Python receiver.
need=()
command -v b3sum >/dev/null 2>&1 || need+=(b3sum)
command -v python3 >/dev/null 2>&1 || need+=(python3)
[ -x /usr/bin/chromium ] || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get install -y -q "${need[@]}" >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q "${need[@]}" >/dev/null))
  else
    echo "The test suite needs the Debian packages: ${need[*]}" >&2
    exit 1
  fi
fi

s3_pid=""
if [ "$tier" != db ]; then
  export TEST_S3_ENDPOINT="${TEST_S3_ENDPOINT:-http://127.0.0.1:4569}"
  if ! curl -s -o /dev/null "$TEST_S3_ENDPOINT"; then
    S3RVER_PORT="${TEST_S3_ENDPOINT##*:}" S3RVER_DIR="$(mktemp -d /tmp/cc-s3rver.XXXXXX)" \
      node scripts/s3-test-server.mjs >/tmp/cc-s3rver.log 2>&1 &
    s3_pid=$!
    for _ in $(seq 1 50); do curl -s -o /dev/null "$TEST_S3_ENDPOINT" && break; sleep 0.1; done
    # Otherwise every asset and storage test would fail later, each on its own connection error.
    if ! curl -s -o /dev/null "$TEST_S3_ENDPOINT"; then
      echo "The S3-compatible test server did not start at $TEST_S3_ENDPOINT (see /tmp/cc-s3rver.log)" >&2
      exit 1
    fi
  fi
fi
cleanup() { [ -n "$s3_pid" ] && kill "$s3_pid" 2>/dev/null || true; }
trap cleanup EXIT

projects=()
[ -n "$tier" ] && projects=(--selectProjects "$tier")
node --experimental-vm-modules --no-warnings=ExperimentalWarning node_modules/jest/bin/jest.js "${projects[@]}" "$@"
