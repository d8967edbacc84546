export { isBlockedAddress, openDownload, outboundAgent, OutboundError } from './safe-download.js';
export type { Download, OutboundFailure, OutboundPolicy } from './safe-download.js';
