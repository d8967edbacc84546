/** Engine protocol: typed messages, binary frames and a client for ComfyUI-compatible engines. */
export * from './messages.js';
export * from './frames.js';
export * from './http-types.js';
export * from './errors.js';
export * from './client.js';
export * from './socket.js';
export { pythonJsonDumps } from './python-json.js';
export { buildMultipartBody, type MultipartBody, type MultipartField, type MultipartFile } from './multipart.js';
