import { Body, Controller, Get, Param, Post, Res, UseGuards } from '@nestjs/common';
import type { FastifyReply } from 'fastify';
import { V1SettingsSchema } from '#libs/contracts';
import type { Account } from '#libs/db';
import { ApiKeyHeaderGuard, CurrentAccount } from '../../auth/index.js';
import { parseWith } from '../../contract/index.js';
import { RateLimitGuard } from '../../limits/index.js';
import { BadBody, engineErrorBody, parseJsonObject, parseJsonText, v1Errors } from '../http/engine-body.js';
import { engineJson, engineText, parsedOr400 } from './engine-replies.js';
import { UserDataRefused, UserFiles } from './user-files.service.js';
import { RendersErrors } from '../../http/error-renderer.js';

/** The one user of an account, in the engine's user-data layout (`user/default/`). */
const USER_ID = 'default';

/**
 * The engine's users and settings (app/user_manager.py, app/app_settings.py). An account is one
 * ComfyUI user: `/api/users` answers in the engine's single-user shape (no `--multi-user`), so
 * clients never send `Comfy-User` or create users. Settings are the file `comfy.settings.json` in
 * the account's user folder, read and merged as the engine does; `/api/userdata` sees the same file.
 */
@RendersErrors(v1Errors)
@Controller('api')
@UseGuards(ApiKeyHeaderGuard, RateLimitGuard)
export class V1SettingsController {
  constructor(private readonly files: UserFiles) {}

  /** `migrated`: whether the user folder exists, i.e. holds a file (the front end then stops copying browser settings over). */
  @Get('users')
  async users(@CurrentAccount() account: Account) {
    return { storage: 'server', migrated: await this.files.hasFilesUnder(account.id, '') };
  }

  /**
   * The engine adds a profile here only for `--multi-user`, whose shape clients see in `GET /users`;
   * this service's users are its accounts, made by its operators.
   */
  @Post('users')
  addUser(@Body() raw: unknown, @Res() reply: FastifyReply) {
    let username: unknown;
    try {
      username = parseJsonObject(raw).username;
    } catch (err) {
      if (err instanceof BadBody) return engineJson(reply, { error: err.message }, 400);
      throw err;
    }
    if (typeof username !== 'string' || username.trim() === '') return engineJson(reply, { error: 'username not provided' }, 400);
    if (username.trim() === USER_ID) return engineJson(reply, { error: 'Duplicate username.' }, 400);
    return engineJson(reply, { error: 'This server has one user per account; users are not added here (ask the operator for another account).' }, 400);
  }

  @Get('settings')
  async settings(@CurrentAccount() account: Account) {
    return this.files.settings(account.id);
  }

  /** One setting, or `null` when it is not set (the engine's answer, never a 404). */
  @Get('settings/:id')
  async setting(@CurrentAccount() account: Account, @Param('id') id: string, @Res() reply: FastifyReply) {
    const settings = await this.files.settings(account.id);
    return engineJson(reply, id && Object.hasOwn(settings, id) ? settings[id] : null);
  }

  /** Merges the posted object into the settings: keys it names are replaced, others stay. */
  @Post('settings')
  async storeSettings(@CurrentAccount() account: Account, @Body() raw: unknown, @Res() reply: FastifyReply) {
    // Any JSON object is a set of settings: every failure of the schema would be a bug, shown as such.
    const changes = parsedOr400(reply, () => parseWith(V1SettingsSchema, parseJsonObject(raw), (issues) => new Error(`V1Settings refused: ${issues[0]!.message}`)));
    if (!changes) return reply;
    return this.change(reply, () => this.files.changeSettings(account.id, (current) => ({ ...current, ...changes.value })));
  }

  /** Sets one setting to the posted JSON value (any value, `null` included). */
  @Post('settings/:id')
  async storeSetting(@CurrentAccount() account: Account, @Param('id') id: string, @Body() raw: unknown, @Res() reply: FastifyReply) {
    if (!id) return engineText(reply, 400, 'Setting id not provided');
    // An empty body reads as `{}` for the JSON routes; a setting posted with no body is refused instead.
    if (typeof raw !== 'string' || raw.trim() === '') return reply.status(400).send(engineErrorBody('invalid_request', 'The request body must be the JSON value of the setting', 'empty body'));
    const value = parsedOr400(reply, () => parseJsonText(raw));
    if (!value) return reply;
    return this.change(reply, () => this.files.changeSettings(account.id, (current) => ({ ...current, [id]: value.value })));
  }

  private async change(reply: FastifyReply, work: () => Promise<void>): Promise<FastifyReply> {
    try {
      await work();
    } catch (err) {
      if (err instanceof UserDataRefused) return engineText(reply, err.status, err.message, err.reason);
      throw err;
    }
    return reply.status(200).send();
  }
}
