#!/usr/bin/env bash
# `node "$@"` on the project's Node.js (scripts/node-runtime.sh): what the npm scripts run.
set -euo pipefail
. "$(dirname "$0")/node-runtime.sh"
exec node "$@"
