// The stock text-to-image graph in the front end's own (UI) format: what a new browser loads from
// the template dialog to start on a working graph. Node ids, slots and links follow the engine's
// node definitions (CheckpointLoaderSimple → CLIPTextEncode ×2 → EmptyLatentImage → KSampler →
// VAEDecode → SaveImage); `widgets_values` are the node inputs the front end shows as widgets, in
// the order of the definition (KSampler's seed is followed by its "control after generate" choice).

/** The checkpoint the graph names when the engines list it (ComfyUI's own default). */
export const DEFAULT_CHECKPOINT = 'v1-5-pruned-emaonly-fp16.safetensors';

type Slot = { name: string; type: string; link?: number | null; links?: number[]; slot_index?: number };

export interface UiNode {
  id: number;
  type: string;
  pos: [number, number];
  size: [number, number];
  flags: Record<string, never>;
  order: number;
  mode: number;
  inputs: Slot[];
  outputs: Slot[];
  properties: Record<string, unknown>;
  widgets_values: unknown[];
}

/** `[link id, from node, from slot, to node, to slot, type]`. */
export type UiLink = [number, number, number, number, number, string];

export interface UiWorkflow {
  last_node_id: number;
  last_link_id: number;
  nodes: UiNode[];
  links: UiLink[];
  groups: unknown[];
  config: Record<string, never>;
  extra: Record<string, unknown>;
  version: number;
}

const LINKS: UiLink[] = [
  [1, 4, 0, 3, 0, 'MODEL'],
  [2, 5, 0, 3, 3, 'LATENT'],
  [3, 4, 1, 6, 0, 'CLIP'],
  [4, 6, 0, 3, 1, 'CONDITIONING'],
  [5, 4, 1, 7, 0, 'CLIP'],
  [6, 7, 0, 3, 2, 'CONDITIONING'],
  [7, 3, 0, 8, 0, 'LATENT'],
  [8, 4, 2, 8, 1, 'VAE'],
  [9, 8, 0, 9, 0, 'IMAGE'],
];

function node(id: number, type: string, order: number, pos: [number, number], size: [number, number], inputs: Array<[string, string]>, outputs: Array<[string, string]>, widgets: unknown[]): UiNode {
  return {
    id,
    type,
    pos,
    size,
    flags: {},
    order,
    mode: 0,
    inputs: inputs.map(([name, t], slot) => ({ name, type: t, link: LINKS.find((l) => l[3] === id && l[4] === slot)?.[0] ?? null })),
    outputs: outputs.map(([name, t], slot) => ({ name, type: t, links: LINKS.filter((l) => l[1] === id && l[2] === slot).map((l) => l[0]), slot_index: slot })),
    properties: { 'Node name for S&R': type },
    widgets_values: widgets,
  };
}

/** The stock text-to-image workflow, loading `checkpoint`. */
export function textToImageWorkflow(checkpoint: string): UiWorkflow {
  return {
    last_node_id: 9,
    last_link_id: 9,
    nodes: [
      node(4, 'CheckpointLoaderSimple', 0, [26, 474], [315, 98], [], [['MODEL', 'MODEL'], ['CLIP', 'CLIP'], ['VAE', 'VAE']], [checkpoint]),
      node(5, 'EmptyLatentImage', 1, [473, 609], [315, 106], [], [['LATENT', 'LATENT']], [512, 512, 1]),
      node(6, 'CLIPTextEncode', 2, [415, 186], [422, 164], [['clip', 'CLIP']], [['CONDITIONING', 'CONDITIONING']], ['a glass bottle holding a purple galaxy, on a wooden table, soft light']),
      node(7, 'CLIPTextEncode', 3, [413, 389], [425, 180], [['clip', 'CLIP']], [['CONDITIONING', 'CONDITIONING']], ['text, watermark, blurry']),
      node(
        3,
        'KSampler',
        4,
        [863, 186],
        [315, 262],
        [['model', 'MODEL'], ['positive', 'CONDITIONING'], ['negative', 'CONDITIONING'], ['latent_image', 'LATENT']],
        [['LATENT', 'LATENT']],
        [156680208700286, 'randomize', 20, 8, 'euler', 'normal', 1],
      ),
      node(8, 'VAEDecode', 5, [1209, 188], [210, 46], [['samples', 'LATENT'], ['vae', 'VAE']], [['IMAGE', 'IMAGE']], []),
      node(9, 'SaveImage', 6, [1451, 189], [210, 270], [['images', 'IMAGE']], [], ['ComfyUI']),
    ],
    links: LINKS.map((l) => [...l] as UiLink),
    groups: [],
    config: {},
    extra: { ds: { scale: 1, offset: [0, 0] } },
    version: 0.4,
  };
}
