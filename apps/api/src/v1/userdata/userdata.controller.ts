import { Body, Controller, Delete, Get, Param, Post, Query, Req, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { V1UserDataListQuerySchema, V1UserDataTreeQuerySchema, V1UserDataWriteQuerySchema } from '#libs/contracts';
import type { Account } from '#libs/db';
import { ApiKeyHeaderGuard, CurrentAccount } from '../../auth/index.js';
import { parseWith } from '../../contract/index.js';
import { RateLimitGuard } from '../../limits/index.js';
import { engineJson, engineText } from './engine-replies.js';
import { OversizedFile, fileBytes, sentContentType } from './request-bodies.js';
import { UserDataRefused, UserFiles, fileInfo, servedContentType, type StoredFile } from './user-files.service.js';
import { baseName, isHidden, parentFolders, relativeTo, resolveUserPath, unquote } from './user-paths.js';
import { EngineTextRefusal, v1Errors } from '../http/engine-body.js';
import { RendersErrors } from '../../http/error-renderer.js';

const INVALID_NAME = 'Invalid filename. Please avoid special characters like :\\/*?"<>|';

/** A user-folder query, parsed by its operation's schema; a refusal is the engine's 400 text, worded by the schema. */
function parseQuery<T extends z.ZodType>(schema: T, query: unknown): z.output<T> {
  return parseWith(schema, query, (issues) => new EngineTextRefusal(400, issues[0]!.message));
}

function etagOf(file: StoredFile): string {
  return `"${(file.modifiedAt.getTime() * 1_000_000).toString(16)}-${file.sizeBytes.toString(16)}"`;
}

/**
 * The engine's user folder (app/user_manager.py), one per account: `/api/userdata` lists it,
 * `/api/userdata/{file}` reads, writes and deletes one file (the name percent-encoded as one
 * segment, `workflows%2Fname.json`), `/api/userdata/{file}/move/{dest}` renames, and
 * `/api/v2/userdata` lists files and folders. Names resolve as the engine resolves them and never
 * leave the caller's own folder; answers have the engine's statuses and texts.
 */
@RendersErrors(v1Errors)
@Controller('api')
@UseGuards(ApiKeyHeaderGuard, RateLimitGuard)
export class V1UserDataController {
  constructor(private readonly files: UserFiles) {}

  @Get('userdata')
  async list(@CurrentAccount() account: Account, @Query() query: unknown, @Res() reply: FastifyReply) {
    const { dir, recurse = false, full_info: fullInfo = false, split = false } = parseQuery(V1UserDataListQuerySchema, query);
    const folder = resolveUserPath(dir);
    if (!folder.ok) return engineText(reply, folder.reason === 'outside' ? 403 : 400, folder.reason === 'outside' ? 'Invalid directory' : INVALID_NAME);
    const all = await this.files.all(account.id);
    const isFile = all.some((f) => f.path === folder.path);
    const under = all.flatMap((f) => {
      const rel = relativeTo(folder.path, f.path);
      return rel === null ? [] : [{ file: f, rel }];
    });
    if (!isFile && under.length === 0) return engineText(reply, 404, 'Directory not found');
    // What the engine's glob finds: files directly in the folder (or at any depth with recurse),
    // not hidden ones; a file named as the folder has nothing in it.
    const found = under.filter(({ rel }) => (recurse || !rel.includes('/')) && !isHidden(rel));
    return engineJson(
      reply,
      found.map(({ file, rel }) => (fullInfo ? fileInfo(file, rel) : split ? [rel, ...rel.split('/')] : rel)),
    );
  }

  @Get('v2/userdata')
  async listV2(@CurrentAccount() account: Account, @Query() query: unknown, @Res() reply: FastifyReply) {
    const requested = unquote(parseQuery(V1UserDataTreeQuerySchema, query).path ?? '');
    const target = requested ? resolveUserPath(requested) : { ok: true as const, path: '' };
    if (!target.ok) return engineText(reply, 400, 'Invalid path requested');
    const all = await this.files.all(account.id);
    if (all.some((f) => f.path === target.path)) return engineText(reply, 400, 'Requested path is not a directory');
    const under = all.filter((f) => relativeTo(target.path, f.path) !== null);
    // The user folder itself is listed empty before anything is in it; any other folder must exist.
    if (under.length === 0) return target.path === '' ? engineJson(reply, []) : engineText(reply, 404, 'Requested path not found');
    const folders = new Set<string>();
    for (const f of under) for (const parent of parentFolders(f.path)) if (relativeTo(target.path, parent) !== null) folders.add(parent);
    const entries: Array<{ name: string; path: string; type: 'directory' | 'file'; size?: number; modified?: number }> = [
      ...[...folders].map((path) => ({ name: baseName(path), path, type: 'directory' as const })),
      ...under.map((f) => ({ name: baseName(f.path), path: f.path, type: 'file' as const, size: f.sizeBytes, modified: f.modifiedAt.getTime() / 1000 })),
    ];
    entries.sort((a, b) => Number(a.type !== 'directory') - Number(b.type !== 'directory') || compare(a.name.toLowerCase(), b.name.toLowerCase()) || compare(a.path, b.path));
    return engineJson(reply, entries);
  }

  @Get('userdata/:file')
  async read(@CurrentAccount() account: Account, @Param('file') name: string, @Req() request: FastifyRequest, @Res() reply: FastifyReply) {
    const path = this.resolved(reply, name);
    if (path === null) return reply;
    const file = await this.files.read(account.id, path);
    if (!file) {
      // A folder is there but is no file: the engine's file response refuses it.
      if ((await this.files.kind(account.id, path)) === 'folder') return engineText(reply, 403, 'Not a file');
      return engineText(reply, 404, 'File not found');
    }
    const etag = etagOf(file);
    reply.header('etag', etag).header('last-modified', file.modifiedAt.toUTCString());
    const since = Date.parse(String(request.headers['if-modified-since'] ?? ''));
    const unchanged = request.headers['if-none-match'] !== undefined ? request.headers['if-none-match'] === etag : Number.isFinite(since) && Math.floor(file.modifiedAt.getTime() / 1000) <= since / 1000;
    if (unchanged) return reply.status(304).send();
    return reply.status(200).type(servedContentType(file.path, file.contentType)).send(Buffer.from(file.content.buffer, file.content.byteOffset, file.content.length));
  }

  @Post('userdata/:file')
  async write(
    @CurrentAccount() account: Account,
    @Param('file') name: string,
    @Query() query: unknown,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
    @Res() reply: FastifyReply,
  ) {
    const { overwrite = true, full_info: fullInfo = false } = parseQuery(V1UserDataWriteQuerySchema, query);
    const bytes = fileBytes(body);
    if (bytes instanceof OversizedFile) {
      reply.header('connection', 'close');
      return this.refused(reply, this.files.tooLarge(bytes.declaredBytes));
    }
    const path = this.resolved(reply, name);
    if (path === null) return reply;
    try {
      const file = await this.files.write(account.id, path, bytes, sentContentType(request), overwrite);
      return engineJson(reply, fullInfo ? fileInfo(file) : file.path);
    } catch (err) {
      if (err instanceof UserDataRefused) return this.refused(reply, err);
      throw err;
    }
  }

  @Delete('userdata/:file')
  async remove(@CurrentAccount() account: Account, @Param('file') name: string, @Res() reply: FastifyReply) {
    const path = this.resolved(reply, name);
    if (path === null) return reply;
    if (await this.files.remove(account.id, path)) return reply.status(204).send();
    if ((await this.files.kind(account.id, path)) === 'folder') return engineText(reply, 403, 'Not a file');
    return engineText(reply, 404, 'File not found');
  }

  @Post('userdata/:file/move/:dest')
  async move(
    @CurrentAccount() account: Account,
    @Param('file') name: string,
    @Param('dest') destName: string,
    @Query() query: unknown,
    @Res() reply: FastifyReply,
  ) {
    const { overwrite = true, full_info: fullInfo = false } = parseQuery(V1UserDataWriteQuerySchema, query);
    const source = this.resolved(reply, name);
    if (source === null) return reply;
    const dest = this.resolved(reply, destName);
    if (dest === null) return reply;
    try {
      const moved = await this.files.move(account.id, source, dest, overwrite);
      return engineJson(reply, fullInfo ? fileInfo(moved) : moved.path);
    } catch (err) {
      if (err instanceof UserDataRefused) {
        if (err.status === 404 && (await this.files.kind(account.id, source)) === 'folder') return engineText(reply, 403, 'Not a file');
        return this.refused(reply, err);
      }
      throw err;
    }
  }

  /** The name in the user folder, or null once the engine's refusal is sent: 400 empty, 403 outside. */
  private resolved(reply: FastifyReply, name: string): string | null {
    if (!name) {
      engineText(reply, 400, 'File name not provided');
      return null;
    }
    const resolved = resolveUserPath(name);
    if (resolved.ok) return resolved.path;
    if (resolved.reason === 'outside') engineText(reply, 403, 'Path is outside the user folder');
    else engineText(reply, 400, INVALID_NAME, INVALID_NAME);
    return null;
  }

  private refused(reply: FastifyReply, err: UserDataRefused): FastifyReply {
    return engineText(reply, err.status, err.message, err.reason ?? (err.status === 400 ? INVALID_NAME : undefined));
  }
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
