import type { IncomingMessage } from 'node:http';
import type { FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';

type RawWithDeployment = IncomingMessage & { deploymentId?: string };

const DEPLOYMENT_ID = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * The engine serves each of its routes both with and without `/api` (server.py adds the prefixed
 * twin of every route; its `/internal/...` routes have no twin). These are the first segments of
 * those routes. The v1 controllers live under `/api`; a request for one of them without the
 * prefix is served as the prefixed route. Nothing else of the service starts with these names:
 * v2 is `/api/v2/...`, the router `/v1/models`, a deployment's pinned workflow `/workflow`, and
 * `/docs`, `/openapi.json`, `/healthz`, `/readyz`, `/metrics`, `/blobs/...`, `/admin/...` stay
 * as they are. `/ws` needs no rewrite: the socket server answers it at both addresses.
 */
export const ENGINE_ROUTE_ROOTS = [
  'prompt', 'queue', 'history', 'view', 'upload', 'object_info', 'interrupt', 'free', 'system_stats', 'features',
  'embeddings', 'extensions', 'models', 'userdata', 'v2/userdata', 'settings', 'users', 'internal', 'experiment',
  'view_metadata', 'i18n', 'workflow_templates', 'job',
];

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * Deployment surface routing: `/deployment/{id}/...` (under BASE_PATH) is served as `...` with the
 * deployment remembered, and so is any path on the host `{id}.<DEPLOYMENT_DOMAIN>`.
 */
function deploymentRewriter(config: Config): ((req: IncomingMessage, url: string) => string) | undefined {
  if (config.surface !== 'deployment') return undefined;
  const prefix = new RegExp(`^${escapeRegExp(config.api.basePath)}/deployment/([^/?#]+)(.*)$`);
  const domain = config.deploymentDomain.toLowerCase();
  return (req, url) => {
    const raw = req as RawWithDeployment;
    const m = prefix.exec(url);
    if (m && DEPLOYMENT_ID.test(m[1]!)) {
      raw.deploymentId = m[1];
      const rest = m[2] ?? '';
      return `${config.api.basePath}${rest.startsWith('/') ? rest : `/${rest}`}`;
    }
    const host = (req.headers.host ?? '').split(':')[0]!.toLowerCase();
    if (domain && host.endsWith(`.${domain}`)) {
      const id = host.slice(0, -(domain.length + 1));
      if (DEPLOYMENT_ID.test(id)) raw.deploymentId = id;
    }
    return url;
  };
}

/** `{BASE_PATH}/prompt` to `{BASE_PATH}/api/prompt`, for every root in ENGINE_ROUTE_ROOTS. */
function engineRouteRewriter(config: Config): (url: string) => string {
  const base = config.api.basePath;
  const unprefixed = new RegExp(`^${escapeRegExp(base)}/(?:${ENGINE_ROUTE_ROOTS.map(escapeRegExp).join('|')})(?=[/?#]|$)`);
  return (url) => (unprefixed.test(url) ? `${base}/api${url.slice(base.length)}` : url);
}

/**
 * How a request URL is routed, before Fastify (and the WebSocket server, which Fastify does not
 * route) looks at it: the deployment surface's prefix and host, then the engine's unprefixed
 * routes. The one place where URLs are rewritten.
 */
export function requestUrlRewriter(config: Config): (req: IncomingMessage) => string {
  const deployment = deploymentRewriter(config);
  const engine = engineRouteRewriter(config);
  return (req) => {
    const url = req.url ?? '/';
    return engine(deployment ? deployment(req, url) : url);
  };
}

/** Of an HTTP request, or of a WebSocket upgrade (`{ raw: request }`), which Fastify does not route. */
export function deploymentIdOf(request: { raw: IncomingMessage }): string | null {
  return (request.raw as RawWithDeployment).deploymentId ?? null;
}

/** The prefix every link of this request carries: BASE_PATH, plus the deployment's gateway prefix. */
export function linkBase(request: FastifyRequest, config: Config): string {
  const deployment = deploymentIdOf(request);
  return `${config.api.basePath}${deployment ? `/deployment/${deployment}` : ''}`;
}
