import { spawn } from 'node:child_process';
import { ROOT } from './processes.js';

export interface Route {
  method: string;
  url: string;
}

/** Every route the built API registers, as `test/observability/route-dump.mjs` lists them. */
export function dumpRoutes(env: Record<string, string>): Promise<Route[]> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['test/observability/route-dump.mjs'], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('exit', (code) => {
      const line = out.split('\n').find((l) => l.startsWith('{"msg":"routes"'));
      if (code !== 0 || !line) reject(new Error(`route dump failed (${code}): ${err}${out}`));
      else resolve((JSON.parse(line) as { routes: Route[] }).routes);
    });
  });
}
