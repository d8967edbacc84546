import type { IncomingMessage } from 'node:http';
import { Inject, Injectable } from '@nestjs/common';
import type { Config } from '#libs/config';
import { ApiError } from '#libs/contracts';
import type { Account, Db, Deployment } from '#libs/db';
import { CONFIG, DB } from '../core/tokens.js';
import { scopeOf, type JobScope } from '../jobs/job-views.service.js';
import { deploymentIdOf } from './request-scope.js';

/** On the deployment surface every request names a deployment; it must be the caller's. */
@Injectable()
export class DeploymentsService {
  constructor(
    @Inject(DB) private readonly db: Db,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  /** Whether requests address deployments (the deployment surface). */
  get active(): boolean {
    return this.config.surface === 'deployment';
  }

  /** The deployment an HTTP request or a WebSocket upgrade (`{ raw }`) addresses; null off that surface. */
  async resolve(request: { raw: IncomingMessage }, account: Account): Promise<Deployment | null> {
    if (!this.active) return null;
    const id = deploymentIdOf(request);
    if (!id) throw new ApiError('not_found', 'Address a deployment: /deployment/{id}/... or {id}.<domain>.');
    const deployment = await this.db.deployment.findFirst({ where: { id, accountId: account.id } });
    if (!deployment) throw ApiError.notFound('deployment');
    return deployment;
  }

  /** The jobs a request (or a WebSocket upgrade) may see: resolved once, by DeploymentScopeGuard or at the upgrade. */
  async jobScope(request: { raw: IncomingMessage }, account: Account): Promise<JobScope> {
    return scopeOf(account, await this.resolve(request, account));
  }
}
