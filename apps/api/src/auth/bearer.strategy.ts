import { Injectable } from '@nestjs/common';
import { PassportStrategy } from '@nestjs/passport';
import { Strategy } from 'passport-http-bearer';
import type { Account } from '#libs/db';
import { ApiKeyAuthService } from './api-key-auth.service.js';

/** v2 credentials: `Authorization: Bearer <API key>`, through passport-http-bearer. */
@Injectable()
export class BearerStrategy extends PassportStrategy(Strategy, 'bearer') {
  constructor(private readonly keys: ApiKeyAuthService) {
    super();
  }

  async validate(token: string): Promise<Account | false> {
    return (await this.keys.authenticate(token)) ?? false;
  }
}
