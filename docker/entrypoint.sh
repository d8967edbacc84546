#!/bin/sh
# Runs one role of the service: the image's single entry point.
#   api | worker | webhooks | sim-engine | migrate | admin <group> <action> [--flags]
# Extra arguments pass through to the role. `node ...` and `sh ...` run as given, for debugging.
set -eu

# Relative paths the code reads (the router catalog, prisma/migrations, .data) are relative to
# the application root, so every role starts there whatever the container's working directory.
APP_ROOT=$(CDPATH= cd -- "$(dirname -- "$0")/.." && pwd)
cd "$APP_ROOT"

usage() {
  echo "usage: $(basename -- "$0") api|worker|webhooks|sim-engine|migrate|admin [args...]" >&2
}

if [ "$#" -eq 0 ]; then
  usage
  exit 64
fi

# V8 flags of the long-running roles: SERVICE_NODE_FLAGS in libs/runtime says why (a test keeps
# the two the same).
SERVICE_NODE_FLAGS="--scavenger-max-new-space-capacity-mb=8 --heap-growing-percent=100"

role=$1
shift
case "$role" in
  api)        exec node $SERVICE_NODE_FLAGS dist/apps/api/src/main.js "$@" ;;
  worker)     exec node $SERVICE_NODE_FLAGS dist/apps/worker/src/main.js "$@" ;;
  webhooks)   exec node $SERVICE_NODE_FLAGS dist/apps/webhooks/src/main.js "$@" ;;
  sim-engine) exec node $SERVICE_NODE_FLAGS dist/apps/sim-engine/src/main.js "$@" ;;
  migrate)    exec node dist/libs/db/migrate-cli.js "$@" ;;
  admin)      exec node dist/apps/admin/src/main.js "$@" ;;
  node|sh)    exec "$role" "$@" ;;
  -h|--help|help)
    usage
    exit 0
    ;;
  *)
    echo "unknown role: $role" >&2
    usage
    exit 64
    ;;
esac
