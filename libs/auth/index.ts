export { generateApiKey, hashApiKey, looksLikeApiKey } from './api-keys.js';
export { mintRouterToken, verifyRouterToken, RouterTokenError } from './router-jwt.js';
export { encodeCursor, decodeCursor } from './signed-cursor.js';
