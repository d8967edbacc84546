export { AuthModule } from './auth.module.js';
export { ApiKeyAuthService, authChangedChannel } from './api-key-auth.service.js';
export { ApiKeyHeaderGuard, BearerAuthGuard, CurrentAccount, keyFromUpgrade } from './guards.js';
