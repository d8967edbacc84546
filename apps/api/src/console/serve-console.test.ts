import { loadConfig } from '#libs/config';
import { cacheControlFor, consoleCsp } from './serve-console.js';

describe('the console page\'s headers', () => {
  const base = { DATABASE_URL: 'postgresql://x@127.0.0.1/x', NODE_ENV: 'test' };

  it('allows the page its own origin only, with the local store (whose signed URLs are on the API)', () => {
    const csp = consoleCsp(loadConfig({ ...base, STORAGE_DRIVER: 'local' }));
    const directives = Object.fromEntries(csp.split('; ').map((d) => [d.split(' ')[0], d.split(' ').slice(1).join(' ')]));
    expect(directives).toMatchObject({
      'default-src': "'self'",
      'script-src': "'self' 'wasm-unsafe-eval'",
      'style-src': "'self'",
      'connect-src': "'self'",
      'img-src': "'self' blob: data:",
      'media-src': "'self' blob: data:",
      'object-src': "'none'",
      'frame-ancestors': "'none'",
    });
    expect(csp).not.toMatch(/'unsafe-inline'|'unsafe-eval'|\*/);
  });

  it('adds the origin of the S3 endpoint that signs output URLs (the public one when set)', () => {
    const s3 = { ...base, STORAGE_DRIVER: 's3', S3_ENDPOINT: 'http://minio.internal:9000', S3_ACCESS_KEY_ID: 'k', S3_SECRET_ACCESS_KEY: 's' };
    expect(consoleCsp(loadConfig(s3))).toContain("connect-src 'self' http://minio.internal:9000;");
    const csp = consoleCsp(loadConfig({ ...s3, S3_PUBLIC_ENDPOINT: 'https://files.example.com/bucket-path' }));
    expect(csp).toContain("img-src 'self' blob: data: https://files.example.com;");
    expect(csp).toContain("media-src 'self' blob: data: https://files.example.com;");
    expect(csp).not.toContain('minio.internal');
  });

  it('caches Vite\'s hashed files for a year and nothing else', () => {
    expect(cacheControlFor('/srv/dist/console/assets/index-CNKIkgaH.js')).toBe('public, max-age=31536000, immutable');
    expect(cacheControlFor('/srv/dist/console/assets/index-CBOEN8-7.css')).toBe('public, max-age=31536000, immutable');
    expect(cacheControlFor('/srv/dist/console/index.html')).toBe('no-store');
    expect(cacheControlFor('/srv/dist/console/assets/readme.txt')).toBe('no-store');
  });
});
