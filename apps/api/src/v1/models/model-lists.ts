import { Injectable } from '@nestjs/common';
import { ApiError } from '#libs/contracts';
import type { Account } from '#libs/db';
import type { EngineModels } from '#libs/jobs';
import { InputFiles } from '../../inputs/input-files.service.js';

/** An account's model lists: folder name → file names, and the embedding names. */
export interface ModelLists {
  folders: Record<string, string[]>;
  embeddings: string[];
}

/**
 * The one place model lists are made: what the engines report, plus the account's own model files
 * of the folders the engines have, each folder's names without repeats, the engines' first.
 */
export function mergeModelLists(engines: EngineModels, own: Partial<ModelLists> = {}): ModelLists {
  const folders: Record<string, string[]> = {};
  for (const [folder, names] of Object.entries(engines.folders)) folders[folder] = [...new Set(names)];
  for (const [folder, names] of Object.entries(own.folders ?? {})) {
    if (Object.hasOwn(folders, folder)) folders[folder] = [...new Set([...folders[folder]!, ...names])];
  }
  return { folders, embeddings: [...new Set([...engines.embeddings, ...(own.embeddings ?? [])])] };
}

/** The model lists v1 clients read (`/models`, `/experiment/models`, `/embeddings`, `/internal/folder_paths`). */
@Injectable()
export class AccountModels {
  constructor(private readonly inputs: InputFiles) {}

  /** As the engines last reported them, with the account's own; like node definitions, unavailable until an engine has. */
  async of(account: Account): Promise<ModelLists> {
    const [reported, own] = await Promise.all([this.inputs.engineModels(), this.inputs.models(account.id)]);
    if (!reported) throw new ApiError('service_unavailable', 'No engine has reported its models yet; retry shortly.', undefined, { 'retry-after': '5' });
    return mergeModelLists(reported, { folders: Object.fromEntries(own.folders().map((f) => [f, own.names(f)])), embeddings: own.embeddingNames() });
  }
}
