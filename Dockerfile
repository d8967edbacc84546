# syntax=docker/dockerfile:1.7
# One image for every role of the service: api, worker, webhooks, sim-engine, migrate, admin.
#   docker build -t comfy-cloud .
#   docker run --rm comfy-cloud api            (or worker, sim-engine, migrate, admin <args>)
# See docs/operations.md.

ARG NODE_IMAGE=node:24-bookworm-slim

# --- all dependencies, dev included: only the build needs TypeScript and the Prisma CLI -------
FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# npm install, not npm ci: npm ci rejects this lock for lacking other platforms' optional binaries.
RUN --mount=type=cache,target=/root/.npm \
    npm install --no-audit --no-fund --loglevel=error

# --- compile ------------------------------------------------------------------------------------
FROM deps AS build
# .dockerignore keeps node_modules, dist, tests and local data out of this copy.
COPY . .
# The Prisma client is generated into libs/db/generated and compiled into dist with the rest.
# tsc compiles code only: the router's catalog data (JSON next to the code that reads it) is
# copied on its own below; the test proves it is there.
RUN node scripts/prisma-generate.mjs \
 && npx tsc -p tsconfig.build.json \
 && npx vite build apps/console \
 && test -f dist/console/index.html \
 && test -f dist/apps/api/src/main.js \
 && test -f dist/apps/worker/src/main.js \
 && test -f dist/apps/webhooks/src/main.js \
 && test -f dist/apps/sim-engine/src/main.js \
 && test -f dist/apps/admin/src/main.js \
 && test -f dist/libs/db/migrate-cli.js \
 && test -f apps/api/src/router/catalog/data/catalog.json \
 && mkdir -p prisma/migrations

# --- production dependencies only, installed apart so no dev package can leak into the image --
FROM ${NODE_IMAGE} AS prod-deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN --mount=type=cache,target=/root/.npm \
    npm install --omit=dev --no-audit --no-fund --loglevel=error

# --- runtime ------------------------------------------------------------------------------------
FROM ${NODE_IMAGE} AS runtime
# tini forwards SIGTERM to node and reaps zombies; without it node runs as PID 1 and a process
# that installs no signal handler (the api) would ignore the orchestrator's SIGTERM.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini ca-certificates \
 && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production \
    API_HOST=0.0.0.0 \
    WORKER_HOST=0.0.0.0 \
    WEBHOOK_HOST=0.0.0.0 \
    SIM_ENGINE_HOST=0.0.0.0
WORKDIR /app
# package.json carries the "#libs/*" import map the compiled code resolves through.
COPY --chown=root:root package.json ./
COPY --chown=root:root --from=prod-deps /app/node_modules ./node_modules
COPY --chown=root:root --from=build /app/dist ./dist
# The migrate role reads the SQL migrations; the api loads the router catalog at start.
COPY --chown=root:root --from=build /app/prisma/migrations ./prisma/migrations
COPY --chown=root:root --from=build /app/apps/api/src/router/catalog/data ./apps/api/src/router/catalog/data
COPY --chown=root:root docker/entrypoint.sh docker/healthcheck.mjs ./docker/
# The code stays root-owned and read-only to the service user; only .data (the local blob
# store, when no S3 is configured) and /tenant-models (a worker's model cache and the folder it
# shares with its engine; a volume goes there) are writable.
RUN chmod 0755 docker/entrypoint.sh \
 && mkdir -p .data /tenant-models && chown node:node .data /tenant-models
USER node
EXPOSE 8080 8081 8082 8188
ENTRYPOINT ["/usr/bin/tini", "--", "/app/docker/entrypoint.sh"]
CMD ["api"]
