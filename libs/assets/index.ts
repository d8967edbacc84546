export { recordBlob, createAssetRecord, guessContentType, validateFilePath, deleteAssetsAndOrphanBlobs } from './records.js';
export type { NewAsset } from './records.js';
