import { Controller, Get, Query, UseGuards } from '@nestjs/common';
import type { Account } from '#libs/db';
import { BearerAuthGuard, CurrentAccount } from '../../auth/index.js';
import { RateLimitGuard } from '../../limits/index.js';
import { AccountView } from './account-view.js';
import { envelopeErrors, RendersErrors } from '../../http/error-renderer.js';
@RendersErrors(envelopeErrors)
@Controller('api/v2/account')
@UseGuards(BearerAuthGuard, RateLimitGuard)
export class AccountController {
  constructor(private readonly view: AccountView) {}

  @Get()
  get(@CurrentAccount() account: Account, @Query() query: Record<string, unknown>) {
    return this.view.render(account, query);
  }
}
