// A tenant's model files are assets placed under `models/<folder>/`, where the folder is one of
// the engines' model folders (`checkpoints`, `loras`, `embeddings`, …). The rest of the path is the
// name workflows use, subfolders kept: `models/loras/styles/ink.safetensors` is the LoRA
// `styles/ink.safetensors`, as the engine names a file in a subfolder of its own `loras` folder.

export const MODELS_PREFIX = 'models/';

/** The folder holding textual-inversion embeddings, which prompts name as `embedding:<name>`. */
export const EMBEDDINGS_FOLDER = 'embeddings';

export interface ModelPath {
  folder: string;
  /** The file's name inside the folder, with its subfolders: what the engine lists. */
  name: string;
}

/** `{folder, name}` of a `models/<folder>/<name>` path, or null for any other path. */
export function parseModelPath(filePath: string): ModelPath | null {
  if (!filePath.startsWith(MODELS_PREFIX)) return null;
  const rest = filePath.slice(MODELS_PREFIX.length);
  const slash = rest.indexOf('/');
  if (slash <= 0 || slash === rest.length - 1) return null;
  return { folder: rest.slice(0, slash), name: rest.slice(slash + 1) };
}

export function isModelPath(filePath: string): boolean {
  return filePath.startsWith(MODELS_PREFIX);
}

export function modelFilePath(folder: string, name: string): string {
  return `${MODELS_PREFIX}${folder}/${name}`;
}

/**
 * Why a path under `models/` cannot be a model file, or null when it can (or is no model path).
 * `folders` are the engines' model folders; null when no engine has reported them yet, and then
 * any folder is taken (it becomes usable once an engine reports it).
 */
export function modelPathProblem(filePath: string, folders: readonly string[] | null): string | null {
  if (!isModelPath(filePath)) return null;
  const parsed = parseModelPath(filePath);
  if (!parsed) return 'must name a file inside a model folder: models/<folder>/<name>';
  if (folders && !folders.includes(parsed.folder)) {
    return `names no model folder of the engines: "${parsed.folder}" is not one of ${folders.join(', ')}`;
  }
  return null;
}

/** An embedding's name as prompts and `/embeddings` spell it: its file name without the extension. */
export function embeddingName(name: string): string {
  const slash = name.lastIndexOf('/');
  const dot = name.lastIndexOf('.');
  return dot > slash + 1 ? name.slice(0, dot) : name;
}
