#!/usr/bin/env bash
# The whole test suite: installs, builds, starts the S3-compatible test server, runs Jest.
# Needs PostgreSQL and Redis reachable (see README); every suite makes its own database and prefix.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/node-runtime.sh

bash scripts/install.sh
# Types and lint first: cheap, and a failure there is a failure of the suite.
npx tsc -p tsconfig.json --noEmit
npx tsc -p apps/console --noEmit
npx eslint .

# The asset tests compare our hashes with the reference b3sum tool.
if ! command -v b3sum >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get install -y -q b3sum >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q b3sum >/dev/null))
  else
    echo "b3sum is required for the test suite: install the Debian package b3sum" >&2
    exit 1
  fi
fi
# The browser suites (test/browser/) drive Debian's Chromium at /usr/bin/chromium.
if [ ! -x /usr/bin/chromium ]; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get install -y -q chromium >/dev/null 2>&1 || (apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null))
  else
    echo "Chromium is required for the test suite: install the Debian package chromium" >&2
    exit 1
  fi
fi

export TEST_S3_ENDPOINT="${TEST_S3_ENDPOINT:-http://127.0.0.1:4569}"
s3_pid=""
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
cleanup() { [ -n "$s3_pid" ] && kill "$s3_pid" 2>/dev/null || true; }
trap cleanup EXIT

node --experimental-vm-modules --no-warnings=ExperimentalWarning node_modules/jest/bin/jest.js "$@"
