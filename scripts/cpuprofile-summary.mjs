// Where a process's CPU went, from a V8 .cpuprofile (`node --cpu-prof`; for the API a bench starts,
// BENCH_API_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof", see bench/support.mjs):
//
//   node scripts/cpuprofile-summary.mjs <file.cpuprofile> [from-s to-s]
//
// Prints the busy share of each half second (to find the measured phase among start-up and
// shutdown), then, for the samples between from-s and to-s (seconds since the profile began; all
// when omitted): self time by function, self time by package or file, and inclusive time by
// function. Time in a socket write (writev, writeUtf8String) includes the moments the process
// was preempted there by the peer it woke (PostgreSQL, Redis): on a loaded 2-core machine that is
// waiting, not work. Async continuations start their own stacks, so inclusive times of a request's
// code are split across them.
import { readFileSync } from 'node:fs';

const [file, fromArg, toArg] = process.argv.slice(2);
if (!file) {
  console.error('usage: node scripts/cpuprofile-summary.mjs <file.cpuprofile> [from-s to-s]');
  process.exit(2);
}
const profile = JSON.parse(readFileSync(file, 'utf8'));
const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of profile.nodes) for (const child of n.children ?? []) parent.set(child, n.id);
const idle = new Set(profile.nodes.filter((n) => n.callFrame.functionName === '(idle)').map((n) => n.id));
const name = (n) => `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.replace(/^.*\/(node_modules|dist)\//, '$1/')}:${n.callFrame.lineNumber + 1}`;
const where = (n) => n.callFrame.url.replace(/^.*\/(node_modules|dist)\//, '$1/').replace(/^(node_modules\/(@[^/]+\/)?[^/]+).*/, '$1') || '(native)';

// Each sample's time, and its moment since the start.
const at = [];
let t = 0;
for (let i = 0; i < profile.samples.length; i++) at.push((t += profile.timeDeltas[i] ?? 0));

const halves = [];
profile.samples.forEach((id, i) => {
  const k = Math.floor(at[i] / 500_000);
  halves[k] ??= [0, 0];
  halves[k][idle.has(id) ? 0 : 1] += profile.timeDeltas[i] ?? 0;
});
console.log(`busy % per half second: ${halves.map((h = [1, 0], k) => `${k / 2}s ${Math.round((100 * h[1]) / (h[0] + h[1] || 1))}`).join('  ')}`);

const from = fromArg === undefined ? 0 : Number(fromArg) * 1e6;
const to = toArg === undefined ? Infinity : Number(toArg) * 1e6;
const self = new Map();
const byWhere = new Map();
const inclusive = new Map();
let total = 0;
profile.samples.forEach((id, i) => {
  if (at[i] < from || at[i] > to) return;
  const dt = profile.timeDeltas[i] ?? 0;
  total += dt;
  const leaf = nodes.get(id);
  self.set(name(leaf), (self.get(name(leaf)) ?? 0) + dt);
  byWhere.set(where(leaf), (byWhere.get(where(leaf)) ?? 0) + dt);
  const seen = new Set();
  for (let cur = id; cur !== undefined; cur = parent.get(cur)) {
    const key = name(nodes.get(cur));
    if (seen.has(key)) continue;
    seen.add(key);
    inclusive.set(key, (inclusive.get(key) ?? 0) + dt);
  }
});
const share = (x) => `${((100 * x) / total).toFixed(1).padStart(5)}%`;
const top = (map, n) => [...map].sort((a, b) => b[1] - a[1]).slice(0, n).map(([k, v]) => `${share(v)}  ${k}`).join('\n');
console.log(`\n${(total / 1000).toFixed(0)} ms of samples\n\n-- self, by function\n${top(self, 50)}`);
console.log(`\n-- self, by package or file\n${top(byWhere, 30)}`);
console.log(`\n-- inclusive, by function\n${top(inclusive, 80)}`);
