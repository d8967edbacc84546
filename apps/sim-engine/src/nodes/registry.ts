/** All node classes the sim-engine knows, by class name. */
import type { NodeDefinition, ObjectInfo } from '#libs/engine-protocol';
import { AUDIO_NODES } from './audio-nodes.js';
import { IMAGE_NODES } from './image-nodes.js';
import { LOADER_NODES } from './loader-nodes.js';
import { SAMPLING_NODES } from './sampling-nodes.js';
import { SIM_NODES } from './sim-nodes.js';
import { TEXT_NODES } from './text-nodes.js';
import type { EnvironmentLists, SimNode } from './types.js';

export const NODE_CLASSES: Record<string, SimNode> = {
  ...LOADER_NODES,
  ...SAMPLING_NODES,
  ...IMAGE_NODES,
  ...TEXT_NODES,
  ...AUDIO_NODES,
  ...SIM_NODES,
};

export class NodeRegistry {
  constructor(
    private readonly env: () => EnvironmentLists,
    /** Definitions reported beside the sim's own (SIM_OBJECT_INFO_FILE); never run. */
    private readonly recorded: ObjectInfo = {},
  ) {}

  has(classType: string): boolean {
    return Object.hasOwn(NODE_CLASSES, classType);
  }

  get(classType: string): SimNode | undefined {
    return this.has(classType) ? NODE_CLASSES[classType] : undefined;
  }

  definition(classType: string): NodeDefinition | undefined {
    return this.get(classType)?.definition(this.env()) ?? (Object.hasOwn(this.recorded, classType) ? this.recorded[classType] : undefined);
  }

  /** One snapshot of all definitions (file lists read once). */
  objectInfo(): ObjectInfo {
    const env = this.env();
    const out: ObjectInfo = {};
    for (const name of [...new Set([...Object.keys(NODE_CLASSES), ...Object.keys(this.recorded)])].sort()) {
      out[name] = Object.hasOwn(NODE_CLASSES, name) ? NODE_CLASSES[name]!.definition(env) : this.recorded[name]!;
    }
    return out;
  }
}
