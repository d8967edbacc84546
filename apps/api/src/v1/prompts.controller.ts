import { Body, Controller, Get, HttpCode, Param, Post, Query, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { ApiError, isUuid, V1_HISTORY_DEFAULT_ITEMS, V1HistoryQuerySchema, V1InterruptRequestSchema, V1QueueRequestSchema } from '#libs/contracts';
import type { Account, Deployment, Job } from '#libs/db';
import { toEngineErrorBody, validateWorkflow, workflowFormat } from '#libs/workflow';
import { ApiKeyHeaderGuard, CurrentAccount } from '../auth/index.js';
import { InputFiles } from '../inputs/input-files.service.js';
import { JobControl } from '../jobs/job-control.service.js';
import { JobViews, type JobScope } from '../jobs/job-views.service.js';
import { SubmissionService, WorkflowRejected } from '../jobs/submission.service.js';
import { RateLimitGuard } from '../limits/index.js';
import { CurrentDeployment, DeploymentScopeGuard, JobsScope } from '../surface/deployment-scope.js';
import { RendersErrors } from '../http/error-renderer.js';
import { parseWith } from '../contract/index.js';
import { BadBody, engineErrorBody, parseJsonObject, v1Errors } from './http/engine-body.js';
import { EngineViews } from './jobs/engine-views.js';
import { v1Status } from './jobs/v1-status.js';
import { parsePromptBody } from './prompt-body.js';

const IN_FLIGHT = ['queued', 'running', 'canceling'] as const;
const FINISHED = ['succeeded', 'failed', 'canceled', 'expired'] as const;

/** The body of the engine's queue and history edits: `{delete?: [prompt_id, ...], clear?: true}` (V1QueueRequest). */
function parseDeleteBody(raw: unknown): { ids: string[]; clear: boolean } {
  const body = parseWith(V1QueueRequestSchema, parseJsonObject(raw), () => new BadBody('invalid_request', 'delete must be a list of prompt ids', 'delete'));
  // An id that is not a UUID names no job: nothing to do for it, as the engine ignores unknown ids.
  const ids = (body.delete ?? []).filter(isUuid).map((id) => id.toLowerCase());
  return { ids: ids.slice(0, 1000), clear: body.clear === true };
}

/** `{prompt_id?}` (V1InterruptRequest): null without one, '' when it names no job. */
function parseInterruptBody(raw: unknown): { promptId: string | null } {
  // Nothing in it can be refused: every failure of the schema would be a bug, shown as such.
  const body = parseWith(V1InterruptRequestSchema, parseJsonObject(raw), (issues) => new Error(`V1InterruptRequest refused: ${issues[0]!.message}`));
  if (body.prompt_id === undefined || body.prompt_id === null) return { promptId: null };
  return { promptId: isUuid(body.prompt_id) ? body.prompt_id.toLowerCase() : '' };
}

/** Runs an engine-body parser; a bad body is answered with the engine's 400 and gives null. */
function parsedOr400<T>(reply: FastifyReply, parse: () => T): T | null {
  try {
    return parse();
  } catch (err) {
    if (!(err instanceof BadBody)) throw err;
    void reply.status(400).send(engineErrorBody(err.type, err.message, err.details));
    return null;
  }
}

/**
 * The engine's 400 body for a prompt refused for what it is; null for any other refusal (credits,
 * limits, a stopped or starting deployment), which keeps its own status in the error envelope.
 */
function refusedPromptBody(err: unknown, prompt: unknown): object | null {
  if (err instanceof WorkflowRejected) return toEngineErrorBody(err.outcome);
  if (!(err instanceof ApiError) || (err.status !== 400 && err.status !== 422) || err.code === 'deployment_stopped') return null;
  const structure = err.code === 'invalid_workflow' ? (err.details?.node_errors as PinnedStructureProblems | undefined) : undefined;
  if (structure) return pinnedStructureBody(err.message, structure, prompt);
  return engineErrorBody('invalid_prompt', err.message, '');
}

type PinnedStructureProblems = Record<string, { field: string; reason: string }[]>;

/** A deployment's pinned-structure problems, per node, in the engine's node_errors shape. */
function pinnedStructureBody(message: string, problems: PinnedStructureProblems, prompt: unknown) {
  const nodes = (prompt ?? {}) as Record<string, { class_type?: unknown } | undefined>;
  const nodeErrors: Record<string, unknown> = {};
  const lines: string[] = [];
  for (const [id, list] of Object.entries(problems)) {
    const classType = Object.hasOwn(nodes, id) ? nodes[id]?.class_type : undefined;
    nodeErrors[id] = {
      // The engine's type for a value its node refused beyond the input types: the closest it has.
      errors: list.map((p) => ({ type: 'custom_validation_failed', message: "Differs from the deployment's pinned workflow", details: `${p.field} ${p.reason}`, extra_info: { input_name: p.field } })),
      dependent_outputs: [],
      class_type: typeof classType === 'string' ? classType : '',
    };
    lines.push(...list.map((p) => `${id}: ${p.field} ${p.reason}`));
  }
  return engineErrorBody('invalid_prompt', message, lines.join('\n'), nodeErrors);
}

/**
 * The engine's prompt, queue and history routes over this account's jobs. A v1 prompt is a job
 * like any other (v2 sees it too); every route sees, counts and touches the jobs v2's job routes
 * would on the same surface (`JobScope`): on a deployment's API, that deployment's jobs only.
 */
@RendersErrors(v1Errors)
@Controller('api')
@UseGuards(ApiKeyHeaderGuard, RateLimitGuard, DeploymentScopeGuard)
export class V1PromptsController {
  constructor(
    private readonly submissions: SubmissionService,
    private readonly control: JobControl,
    private readonly inputs: InputFiles,
    private readonly views: EngineViews,
    private readonly jobs: JobViews,
  ) {}

  @Post('prompt')
  @HttpCode(200)
  async submit(
    @CurrentAccount() account: Account,
    @CurrentDeployment() deployment: Deployment | null,
    @Body() body: unknown,
    @Res({ passthrough: true }) reply: FastifyReply,
  ) {
    if (account.status === 'inactive') throw new ApiError('inactive_account', 'The subscription of this account is not active; workflows cannot run.');
    const bad = (payload: object) => {
      reply.status(400);
      return payload;
    };
    let request;
    try {
      request = parsePromptBody(body);
    } catch (err) {
      if (err instanceof BadBody) return bad(engineErrorBody(err.type, err.message, err.details));
      throw err;
    }
    if (workflowFormat(request.prompt) !== 'api') {
      const ui = workflowFormat(request.prompt) === 'ui';
      return bad(engineErrorBody('invalid_prompt', ui ? 'The prompt is in the editor (UI) format; export it in API format.' : 'The prompt must be an object in API format.', ''));
    }
    let job: Job;
    let nodeErrors: Record<string, unknown> = {};
    try {
      // As on v2, a deployment's state and pinned structure come before the engine's validation.
      if (deployment) this.submissions.checkDeployment(deployment, request.prompt);
      const defs = await this.submissions.definitions();
      const workflow = await this.inputs.resolve(account.id, request.prompt, defs);
      // File inputs list only the caller's own files: another account's name fails like an unknown one.
      const outcome = validateWorkflow(workflow, await this.inputs.definitionsFor(account.id, defs));
      // As the engine: the outputs that validate run, and the others' errors come with the 200.
      if (!outcome.ok && !outcome.runnable) return bad(toEngineErrorBody(outcome));
      if (!outcome.ok) nodeErrors = toEngineErrorBody(outcome).node_errors;
      job = await this.submissions.submit(account, {
        workflow: outcome.ok ? workflow : outcome.runnable!.workflow,
        // The engine's history and queue show the prompt as sent, failed outputs and all.
        submitted: request.prompt,
        extraData: request.extraData,
        source: 'v1',
        clientId: request.clientId,
        jobId: request.promptId,
        deployment,
      });
    } catch (err) {
      const refused = refusedPromptBody(err, request.prompt);
      if (refused) return bad(refused);
      throw err;
    }
    return { prompt_id: job.id, number: Number(job.number), node_errors: nodeErrors };
  }

  @Get('prompt')
  async queueInfo(@JobsScope() scope: JobScope) {
    const remaining = await this.jobs.countInFlight(scope);
    return { exec_info: { queue_remaining: remaining } };
  }

  @Get('job/:id/status')
  async status(@JobsScope() scope: JobScope, @Param('id') id: string) {
    // As v2 reads a job: the same service, the same scope.
    const job = isUuid(id) ? await this.jobs.findOrNull(scope, id.toLowerCase()) : null;
    if (!job) throw ApiError.notFound('job');
    return { status: v1Status(job) };
  }

  @Get('queue')
  async queue(@JobsScope() scope: JobScope) {
    const jobs = await this.jobs.list(scope, [...IN_FLIGHT]);
    return {
      queue_running: await this.views.queueTuples(jobs.filter((j) => j.status !== 'queued')),
      queue_pending: await this.views.queueTuples(jobs.filter((j) => j.status === 'queued')),
    };
  }

  /** `{delete: [prompt_id, ...]}` cancels those jobs (waiting or running); `{clear: true}` every waiting one. */
  @Post('queue')
  @HttpCode(200)
  async manageQueue(@JobsScope() mine: JobScope, @Body() raw: unknown, @Res({ passthrough: true }) reply: FastifyReply) {
    const body = parsedOr400(reply, () => parseDeleteBody(raw));
    if (!body) return reply;
    const targets: Job[] = [];
    if (body.ids.length > 0) targets.push(...(await this.jobs.list(mine, ['queued', 'running'], body.ids)));
    if (body.clear) targets.push(...(await this.jobs.list(mine, ['queued'])));
    for (const job of targets) await this.control.cancel(job);
    return reply.status(200).send();
  }

  /** Interrupts the caller's running job named by `prompt_id`, or all of its running jobs. */
  @Post('interrupt')
  @HttpCode(200)
  async interrupt(@JobsScope() mine: JobScope, @Body() raw: unknown, @Res({ passthrough: true }) reply: FastifyReply) {
    const body = parsedOr400(reply, () => parseInterruptBody(raw));
    if (!body) return reply;
    const { promptId } = body;
    if (promptId === '') return reply.status(200).send();
    const running = await this.jobs.list(mine, ['running'], promptId ? [promptId] : null);
    for (const job of running) await this.control.cancel(job);
    return reply.status(200).send();
  }

  @Get('history')
  async history(@JobsScope() mine: JobScope, @Query() query: unknown) {
    const { max_items: take = V1_HISTORY_DEFAULT_ITEMS, offset = -1 } = parseWith(V1HistoryQuerySchema, query, (issues) => ApiError.invalid(issues[0]!.message));
    // As the engine counts it: `offset` skips that many of the oldest; without one the page is
    // the newest `max_items`. Either way the engine lists history oldest first.
    const jobs = await this.jobs.history(mine, take, offset);
    return this.views.history(offset < 0 ? jobs.reverse() : jobs);
  }

  /** A finished job of the caller, or `{}` as the engine answers for an unknown prompt. */
  @Get('history/:id')
  async historyOf(@JobsScope() scope: JobScope, @Param('id') id: string) {
    if (!isUuid(id)) return {};
    // Clients poll this while they wait: one query, as the v2 job view reads a job.
    const job = await this.jobs.findOrNull(scope, id.toLowerCase());
    if (!job || job.historyHidden || !(FINISHED as readonly string[]).includes(job.status) || (job.status === 'canceled' && !job.startedAt)) return {};
    return this.views.history([job]);
  }

  /**
   * `{clear: true}` empties the caller's history, `{delete: [prompt_id, ...]}` takes those prompts
   * out of it. The jobs stay (v2 still lists them, their outputs stay downloadable), as the engine
   * keeps output files when its history is cleared.
   */
  @Post('history')
  @HttpCode(200)
  async manageHistory(@JobsScope() mine: JobScope, @Body() raw: unknown, @Res({ passthrough: true }) reply: FastifyReply) {
    const body = parsedOr400(reply, () => parseDeleteBody(raw));
    if (!body) return reply;
    if (body.clear) await this.control.hideFromHistory(mine, null);
    if (body.ids.length > 0) await this.control.hideFromHistory(mine, body.ids);
    return reply.status(200).send();
  }
}
