export { notExpired, blobRow, recordUploadedAsset, recordStoredAsset, createAssetRecord, guessContentType, validateFilePath, deleteAssetsAndOrphanBlobs, deleteAssetUnlessInUse, discardUnrecordedBytes, blobSurvived, underBlobLock, bytesNewToAccount } from './records.js';
export type { NewAsset } from './records.js';
