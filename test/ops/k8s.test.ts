import { execFileSync } from 'node:child_process';
import { describe, expect, it } from '@jest/globals';
import { parseAllDocuments } from 'yaml';
import { ENV_DEFAULTS, loadConfig } from '#libs/config';
import { jobKeys } from '#libs/jobs';
import { typeCheckObjects, validateObjects, type K8sObject } from './k8s-schema.js';
import { ROLE_ENTRIES, ROOT, apiHealthPaths, sourceExists, urlPort, workerHealthPaths } from './support.js';

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { fieldRef?: { fieldPath: string }; secretKeyRef?: { name: string; key: string } };
}
interface Probe {
  httpGet?: { path: string; port: number | string };
  exec?: { command: string[] };
}
interface Container {
  name: string;
  image: string;
  args?: string[];
  command?: string[];
  ports?: { name?: string; containerPort: number }[];
  env?: EnvVar[];
  envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string } }[];
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  startupProbe?: Probe;
  lifecycle?: { preStop?: { exec?: { command: string[] } } };
  resources?: { requests?: Record<string, string | number>; limits?: Record<string, string | number> };
}
interface PodSpec {
  containers: Container[];
  initContainers?: Container[];
  terminationGracePeriodSeconds?: number;
}
interface Workload extends K8sObject {
  spec: { selector?: { matchLabels: Record<string, string> }; template: { metadata: { labels: Record<string, string> }; spec: PodSpec } };
}

function render(dir: string): K8sObject[] {
  // stderr taken: newer kubectl warns there that commonLabels is deprecated (see kustomization.yaml).
  const out = execFileSync('kubectl', ['kustomize', dir], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  return parseAllDocuments(out).map((d) => d.toJS() as K8sObject);
}

const base = render('k8s/');
const keda = render('k8s/optional/keda/');

const find = <T extends K8sObject = K8sObject>(objects: K8sObject[], kind: string, name: string): T => {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`${kind} ${name} not rendered`);
  return found as T;
};

const configMap = find<K8sObject & { data: Record<string, string> }>(base, 'ConfigMap', 'comfy-cloud-config');
const secret = find<K8sObject & { stringData: Record<string, string> }>(base, 'Secret', 'comfy-cloud-secrets');
const api = find<Workload>(base, 'Deployment', 'comfy-cloud-api');
const worker = find<Workload>(base, 'Deployment', 'comfy-cloud-worker');
const migrateJob = find<Workload>(base, 'Job', 'comfy-cloud-migrate');
const webhooks = find<Workload>(base, 'Deployment', 'comfy-cloud-webhooks');

const appImage = 'registry.example.com/comfy-cloud:0.1.0';
const isApp = (c: Container) => c.image === appImage;

/** The Secret as an operator applies it: every CHANGE-ME placeholder replaced. */
const filledSecret = Object.fromEntries(Object.entries(secret.stringData).map(([k, v]) => [k, v.replaceAll('CHANGE-ME', `operator-chosen-${k.length}-0123456789`)]));

/** The environment a container of ours starts with: envFrom sources, then its own env. */
function containerEnv(c: Container, pod: string, secretData: Record<string, string> = filledSecret): Record<string, string> {
  const env: Record<string, string> = {};
  for (const from of c.envFrom ?? []) {
    if (from.configMapRef) {
      expect(from.configMapRef.name).toBe(configMap.metadata.name);
      Object.assign(env, configMap.data);
    }
    if (from.secretRef) {
      expect(from.secretRef.name).toBe(secret.metadata.name);
      Object.assign(env, secretData);
    }
  }
  for (const v of c.env ?? []) {
    // A pod name stands in for metadata.name.
    env[v.name] = v.value ?? (v.valueFrom?.fieldRef?.fieldPath === 'metadata.name' ? `${pod}-7d9f8c6b5d-x2x4q` : '');
  }
  return env;
}

function portOf(c: Container, port: number | string): number {
  if (typeof port === 'number') return port;
  const named = c.ports?.find((p) => p.name === port);
  if (!named) throw new Error(`${c.name} has no port named ${port}`);
  return named.containerPort;
}

const container = (w: Workload, name: string) => {
  const c = w.spec.template.spec.containers.find((x) => x.name === name);
  if (!c) throw new Error(`${w.metadata.name} has no container ${name}`);
  return c;
};

