/** Optimal string alignment distance: edits, including swapping two neighbours, to turn a into b. */
export function editDistance(a: string, b: string): number {
  const rows = a.length + 1;
  const cols = b.length + 1;
  const d: number[][] = Array.from({ length: rows }, (_, i) => {
    const row = new Array<number>(cols).fill(0);
    row[0] = i;
    return row;
  });
  for (let j = 0; j < cols; j++) d[0]![j] = j;
  for (let i = 1; i < rows; i++) {
    for (let j = 1; j < cols; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, d[i - 2]![j - 2]! + 1);
      d[i]![j] = best;
    }
  }
  return d[a.length]![b.length]!;
}

/** Up to `count` ids closest to what the caller asked for; the model segment weighs most. */
export function closestIds(asked: string, candidates: readonly string[], count = 3): string[] {
  const wanted = asked.toLowerCase().slice(0, 200);
  const wantedModel = wanted.slice(wanted.indexOf('/') + 1);
  const scored = candidates.map((id) => {
    const model = id.slice(id.indexOf('/') + 1);
    const score = Math.min(editDistance(wanted, id), editDistance(wantedModel, model) + 1);
    return { id, score: score / Math.max(id.length, wanted.length, 1) };
  });
  scored.sort((x, y) => x.score - y.score || (x.id < y.id ? -1 : 1));
  return scored.slice(0, count).map((s) => s.id);
}
