export { AuthModule } from './auth.module.js';
export { ApiKeyAuthService, authChangedChannel } from './api-key-auth.service.js';
export { ApiKeyHeaderGuard, BearerAuthGuard, CurrentAccount, SelfHostedGate, UpgradeAuth, bearerToken, keyFromUpgrade } from './guards.js';
export { AuthFailures, clientAddress } from './auth-failures.js';
