/** Connected WebSockets by sid, with each one's declared feature flags. */
import type { WebSocket } from 'ws';
import { pythonJsonDumps, type FeatureFlags } from '#libs/engine-protocol';

interface Client {
  ws: WebSocket;
  flags: FeatureFlags;
}

export class WsHub {
  private readonly clients = new Map<string, Client>();

  add(sid: string, ws: WebSocket): void {
    // A reconnect with the same clientId replaces the old entry (the old socket stays open but deaf).
    this.clients.set(sid, { ws, flags: {} });
  }

  remove(sid: string, ws: WebSocket): void {
    if (this.clients.get(sid)?.ws === ws) this.clients.delete(sid);
  }

  has(sid: string): boolean {
    return this.clients.has(sid);
  }

  setFlags(sid: string, flags: FeatureFlags): void {
    const c = this.clients.get(sid);
    if (c) c.flags = flags;
  }

  /** The engine checks `is True`: only a literal true counts. */
  supportsPreviewMetadata(sid: string | null): boolean {
    if (sid === null) return false;
    return this.clients.get(sid)?.flags.supports_preview_metadata === true;
  }

  /** `sid` null broadcasts to every socket, as the engine does. */
  sendJson(type: string, data: unknown, sid: string | null): void {
    this.sendRaw(pythonJsonDumps({ type, data }), sid);
  }

  sendBinary(frame: Buffer, sid: string | null): void {
    this.sendRaw(frame, sid);
  }

  private sendRaw(payload: string | Buffer, sid: string | null): void {
    const targets = sid === null ? [...this.clients.values()] : this.clients.has(sid) ? [this.clients.get(sid)!] : [];
    for (const c of targets) {
      if (c.ws.readyState === c.ws.OPEN) c.ws.send(payload, { binary: typeof payload !== 'string' });
    }
  }

  closeAll(): void {
    for (const c of this.clients.values()) c.ws.terminate();
    this.clients.clear();
  }
}
