import 'reflect-metadata';
import multipart from '@fastify/multipart';
import { NestFactory } from '@nestjs/core';
import { FastifyAdapter, type NestFastifyApplication } from '@nestjs/platform-fastify';
import type { Config } from '#libs/config';
import { createLogger, NestPinoLogger, setProcessLogger } from '#libs/logging';
import { mountBrowserPages } from './admin-ui/index.js';
import { AppModule } from './app.module.js';
import { Draining } from './core/draining.js';
import { installCompression } from './http/compression.js';
import { installCors } from './http/cors.js';
import { fastifyOptions, installHttpHooks } from './http/fastify-setup.js';
import { installJsonDepthLimit } from './http/json-body.js';
import { installLoadShedding } from './http/overload.js';

/** Builds the API application (not yet listening). */
export async function createApi(config: Config): Promise<NestFastifyApplication> {
  const adapter = new FastifyAdapter(fastifyOptions(config));
  // Services and Nest itself log through the process's pino logger (libs/logging).
  const logger = createLogger({ base: { role: 'api' }, level: config.logLevel });
  setProcessLogger(logger);
  const app = await NestFactory.create<NestFastifyApplication>(AppModule.forConfig(config), adapter, {
    logger: config.logLevel === 'silent' ? false : new NestPinoLogger(logger),
    bufferLogs: false,
  });
  const fastify = app.getHttpAdapter().getInstance();
  // Before any route is added: compression attaches itself to each route as it is added.
  await installCompression(app);
  installCors(app, config);
  installHttpHooks(fastify, app.get(Draining));
  installJsonDepthLimit(app, config.maxJsonBodyBytes);
  await app.register(multipart, {
    // Text fields are held in memory: 100 of at most 64 KiB each bound what one upload can make us keep.
    limits: { fileSize: config.maxUploadBytes, files: 2, fields: 100, parts: 110, fieldSize: 64 * 1024, headerPairs: 100 },
    throwFileSizeLimit: true,
  });
  if (config.api.basePath) app.setGlobalPrefix(config.api.basePath);
  await mountBrowserPages(app, config);
  // Last among the request hooks, so the ones before it (request id, CORS) still mark a 503.
  await installLoadShedding(app, config);
  app.enableShutdownHooks();
  return app;
}
