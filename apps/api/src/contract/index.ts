// The API's operations, declared once (tables per surface over the schemas of libs/contracts):
// the OpenAPI document is generated from them, and requests are parsed with them.
export { OPERATIONS, buildDocument } from './document.js';
export type { Operation } from './operation.js';
export { parseWith } from './validate.js';
