import { Controller, Get, Param, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import type { Account } from '#libs/db';
import { ApiKeyHeaderGuard, CurrentAccount } from '../../auth/index.js';
import { RateLimitGuard } from '../../limits/index.js';
import { AccountModels } from '../models/model-lists.js';
import { engineText } from '../userdata/engine-replies.js';
import { DEFAULT_CHECKPOINT, textToImageWorkflow } from './stock-workflows.js';
import { graphThumbnail } from './thumbnail.js';
import { v1Errors } from '../http/engine-body.js';
import { RendersErrors } from '../../http/error-renderer.js';

/** The stock template: its name is the file name the front end loads (`/templates/{name}.json`). */
const STOCK = 'default';

/**
 * The index the front end's template dialog reads (the engine serves the comfyui-workflow-templates
 * package at `/templates/`): one category with the stock text-to-image workflow, pictured by
 * `/templates/default-1.png`.
 */
function templateIndex() {
  return [
    {
      moduleName: 'default',
      title: 'Basics',
      type: 'image',
      category: 'GENERATION TYPE',
      templates: [
        {
          name: STOCK,
          title: 'Image Generation',
          mediaType: 'image',
          mediaSubtype: 'png',
          description: 'Generate images from text prompts.',
          tags: ['Text to Image', 'Image'],
          models: ['SD1.5'],
        },
      ],
    },
  ];
}

/**
 * The engine's workflow templates: `/templates/...` (static files next to the front end, the
 * same for everyone) and `/api/workflow_templates` (example workflows of installed custom nodes).
 */
@RendersErrors(v1Errors)
@Controller()
@UseGuards(ApiKeyHeaderGuard, RateLimitGuard)
export class V1TemplatesController {
  private readonly thumbnail = graphThumbnail(textToImageWorkflow(DEFAULT_CHECKPOINT));

  constructor(private readonly models: AccountModels) {}

  /** Custom nodes' example workflows by node pack; the engines report none. */
  @Get('api/workflow_templates')
  customNodeTemplates() {
    return {};
  }

  @Get('templates/:file')
  async file(@CurrentAccount() account: Account, @Param('file') file: string, @Res() reply: FastifyReply) {
    if (file === 'index.json') return reply.type('application/json; charset=utf-8').send(JSON.stringify(templateIndex()));
    if (file === `${STOCK}.json`) return reply.type('application/json; charset=utf-8').send(JSON.stringify(textToImageWorkflow(await this.checkpoint(account))));
    if (file === `${STOCK}-1.png`) return reply.type('image/png').send(this.thumbnail);
    // What the engine's static route answers for a file it does not have (localized indexes, fuse options, ...).
    return engineText(reply, 404, '404: Not Found');
  }

  /** The default checkpoint when the engines have it, else the first they list: the graph must run as loaded. */
  private async checkpoint(account: Account): Promise<string> {
    const listed: string[] = await this.models.of(account).then(
      (m) => m.folders.checkpoints ?? [],
      () => [],
    );
    return listed.length === 0 || listed.includes(DEFAULT_CHECKPOINT) ? DEFAULT_CHECKPOINT : listed[0]!;
  }
}
