import { spawn } from 'node:child_process';
import { createServer, connect, type Socket } from 'node:net';
import { acceptQueueIn, acceptQueueLength } from './accept-queue.js';

const TABLE = [
  '  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode',
  '   0: 0100007F:1F90 00000000:0000 0A 00001000:000001AC 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0',
  // A connection to the port, not the listener: its rx_queue is unread bytes.
  '   1: 0100007F:1F90 0100007F:D431 01 00000000:00000040 00:00000000 00000000     0        0 2 1 0 20 4 30 10 -1',
  // Another port that merely contains 1F90 elsewhere on the line.
  '   2: 0100007F:1F91 00000000:0000 0A 00000000:00001F90 00:00000000 00000000     0        0 3 1 0 100 0 0 10 0',
].join('\n');

describe('acceptQueueIn', () => {
  it("reads the listening socket's accept backlog for the port, and nothing else", () => {
    expect(acceptQueueIn(TABLE, 8080)).toBe(0x1ac);
    expect(acceptQueueIn(TABLE, 8081)).toBe(0x1f90);
    expect(acceptQueueIn(TABLE, 9000)).toBeNull();
  });
});

describe('acceptQueueLength', () => {
  it('counts connections the kernel holds for a server that does not accept them', async () => {
    // A server whose event loop is stuck: the kernel completes the handshakes and queues them.
    const stuck = spawn(process.execPath, ['-e', "require('net').createServer().listen(0, '127.0.0.1', function () { require('fs').writeSync(1, this.address().port + '\\n'); for (;;); })"], { stdio: ['ignore', 'pipe', 'inherit'] });
    const clients: Socket[] = [];
    try {
      const port = Number(await new Promise<string>((resolve) => stuck.stdout!.once('data', (d: Buffer) => resolve(d.toString()))));
      expect(await acceptQueueLength(port)).toBe(0);
      for (let i = 0; i < 5; i++) clients.push(connect(port, '127.0.0.1'));
      await Promise.all(clients.map((c) => new Promise((resolve) => c.once('connect', resolve))));
      expect(await acceptQueueLength(port)).toBe(5);
    } finally {
      for (const c of clients) c.destroy();
      stuck.kill('SIGKILL');
    }
  });

  it('is null for a port nothing listens on', async () => {
    const server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as { port: number }).port;
    await new Promise((resolve) => server.close(resolve));
    expect(await acceptQueueLength(port)).toBeNull();
  });
});
