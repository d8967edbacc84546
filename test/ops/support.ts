import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export const read = (relative: string): string => readFileSync(path.join(ROOT, relative), 'utf8');

/**
 * The built entry point of each role, as the image runs it. Every dist path must come from a
 * TypeScript source the build compiles (dist/X.js <- X.ts), so the check holds before a build.
 */
export const ROLE_ENTRIES = {
  api: 'dist/apps/api/src/main.js',
  worker: 'dist/apps/worker/src/main.js',
  webhooks: 'dist/apps/webhooks/src/main.js',
  'sim-engine': 'dist/apps/sim-engine/src/main.js',
  migrate: 'dist/libs/db/migrate-cli.js',
  admin: 'dist/apps/admin/src/main.js',
} as const;

export type Role = keyof typeof ROLE_ENTRIES;

export function sourceOf(distEntry: string): string {
  return distEntry.replace(/^dist\//, '').replace(/\.js$/, '.ts');
}

export function sourceExists(distEntry: string): boolean {
  return existsSync(path.join(ROOT, sourceOf(distEntry)));
}

/** The SIM_* variables the sim-engine reads, straight from its configuration code. */
export function simEngineEnvNames(): Set<string> {
  const names = [...read('apps/sim-engine/src/config.ts').matchAll(/\benv\.(SIM_[A-Z0-9_]+)/g)].map((m) => m[1]!);
  return new Set(names);
}

/** Default values the sim-engine falls back to, e.g. `num(env.SIM_ENGINE_PORT, 8188)`. */
export function simEngineDefaultPort(): number {
  const m = /num\(env\.SIM_ENGINE_PORT,\s*(\d+)\)/.exec(read('apps/sim-engine/src/config.ts'));
  if (!m) throw new Error('SIM_ENGINE_PORT default not found in apps/sim-engine/src/config.ts');
  return Number(m[1]);
}

/** Paths the health server of the worker and the webhooks process answers (it matches `req.url` literally). */
export function workerHealthPaths(): Set<string> {
  return new Set([...read('libs/runtime/health-server.ts').matchAll(/req\.url === '([^']+)'/g)].map((m) => m[1]!));
}

/** Paths the api's health controller answers (`@Get('healthz')` under a root controller). */
export function apiHealthPaths(): Set<string> {
  const source = read('apps/api/src/health/health.controller.ts');
  if (!/@Controller\(\)/.test(source)) throw new Error('the health controller is no longer mounted at the root');
  return new Set([...source.matchAll(/@Get\('([^']+)'\)/g)].map((m) => `/${m[1]!}`));
}

/**
 * Compose-style interpolation: `${VAR}`, `${VAR:-default}`, `${VAR-default}`, `${VAR:?err}` and
 * `$$`. Values come from `vars` (an empty environment shows what `docker compose up` does on a
 * machine with no .env file).
 */
export function interpolate(value: string, vars: Record<string, string> = {}): string {
  return value.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([^}]*)|(:?\?)([^}]*))?\}/g, (match, name?: string, dashOp?: string, dflt?: string, qOp?: string, err?: string) => {
    if (match === '$$') return '$';
    const v = vars[name!];
    if (dashOp) return (dashOp === ':-' ? v === undefined || v === '' : v === undefined) ? dflt! : v!;
    if (qOp) {
      if (qOp === ':?' ? v === undefined || v === '' : v === undefined) throw new Error(`${name}: ${err}`);
      return v!;
    }
    return v ?? '';
  });
}

export function urlPort(url: string): number {
  const u = new URL(url);
  return Number(u.port || (u.protocol === 'https:' ? 443 : 80));
}
