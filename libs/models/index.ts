export { MODELS_PREFIX, EMBEDDINGS_FOLDER, parseModelPath, isModelPath, modelFilePath, modelPathProblem, embeddingName } from './model-paths.js';
export type { ModelPath } from './model-paths.js';
export { embeddingMentions, matchEmbedding, renameEmbeddings, EMBEDDING_EXTENSIONS } from './embeddings.js';
export type { EmbeddingMention } from './embeddings.js';
export { modelEvictionChannel } from './keys.js';
