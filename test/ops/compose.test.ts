import { describe, expect, it } from '@jest/globals';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { parse } from 'yaml';
import { ENV_DEFAULTS, loadConfig } from '#libs/config';
import {
  ROLE_ENTRIES,
  apiHealthPaths,
  interpolate,
  read,
  simEngineDefaultPort,
  simEngineEnvNames,
  sourceExists,
  urlPort,
  workerHealthPaths,
  type Role,
} from './support.js';

interface Healthcheck {
  test?: string | string[];
  disable?: boolean;
}
interface Service {
  image?: string;
  build?: unknown;
  command?: string | string[];
  environment?: Record<string, string | number | boolean | null> | string[];
  depends_on?: string[] | Record<string, { condition?: string }>;
  healthcheck?: Healthcheck;
  ports?: (string | { target: number; published?: string | number })[];
  profiles?: string[];
  restart?: string;
  stop_grace_period?: string;
  deploy?: { resources?: { reservations?: { devices?: { driver?: string; capabilities?: string[] }[] } } };
}
interface ComposeFile {
  services: Record<string, Service>;
}

// ajv-formats is CommonJS: its default export arrives wrapped under native ESM.
const addFormats = ((addFormatsModule as unknown as { default?: typeof addFormatsModule }).default ?? addFormatsModule) as unknown as (ajv: Ajv) => Ajv;

const source = read('docker-compose.yml');
// Compose resolves YAML merge keys (`<<: *anchor`), so the test does too.
const compose = parse(source, { merge: true }) as ComposeFile;
const services = Object.entries(compose.services);
const APP_IMAGE = '${COMFY_CLOUD_IMAGE:-comfy-cloud:local}';

const appServices = services.filter(([, s]) => s.image === APP_IMAGE);
const roleOf = (s: Service): Role | undefined => {
  const command = Array.isArray(s.command) ? s.command : s.command?.split(/\s+/);
  return command?.[0] as Role | undefined;
};
const byRole = (role: Role) => appServices.filter(([, s]) => roleOf(s) === role);

function env(s: Service): Record<string, string> {
  if (Array.isArray(s.environment)) {
    return Object.fromEntries(s.environment.map((e) => [e.split('=')[0]!, e.slice(e.indexOf('=') + 1)]));
  }
  return Object.fromEntries(Object.entries(s.environment ?? {}).map(([k, v]) => [k, String(v ?? '')]));
}

/** What the container sees after `docker compose up` with no .env file. */
const resolvedEnv = (s: Service) => Object.fromEntries(Object.entries(env(s)).map(([k, v]) => [k, interpolate(v)]));

