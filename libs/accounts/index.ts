export { TIERS, TIER_MAX_CANCEL_AFTER_SECONDS, maxCancelAfterSeconds, tierLimits } from './tiers.js';
export type { TierName, TierLimits } from './tiers.js';
export { AccountsService } from './accounts.service.js';
export type { AccountLimitsPatch } from './accounts.service.js';
export { CHARGE_REASONS, chargeCtes, ledgerPage, moveCredits, recordOpeningCredits } from './billing.js';
