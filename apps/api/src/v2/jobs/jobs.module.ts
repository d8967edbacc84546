import { Module } from '@nestjs/common';
import { AuthModule } from '../../auth/index.js';
import { JobsCoreModule } from '../../jobs/jobs-core.module.js';
import { JobEventStream } from './job-event-stream.js';
import { JobsController } from './jobs.controller.js';

@Module({
  imports: [AuthModule, JobsCoreModule],
  controllers: [JobsController],
  providers: [JobEventStream],
})
export class JobsModule {}
