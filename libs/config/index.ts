export { loadConfig, ConfigError, ENV_DEFAULTS } from './config.js';
export type { Config, Surface } from './config.js';
