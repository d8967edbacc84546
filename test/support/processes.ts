import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { SERVICE_NODE_FLAGS } from '#libs/runtime';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface RunningProcess {
  child: ChildProcess;
  port: number;
  url: string;
  /** Every line the process printed (stdout and stderr), for assertions on logs. */
  output: string[];
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/**
 * Starts a built entry point (dist/...) and waits for its `{"msg":"listening","port":N}` line.
 * Processes are started from the build so tests exercise what operators run.
 */
export async function startProcess(
  entry: string,
  env: Record<string, string>,
  options: { readyTimeoutMs?: number; readyMessage?: string } = {},
): Promise<RunningProcess> {
  const child = spawn(process.execPath, [...SERVICE_NODE_FLAGS, path.join(ROOT, 'dist', entry)], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const output: string[] = [];
  const readyMessage = options.readyMessage ?? 'listening';
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${entry} did not start in time:\n${output.join('\n')}`)), options.readyTimeoutMs ?? 20_000);
    const onLine = (line: string) => {
      output.push(line);
      if (!line.startsWith('{')) return;
      try {
        const msg = JSON.parse(line) as { msg?: string; port?: number };
        if (msg.msg === readyMessage) {
          clearTimeout(timer);
          resolve(msg.port ?? 0);
        }
      } catch {
        // not a JSON line
      }
    };
    createInterface({ input: child.stdout! }).on('line', onLine);
    createInterface({ input: child.stderr! }).on('line', onLine);
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${entry} exited with ${code} before it was ready:\n${output.join('\n')}`));
    });
  });
  return {
    child,
    port,
    url: `http://127.0.0.1:${port}`,
    output,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

/** Resident memory of a process in MiB: now (VmRSS) or its peak so far (VmHWM). */
export function memoryMiB(pid: number, field: 'VmRSS' | 'VmHWM' = 'VmRSS'): number {
  return Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;
}

/** Runs a built command line to completion. */
export function runCommand(entry: string, args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(ROOT, 'dist', entry), ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}
