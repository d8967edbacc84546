export { notExpired, lockedBlobRow, recordUploadedAsset, recordStoredAsset, createAssetRecord, guessContentType, validateFilePath, deleteAssetsAndOrphanBlobs, deleteAssetUnlessInUse, discardUnrecordedBytes, blobSurvived } from './records.js';
export type { NewAsset } from './records.js';