describe('k8s/ (kubectl apply -k k8s/)', () => {
  it('renders with kustomize into the expected objects, all in one namespace', () => {
    const kinds = base.map((o) => `${o.kind}/${o.metadata.name}`).sort();
    expect(kinds).toEqual(
      [
        'ConfigMap/comfy-cloud-config',
        'Deployment/comfy-cloud-api',
        'Deployment/comfy-cloud-worker',
        'Deployment/comfy-cloud-webhooks',
        'HorizontalPodAutoscaler/comfy-cloud-api',
        'Ingress/comfy-cloud-api',
        'Job/comfy-cloud-migrate',
        'Namespace/comfy-cloud',
        'PodDisruptionBudget/comfy-cloud-api',
        'PodDisruptionBudget/comfy-cloud-worker',
        'PodDisruptionBudget/comfy-cloud-webhooks',
        'Secret/comfy-cloud-secrets',
        'Service/comfy-cloud-api',
      ].sort(),
    );
    for (const o of [...base, ...keda]) {
      if (o.kind !== 'Namespace') expect({ o: `${o.kind}/${o.metadata.name}`, ns: o.metadata.namespace }).toEqual({ o: `${o.kind}/${o.metadata.name}`, ns: 'comfy-cloud' });
    }
    // The base must apply on a cluster without KEDA.
    expect(base.filter((o) => o.apiVersion.startsWith('keda.sh/'))).toEqual([]);
  });

  it('validates every rendered object against the Kubernetes schemas', () => {
    expect(validateObjects([...base, ...keda])).toEqual([]);
  });

  it('has no unknown or misplaced fields (type-checked against the Kubernetes API types)', () => {
    expect(typeCheckObjects([...base, ...keda])).toEqual([]);
    // The check is not vacuous: a misspelt field is caught.
    const broken = structuredClone(worker);
    (broken.spec.template.spec.containers[0] as unknown as Record<string, unknown>).readinesProbe = { httpGet: { path: '/readyz', port: 8081 } };
    expect(typeCheckObjects([broken]).join('\n')).toMatch(/readinesProbe/);
  });

  it('runs every app container with a role the image maps to a built entry point', () => {
    const app = [api, worker, webhooks, migrateJob].flatMap((w) => [...w.spec.template.spec.containers, ...(w.spec.template.spec.initContainers ?? [])]).filter(isApp);
    expect(app.length).toBe(5);
    for (const c of app) {
      const role = c.args?.[0] as keyof typeof ROLE_ENTRIES;
      expect(role in ROLE_ENTRIES).toBe(true);
      expect(sourceExists(ROLE_ENTRIES[role])).toBe(true);
    }
    expect(container(migrateJob, 'migrate').args).toEqual(['migrate']);
    expect(api.spec.template.spec.initContainers?.map((c) => c.args)).toEqual([['migrate']]);
  });

  it('sets only variables the code reads, and each app container gets a configuration that loads', () => {
    const known = new Set(Object.keys(ENV_DEFAULTS));
    for (const key of [...Object.keys(configMap.data), ...Object.keys(secret.stringData)]) expect({ key, known: known.has(key) }).toEqual({ key, known: true });
    for (const w of [api, worker, webhooks, migrateJob]) {
      for (const c of [...w.spec.template.spec.containers, ...(w.spec.template.spec.initContainers ?? [])].filter(isApp)) {
        for (const v of c.env ?? []) expect({ c: c.name, key: v.name, known: known.has(v.name) }).toEqual({ c: c.name, key: v.name, known: true });
        const config = loadConfig(containerEnv(c, w.metadata.name));
        expect(config.env).toBe('production');
        expect(config.storage.driver).toBe('s3');
        // Applied as shipped, the template's placeholders are refused by name.
        const asShipped = () => loadConfig(containerEnv(c, w.metadata.name, secret.stringData));
        for (const name of ['SIGNING_SECRET', 'ROUTER_JWT_SECRET', 'OPERATOR_TOKEN']) expect(asShipped).toThrow(new RegExp(`${name}: still the template's CHANGE-ME placeholder`));
      }
    }
  });

  it('probes the api on the port it binds, on paths it serves', () => {
    const c = container(api, 'api');
    const env = containerEnv(c, api.metadata.name);
    expect(env.API_HOST).toBe('0.0.0.0');
    const port = Number(env.API_PORT);
    const served = apiHealthPaths();
    expect(c.livenessProbe?.httpGet?.path).toBe('/healthz');
    expect(c.readinessProbe?.httpGet?.path).toBe('/readyz');
    for (const probe of [c.livenessProbe, c.readinessProbe, c.startupProbe]) {
      expect(served.has(probe!.httpGet!.path)).toBe(true);
      expect(portOf(c, probe!.httpGet!.port)).toBe(port);
    }
    expect(api.metadata.name).toBe('comfy-cloud-api');
    expect(api.spec.template.metadata.labels['app.kubernetes.io/name']).toBe('comfy-cloud-api');
  });

  it('lets the api finish requests in flight within the pod\'s grace, after its preStop pause', () => {
    const pod = api.spec.template.spec;
    const c = container(api, 'api');
    const graceMs = Number(containerEnv(c, api.metadata.name).API_SHUTDOWN_GRACE_MS);
    expect(graceMs).toBe(Number(ENV_DEFAULTS.API_SHUTDOWN_GRACE_MS));
    const pause = c.lifecycle?.preStop?.exec?.command ?? [];
    expect(pause[0]).toBe('sleep');
    // The pause, the grace, a second for the last answers and the close of the connections to the stores.
    expect((pod.terminationGracePeriodSeconds ?? 30) * 1000).toBeGreaterThanOrEqual(Number(pause[1]) * 1000 + graceMs + 5_000);
  });

  it('routes the Service, Ingress, HPA and PDB to the api pods, with stream-friendly proxy settings', () => {
    const labels = api.spec.template.metadata.labels;
    const matches = (selector: Record<string, string>) => Object.entries(selector).every(([k, v]) => labels[k] === v);
    const service = find<K8sObject & { spec: { selector: Record<string, string>; ports: { name: string; targetPort: string | number }[] } }>(base, 'Service', 'comfy-cloud-api');
    expect(matches(service.spec.selector)).toBe(true);
    expect(portOf(container(api, 'api'), service.spec.ports[0]!.targetPort)).toBe(Number(configMap.data.API_PORT));

    const ingress = find<K8sObject & { spec: { rules: { http: { paths: { backend: { service: { name: string; port: { name?: string } } } }[] } }[] } }>(base, 'Ingress', 'comfy-cloud-api');
    const backend = ingress.spec.rules[0]!.http.paths[0]!.backend.service;
    expect(backend.name).toBe(service.metadata.name);
    expect(service.spec.ports.map((p) => p.name)).toContain(backend.port.name);
    const a = ingress.metadata.annotations ?? {};
    expect(Number(a['nginx.ingress.kubernetes.io/proxy-read-timeout'])).toBeGreaterThanOrEqual(3600);
    expect(Number(a['nginx.ingress.kubernetes.io/proxy-send-timeout'])).toBeGreaterThanOrEqual(3600);
    expect(a['nginx.ingress.kubernetes.io/proxy-buffering']).toBe('off');
    expect(a['nginx.org/websocket-services']).toBe(service.metadata.name);

    const hpa = find<K8sObject & { spec: { scaleTargetRef: { kind: string; name: string }; minReplicas: number } }>(base, 'HorizontalPodAutoscaler', 'comfy-cloud-api');
    expect(hpa.spec.scaleTargetRef).toMatchObject({ kind: 'Deployment', name: api.metadata.name });
    expect(hpa.spec.minReplicas).toBeGreaterThanOrEqual(2);
    const pdb = find<K8sObject & { spec: { selector: { matchLabels: Record<string, string> } } }>(base, 'PodDisruptionBudget', 'comfy-cloud-api');
    expect(matches(pdb.spec.selector.matchLabels)).toBe(true);
  });

  it('runs each worker with its engine in the same pod, the GPU on the engine', () => {
    const pod = worker.spec.template.spec;
    expect(pod.containers.map((c) => c.name)).toEqual(['worker', 'engine']);
    const w = container(worker, 'worker');
    const engine = container(worker, 'engine');
    expect(w.args).toEqual(['worker']);
    expect(engine.resources?.limits?.['nvidia.com/gpu']).toBe(1);
    expect(engine.resources?.requests?.['nvidia.com/gpu']).toBe(1);
    expect(w.resources?.limits?.['nvidia.com/gpu']).toBeUndefined();

    const env = containerEnv(w, worker.metadata.name);
    expect(env.ENGINE_URL).toBe('http://127.0.0.1:8188');
    const args = engine.args ?? [];
    expect(args[args.indexOf('--port') + 1]).toBe(String(urlPort(env.ENGINE_URL!)));
    expect(args[args.indexOf('--listen') + 1]).toBe('127.0.0.1');
    expect(loadConfig(env).worker.workerId).toMatch(/^comfy-cloud-worker-/);
  });

  it('probes the worker on its health port and paths, and the engine from inside its container', () => {
    const w = container(worker, 'worker');
    const env = containerEnv(w, worker.metadata.name);
    const served = workerHealthPaths();
    expect(w.livenessProbe?.httpGet?.path).toBe('/healthz');
    expect(w.readinessProbe?.httpGet?.path).toBe('/readyz');
    for (const probe of [w.livenessProbe, w.readinessProbe]) {
      expect(served.has(probe!.httpGet!.path)).toBe(true);
      expect(portOf(w, probe!.httpGet!.port)).toBe(Number(env.WORKER_PORT));
    }
    const engine = container(worker, 'engine');
    for (const probe of [engine.livenessProbe, engine.startupProbe]) expect(probe?.exec?.command.join(' ')).toContain('http://127.0.0.1:8188/system_stats');
  });

  it('probes the webhooks process on its health port and paths, and lets its attempts under way end', () => {
    const c = container(webhooks, 'webhooks');
    expect(c.args).toEqual(['webhooks']);
    const env = containerEnv(c, webhooks.metadata.name);
    expect(env.WEBHOOK_HOST).toBe('0.0.0.0');
    const served = workerHealthPaths();
    expect(c.livenessProbe?.httpGet?.path).toBe('/healthz');
    expect(c.readinessProbe?.httpGet?.path).toBe('/readyz');
    for (const probe of [c.livenessProbe, c.readinessProbe]) {
      expect(served.has(probe!.httpGet!.path)).toBe(true);
      expect(portOf(c, probe!.httpGet!.port)).toBe(Number(env.WEBHOOK_PORT));
    }
    const timeoutMs = Number(env.WEBHOOK_TIMEOUT_MS ?? ENV_DEFAULTS.WEBHOOK_TIMEOUT_MS);
    expect((webhooks.spec.template.spec.terminationGracePeriodSeconds ?? 30) * 1000).toBeGreaterThan(timeoutMs + 5_000);
    expect(loadConfig(env).api.publicUrl).toBe(configMap.data.PUBLIC_URL);
  });

  it('gives a worker time to hand its job back, and keeps the engine up until the worker is gone', () => {
    const pod = worker.spec.template.spec;
    const graceMs = Number(containerEnv(container(worker, 'worker'), worker.metadata.name).WORKER_SHUTDOWN_GRACE_MS);
    expect(graceMs).toBe(Number(ENV_DEFAULTS.WORKER_SHUTDOWN_GRACE_MS));
    // The job's grace, then closing connections and deregistering: at least 15 s beyond it.
    expect((pod.terminationGracePeriodSeconds ?? 30) * 1000).toBeGreaterThanOrEqual(graceMs + 15_000);
    const preStop = container(worker, 'engine').lifecycle?.preStop?.exec?.command.join(' ') ?? '';
    expect(preStop).toContain(`http://127.0.0.1:${configMap.data.WORKER_PORT}/healthz`);
    const waitSeconds = Number(/time\.time\(\) \+ (\d+)/.exec(preStop)?.[1]);
    expect(waitSeconds).toBeLessThan(pod.terminationGracePeriodSeconds!);
  });

  it('sets resource requests and limits on every container', () => {
    for (const w of [api, worker, webhooks, migrateJob]) {
      for (const c of [...w.spec.template.spec.containers, ...(w.spec.template.spec.initContainers ?? [])]) {
        expect({ c: c.name, cpu: c.resources?.requests?.cpu !== undefined, memory: c.resources?.requests?.memory !== undefined }).toEqual({ c: c.name, cpu: true, memory: true });
        expect({ c: c.name, memoryLimit: c.resources?.limits?.memory !== undefined }).toEqual({ c: c.name, memoryLimit: true });
      }
    }
  });
});

