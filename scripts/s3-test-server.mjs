// The S3-compatible server the test suite talks to (s3rver 3.7.1 works with the current AWS SDK).
import { mkdirSync } from 'node:fs';
import S3rver from 's3rver';
import { multipartExtras } from './s3-multipart-extras.mjs';

const port = Number(process.env.S3RVER_PORT ?? 4569);
const directory = process.env.S3RVER_DIR ?? '/tmp/cc-s3rver';
mkdirSync(directory, { recursive: true });
// s3rver throws from a stray stream when a client aborts an upload at the wrong moment (its
// temporary file is already gone). The fault suite aborts uploads on purpose; one such error must
// not take the store away from every suite that runs after it.
process.on('uncaughtException', (err) => {
  console.error(JSON.stringify({ msg: 's3rver stream error, ignored', err: err.message }));
});
const server = new S3rver({ port, address: '127.0.0.1', silent: true, directory, resetOnClose: true });
// Ahead of s3rver's own routes: the multipart calls resumable uploads need and s3rver lacks.
server.middleware.unshift(multipartExtras(server));
await server.run();
console.log(JSON.stringify({ msg: 'listening', role: 's3rver', port }));
const stop = () => server.close().then(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
