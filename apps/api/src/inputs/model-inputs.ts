// Which list inputs of the engine's node definitions pick a file of which model folder. The
// definitions do not say: a loader's input is a plain list of names (`lora_name: [["a.safetensors",
// …]]`). So the lists are compared with the folders' own lists the engines report, and an input
// whose choices hold every file of exactly one folder is that folder's. Where the folders are
// empty (nothing to compare) or alike, the names the engine's own loaders use decide, as the
// engine's front end knows them. Only folders the engines report are ever named.

import type { EngineModels } from '#libs/jobs';
import { inputChoices, type NodeDefinition, type NodeDefinitions } from '#libs/workflow';
import { fileKind } from './file-inputs.js';

/** Inputs of the engine's loaders and their folders, when the lists cannot tell. */
const BY_INPUT: Record<string, string> = {
  ckpt_name: 'checkpoints',
  lora_name: 'loras',
  vae_name: 'vae',
  unet_name: 'diffusion_models',
  clip_name: 'text_encoders',
  clip_name1: 'text_encoders',
  clip_name2: 'text_encoders',
  clip_name3: 'text_encoders',
  clip_name4: 'text_encoders',
  control_net_name: 'controlnet',
  style_model_name: 'style_models',
  gligen_name: 'gligen',
  hypernetwork_name: 'hypernetworks',
  photomaker_model_name: 'photomaker',
  audio_encoder_name: 'audio_encoders',
};

/** Where one class's input of a common name reads another folder. */
const BY_CLASS_INPUT: Record<string, string> = {
  'CLIPVisionLoader.clip_name': 'clip_vision',
  'UpscaleModelLoader.model_name': 'upscale_models',
  'ModelPatchLoader.name': 'model_patches',
  'CheckpointLoader.config_name': 'configs',
};

export interface ModelInput {
  classType: string;
  section: 'required' | 'optional';
  input: string;
  folder: string;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The folder whose every file the choices list; the largest such folder, unless two tie. */
function inferredFolder(choices: Set<unknown>, folders: Array<[string, string[]]>): string | null {
  let best: string | null = null;
  let bestSize = 0;
  let tie = false;
  for (const [folder, names] of folders) {
    if (names.length === 0 || names.length < bestSize || !names.every((n) => choices.has(n))) continue;
    if (names.length === bestSize) tie = true;
    else {
      best = folder;
      bestSize = names.length;
      tie = false;
    }
  }
  return tie ? null : best;
}

/** The model inputs of a set of definitions, for the folders the engines report. */
export function findModelInputs(defs: NodeDefinitions, models: EngineModels): ModelInput[] {
  const folders = Object.entries(models.folders);
  const reported = new Set(Object.keys(models.folders));
  const found: ModelInput[] = [];
  for (const [classType, def] of Object.entries(defs) as Array<[string, NodeDefinition]>) {
    for (const section of ['required', 'optional'] as const) {
      const inputs = def.input?.[section];
      if (!isObject(inputs)) continue;
      for (const [input, entry] of Object.entries(inputs)) {
        const choices = inputChoices(entry);
        if (!choices || fileKind(entry) !== null) continue;
        const folder = inferredFolder(new Set(choices), folders) ?? BY_CLASS_INPUT[`${classType}.${input}`] ?? BY_INPUT[input] ?? null;
        if (folder && reported.has(folder)) found.push({ classType, section, input, folder });
      }
    }
  }
  return found;
}

/** The model inputs, looked up by class and input; made once per pair of engine reports. */
export class ModelInputs {
  private readonly byKey = new Map<string, ModelInput>();
  private readonly byClass = new Map<string, ModelInput[]>();

  constructor(readonly list: ModelInput[]) {
    for (const m of list) {
      this.byKey.set(`${m.classType}\u0000${m.input}`, m);
      const forClass = this.byClass.get(m.classType);
      if (forClass) forClass.push(m);
      else this.byClass.set(m.classType, [m]);
    }
  }

  folderOf(classType: string, input: string): string | null {
    return this.byKey.get(`${classType}\u0000${input}`)?.folder ?? null;
  }

  ofClass(classType: string): ModelInput[] {
    return this.byClass.get(classType) ?? [];
  }

  private static made = new WeakMap<NodeDefinitions, WeakMap<EngineModels, ModelInputs>>();

  /** Memoized on the reports themselves: they are replaced, never changed, when engines report anew. */
  static of(defs: NodeDefinitions, models: EngineModels | null): ModelInputs {
    if (!models) return EMPTY;
    let byModels = ModelInputs.made.get(defs);
    if (!byModels) ModelInputs.made.set(defs, (byModels = new WeakMap()));
    let made = byModels.get(models);
    if (!made) byModels.set(models, (made = new ModelInputs(findModelInputs(defs, models))));
    return made;
  }
}

const EMPTY = new ModelInputs([]);
