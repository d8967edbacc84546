import { Module } from '@nestjs/common';
import { AuthModule } from '../../auth/index.js';
import { LimitsModule } from '../../limits/index.js';
import { AssetList } from './asset-list.js';
import { AssetsController } from './assets.controller.js';
import { AssetsService } from './assets.service.js';
import { ModelStorage } from './model-storage.js';
import { UrlImports } from './url-import.js';
import { UploadKeys } from './upload-keys.js';

@Module({
  imports: [AuthModule, LimitsModule],
  controllers: [AssetsController],
  providers: [AssetsService, UploadKeys, AssetList, ModelStorage, UrlImports],
  exports: [AssetsService, UploadKeys, ModelStorage],
})
export class AssetsModule {}
