export { componentLogger, createLogger, logDestination, loggerOptions, logFunction, processLogger, setProcessLogger } from './logger.js';
export type { Log, LogLevel, Logger, LoggerSettings } from './logger.js';
export { NestPinoLogger } from './nest-logger.js';
