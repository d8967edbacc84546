import send from '@fastify/send';
import { Inject, Injectable } from '@nestjs/common';
import type { Config } from '#libs/config';
import type { Db } from '#libs/db';
import { CONFIG, DB } from '../../core/tokens.js';
import { baseName, parentFolders } from './user-paths.js';

/** A refusal in the engine's terms: its status and the text it answers with. */
export class UserDataRefused extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** A short reason phrase for the status line, which the front end shows. */
    readonly reason?: string,
  ) {
    super(message);
  }
}

/** What the engine's `get_file_info` reports: times as seconds since the epoch. */
export interface FileInfo {
  path: string;
  size: number;
  modified: number;
  created: number;
}

export interface StoredFile {
  path: string;
  sizeBytes: number;
  createdAt: Date;
  modifiedAt: Date;
}

export interface FileContent extends StoredFile {
  content: Uint8Array;
  contentType: string;
}

/** The engine's `user/default/comfy.settings.json`, which `/api/settings` reads and merges. */
export const SETTINGS_FILE = 'comfy.settings.json';

const LISTED = { path: true, sizeBytes: true, createdAt: true, modifiedAt: true } as const;
type Tx = Parameters<Parameters<Db['$transaction']>[0]>[0];

export function fileInfo(file: StoredFile, relativePath = file.path): FileInfo {
  return { path: relativePath, size: file.sizeBytes, modified: file.modifiedAt.getTime() / 1000, created: file.createdAt.getTime() / 1000 };
}

/**
 * The media type a file is served with: by its extension, as the engine's file responses guess it;
 * for a name whose extension says nothing, what the client sent when it stored the file.
 */
export function servedContentType(path: string, stored: string): string {
  return send.mime.getType(path) ?? (stored || 'application/octet-stream');
}

/**
 * Each account's user folder in PostgreSQL. Folders are not stored: a folder exists while a file
 * lies under it. Every change of an account's folder runs under one lock per account, so the
 * limits (one file, the account's bytes and files) and the file-or-folder rules hold however many
 * requests and replicas write at once.
 */
@Injectable()
export class UserFiles {
  private readonly limits: Config['userdata'];

  constructor(
    @Inject(DB) private readonly db: Db,
    @Inject(CONFIG) config: Config,
  ) {
    this.limits = config.userdata;
  }

  get maxFileBytes(): number {
    return this.limits.maxFileBytes;
  }

  async read(accountId: string, path: string): Promise<FileContent | null> {
    return this.db.userFile.findUnique({ where: { accountId_path: { accountId, path } } });
  }

  /** Every file of the account, without contents (at most USERDATA_MAX_FILES of them). */
  async all(accountId: string): Promise<StoredFile[]> {
    return this.db.userFile.findMany({ where: { accountId }, select: LISTED, orderBy: { path: 'asc' } });
  }

  /** What a name is: a file, a folder (files lie under it; '' always is one), or nothing. */
  async kind(accountId: string, path: string, db: Db | Tx = this.db): Promise<'file' | 'folder' | null> {
    if (path === '') return 'folder';
    if (await db.userFile.findUnique({ where: { accountId_path: { accountId, path } }, select: { path: true } })) return 'file';
    return (await this.hasFilesUnder(accountId, path, db)) ? 'folder' : null;
  }

  /** Whether the folder has any file, for a folder a name that the listings treat as missing when empty. */
  async hasFilesUnder(accountId: string, folder: string, db: Db | Tx = this.db): Promise<boolean> {
    if (folder === '') return (await db.userFile.count({ where: { accountId }, take: 1 })) > 0;
    // starts_with: a LIKE pattern would read `%` and `_` in names as wildcards.
    const rows = await db.$queryRaw<unknown[]>`SELECT 1 FROM user_files WHERE account_id = ${accountId}::uuid AND starts_with(path, ${`${folder}/`}) LIMIT 1`;
    return rows.length > 0;
  }

  /**
   * Stores `content` at `path`: 409 when it exists and `overwrite` is false; 400 when a folder is
   * in the way (the name is a folder, or one of its folders is a file); 413 past a limit.
   */
  async write(accountId: string, path: string, content: Buffer, contentType: string, overwrite: boolean): Promise<StoredFile> {
    if (content.length > this.limits.maxFileBytes) throw this.tooLarge(content.length);
    const bytes = new Uint8Array(content);
    return this.locked(accountId, async (tx) => {
      const kind = await this.kind(accountId, path, tx);
      if (kind !== null && !overwrite) throw new UserDataRefused(409, 'File already exists');
      if (kind === 'folder') throw new UserDataRefused(400, `Invalid filename: "${path || '.'}" is a directory`);
      await this.refuseFileInTheWay(tx, accountId, path);
      const existing = kind === 'file' ? await tx.userFile.findUnique({ where: { accountId_path: { accountId, path } }, select: { sizeBytes: true } }) : null;
      await this.checkRoom(tx, accountId, content.length - (existing?.sizeBytes ?? 0), existing ? 0 : 1);
      const now = new Date();
      return tx.userFile.upsert({
        where: { accountId_path: { accountId, path } },
        create: { accountId, path, content: bytes, contentType, sizeBytes: bytes.length, createdAt: now, modifiedAt: now },
        update: { content: bytes, contentType, sizeBytes: bytes.length, modifiedAt: now },
        select: LISTED,
      });
    });
  }

  /** Removes a file; false when there is none (a folder is not a file). */
  async remove(accountId: string, path: string): Promise<boolean> {
    return this.locked(accountId, async (tx) => (await tx.userFile.deleteMany({ where: { accountId, path } })).count > 0);
  }

