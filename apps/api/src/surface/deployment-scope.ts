import { type CanActivate, type ExecutionContext, Injectable, createParamDecorator } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { Account, Deployment } from '#libs/db';
import { scopeOf, type JobScope } from '../jobs/job-views.service.js';
import { DeploymentsService } from './deployments.service.js';

// Whose jobs a request sees is resolved once, by a guard that runs after authentication, and handed
// to handlers as parameters (`@JobsScope()`, `@CurrentDeployment()`), as the account is. A handler
// cannot forget it: the decorators refuse to answer on a route the guard does not protect, so a
// missing guard is a loud 500 in the first test, never a read across deployments.

const RESOLVED = Symbol('deploymentScope');

interface Resolved {
  deployment: Deployment | null;
  jobs: JobScope;
}

type ScopedRequest = FastifyRequest & { user?: Account; [RESOLVED]?: Resolved };

/**
 * On the deployment surface every job route resolves the addressed deployment (none addressed,
 * unknown, another account's: the same 404) and sees that deployment's jobs only; elsewhere the
 * scope is the account. Put it after the authentication guard.
 */
@Injectable()
export class DeploymentScopeGuard implements CanActivate {
  constructor(private readonly deployments: DeploymentsService) {}

  canActivate(context: ExecutionContext): boolean | Promise<boolean> {
    const request = context.switchToHttp().getRequest<ScopedRequest>();
    const account = request.user;
    if (!account) throw new Error('DeploymentScopeGuard runs after an authentication guard');
    // Off the deployment surface nothing is looked up: no promise, no await on every request.
    if (!this.deployments.active) {
      request[RESOLVED] = { deployment: null, jobs: scopeOf(account, null) };
      return true;
    }
    return this.deployments.resolve(request, account).then((deployment) => {
      request[RESOLVED] = { deployment, jobs: scopeOf(account, deployment) };
      return true;
    });
  }
}

function resolved(context: ExecutionContext): Resolved {
  const found = context.switchToHttp().getRequest<ScopedRequest>()[RESOLVED];
  if (!found) throw new Error('this route reads the deployment scope without DeploymentScopeGuard');
  return found;
}

/** The jobs this request may see and touch (its account, and its deployment on that surface). */
export const JobsScope = createParamDecorator((_: unknown, context: ExecutionContext): JobScope => resolved(context).jobs);

/** The deployment the request addresses; null off the deployment surface. */
export const CurrentDeployment = createParamDecorator((_: unknown, context: ExecutionContext): Deployment | null => resolved(context).deployment);
