import { Injectable } from '@nestjs/common';
import { ApiError } from '#libs/contracts';
import type { Account } from '#libs/db';
import type { EngineModels } from '#libs/jobs';
import { JobPipeline } from '../../jobs/job-pipeline.js';

/** An account's model lists: folder name → file names, and the embedding names. */
export interface ModelLists {
  folders: Record<string, string[]>;
  embeddings: string[];
}

/**
 * The one place model lists are made: what the engines report, plus entries of the account's own
 * (none today: per-account model files are a later step, and they join the lists here), each
 * folder's names without repeats, the engines' first.
 */
export function mergeModelLists(engines: EngineModels, own: Partial<ModelLists> = {}): ModelLists {
  const folders: Record<string, string[]> = {};
  for (const [folder, names] of [...Object.entries(engines.folders), ...Object.entries(own.folders ?? {})]) {
    folders[folder] = [...new Set([...(folders[folder] ?? []), ...names])];
  }
  return { folders, embeddings: [...new Set([...engines.embeddings, ...(own.embeddings ?? [])])] };
}

/** The model lists v1 clients read (`/models`, `/experiment/models`, `/embeddings`, `/internal/folder_paths`). */
@Injectable()
export class AccountModels {
  constructor(private readonly pipeline: JobPipeline) {}

  /** As the engines last reported them; like node definitions, unavailable until one has. */
  async of(_account: Account): Promise<ModelLists> {
    const reported = await this.pipeline.models.get();
    if (!reported) throw new ApiError('service_unavailable', 'No engine has reported its models yet; retry shortly.', undefined, { 'retry-after': '5' });
    return mergeModelLists(reported);
  }
}
