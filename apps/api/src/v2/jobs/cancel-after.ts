import { ApiError } from '#libs/contracts';

// `Cancel-After` on a submission, in the syntax Replicate's API takes: a duration of hours,
// minutes and seconds in that order (`90s`, `5m`, `1h30m`, `2h`), or plain seconds (`300`). The
// tier's maximum caps it (submission); at least a second.
const DURATION = /^(?:(\d{1,6})h)?(?:(\d{1,6})m)?(?:(\d{1,8})s)?$/;

/** Seconds, or undefined without the header; 400 for a value that is not a duration. */
export function parseCancelAfter(header: string | string[] | undefined): number | undefined {
  if (header === undefined) return undefined;
  const value = (Array.isArray(header) ? header.join(',') : header).trim();
  const bad = () => ApiError.invalid('Cancel-After must be a duration such as 90s, 5m or 1h30m, or a number of seconds, of at least 1 second.', { header: 'Cancel-After' });
  let seconds: number;
  if (/^\d{1,9}$/.test(value)) seconds = Number(value);
  else {
    const m = value === '' ? null : DURATION.exec(value);
    if (!m) throw bad();
    seconds = Number(m[1] ?? 0) * 3600 + Number(m[2] ?? 0) * 60 + Number(m[3] ?? 0);
  }
  if (seconds < 1) throw bad();
  return seconds;
}
