/** All node classes the sim-engine knows, by class name. */
import type { NodeDefinition, ObjectInfo } from '#libs/engine-protocol';
import { AUDIO_NODES } from './audio-nodes.js';
import { IMAGE_NODES } from './image-nodes.js';
import { SAMPLING_NODES } from './sampling-nodes.js';
import { SIM_NODES } from './sim-nodes.js';
import { TEXT_NODES } from './text-nodes.js';
import type { EnvironmentLists, SimNode } from './types.js';

export const NODE_CLASSES: Record<string, SimNode> = {
  ...SAMPLING_NODES,
  ...IMAGE_NODES,
  ...TEXT_NODES,
  ...AUDIO_NODES,
  ...SIM_NODES,
};

export class NodeRegistry {
  constructor(private readonly env: () => EnvironmentLists) {}

  has(classType: string): boolean {
    return Object.hasOwn(NODE_CLASSES, classType);
  }

  get(classType: string): SimNode | undefined {
    return this.has(classType) ? NODE_CLASSES[classType] : undefined;
  }

  definition(classType: string): NodeDefinition | undefined {
    return this.get(classType)?.definition(this.env());
  }

  /** One snapshot of all definitions (file lists read once). */
  objectInfo(): ObjectInfo {
    const env = this.env();
    const out: ObjectInfo = {};
    for (const name of Object.keys(NODE_CLASSES).sort()) out[name] = NODE_CLASSES[name]!.definition(env);
    return out;
  }
}
