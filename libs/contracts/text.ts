// Text PostgreSQL cannot store: NUL (refused in text and jsonb) or a lone UTF-16 surrogate (not
// Unicode at all). Checked where client text is accepted, so it is a 4xx and never a failed insert.
// eslint-disable-next-line no-control-regex
const UNSTORABLE = /[\u0000\p{Cs}]/u;

export function isStorableText(value: string): boolean {
  return !UNSTORABLE.test(value);
}
