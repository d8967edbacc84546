#!/usr/bin/env bash
# Runs every benchmark against freshly built processes and prints their figures.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/node-runtime.sh
bash scripts/install.sh
for b in bench/*.mjs; do
  [ "$(basename "$b")" = support.mjs ] && continue
  echo "== $b"
  node "$b"
done
