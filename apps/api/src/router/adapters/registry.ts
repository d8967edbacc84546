import type { ProviderKeys } from '#libs/config';
import type { AdapterKind, ProviderAdapter } from './adapter.js';
import { BflAdapter } from './providers/bfl.js';
import { ElevenLabsAdapter } from './providers/elevenlabs.js';
import { GoogleVeoAdapter } from './providers/google-veo.js';
import { IdeogramAdapter } from './providers/ideogram.js';
import { KlingAdapter } from './providers/kling.js';
import { LumaAdapter } from './providers/luma.js';
import { MinimaxAdapter } from './providers/minimax.js';
import { OpenAiImagesAdapter } from './providers/openai.js';
import { RecraftAdapter } from './providers/recraft.js';
import { RunwayAdapter } from './providers/runway.js';
import { StabilityAdapter } from './providers/stability.js';

/** One adapter per provider protocol, each holding the router's credentials at that provider. */
export function createAdapters(keys: ProviderKeys): Record<AdapterKind, ProviderAdapter> {
  return {
    bfl: new BflAdapter(keys.bfl),
    'openai-images': new OpenAiImagesAdapter(keys.openai),
    stability: new StabilityAdapter(keys.stability),
    recraft: new RecraftAdapter(keys.recraft),
    ideogram: new IdeogramAdapter(keys.ideogram),
    kling: new KlingAdapter(keys.klingAccessKey, keys.klingSecretKey),
    luma: new LumaAdapter(keys.luma),
    runway: new RunwayAdapter(keys.runway),
    minimax: new MinimaxAdapter(keys.minimax),
    'google-veo': new GoogleVeoAdapter(keys.google),
    elevenlabs: new ElevenLabsAdapter(keys.elevenlabs),
  };
}
