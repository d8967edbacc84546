import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { SwaggerModule, type OpenAPIObject } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';
import { deploymentIdOf, linkBase } from '../surface/request-scope.js';
import { buildOpenApiDocument } from './document.js';

export { AccountDocs, AssetDocs, BlobDocs, HealthDocs, JobDocs, UploadDocs } from './v2-endpoints.js';
export { WebhookDocs } from './webhook-docs.js';

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
    // Read through a deployment (`/deployment/{id}/openapi.json`, or its host), the server is
    // that deployment's prefix, as in its links: a client generated from it must call the
    // deployment, not the cloud paths the same routes serve without the prefix.
    patchDocumentOnRequest: (request, _reply, doc) => {
      const req = request as FastifyRequest;
      return deploymentIdOf(req) ? { ...doc, servers: [{ url: linkBase(req, config), description: 'This deployment' }] } : doc;
    },
  });
}