describe('k8s/optional/keda', () => {
  const scaled = find<K8sObject & {
    spec: {
      scaleTargetRef: { name: string; kind?: string; envSourceContainerName?: string };
      minReplicaCount: number;
      triggers: { type: string; metadata: Record<string, string>; authenticationRef?: { name: string } }[];
    };
  }>(keda, 'ScaledObject', 'comfy-cloud-worker');

  it('scales the worker Deployment', () => {
    expect(scaled.spec.scaleTargetRef).toMatchObject({ kind: 'Deployment', name: worker.metadata.name, envSourceContainerName: 'worker' });
    expect(scaled.spec.minReplicaCount).toBeGreaterThanOrEqual(1);
  });

  it("watches BullMQ's wait list under the configured Redis prefix", () => {
    const keys = jobKeys(configMap.data.REDIS_PREFIX!);
    const redis = scaled.spec.triggers.find((t) => t.type === 'redis');
    expect(redis?.metadata.listName).toBe(`${keys.bullPrefix}:${keys.queueName}:wait`);
    expect(redis?.metadata.listName).toBe('cc:bull:engine-jobs:wait');
    const auth = redis?.authenticationRef?.name;
    expect(keda.some((o) => o.kind === 'TriggerAuthentication' && o.metadata.name === auth)).toBe(true);
  });

  it('watches the undispatched backlog in PostgreSQL through the connection the worker already has', () => {
    const pg = scaled.spec.triggers.find((t) => t.type === 'postgresql');
    expect(pg?.metadata.query).toMatch(/FROM jobs WHERE status = 'queued' AND dispatched_at IS NULL/);
    expect(Object.keys(containerEnv(container(worker, 'worker'), worker.metadata.name))).toContain(pg?.metadata.connectionFromEnv);
  });
});
