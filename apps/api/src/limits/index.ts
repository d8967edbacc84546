export { AccountLimits } from './account-limits.js';
export { RateLimitGuard } from './rate-limit.guard.js';
export { LimitsModule } from './limits.module.js';