  /**
   * The engine's move (`shutil.move`): onto a folder moves the file into it; 404 without a source
   * file, 409 when the destination exists and `overwrite` is false (or the file of that name inside
   * a destination folder exists), 400 when a file is in the way of the destination's folders.
   */
  async move(accountId: string, source: string, dest: string, overwrite: boolean): Promise<StoredFile> {
    return this.locked(accountId, async (tx) => {
      const file = await tx.userFile.findUnique({ where: { accountId_path: { accountId, path: source } }, select: LISTED });
      if (!file) throw new UserDataRefused(404, 'File not found');
      const destKind = await this.kind(accountId, dest, tx);
      if (destKind !== null && !overwrite) throw new UserDataRefused(409, 'File already exists');
      let target = dest;
      if (destKind === 'folder') {
        target = dest === '' ? baseName(source) : `${dest}/${baseName(source)}`;
        if ((await this.kind(accountId, target, tx)) !== null) throw new UserDataRefused(409, `Destination path "${target}" already exists`);
      }
      if (target === source) return file;
      await this.refuseFileInTheWay(tx, accountId, target);
      // A moved file keeps its times, as a rename does; the file it replaces is gone.
      await tx.userFile.deleteMany({ where: { accountId, path: target } });
      return tx.userFile.update({ where: { accountId_path: { accountId, path: source } }, data: { path: target }, select: LISTED });
    });
  }

  /** The account's settings: `{}` when there are none or the file is not a JSON object, as the engine reads them. */
  async settings(accountId: string): Promise<Record<string, unknown>> {
    const file = await this.read(accountId, SETTINGS_FILE);
    return file ? parseSettings(file.content) : {};
  }

  /** Reads, changes and writes the settings file as one step, so concurrent changes all land. */
  async changeSettings(accountId: string, change: (current: Record<string, unknown>) => Record<string, unknown>): Promise<void> {
    await this.locked(accountId, async (tx) => {
      const file = await tx.userFile.findUnique({ where: { accountId_path: { accountId, path: SETTINGS_FILE } }, select: { content: true, sizeBytes: true } });
      if (!file && (await this.hasFilesUnder(accountId, SETTINGS_FILE, tx))) throw new UserDataRefused(400, `Invalid filename: "${SETTINGS_FILE}" is a directory`);
      // Written as the engine writes it: `json.dumps(settings, indent=4)`.
      const content = new Uint8Array(Buffer.from(JSON.stringify(change(file ? parseSettings(file.content) : {}), null, 4)));
      if (content.length > this.limits.maxFileBytes) throw this.tooLarge(content.length);
      await this.checkRoom(tx, accountId, content.length - (file?.sizeBytes ?? 0), file ? 0 : 1);
      const now = new Date();
      await tx.userFile.upsert({
        where: { accountId_path: { accountId, path: SETTINGS_FILE } },
        create: { accountId, path: SETTINGS_FILE, content, contentType: 'application/json', sizeBytes: content.length, createdAt: now, modifiedAt: now },
        update: { content, sizeBytes: content.length, modifiedAt: now },
      });
    });
  }

  private async locked<T>(accountId: string, work: (tx: Tx) => Promise<T>): Promise<T> {
    return this.db.$transaction(async (tx) => {
      await tx.$executeRaw`SELECT pg_advisory_xact_lock(hashtextextended(${`user_files:${accountId}`}, 0))`;
      return work(tx);
    });
  }

  /** A file where one of the name's folders would be: the engine cannot create the folder (400). */
  private async refuseFileInTheWay(tx: Tx, accountId: string, path: string): Promise<void> {
    const folders = parentFolders(path);
    if (folders.length === 0) return;
    const blocking = await tx.userFile.findFirst({ where: { accountId, path: { in: folders } }, select: { path: true } });
    if (blocking) throw new UserDataRefused(400, `Invalid filename: "${blocking.path}" is a file, not a directory`);
  }

  private async checkRoom(tx: Tx, accountId: string, addedBytes: number, addedFiles: number): Promise<void> {
    const used = await tx.userFile.aggregate({ where: { accountId }, _sum: { sizeBytes: true }, _count: true });
    const bytes = (used._sum.sizeBytes ?? 0) + addedBytes;
    if (addedBytes > 0 && bytes > this.limits.maxAccountBytes) {
      throw new UserDataRefused(413, `User data quota exceeded: this would keep ${bytes} bytes, and an account may keep ${this.limits.maxAccountBytes} (USERDATA_MAX_ACCOUNT_BYTES). Delete files to make room.`, 'User data quota exceeded');
    }
    if (addedFiles > 0 && used._count + addedFiles > this.limits.maxFiles) {
      throw new UserDataRefused(413, `User data quota exceeded: an account may keep ${this.limits.maxFiles} files (USERDATA_MAX_FILES). Delete files to make room.`, 'User data quota exceeded');
    }
  }

  tooLarge(size: number | null): UserDataRefused {
    const got = size === null ? 'The file is larger than that' : `This one has ${size} bytes`;
    return new UserDataRefused(413, `A user data file may have at most ${this.limits.maxFileBytes} bytes (USERDATA_MAX_FILE_BYTES). ${got}.`, 'User data file too large');
  }
}

function parseSettings(content: Uint8Array): Record<string, unknown> {
  try {
    const value = JSON.parse(Buffer.from(content.buffer, content.byteOffset, content.length).toString('utf8')) as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
