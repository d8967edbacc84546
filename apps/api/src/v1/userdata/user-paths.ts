// Names in the user folder, resolved as the engine resolves them (app/user_manager.py,
// get_request_user_filepath): the name is joined to the user's folder `user/default`, normalized
// (`.`, `..`, repeated and trailing slashes), and refused when the result is not inside that folder.
// The result here is the path relative to the folder ('' for the folder itself), which is what the
// database keys files by; it never names anything outside the caller's own folder.

/** The engine's folder of the (single) user, relative to the directory above it. */
const USER_FOLDER = ['user', 'default'];
/** Linux's limits on one name and a whole path, where the engine's writes fail with a 400. */
const MAX_SEGMENT_BYTES = 255;
const MAX_PATH_BYTES = 4095;

/**
 * Python's `urllib.parse.unquote`, which the engine applies to a name that still holds a `%` after
 * the framework decoded it once: `%XX` runs become UTF-8 text (bad bytes as U+FFFD), anything
 * else stays as it is.
 */
export function unquote(value: string): string {
  if (!value.includes('%')) return value;
  return value.replace(/(?:%[0-9a-fA-F]{2})+/g, (run) => Buffer.from(run.replace(/%/g, ''), 'hex').toString('utf8'));
}

export type Resolved = { ok: true; path: string } | { ok: false; reason: 'outside' | 'invalid' };

/**
 * `name` (already decoded once by the router or the query parser) inside the user folder. The
 * engine decodes it once more when it holds a `%`. `outside`: it leaves the folder (the engine's
 * 403); `invalid`: no file could have this name (a NUL, a name longer than the file system allows:
 * the engine fails on these when it touches the disk).
 */
export function resolveUserPath(name: string): Resolved {
  const decoded = unquote(name);
  if (decoded.includes('\u0000')) return { ok: false, reason: 'invalid' };
  // An absolute name replaces the folder in the join; no absolute name is inside it.
  if (decoded.startsWith('/')) return { ok: false, reason: 'outside' };
  const stack = [...USER_FOLDER];
  for (const segment of decoded.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') {
      // Above the directory that holds `user/` the way back down is unknown: outside.
      if (stack.length === 0) return { ok: false, reason: 'outside' };
      stack.pop();
    } else {
      stack.push(segment);
    }
  }
  if (stack.length < USER_FOLDER.length || USER_FOLDER.some((s, i) => stack[i] !== s)) return { ok: false, reason: 'outside' };
  const inside = stack.slice(USER_FOLDER.length);
  if (inside.some((s) => Buffer.byteLength(s) > MAX_SEGMENT_BYTES)) return { ok: false, reason: 'invalid' };
  const path = inside.join('/');
  if (Buffer.byteLength(path) > MAX_PATH_BYTES) return { ok: false, reason: 'invalid' };
  return { ok: true, path };
}

/** The folders that hold `path`, outermost first: `a/b/c.json` → `a`, `a/b`. */
export function parentFolders(path: string): string[] {
  const parts = path.split('/');
  return parts.slice(0, -1).map((_, i) => parts.slice(0, i + 1).join('/'));
}

export function baseName(path: string): string {
  return path.slice(path.lastIndexOf('/') + 1);
}

/** `path` relative to `folder` ('' is the user folder), or null when it is not under it. */
export function relativeTo(folder: string, path: string): string | null {
  if (folder === '') return path;
  return path.startsWith(`${folder}/`) ? path.slice(folder.length + 1) : null;
}

/** Python's glob skips names starting with a dot, at every level a pattern matches. */
export function isHidden(relative: string): boolean {
  return relative.split('/').some((s) => s.startsWith('.'));
}
