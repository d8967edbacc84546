import { Body, Controller, Get, HttpCode, Inject, Param, Post, Query, Req, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '#libs/config';
import { ApiError, CancelAfterSchema, IdempotencyKeySchema, isTerminal, PreferWaitSchema, type JobView } from '#libs/contracts';
import type { Account, Deployment } from '#libs/db';
import { jobFromEndedText, JobStore, type JobWithOutputs } from '#libs/jobs';
import { toV2NodeErrors } from '#libs/workflow';
import { BearerAuthGuard, CurrentAccount } from '../../auth/index.js';
import { Draining } from '../../core/draining.js';
import { CONFIG } from '../../core/tokens.js';
import { requireJsonObject } from '../../http/json-body.js';
import { UuidPipe } from '../../http/uuid.pipe.js';
import { EventFanout } from '../../jobs/event-fanout.js';
import { JobControl } from '../../jobs/job-control.service.js';
import { JobViews, type JobScope } from '../../jobs/job-views.service.js';
import { SubmissionService, WorkflowRejected } from '../../jobs/submission.service.js';
import { AccountLimits, RateLimitGuard } from '../../limits/index.js';
import { CurrentDeployment, DeploymentScopeGuard, JobsScope } from '../../surface/deployment-scope.js';
import { JobEventStream } from './job-event-stream.js';
import { nextCursor, parseJobListQuery } from './job-list.js';
import { parseSubmitBody } from './submit-body.js';
import { parseV2Input } from '../parse-input.js';
import { envelopeErrors, RendersErrors } from '../../http/error-renderer.js';

// How long a request waiting for its job's end (`Prefer: wait`) trusts the job's events alone
// before it also reads the job once (see waitForEnd).
const MISSED_END_CHECK_MS = 100;

@RendersErrors(envelopeErrors)
@Controller()
@UseGuards(BearerAuthGuard, RateLimitGuard, DeploymentScopeGuard)
export class JobsController {
  constructor(
    private readonly jobs: JobStore,
    @Inject(CONFIG) private readonly config: Config,
    private readonly submissions: SubmissionService,
    private readonly views: JobViews,
    private readonly control: JobControl,
    private readonly eventStream: JobEventStream,
    private readonly fanout: EventFanout,
    private readonly limits: AccountLimits,
    private readonly stopping: Draining,
  ) {}

  @Post('api/v2/jobs')
  async submit(
    @CurrentAccount() account: Account,
    @CurrentDeployment() deployment: Deployment | null,
    @Body() body: unknown,
    @Req() request: FastifyRequest,
    @Res({ passthrough: true }) reply: FastifyReply,
  ): Promise<JobView> {
    const parsed = parseSubmitBody(requireJsonObject(request, body));
    const idempotencyKey = parseV2Input(IdempotencyKeySchema, request.headers['idempotency-key']);
    const preferWait = parseV2Input(PreferWaitSchema, request.headers.prefer);
    const wait = preferWait === undefined ? undefined : Math.min(preferWait, this.config.jobs.preferWaitMaxSeconds);
    const cancelAfterSeconds = parseV2Input(CancelAfterSchema, request.headers['cancel-after'], { header: 'Cancel-After' });
    let job;
    try {
      job = await this.submissions.submit(account, { ...parsed, idempotencyKey, source: 'v2', deployment, cancelAfterSeconds });
    } catch (err) {
      if (err instanceof WorkflowRejected) {
        const o = err.outcome;
        const summary = o.error.details ? `${o.error.message.replace(/\.$/, '')}: ${o.error.details.split('\n')[0]}` : o.error.message;
        throw new ApiError('invalid_workflow', summary, {
          error_type: o.error.type,
          node_errors: toV2NodeErrors(o),
        });
      }
      throw err;
    }
    let ended: JobWithOutputs | null = null;
    if (wait !== undefined) {
      ended = await this.waitForEnd(job.id, job.status, wait * 1000);
      reply.header('preference-applied', `wait=${wait}`);
    }
    reply.status(201);
    return this.views.renderCreated(job, request, wait !== undefined, ended);
  }

  /**
   * Holds the response until the job ends or the time passes, whichever comes first. A replica
   * that is stopping answers at once: the job as it stands, which the client then polls. Resolves
   * with the job as its run ended it when that came with the terminal status (no read-back then).
   */
  private async waitForEnd(jobId: string, status: string, ms: number): Promise<JobWithOutputs | null> {
    if (isTerminal(status) || ms <= 0 || this.stopping.draining) return null;
    return new Promise<JobWithOutputs | null>((resolve) => {
      let endedText: string | null = null;
      const stopEnded = this.fanout.onJobEnded(jobId, (text) => (endedText = text));
      const timer = setTimeout(done, ms);
      const stop = this.fanout.onJob(jobId, (e) => {
        if (e.event !== 'status') return;
        const ended = (JSON.parse(e.data) as { status: string }).status;
        if (!isTerminal(ended)) return;
        const job = endedText === null ? null : jobFromEndedText(endedText);
        done(job?.id === jobId && job.status === ended ? job : null);
      });
      const undrain = this.stopping.onDraining(done);
      // The job may have ended between submission and subscription: looked at once, if it has not
      // ended a moment later. Most jobs a client waits for end sooner, and this read would compete
      // with their dispatch for the database. If it fails, the wait still ends with the job's
      // event or the time; it must not reject unhandled (that stops the process).
      const missed = setTimeout(
        () =>
          void this.jobs
            .get(jobId)
            .then((j) => j && isTerminal(j.status) && done())
            .catch(() => undefined),
        MISSED_END_CHECK_MS,
      );
      function done(job: JobWithOutputs | null = null) {
        clearTimeout(timer);
        clearTimeout(missed);
        stop();
        stopEnded();
        undrain();
        resolve(job);
      }
    });
  }

  @Get('api/v2/jobs')
  async list(@CurrentAccount() account: Account, @JobsScope() scope: JobScope, @Query() query: Record<string, unknown>, @Req() request: FastifyRequest) {
    const q = parseJobListQuery(query, this.config.signingSecret, account.id);
    const rows = await this.views.page(scope, q);
    const page = rows.slice(0, q.limit);
    const hasMore = rows.length > q.limit;
    return {
      data: await this.views.renderMany(page, request),
      has_more: hasMore,
      ...(hasMore ? { next_cursor: nextCursor(this.config.signingSecret, account.id, page[page.length - 1]!) } : {}),
      limit: q.limit,
    };
  }

  @Get('api/v2/jobs/:id')
  async get(@JobsScope() scope: JobScope, @Param('id', new UuidPipe('job')) id: string, @Req() request: FastifyRequest): Promise<JobView> {
    return this.views.render(await this.views.find(scope, id), request);
  }

  @Get('api/v2/jobs/:id/workflow')
  async workflow(@JobsScope() scope: JobScope, @Param('id', new UuidPipe('job')) id: string) {
    return { workflow: await this.views.workflow(scope, id), format: 'api' };
  }

  @Get('api/v2/jobs/:id/events')
  async events(@CurrentAccount() account: Account, @JobsScope() scope: JobScope, @Param('id', new UuidPipe('job')) id: string, @Req() request: FastifyRequest, @Res() reply: FastifyReply): Promise<void> {
    await this.eventStream.stream(account, scope, id, request, reply);
  }

  @Post('api/v2/jobs/:id/cancel')
  @HttpCode(200)
  async cancel(@JobsScope() scope: JobScope, @Param('id', new UuidPipe('job')) id: string, @Req() request: FastifyRequest): Promise<JobView> {
    const job = await this.views.find(scope, id);
    await this.control.cancel(job);
    return this.views.render(await this.views.find(scope, id), request);
  }

  @Get('api/v2/jobs/:id/logs')
  async logs(@JobsScope() scope: JobScope, @Param('id', new UuidPipe('job')) id: string, @Req() request: FastifyRequest, @Res() reply: FastifyReply): Promise<FastifyReply> {
    // The contract: without logs, a routing 404 that cannot be told from the job being gone.
    if (!this.config.jobs.captureLogs) throw ApiError.notFound('job');
    const job = await this.views.find(scope, id);
    if (!isTerminal(job.status) || job.logText === null || !job.logCapturedAt) return reply.status(204).send();
    return reply.status(200).send({ text: job.logText, truncated: job.logTruncated, captured_at: job.logCapturedAt.toISOString() });
  }

  /** Deployment surface: the pinned workflow this deployment runs. */
  @Get('workflow')
  pinnedWorkflow(@CurrentDeployment() deployment: Deployment | null) {
    if (!deployment) throw ApiError.noRoute();
    return { workflow: deployment.workflow, format: 'api' };
  }
}
