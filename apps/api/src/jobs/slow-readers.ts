// The bound on what a client that does not read its event stream (SSE or the v1 WebSocket) may
// make a replica hold in memory. Without it one such client on a long job with previews would
// grow the API by the whole job's events.

/** Past this much unsent data a stream gets no more previews (they are the bulk and expendable). */
export const PREVIEW_DROP_BYTES = 1 << 20;
/** Past this much unsent data the client is not keeping up at all: its stream is closed. */
export const MAX_BUFFERED_BYTES = 8 << 20;
