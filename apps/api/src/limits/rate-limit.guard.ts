import { type CanActivate, type ExecutionContext, Injectable } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import type { Account } from '#libs/db';
import { AccountLimits } from './account-limits.js';

/** Counts every authenticated request against its account's per-minute allowance. */
@Injectable()
export class RateLimitGuard implements CanActivate {
  constructor(private readonly limits: AccountLimits) {}

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const account = context.switchToHttp().getRequest<FastifyRequest & { user?: Account }>().user;
    if (account) await this.limits.countRequest(account);
    return true;
  }
}
