import { Module } from '@nestjs/common';
import { PassportModule } from '@nestjs/passport';
import { ApiKeyAuthService } from './api-key-auth.service.js';
import { BearerStrategy } from './bearer.strategy.js';
import { ApiKeyHeaderGuard, BearerAuthGuard } from './guards.js';
import { SelfHostedAccount } from './self-hosted-account.js';

@Module({
  imports: [PassportModule.register({ session: false })],
  providers: [ApiKeyAuthService, BearerStrategy, BearerAuthGuard, ApiKeyHeaderGuard, SelfHostedAccount],
  exports: [ApiKeyAuthService, BearerAuthGuard, ApiKeyHeaderGuard, SelfHostedAccount],
})
export class AuthModule {}
