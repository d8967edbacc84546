import { readFileSync } from 'node:fs';
import { ConfigError, ENV_DEFAULTS, loadConfig } from '#libs/config';

describe('configuration', () => {
  it('has a working default for every variable', () => {
    const config = loadConfig({});
    expect(config.api.port).toBe(8080);
    expect(config.storage).toEqual({ driver: 'local', dir: '.data/blobs' });
    expect(config.surface).toBe('cloud');
    expect(config.maxUploadBytes).toBe(100 * 1024 * 1024);
  });

  it.each([
    ['API_PORT', 'eighty'],
    ['API_PORT', '70000'],
    ['DATABASE_URL', 'mysql://x'],
    ['REDIS_URL', 'not a url'],
    ['SURFACE', 'moon'],
    ['BASE_PATH', 'no-leading-slash'],
    ['MAX_UPLOAD_BYTES', '-1'],
    ['S3_FORCE_PATH_STYLE', 'maybe'],
    ['SIGNING_SECRET', 'short'],
    ['LOG_LEVEL', 'loud'],
    ['OVERLOAD_MAX_EVENT_LOOP_UTILIZATION', '1.5'],
    ['OVERLOAD_MAX_HEAP_USED_FRACTION', '90%'],
    ['OVERLOAD_MAX_EVENT_LOOP_DELAY_MS', '-1'],
    ['OVERLOAD_SAMPLE_INTERVAL_MS', '0'],
    ['OVERLOAD_RETRY_AFTER_SECONDS', '0'],
    ['OVERLOAD_MAX_ACCEPT_QUEUE', 'many'],
    ['HTTP_LISTEN_BACKLOG', '0'],
    ['STORAGE_WRITE_PROBE_INTERVAL_MS', '1.5'],
    ['WEBHOOK_RETRY_SCALE', 'fast'],
    ['WEBHOOK_TIMEOUT_MS', '0'],
    ['WEBHOOK_CONCURRENCY', '0'],
  ])('stops on a bad %s and names it', (name, value) => {
    expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
    expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`${name}:`));
  });

  it('refuses the development signing secret in production', () => {
    expect(() => loadConfig({ NODE_ENV: 'production' })).toThrow(/SIGNING_SECRET/);
    expect(loadConfig({ NODE_ENV: 'production', SIGNING_SECRET: 'a-real-production-secret-value' }).env).toBe('production');
  });

  it("refuses the Secret template's placeholders for access-guarding secrets in production", () => {
    const production = { NODE_ENV: 'production', SIGNING_SECRET: 'a-real-production-secret-value' };
    for (const name of ['SIGNING_SECRET', 'ROUTER_JWT_SECRET', 'OPERATOR_TOKEN', 'SELF_HOSTED_TOKEN']) {
      expect(() => loadConfig({ ...production, [name]: 'CHANGE-ME-to-32-random-bytes-base64' })).toThrow(new RegExp(`${name}: still the template's CHANGE-ME placeholder`));
    }
    expect(loadConfig({ ...production, ROUTER_JWT_SECRET: 'a-real-router-secret' }).env).toBe('production');
    // A development stack may keep whatever it likes.
    expect(loadConfig({ OPERATOR_TOKEN: 'CHANGE-ME' }).env).toBe('development');
  });

  it('keeps the self-hosted surface on loopback (8189) unless a token is set', () => {
    expect(loadConfig({ SURFACE: 'self-hosted' }).api).toMatchObject({ host: '127.0.0.1', port: 8189 });
    expect(() => loadConfig({ SURFACE: 'self-hosted', API_HOST: '0.0.0.0' })).toThrow(/API_HOST:/);
    expect(loadConfig({ SURFACE: 'self-hosted', API_HOST: '0.0.0.0', SELF_HOSTED_TOKEN: 'a-static-token' }).api.host).toBe('0.0.0.0');
  });

  it('tells loopback addresses from host names that only look like them', () => {
    for (const host of ['127.0.0.1', '127.0.1.1', 'localhost', '::1']) expect(loadConfig({ SURFACE: 'self-hosted', API_HOST: host }).api.host).toBe(host);
    // A name resolves wherever its DNS says; "127." at its start proves nothing.
    for (const host of ['127.example.com', '127.0.0.1.nip.io', '::', '0.0.0.0', '192.168.1.10']) {
      expect(() => loadConfig({ SURFACE: 'self-hosted', API_HOST: host })).toThrow(/API_HOST: the self-hosted surface binds beyond loopback only with SELF_HOSTED_TOKEN/);
    }
  });

  it('reads CORS_ALLOWED_ORIGINS as `*`, a list of origins, or none', () => {
    expect(loadConfig({}).api.corsOrigins).toEqual([]);
    expect(loadConfig({ CORS_ALLOWED_ORIGINS: '*' }).api.corsOrigins).toBe('*');
    expect(loadConfig({ CORS_ALLOWED_ORIGINS: ' https://app.example.com , http://localhost:5173,https://app.example.com' }).api.corsOrigins).toEqual(['https://app.example.com', 'http://localhost:5173']);
    // What a browser would never send as its Origin is a mistake, named at startup.
    for (const bad of ['app.example.com', 'https://app.example.com/', 'https://app.example.com/path', 'https://App.example.com', 'http://localhost:80', 'ftp://files.example.com', '*,https://app.example.com', 'null']) {
      expect(() => loadConfig({ CORS_ALLOWED_ORIGINS: bad })).toThrow(/CORS_ALLOWED_ORIGINS:/);
    }
  });

  it('switches to the S3 driver when an endpoint is given', () => {
    const config = loadConfig({ S3_ENDPOINT: 'http://127.0.0.1:9000', S3_BUCKET: 'media' });
    expect(config.storage).toMatchObject({ driver: 's3', endpoint: 'http://127.0.0.1:9000', publicEndpoint: 'http://127.0.0.1:9000', bucket: 'media', forcePathStyle: true });
  });

  it('documents the self-hosted port default where API_PORT and SURFACE are described', () => {
    const port = String(loadConfig({ SURFACE: 'self-hosted' }).api.port);
    const lines = readFileSync('.env.example', 'utf8').split('\n');
    const at = lines.indexOf(`API_PORT=${ENV_DEFAULTS.API_PORT}`);
    // The comment block just above the variable.
    const comment = lines.slice(0, at).reverse().filter((_l, i, all) => all.slice(0, i + 1).every((x) => x.startsWith('#'))).join(' ');
    expect(comment).toContain(port);
    const surfaceRow = readFileSync('README.md', 'utf8').split('\n').find((l) => l.startsWith('| `SURFACE` |'));
    expect(surfaceRow).toContain(port);
    expect(surfaceRow).toContain('SELF_HOSTED_TOKEN');
  });

  it('is listed whole, with the same defaults, in .env.example', () => {
    const example = new Map(
      readFileSync('.env.example', 'utf8')
        .split('\n')
        .filter((l) => /^[A-Z0-9_]+=/.test(l))
        .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)] as const),
    );
    for (const [name, value] of Object.entries(ENV_DEFAULTS)) {
      expect(`${name}=${example.get(name)}`).toBe(`${name}=${value}`);
    }
  });
});
