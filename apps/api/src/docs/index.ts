import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { SwaggerModule, type OpenAPIObject } from '@nestjs/swagger';
import type { Config } from '#libs/config';
import { buildOpenApiDocument } from './document.js';

export { AssetDocs, BlobDocs, HealthDocs, JobDocs } from './v2-endpoints.js';

/**
 * `<BASE_PATH>/openapi.json` (the document) and `<BASE_PATH>/docs` (Swagger UI, its assets served
 * by @fastify/static). Built on first request, when every module is in place, then kept.
 */
export function mountApiDocs(app: NestFastifyApplication, config: Config): void {
  let document: OpenAPIObject | null = null;
  SwaggerModule.setup('docs', app, () => (document ??= buildOpenApiDocument(app, config)), {
    useGlobalPrefix: true,
    jsonDocumentUrl: 'openapi.json',
    raw: ['json'],
    customSiteTitle: 'comfy-cloud API',
    swaggerOptions: { docExpansion: 'none', defaultModelsExpandDepth: 0 },
  });
}
