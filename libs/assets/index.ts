export { notExpired, blobRow, recordUploadedAsset, recordStoredAsset, createAssetRecord, guessContentType, validateFilePath, deleteAssetsAndOrphanBlobs, deleteAssetUnlessInUse, discardUnrecordedBytes, blobSurvived, underBlobLock } from './records.js';
export type { NewAsset } from './records.js';
