import { readFile } from 'node:fs/promises';

// Node accepts one new connection per turn of its event loop (libuv stopped accepting in a loop
// in 1.45, libuv/libuv#3696). A replica whose turns take 10 ms under load therefore takes in about
// a hundred new connections a second, whatever else it could do; the rest wait in the kernel's
// accept queue, where the process's own figures (event loop delay, requests in flight) cannot see
// them. When the queue is full the kernel drops new connections, and clients that thought
// themselves connected are reset: the connection errors the load suite saw. Only the kernel knows
// how long that queue is.

const LISTEN = '0A';
const TABLES = ['/proc/net/tcp', '/proc/net/tcp6'];

/**
 * Connections waiting to be accepted on the sockets listening on `port`, from a /proc/net/tcp
 * table: a listening socket's `rx_queue` is its accept backlog. Null when no such socket is listed.
 */
export function acceptQueueIn(table: string, port: number): number | null {
  const portHex = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  let waiting: number | null = null;
  for (const line of table.split('\n')) {
    if (!line.includes(portHex)) continue;
    // `  sl  local_address rem_address   st tx_queue:rx_queue ...`
    const cols = line.trim().split(/\s+/, 5);
    if (cols[3] !== LISTEN || !cols[1]?.endsWith(portHex)) continue;
    waiting = (waiting ?? 0) + parseInt(cols[4]?.split(':')[1] ?? '0', 16);
  }
  return waiting;
}

/** The accept queue of `port` over IPv4 and IPv6 (Linux); null where the kernel does not say. */
export async function acceptQueueLength(port: number): Promise<number | null> {
  let waiting: number | null = null;
  for (const path of TABLES) {
    const table = await readFile(path, 'latin1').catch(() => null);
    const found = table === null ? null : acceptQueueIn(table, port);
    if (found !== null) waiting = (waiting ?? 0) + found;
  }
  return waiting;
}
