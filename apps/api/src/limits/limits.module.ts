import { Module } from '@nestjs/common';
import { AccountLimits } from './account-limits.js';
import { RateLimitGuard } from './rate-limit.guard.js';

@Module({ providers: [AccountLimits, RateLimitGuard], exports: [AccountLimits, RateLimitGuard] })
export class LimitsModule {}
