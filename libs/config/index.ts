export { loadConfig, ConfigError, ENV_DEFAULTS } from './config.js';
export type { Config, ProviderKeys, Surface } from './config.js';