const healthUrl = (s: Service): string | undefined => {
  const test = s.healthcheck?.test;
  return /https?:\/\/[^\s'"]+/.exec(Array.isArray(test) ? test.join(' ') : (test ?? ''))?.[0];
};

const isOneShot = (name: string, s: Service) =>
  s.restart === 'no' &&
  services.some(([, other]) => !Array.isArray(other.depends_on) && other.depends_on?.[name]?.condition === 'service_completed_successfully');

describe('docker-compose.yml', () => {
  it('validates against the Compose Specification schema', () => {
    const schema = JSON.parse(read('test/ops/schemas/compose-spec.schema.json')) as object;
    const ajv = new Ajv({ allErrors: true, strict: false });
    addFormats(ajv);
    // The schema names draft-07 by its https address; Ajv registers it under the http one.
    const draft7 = ajv.getSchema('http://json-schema.org/draft-07/schema')!.schema as object;
    ajv.addMetaSchema({ ...draft7, $id: 'https://json-schema.org/draft-07/schema' });
    const validate = ajv.compile(schema);
    const valid = validate(compose);
    expect(validate.errors ?? []).toEqual([]);
    expect(valid).toBe(true);
  });

  it('has the stores, a migration step, the api and two worker/engine pairs', () => {
    const names = services.map(([n]) => n);
    expect(names).toEqual(expect.arrayContaining(['postgres', 'redis', 'minio', 'minio-init', 'migrate', 'api', 'worker-1', 'worker-2', 'engine-1', 'engine-2']));
    expect(byRole('migrate').map(([n]) => n)).toEqual(['migrate']);
    expect(byRole('api').map(([n]) => n)).toEqual(['api']);
    expect(byRole('webhooks').map(([n]) => n)).toEqual(['webhooks']);
    expect(byRole('worker').filter(([, s]) => !s.profiles).map(([n]) => n)).toEqual(['worker-1', 'worker-2']);
    expect(byRole('sim-engine').map(([n]) => n)).toEqual(['engine-1', 'engine-2']);
  });

  it('gives every long-running service a health check and every one-shot a successful exit to wait for', () => {
    for (const [name, s] of services) {
      if (isOneShot(name, s)) {
        expect({ name, healthcheck: s.healthcheck }).toEqual({ name, healthcheck: undefined });
        continue;
      }
      expect({ name, test: s.healthcheck?.test }).toEqual({ name, test: expect.anything() });
      expect(s.healthcheck?.disable).not.toBe(true);
    }
    expect(isOneShot('migrate', compose.services.migrate!)).toBe(true);
    expect(isOneShot('minio-init', compose.services['minio-init']!)).toBe(true);
  });

  it('orders start-up with depends_on conditions on every dependency', () => {
    for (const [name, s] of services) {
      if (!s.depends_on) continue;
      expect({ name, short: Array.isArray(s.depends_on) }).toEqual({ name, short: false });
      for (const [dep, spec] of Object.entries(s.depends_on as Record<string, { condition?: string }>)) {
        expect(compose.services[dep]).toBeDefined();
        const wanted = isOneShot(dep, compose.services[dep]!) ? 'service_completed_successfully' : 'service_healthy';
        expect({ name, dep, condition: spec.condition }).toEqual({ name, dep, condition: wanted });
      }
    }
    const apiDeps = compose.services.api!.depends_on as Record<string, { condition: string }>;
    expect(apiDeps.migrate?.condition).toBe('service_completed_successfully');
    expect(apiDeps['minio-init']?.condition).toBe('service_completed_successfully');
  });

  it('runs every app service with a role the image maps to a built entry point', () => {
    expect(appServices.length).toBeGreaterThanOrEqual(7);
    for (const [name, s] of appServices) {
      const role = roleOf(s);
      expect({ name, role: role && role in ROLE_ENTRIES }).toEqual({ name, role: true });
      expect(sourceExists(ROLE_ENTRIES[role!])).toBe(true);
    }
  });

  it('sets only variables the processes read, and the api/worker/migrate settings pass the config parser', () => {
    const known = new Set(Object.keys(ENV_DEFAULTS));
    const sim = simEngineEnvNames();
    expect(sim.has('SIM_ENGINE_PORT')).toBe(true);
    for (const [name, s] of appServices) {
      const allowed = roleOf(s) === 'sim-engine' ? sim : known;
      for (const key of Object.keys(env(s))) expect({ name, key, known: allowed.has(key) }).toEqual({ name, key, known: true });
      if (roleOf(s) !== 'sim-engine') {
        // Production mode refuses the code's default signing secret: the stack must bring its own.
        const config = loadConfig(resolvedEnv(s));
        expect(config.env).toBe('production');
        expect(config.storage.driver).toBe('s3');
      }
    }
  });

  it('exposes the api on the port it binds and checks the paths it serves', () => {
    const api = compose.services.api!;
    const e = resolvedEnv(api);
    expect(e.API_HOST).toBe('0.0.0.0');
    const port = Number(e.API_PORT ?? ENV_DEFAULTS.API_PORT);
    expect(api.ports).toEqual([expect.objectContaining({ target: port })]);
    const url = healthUrl(api)!;
    expect(urlPort(url)).toBe(port);
    expect(apiHealthPaths().has(new URL(url).pathname)).toBe(true);
    // Requests in flight get their grace, and a second more to leave, before Compose kills the api.
    expect(parseDuration(api.stop_grace_period ?? '10s')).toBeGreaterThanOrEqual(Number(e.API_SHUTDOWN_GRACE_MS ?? ENV_DEFAULTS.API_SHUTDOWN_GRACE_MS) + 5_000);
  });

  it('checks the webhooks process on the port its health server binds, and gives it the api\'s public URL', () => {
    const webhooks = compose.services.webhooks!;
    const e = resolvedEnv(webhooks);
    expect(e.WEBHOOK_HOST).toBe('0.0.0.0');
    const url = healthUrl(webhooks)!;
    expect(urlPort(url)).toBe(Number(e.WEBHOOK_PORT ?? ENV_DEFAULTS.WEBHOOK_PORT));
    expect(workerHealthPaths().has(new URL(url).pathname)).toBe(true);
    expect(e.PUBLIC_URL).toBe(resolvedEnv(compose.services.api!).PUBLIC_URL);
    // Attempts under way may take WEBHOOK_TIMEOUT_MS to end before Compose kills the process.
    expect(parseDuration(webhooks.stop_grace_period ?? '10s')).toBeGreaterThan(Number(e.WEBHOOK_TIMEOUT_MS ?? ENV_DEFAULTS.WEBHOOK_TIMEOUT_MS));
  });

  it('connects each worker to its own engine on the port that engine listens on', () => {
    const workers = byRole('worker');
    expect(workers.length).toBe(4);
    const engines = new Set<string>();
    for (const [name, s] of workers) {
      const e = resolvedEnv(s);
      expect(e.WORKER_HOST).toBe('0.0.0.0');
      const url = healthUrl(s)!;
      expect(urlPort(url)).toBe(Number(e.WORKER_PORT ?? ENV_DEFAULTS.WORKER_PORT));
      expect(workerHealthPaths().has(new URL(url).pathname)).toBe(true);
      // The worker must outlive its own shutdown grace, or Compose kills it mid hand-back.
      expect(parseDuration(s.stop_grace_period ?? '10s')).toBeGreaterThan(Number(e.WORKER_SHUTDOWN_GRACE_MS ?? ENV_DEFAULTS.WORKER_SHUTDOWN_GRACE_MS));

      const engineUrl = new URL(e.ENGINE_URL!);
      const engineName = engineUrl.hostname;
      const engine = compose.services[engineName];
      expect({ name, engine: engineName, defined: engine !== undefined }).toEqual({ name, engine: engineName, defined: true });
      expect((s.depends_on as Record<string, { condition: string }>)[engineName]?.condition).toBe('service_healthy');
      expect(s.profiles).toEqual(engine!.profiles);
      engines.add(engineName);

      const enginePort = roleOf(engine!) === 'sim-engine' ? Number(resolvedEnv(engine!).SIM_ENGINE_PORT ?? simEngineDefaultPort()) : comfyPort(engine!);
      expect(urlPort(engineUrl.toString())).toBe(enginePort);
      expect(urlPort(healthUrl(engine!)!)).toBe(enginePort);
      if (roleOf(engine!) === 'sim-engine') {
        expect(resolvedEnv(engine!).SIM_ENGINE_HOST).toBe('0.0.0.0');
        expect(new URL(healthUrl(engine!)!).pathname).toBe('/system_stats');
      }
    }
    expect(engines.size).toBe(workers.length);
  });

  it('swaps in ComfyUI on NVIDIA GPUs under the gpu profile', () => {
    const gpu = services.filter(([, s]) => s.profiles?.includes('gpu'));
    const comfy = gpu.filter(([, s]) => s.deploy?.resources?.reservations?.devices !== undefined);
    expect(comfy.map(([n]) => n)).toEqual(['comfyui-1', 'comfyui-2']);
    for (const [, s] of comfy) {
      expect(s.deploy?.resources?.reservations?.devices).toEqual([expect.objectContaining({ driver: 'nvidia', capabilities: ['gpu'] })]);
    }
    expect(gpu.filter(([, s]) => roleOf(s) === 'worker').map(([n]) => n)).toEqual(['worker-gpu-1', 'worker-gpu-2']);
    // SIM_REPLICAS=0 takes the simulated pairs out, so the profile can replace them.
    for (const name of ['engine-1', 'engine-2', 'worker-1', 'worker-2']) {
      expect(source).toMatch(/replicas: \$\{SIM_REPLICAS:-1\}/);
      expect((compose.services[name] as { deploy?: { replicas?: string } }).deploy?.replicas).toBe('${SIM_REPLICAS:-1}');
    }
  });

  it('runs Redis with noeviction', () => {
    const redis = compose.services.redis!;
    const command = Array.isArray(redis.command) ? redis.command.join(' ') : (redis.command ?? '');
    expect(command).toMatch(/--maxmemory-policy[ =]noeviction\b/);
    expect(resolvedEnv(compose.services.api!).REDIS_URL).toBe('redis://redis:6379');
  });

  it('creates the bucket the services use before they start', () => {
    const init = compose.services['minio-init']!;
    const script = (Array.isArray(init.command) ? init.command.join(' ') : (init.command ?? '')).replace(/\$\$/g, '$');
    expect(script).toMatch(/mc mb --ignore-existing "local\/\$\{S3_BUCKET\}"/);
    expect(interpolate(env(init).S3_BUCKET!)).toBe(resolvedEnv(compose.services.api!).S3_BUCKET);
    expect(resolvedEnv(compose.services.api!).S3_ENDPOINT).toBe('http://minio:9000');
  });
});

function comfyPort(s: Service): number {
  const args = Array.isArray(s.command) ? s.command : [];
  const i = args.indexOf('--port');
  return i >= 0 ? Number(args[i + 1]) : 8188;
}

function parseDuration(value: string): number {
  let ms = 0;
  for (const [, n, unit] of value.matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)) {
    ms += Number(n) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[unit as 'ms' | 's' | 'm' | 'h'];
  }
  return ms;
}
