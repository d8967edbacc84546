/**
 * The engine's model loaders over real files of the models folder (SIM_MODELS_DIR): each opens
 * the named file and checks it is a readable safetensors file before its "weights" flow on. The
 * values carry which file they came from, so a different file makes a different image.
 * Checkpoint names of SIM_CHECKPOINTS with no file behind them load as before, reading nothing.
 */
import { access, constants } from 'node:fs/promises';
import type { ModelFolders } from '../models.js';
import { readSafetensors, SafetensorError } from '../safetensors.js';
import { def } from './image-nodes.js';
import { NodeException, type NodeContext, type SimNode } from './types.js';
import type { ClipValue, ModelValue, VaeValue } from './values.js';

function withList(name: string, input: string, choices: string[]): ReturnType<typeof def> {
  const d = def(name);
  const entry = d.input.required![input]!;
  entry[0] = choices;
  return d;
}

function notFound(folder: string, name: string): NodeException {
  return new NodeException('FileNotFoundError', `Model in folder '${folder}' with filename '${name}' not found.`, [
    '  File "/ComfyUI/folder_paths.py", line 318, in get_full_path_or_raise\n    raise FileNotFoundError(f"Model in folder \'{folder_name}\' with filename \'{filename}\' not found.")\n',
  ]);
}

/**
 * Which weights a file holds (the header's digest), after the checks a loader makes: the file is
 * there and readable, and a safetensors file has a well-formed header.
 */
export async function weightsOf(file: string): Promise<string> {
  if (/\.(safetensors|sft)$/i.test(file)) {
    try {
      return (await readSafetensors(file)).id;
    } catch (err) {
      if (err instanceof SafetensorError) {
        throw new NodeException(err.name, err.message, ['  File "/ComfyUI/comfy/utils.py", line 53, in load_torch_file\n    sd = safetensors.torch.load_file(ckpt, device=device.type)\n']);
      }
      throw err;
    }
  }
  try {
    await access(file, constants.R_OK);
  } catch {
    throw new NodeException('PermissionError', `[Errno 13] Permission denied: '${file}'`);
  }
  return `file:${file.length}`;
}

/** `name#weights`, after loading the named file of the folder; a stand-in checkpoint is its name. */
async function load(models: ModelFolders, folder: string, name: string): Promise<string> {
  if (models.isVirtual(folder, name)) return name;
  const file = models.fullPath(folder, name);
  if (!file) throw notFound(folder, name);
  return `${name}#${await weightsOf(file)}`;
}

const modelsOf = (ctx: NodeContext): ModelFolders => ctx.storage.models;

export const LOADER_NODES: Record<string, SimNode> = {
  CheckpointLoaderSimple: {
    definition: (env) => withList('CheckpointLoaderSimple', 'ckpt_name', env.models('checkpoints')),
    async execute(inputs, ctx) {
      const checkpoint = await load(modelsOf(ctx), 'checkpoints', String(inputs.ckpt_name));
      return {
        outputs: [
          { kind: 'MODEL', checkpoint } satisfies ModelValue,
          { kind: 'CLIP', checkpoint } satisfies ClipValue,
          { kind: 'VAE', checkpoint } satisfies VaeValue,
        ],
      };
    },
  },
  LoraLoader: {
    definition: (env) => withList('LoraLoader', 'lora_name', env.models('loras')),
    async execute(inputs, ctx) {
      const lora = await load(modelsOf(ctx), 'loras', String(inputs.lora_name));
      const model = inputs.model as ModelValue;
      const clip = inputs.clip as ClipValue;
      return {
        outputs: [
          { kind: 'MODEL', checkpoint: `${model.checkpoint}+${lora}@${Number(inputs.strength_model)}` } satisfies ModelValue,
          { kind: 'CLIP', checkpoint: `${clip.checkpoint}+${lora}@${Number(inputs.strength_clip)}` } satisfies ClipValue,
        ],
      };
    },
  },
  LoraLoaderModelOnly: {
    definition: (env) => withList('LoraLoaderModelOnly', 'lora_name', env.models('loras')),
    async execute(inputs, ctx) {
      const lora = await load(modelsOf(ctx), 'loras', String(inputs.lora_name));
      const model = inputs.model as ModelValue;
      return { outputs: [{ kind: 'MODEL', checkpoint: `${model.checkpoint}+${lora}@${Number(inputs.strength_model)}` } satisfies ModelValue] };
    },
  },
  VAELoader: {
    // The engine lists its VAE files and the built-in "pixel_space" decoder.
    definition: (env) => withList('VAELoader', 'vae_name', [...env.models('vae'), 'pixel_space']),
    async execute(inputs, ctx) {
      const name = String(inputs.vae_name);
      const checkpoint = name === 'pixel_space' ? name : await load(modelsOf(ctx), 'vae', name);
      return { outputs: [{ kind: 'VAE', checkpoint } satisfies VaeValue] };
    },
  },
  CLIPLoader: {
    definition: (env) => withList('CLIPLoader', 'clip_name', env.models('text_encoders')),
    async execute(inputs, ctx) {
      const checkpoint = await load(modelsOf(ctx), 'text_encoders', String(inputs.clip_name));
      return { outputs: [{ kind: 'CLIP', checkpoint: `${checkpoint}:${String(inputs.type)}` } satisfies ClipValue] };
    },
  },
  UNETLoader: {
    definition: (env) => withList('UNETLoader', 'unet_name', env.models('diffusion_models')),
    async execute(inputs, ctx) {
      const checkpoint = await load(modelsOf(ctx), 'diffusion_models', String(inputs.unet_name));
      return { outputs: [{ kind: 'MODEL', checkpoint } satisfies ModelValue] };
    },
  },
};
