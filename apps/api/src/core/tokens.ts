// Injection tokens of the process-wide resources CoreModule provides.
export const CONFIG = Symbol('CONFIG');
export const DB = Symbol('DB');
export const REDIS = Symbol('REDIS');
export const BLOB_STORE = Symbol('BLOB_STORE');
