import type { IncomingMessage } from 'node:http';
import type { FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';

type RawWithDeployment = IncomingMessage & { deploymentId?: string };

const DEPLOYMENT_ID = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/**
 * Deployment surface routing, before Fastify routes the request: `/deployment/{id}/...` (under
 * BASE_PATH) is served as `...` with the deployment remembered, and so is any path on the host
 * `{id}.<DEPLOYMENT_DOMAIN>`.
 */
export function deploymentRewriter(config: Config): ((req: IncomingMessage) => string) | undefined {
  if (config.surface !== 'deployment') return undefined;
  const prefix = new RegExp(`^${escapeRegExp(config.api.basePath)}/deployment/([^/?#]+)(.*)$`);
  const domain = config.deploymentDomain.toLowerCase();
  return (req) => {
    const url = req.url ?? '/';
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

/** Of an HTTP request, or of a WebSocket upgrade (`{ raw: request }`), which Fastify does not route. */
export function deploymentIdOf(request: { raw: IncomingMessage }): string | null {
  return (request.raw as RawWithDeployment).deploymentId ?? null;
}

/** The prefix every link of this request carries: BASE_PATH, plus the deployment's gateway prefix. */
export function linkBase(request: FastifyRequest, config: Config): string {
  const deployment = deploymentIdOf(request);
  return `${config.api.basePath}${deployment ? `/deployment/${deployment}` : ''}`;
}
