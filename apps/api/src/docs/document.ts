import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, SwaggerModule, type OpenAPIObject } from '@nestjs/swagger';
import type { Config } from '#libs/config';
import { ROUTER_PATHS } from './router-paths.js';
import { COMPONENT_SCHEMAS } from './schemas.js';
import { V1_PATHS, V1_WEBSOCKET_PATHS } from './v1-paths.js';
import { WEBHOOK_SCHEMAS } from './webhook-docs.js';

const DESCRIPTION = `Runs ComfyUI workflows as durable jobs.

- **v2** (\`/api/v2\`): jobs, assets, your account and webhooks. \`Authorization: Bearer <API key>\`. Errors are an ErrorEnvelope.
- **v1** (\`/api\`, \`/ws\`): the deprecated engine-compatible API. \`X-API-Key: <API key>\` (WebSocket: \`?token=\`). As on the engine, every v1 route is also served without \`/api\` (\`/prompt\`, \`/userdata/...\`, \`/internal/...\`).
- **router** (\`/v1/models\`): direct partner-model calls. \`Authorization: Bearer <JWT>\`, or the account's API key in its place. Errors are a RouterErrorResponse with \`X-Service-Error-Type\`.

Paths are relative to the server URL (the \`BASE_PATH\` mount). A serverless deployment serves the same v2 paths under
\`/deployment/{deployment}\` or on its own host. Every response carries \`X-Request-Id\`.`;

/**
 * The OpenAPI 3.1 document. v2, health and blob routes are generated from their controllers'
 * decorators (only decorated routes are taken, so v1, router and operational routes never appear
 * half-described); v1 and router paths come from the tables next to this file.
 */
export function buildOpenApiDocument(app: INestApplication, config: Config): OpenAPIObject {
  const base = new DocumentBuilder()
    .setOpenAPIVersion('3.1.0')
    .setTitle('comfy-cloud')
    .setDescription(DESCRIPTION)
    .setVersion('2.0.0')
    .addServer(config.api.basePath || '/', 'This server')
    .addBearerAuth({ type: 'http', scheme: 'bearer', description: 'An account API key (v2).' }, 'apiKey')
    .addApiKey({ type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'An account API key (v1 REST).' }, 'v1ApiKey')
    .addApiKey({ type: 'apiKey', in: 'query', name: 'token', description: 'An account API key (v1 WebSocket).' }, 'v1Token')
    .addBearerAuth({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'A router token (`sub` = account id), minted by an operator.' }, 'routerJwt')
    .addTag('jobs', 'v2: durable, pollable, cancelable executions of a workflow.')
    .addTag('assets', 'v2: uploads and outputs, UUID records over content-addressed blobs.')
    .addTag('uploads', 'v2: resumable uploads (tus) for large files such as models.')
    .addTag('account', 'v2: your credit balance, charges, limits and usage (read-only).')
    .addTag('webhooks', 'v2: endpoints that receive your job events, signed per Standard Webhooks, and their deliveries.')
    .addTag('v1', 'Deprecated engine-compatible API.')
    .addTag('router', 'Model router: synchronous partner-model calls.')
    .addTag('health', 'Probes.')
    .build();
  const document = SwaggerModule.createDocument(app, base, { onlyIncludeDecoratedEndpoints: true, ignoreGlobalPrefix: true, autoTagControllers: false });
  document.components = { ...document.components, schemas: { ...COMPONENT_SCHEMAS, ...WEBHOOK_SCHEMAS, ...document.components?.schemas } };
  document.paths = { ...document.paths, ...(V1_PATHS as OpenAPIObject['paths']), ...(V1_WEBSOCKET_PATHS as OpenAPIObject['paths']), ...(ROUTER_PATHS as OpenAPIObject['paths']) };
  return document;
}
