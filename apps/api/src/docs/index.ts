import type { NestFastifyApplication } from '@nestjs/platform-fastify';
import { SwaggerModule, type OpenAPIObject } from '@nestjs/swagger';
import type { FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';
import { buildDocument } from '../contract/index.js';
import { deploymentIdOf, linkBase } from '../surface/request-scope.js';

/**
 * `<BASE_PATH>/openapi.json` (the document generated from the operation tables, see
 * ../contract) and `<BASE_PATH>/docs` (Swagger UI, its assets served by @fastify/static).
 */
export function mountApiDocs(app: NestFastifyApplication, config: Config): void {
  const document = buildDocument(config.api.basePath) as unknown as OpenAPIObject;
  SwaggerModule.setup('docs', app, document, {
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
