import { Global, Module } from '@nestjs/common';
import { PassportModule } from '@nestjs/passport';
import { ApiKeyAuthService } from './api-key-auth.service.js';
import { AuthFailures } from './auth-failures.js';
import { BearerStrategy } from './bearer.strategy.js';
import { ApiKeyHeaderGuard, BearerAuthGuard, SelfHostedGate, UpgradeAuth } from './guards.js';
import { SelfHostedAccount } from './self-hosted-account.js';

// Global so that every surface's authentication (the router's too) counts failures in one place.
@Global()
@Module({
  imports: [PassportModule.register({ session: false })],
  providers: [ApiKeyAuthService, AuthFailures, BearerStrategy, BearerAuthGuard, ApiKeyHeaderGuard, UpgradeAuth, SelfHostedAccount, SelfHostedGate],
  exports: [ApiKeyAuthService, AuthFailures, BearerAuthGuard, ApiKeyHeaderGuard, UpgradeAuth, SelfHostedAccount, SelfHostedGate],
})
export class AuthModule {}
