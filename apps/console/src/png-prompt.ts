// The package is CommonJS (UMD): its default export is the module, in Node and in the bundle alike.
import metaPng from 'meta-png';

const PNG = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

/**
 * The API-format prompt a PNG saved by ComfyUI carries in its `prompt` text chunk (the engine
 * writes it as JSON with ASCII escapes, so a tEXt chunk), or why there is none.
 */
export function promptOfPng(bytes: Uint8Array): { ok: true; text: string } | { ok: false; problem: string } {
  if (bytes.length < 8 || PNG.some((b, i) => bytes[i] !== b)) return { ok: false, problem: 'This file is not a PNG.' };
  let text: string | undefined;
  try {
    text = metaPng.getMetadata(bytes, 'prompt');
  } catch {
    return { ok: false, problem: 'This PNG could not be read.' };
  }
  if (text === undefined) {
    const editorOnly = (() => {
      try {
        return metaPng.getMetadata(bytes, 'workflow') !== undefined;
      } catch {
        return false;
      }
    })();
    return { ok: false, problem: editorOnly ? 'This PNG carries the editor\'s workflow but no API-format prompt.' : 'This PNG carries no workflow: it was not saved by ComfyUI\'s SaveImage.' };
  }
  return { ok: true, text };
}
