#!/usr/bin/env bash
# The long version of the load suite: the same traffic (200 submissions/s, 2,000 SSE and 500
# WebSocket clients, router bursts at the limit) held for SOAK_SECONDS (default 30 minutes).
# Figures are printed at the end and written to the "Soak" section of .data/reliability.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/node-runtime.sh
bash scripts/install.sh
export LOAD_SECONDS="${SOAK_SECONDS:-1800}"
export LOAD_RATE="${SOAK_RATE:-200}"
export RELIABILITY_REPORT="$PWD/docs/reliability.md"
node --experimental-vm-modules --no-warnings=ExperimentalWarning node_modules/jest/bin/jest.js test/reliability/load.e2e.test.ts
