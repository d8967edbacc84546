import { isRawJson } from '#libs/contracts';
import { CACHE_SCOPE_INPUT } from './cache-scope.js';

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * What the engine says about a job, as its tenant may see it. The engine knows the job's inputs by
 * the names the worker staged them under, inside its input folder, and sees the cache scope the
 * worker adds to every node: in error messages, tracebacks, `current_inputs` and printed log lines
 * these become the names the tenant used, and the scope disappears. Nothing of the engine's folders
 * (where other tenants' inputs are staged) reaches a tenant.
 */
export class TenantView {
  private readonly pattern: RegExp | null;

  constructor(
    private readonly tenantNames: Map<string, string>,
    stagingFolder: string | null,
  ) {
    const names = [...tenantNames.keys()].sort((a, b) => b.length - a.length).map(escapeRegExp);
    // A staged name with whatever path the engine put before it (`/…/ComfyUI/input/cloud-…/x.png`,
    // Windows paths too, whose drive letter stands alone: not the `g:` of `embedding:cloud-…`);
    // then the staging folder itself, wherever it is still named.
    const alternatives = names.map((n) => `(?:(?<![A-Za-z0-9])[A-Za-z]:)?(?:[^\\s'"\`()\\[\\]{},]*[\\\\/])?${n.split('/').join('[\\\\/]')}`);
    if (stagingFolder) alternatives.push(`(?:(?<![A-Za-z0-9])[A-Za-z]:)?(?:[^\\s'"\`()\\[\\]{},]*[\\\\/])?${escapeRegExp(stagingFolder)}(?:[\\\\/])?`);
    this.pattern = alternatives.length > 0 ? new RegExp(alternatives.join('|'), 'g') : null;
  }

  /** A text as the tenant may read it. */
  text(value: string): string {
    if (!this.pattern) return value;
    return value.replace(this.pattern, (match) => {
      for (const [engine, tenant] of this.tenantNames) if (match.endsWith(engine) || match.replace(/\\/g, '/').endsWith(engine)) return tenant;
      return '';
    });
  }

  /** Any JSON value with its strings rewritten and the cache scope taken out of every object. */
  value<T>(value: T): T {
    if (typeof value === 'string') return this.text(value) as T;
    if (Array.isArray(value)) return value.map((v) => this.value(v)) as T;
    if (!isObject(value) || isRawJson(value)) return value;
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) if (k !== CACHE_SCOPE_INPUT) out[this.text(k)] = this.value(v);
    return out as T;
  }
}
