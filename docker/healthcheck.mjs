// Container health check without curl or wget in the image: `node docker/healthcheck.mjs URL`
// exits 0 when URL answers 2xx within the timeout, 1 otherwise. Used by Compose and usable by
// any orchestrator that runs a command.
const url = process.argv[2];
const timeoutMs = Number(process.argv[3] ?? 3000);
if (!url) {
  process.stderr.write('usage: node healthcheck.mjs URL [timeout-ms]\n');
  process.exit(64);
}
try {
  const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
  process.exit(res.ok ? 0 : 1);
} catch (err) {
  process.stderr.write(`${url}: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
