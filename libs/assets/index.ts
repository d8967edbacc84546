export { notExpired, blobRow, recordUploadedAsset, createAssetRecord, guessContentType, validateFilePath, deleteAssetsAndOrphanBlobs, discardUnrecordedBytes, blobSurvived } from './records.js';
export type { NewAsset } from './records.js';
