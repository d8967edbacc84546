import { Inject, Injectable, type OnModuleInit } from '@nestjs/common';
import { TIERS } from '#libs/accounts';
import type { Config } from '#libs/config';
import type { Account, Db } from '#libs/db';
import { CONFIG, DB } from '../core/tokens.js';

const NAME = 'self-hosted';

/**
 * The self-hosted surface has no tenants: every request acts as one local account, created on
 * first start with generous limits.
 */
@Injectable()
export class SelfHostedAccount implements OnModuleInit {
  private account: Account | null = null;

  constructor(
    @Inject(DB) private readonly db: Db,
    @Inject(CONFIG) private readonly config: Config,
  ) {}

  async onModuleInit(): Promise<void> {
    if (this.config.surface !== 'self-hosted') return;
    this.account =
      (await this.db.account.findFirst({ where: { name: NAME, tier: 'enterprise' }, orderBy: { createdAt: 'asc' } })) ??
      (await this.db.account.create({ data: { name: NAME, tier: 'enterprise', creditBalance: 1n << 60n, ...TIERS.enterprise } }));
  }

  get(): Account {
    if (!this.account) throw new Error('the self-hosted account exists only on the self-hosted surface');
    return this.account;
  }
}
