import { Module } from '@nestjs/common';
import { AuthModule } from '../../auth/index.js';
import { LimitsModule } from '../../limits/index.js';
import { AssetsController } from './assets.controller.js';
import { AssetsService } from './assets.service.js';
import { UploadKeys } from './upload-keys.js';

@Module({
  imports: [AuthModule, LimitsModule],
  controllers: [AssetsController],
  providers: [AssetsService, UploadKeys],
  exports: [AssetsService],
})
export class AssetsModule {}
