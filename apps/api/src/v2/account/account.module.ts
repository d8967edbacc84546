import { Module } from '@nestjs/common';
import { AuthModule } from '../../auth/index.js';
import { LimitsModule } from '../../limits/index.js';
import { AssetsModule } from '../assets/assets.module.js';
import { AccountController } from './account.controller.js';
import { AccountView } from './account-view.js';

/** The caller's own account, read-only (the console's account page). */
@Module({
  imports: [AuthModule, LimitsModule, AssetsModule],
  controllers: [AccountController],
  providers: [AccountView],
})
export class AccountModule {}
