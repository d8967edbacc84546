import type { IncomingMessage } from 'node:http';
import { Inject, Injectable } from '@nestjs/common';
import type { Config } from '#libs/config';
import { ApiError } from '#libs/contracts';
import type { Account, Db, Deployment } from '#libs/db';
import { CONFIG, DB } from '../core/tokens.js';
import { deploymentIdOf } from './request-scope.js';

/** On the deployment surface every request names a deployment; it must be the caller's. */
@Injectable()
export class DeploymentsService {
  constructor(
    @Inject(DB) private readonly db: Db,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  async resolve(request: { raw: IncomingMessage }, account: Account): Promise<Deployment | null> {
    if (this.config.surface !== 'deployment') return null;
    const id = deploymentIdOf(request);
    if (!id) throw new ApiError('not_found', 'Address a deployment: /deployment/{id}/... or {id}.<domain>.');
    const deployment = await this.db.deployment.findFirst({ where: { id, accountId: account.id } });
    if (!deployment) throw ApiError.notFound('deployment');
    return deployment;
  }
}
