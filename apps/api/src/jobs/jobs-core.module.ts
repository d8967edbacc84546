import { Module } from '@nestjs/common';
import { InputFiles } from '../inputs/input-files.service.js';
import { LimitsModule } from '../limits/index.js';
import { DeploymentsService } from '../surface/deployments.service.js';
import { EventFanout } from './event-fanout.js';
import { JobControl } from './job-control.service.js';
import { jobSystemExports, jobSystemProviders } from './job-system.providers.js';
import { JobViews } from './job-views.service.js';
import { SubmissionService } from './submission.service.js';

/** Job logic shared by the v2 and v1 surfaces. */
@Module({
  imports: [LimitsModule],
  providers: [...jobSystemProviders, EventFanout, SubmissionService, JobViews, JobControl, DeploymentsService, InputFiles],
  exports: [...jobSystemExports, EventFanout, SubmissionService, JobViews, JobControl, DeploymentsService, InputFiles, LimitsModule],
})
export class JobsCoreModule {}
