import { Body, Controller, Get, HttpCode, Param, Patch, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { V1_SUBSCRIBE_REFUSED, V1LogsSubscribeRequestSchema } from '#libs/contracts';
import type { Account } from '#libs/db';
import { ApiKeyHeaderGuard, CurrentAccount } from '../../auth/index.js';
import { parseWith } from '../../contract/index.js';
import type { JobScope } from '../../jobs/job-views.service.js';
import { RateLimitGuard } from '../../limits/index.js';
import { DeploymentScopeGuard, JobsScope } from '../../surface/deployment-scope.js';
import { InputFiles } from '../../inputs/input-files.service.js';
import { BadBody, parseJsonObject, v1Errors } from '../http/engine-body.js';
import { AccountModels } from '../models/model-lists.js';
import { engineJson, parsedOr400 } from '../userdata/engine-replies.js';
import { TERMINAL_SIZE, TenantLogs } from './tenant-logs.service.js';
import { RendersErrors } from '../../http/error-renderer.js';

/**
 * The engine's `/internal/...` routes (api_server/routes/internal/), which its front end reads:
 * the log terminal, folder paths, the input and output file lists. Per account: the log is the
 * account's own jobs' lines, folders show no engine path, files are the account's own. The engine
 * serves these only without `/api`; here `/api/internal/...` answers the same.
 */
@RendersErrors(v1Errors)
@Controller('api/internal')
@UseGuards(ApiKeyHeaderGuard, RateLimitGuard)
export class V1InternalController {
  constructor(
    private readonly logs: TenantLogs,
    private readonly models: AccountModels,
    private readonly inputs: InputFiles,
  ) {}

  /** The log as one string, each entry `"{t} - {m}"`. */
  @Get('logs')
  @UseGuards(DeploymentScopeGuard)
  async text(@JobsScope() scope: JobScope, @Res() reply: FastifyReply) {
    const entries = await this.logs.recent(scope);
    return engineJson(reply, entries.map((e) => `${e.t} - ${e.m}`).join(''));
  }

  @Get('logs/raw')
  @UseGuards(DeploymentScopeGuard)
  async raw(@JobsScope() scope: JobScope) {
    return { entries: await this.logs.recent(scope), size: TERMINAL_SIZE };
  }

  /** `{clientId, enabled}`: that client's sockets get a `logs` message with each of the account's jobs' lines as it ends. */
  @Patch('logs/subscribe')
  @HttpCode(200)
  async subscribe(@CurrentAccount() account: Account, @Body() raw: unknown, @Res() reply: FastifyReply) {
    const body = parsedOr400(reply, () =>
      parseWith(V1LogsSubscribeRequestSchema, parseJsonObject(raw), () => new BadBody('invalid_request', V1_SUBSCRIBE_REFUSED, 'clientId, enabled')),
    );
    if (!body) return reply;
    const { clientId, enabled } = body.value;
    await this.logs.subscribe(account.id, clientId, enabled);
    return reply.status(200).send();
  }

  /** Each model folder with its paths on disk; the engines' paths are theirs, so each list is empty. */
  @Get('folder_paths')
  async folderPaths(@CurrentAccount() account: Account) {
    return Object.fromEntries(Object.keys((await this.models.of(account)).folders).map((name) => [name, [] as string[]]));
  }

  /**
   * The files directly in a folder, newest first. Input: the account's uploads, by the names a
   * prompt uses. Output and temp: none directly in the folder, as every output here lies in the
   * subfolder of its prompt (`/view?subfolder={prompt_id}`).
   */
  @Get('files/:type')
  async folderFiles(@CurrentAccount() account: Account, @Param('type') type: string, @Res() reply: FastifyReply) {
    if (type === 'input') return engineJson(reply, await this.inputs.inputNames(account.id));
    if (type === 'output' || type === 'temp') return engineJson(reply, []);
    return engineJson(reply, { error: 'Invalid directory type' }, 400);
  }
}
