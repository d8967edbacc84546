import type { ServerResponse } from 'node:http';
import { Controller, Delete, Get, Inject, Options, Param, Patch, Post, Put, Query, Req, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { Config } from '#libs/config';
import { ROUTER_DEFAULT_PAGE_LIMIT, RouterIfNoneMatchSchema, RouterModelListQuerySchema } from '#libs/contracts';
import { parseWith } from '../contract/index.js';
import { CONFIG } from '../core/tokens.js';
import { toErrorShape } from '../http/error-body.js';
import { RendersErrors } from '../http/error-renderer.js';
import { isJsonContentType, rawJsonBody, UnparsableBody } from '../http/json-body.js';
import { requestOrigin } from '../http/request-origin.js';
import { KeepsRawJson, WaitsByDesign } from '../http/route-flags.js';
import { CallsService, type CallerFate } from './calls/calls.service.js';
import { CatalogService, type ModelListEntry } from './catalog/catalog.service.js';
import { CursorCodec, CursorError } from './catalog/cursor.js';
import { RouterError } from './errors.js';
import { ifNoneMatchHits } from './etag.js';
import { modelPathSegments, serviceRequestId } from './request-context.js';
import { RouterAuthGuard, workspaceOf } from './router-auth.js';
import { routerErrors } from './router-errors.js';

/** A refused query or header: the router's `invalid_input`, worded by the schema. */
const refuseInput = (issues: z.core.$ZodIssue[]) => new RouterError('invalid_input', issues[0]!.message);

/**
 * 405 for a method no router route serves, with the methods that path does take. It is thrown
 * from routes behind the guard, so the token is checked first, as on every router path.
 */
function methodNotAllowed(request: FastifyRequest): never {
  const atRoot = request.url.split('?')[0]!.replace(/\/+$/, '').endsWith('/v1/models');
  const allow = atRoot ? 'GET, HEAD' : 'GET, HEAD, POST';
  throw new RouterError('invalid_input', `${request.method} is not a method of this path; it takes ${allow}.`, { allow }, 405);
}

/**
 * The caller's connection as a call sees it. The handler runs after the guard and the body parser,
 * so the caller may have left already: then 'close' has fired and will not fire again.
 */
function callerFate(response: ServerResponse): CallerFate {
  const settled = response.closed
    ? Promise.resolve(response.writableFinished)
    : new Promise<boolean>((resolve) => response.once('close', () => resolve(response.writableFinished)));
  return { settled, gone: () => response.destroyed };
}

@Controller('v1/models')
@UseGuards(RouterAuthGuard)
@RendersErrors(routerErrors)
export class RouterController {
  private readonly cursors: CursorCodec;

  constructor(
    private readonly catalog: CatalogService,
    private readonly calls: CallsService,
    @Inject(CONFIG) private readonly config: Config,
  ) {
    this.cursors = new CursorCodec(config.signingSecret);
  }

  @Get()
  async list(@Req() request: FastifyRequest, @Query() query: unknown) {
    const account = workspaceOf(request);
    const { cursor, limit = ROUTER_DEFAULT_PAGE_LIMIT } = parseWith(RouterModelListQuerySchema, query, refuseInput);
    let after: string | null = null;
    if (cursor !== undefined) {
      try {
        after = this.cursors.decode(account.id, cursor);
      } catch (err) {
        if (!(err instanceof CursorError)) throw err;
        throw new RouterError('invalid_input', `The cursor is not valid (${err.message}); start the walk again without one.`);
      }
    }
    const page = await this.catalog.page(account.routerEntitlements, after, limit);
    const body: { data: ModelListEntry[]; has_more: boolean; next_cursor?: string; limit: number } = { data: page.data, has_more: page.hasMore, limit };
    if (page.hasMore) body.next_cursor = this.cursors.encode(account.id, page.data[page.data.length - 1]!.id);
    return body;
  }

  @Get(':provider/:model')
  async detail(@Req() request: FastifyRequest, @Param('provider') provider: string, @Param('model') model: string) {
    const found = await this.calls.resolve(workspaceOf(request), provider, model);
    const detail: ModelListEntry & { input_schema_url?: string } = {
      id: found.id,
      provider: found.provider,
      model: found.model,
      billing: { charges_on_policy_rejection: found.chargesOnPolicyRejection },
    };
    // The contract allows only https URLs here; behind plain http the pointer is left out.
    const url = `${requestOrigin(request, this.config)}${this.config.api.basePath}/v1/models/${found.id}/openapi.json`;
    if (url.startsWith('https://') && url.length <= 2048) detail.input_schema_url = url;
    return detail;
  }

  @Get(':provider/:model/openapi.json')
  async inputSchema(@Req() request: FastifyRequest, @Res() reply: FastifyReply, @Param('provider') provider: string, @Param('model') model: string): Promise<void> {
    const found = await this.calls.resolve(workspaceOf(request), provider, model);
    reply.header('etag', found.schema.etag).header('cache-control', 'private, must-revalidate');
    if (ifNoneMatchHits(parseWith(RouterIfNoneMatchSchema, request.headers['if-none-match'], refuseInput), found.schema.etag)) {
      await reply.status(304).send();
      return;
    }
    await reply.status(200).type('application/json; charset=utf-8').send(found.schema.text);
  }

  // Fastify refuses path parameters over 100 characters, but model segments may have 128: longer
  // paths land on these catch-alls (wildcards have no such cap) and take the same way.
  @Get('*')
  async longGet(@Req() request: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    const segments = modelPathSegments(request);
    if (segments.length === 3 && segments[2] === 'openapi.json') return this.inputSchema(request, reply, segments[0]!, segments[1]!);
    if (segments.length !== 2) await this.calls.resolve(workspaceOf(request), segments.join('/'), '');
    await reply.send(await this.detail(request, segments[0]!, segments[1]!));
  }

  @Post('*')
  @WaitsByDesign()
  @KeepsRawJson()
  async longCall(@Req() request: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    const segments = modelPathSegments(request);
    return this.call(request, reply, segments.length === 2 ? segments[0]! : segments.join('/'), segments.length === 2 ? segments[1]! : '');
  }

  @Post()
  postToCatalog(@Req() request: FastifyRequest): never {
    return methodNotAllowed(request);
  }

  @Put(['', '*'])
  put(@Req() request: FastifyRequest): never {
    return methodNotAllowed(request);
  }

  @Patch(['', '*'])
  patch(@Req() request: FastifyRequest): never {
    return methodNotAllowed(request);
  }

  @Delete(['', '*'])
  remove(@Req() request: FastifyRequest): never {
    return methodNotAllowed(request);
  }

  @Options(['', '*'])
  options(@Req() request: FastifyRequest): never {
    return methodNotAllowed(request);
  }

  @Post(':provider/:model')
  @WaitsByDesign()
  @KeepsRawJson()
  async call(@Req() request: FastifyRequest, @Res() reply: FastifyReply, @Param('provider') provider: string, @Param('model') model: string): Promise<void> {
    const startedAt = Date.now();
    const fate = callerFate(reply.raw);
    const isJson = isJsonContentType(request.headers['content-type']);
    // Only JSON is a model input; Fastify would also hand over text bodies as strings.
    const parsed = isJson ? request.body : undefined;
    const unparsable = parsed instanceof UnparsableBody;
    const { result, headers } = await this.calls.run({
      callId: serviceRequestId(request),
      account: workspaceOf(request),
      provider,
      model,
      rawBody: isJson ? rawJsonBody(request) : undefined,
      // A JSON `null` stays null: it is input the model's schema refuses, not a missing body.
      body: unparsable ? undefined : parsed,
      bodyError: unparsable ? toErrorShape(parsed.error).message : undefined,
      idempotencyKeyHeader: request.headers['idempotency-key'],
      fate,
      startedAt,
      origin: () => requestOrigin(request, this.config),
    });
    if (reply.raw.destroyed) return; // the caller left: recorded as client_disconnected, nothing to deliver
    for (const [name, value] of Object.entries(headers)) reply.header(name, value);
    if (result.bucket !== 'success') reply.header('x-service-error-type', result.bucket);
    await reply.status(result.status).header('content-type', result.contentType).header('x-content-type-options', 'nosniff').send(result.body);
  }
}
