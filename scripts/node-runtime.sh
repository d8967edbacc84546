# Sourced by the scripts in this folder: puts Node.js 24 first on PATH.
#
# The project runs on Node.js 24 (LTS): Node 20 reached its end of life in April 2026, and on 24
# the API takes 20-40% more submissions a second on the same machine (README, Benchmarks). A
# machine whose own node is older gets the build pinned in scripts/node-runtime/package-lock.json
# from the npm registry (Linux x64 and arm64), installed once into scripts/node-runtime/node_modules.
NODE_RUNTIME_MAJOR=24
if [ "$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)" -lt "$NODE_RUNTIME_MAJOR" ]; then
  node_runtime_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/node-runtime"
  if [ ! -x "$node_runtime_dir/node_modules/.bin/node" ]; then
    echo "node $(node --version 2>/dev/null || echo missing) is older than $NODE_RUNTIME_MAJOR: installing the pinned Node.js $NODE_RUNTIME_MAJOR from the npm registry" >&2
    (cd "$node_runtime_dir" && npm install --no-save --no-audit --no-fund --loglevel=error >&2)
  fi
  if [ ! -x "$node_runtime_dir/node_modules/.bin/node" ]; then
    echo "No Node.js $NODE_RUNTIME_MAJOR build on the npm registry for $(uname -s)/$(uname -m): install Node.js $NODE_RUNTIME_MAJOR and run again." >&2
    exit 1
  fi
  export PATH="$node_runtime_dir/node_modules/.bin:$PATH"
  hash -r
fi
