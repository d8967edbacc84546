export { generateApiKey, hashApiKey, looksLikeApiKey } from './api-keys.js';
export { DEFAULT_ROUTER_TOKEN_LIFETIME_SECONDS, mintRouterToken, verifyRouterToken, RouterTokenError } from './router-jwt.js';
export { encodeCursor, decodeCursor } from './signed-cursor.js';
export { sealText, openText } from './sealed.js';
