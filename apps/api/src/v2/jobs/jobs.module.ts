import { Module } from '@nestjs/common';
import { AuthModule } from '../../auth/index.js';
import { JobsCoreModule } from '../../jobs/jobs-core.module.js';
import { JobsController } from './jobs.controller.js';

@Module({
  imports: [AuthModule, JobsCoreModule],
  controllers: [JobsController],
})
export class JobsModule {}
