// The multipart-upload calls s3rver 3.7.1 lacks and resumable uploads (@tus/s3-store) make:
// ListParts (how much of an upload arrived), AbortMultipartUpload and ListMultipartUploads. They
// read and change s3rver's own record of uploads (`<bucket>/…uploads/<upload id>/<part>`, with
// each part's MD5 beside it), so parts uploaded through s3rver are the ones listed.
import { readdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';

const xml = (body) => `<?xml version="1.0" encoding="UTF-8"?>\n${body}`;
const escape = (s) => String(s).replace(/[<>&'"]/g, (c) => `&#${c.charCodeAt(0)};`);

function noSuchUpload(ctx, uploadId) {
  ctx.status = 404;
  ctx.type = 'application/xml';
  ctx.body = xml(`<Error><Code>NoSuchUpload</Code><Message>The specified upload does not exist.</Message><UploadId>${escape(uploadId)}</UploadId></Error>`);
}

async function parts(dir) {
  const names = (await readdir(dir)).filter((n) => /^\d+$/.test(n)).map(Number).sort((a, b) => a - b);
  return Promise.all(
    names.map(async (n) => {
      const s = await stat(path.join(dir, String(n)));
      const md5 = await readFile(path.join(dir, `${n}.md5`), 'utf8').catch(() => '');
      return { n, size: s.size, md5, modified: s.mtime.toISOString() };
    }),
  );
}

/** Koa middleware to put in front of s3rver's own (path-style requests only). */
export function multipartExtras(server) {
  const uploadsDir = (bucket) => server.store.getResourcePath(bucket, undefined, 'uploads');
  return async (ctx, next) => {
    const [, bucket, ...keyParts] = ctx.path.split('/');
    const key = decodeURIComponent(keyParts.join('/'));
    const uploadId = typeof ctx.query.uploadId === 'string' ? ctx.query.uploadId : null;
    if (bucket && key && uploadId && !/^[0-9a-f]+$/.test(uploadId)) return noSuchUpload(ctx, uploadId);
    if (ctx.method === 'GET' && bucket && key && uploadId && ctx.query.partNumber === undefined) {
      const dir = path.join(uploadsDir(bucket), uploadId);
      const listed = await parts(dir).catch(() => null);
      if (!listed) return noSuchUpload(ctx, uploadId);
      const marker = Number(ctx.query['part-number-marker'] ?? 0);
      const after = listed.filter((p) => p.n > marker);
      ctx.type = 'application/xml';
      ctx.body = xml(
        `<ListPartsResult><Bucket>${escape(bucket)}</Bucket><Key>${escape(key)}</Key><UploadId>${uploadId}</UploadId>` +
          `<PartNumberMarker>${marker}</PartNumberMarker><NextPartNumberMarker>${after.at(-1)?.n ?? marker}</NextPartNumberMarker><MaxParts>10000</MaxParts><IsTruncated>false</IsTruncated>` +
          after.map((p) => `<Part><PartNumber>${p.n}</PartNumber><LastModified>${p.modified}</LastModified><ETag>"${p.md5}"</ETag><Size>${p.size}</Size></Part>`).join('') +
          `</ListPartsResult>`,
      );
      return;
    }
    if (ctx.method === 'DELETE' && bucket && key && uploadId) {
      const dir = path.join(uploadsDir(bucket), uploadId);
      if (!(await stat(dir).catch(() => null))) return noSuchUpload(ctx, uploadId);
      await rm(dir, { recursive: true, force: true });
      ctx.status = 204;
      return;
    }
    if (ctx.method === 'GET' && bucket && !key && ctx.query.uploads !== undefined) {
      const root = uploadsDir(bucket);
      const ids = await readdir(root).catch(() => []);
      const uploads = [];
      for (const id of ids) {
        const k = await readFile(path.join(root, id, 'key'), 'utf8').catch(() => null);
        const s = await stat(path.join(root, id)).catch(() => null);
        if (k !== null && s) uploads.push(`<Upload><Key>${escape(k)}</Key><UploadId>${id}</UploadId><Initiated>${s.birthtime.toISOString()}</Initiated></Upload>`);
      }
      ctx.type = 'application/xml';
      ctx.body = xml(`<ListMultipartUploadsResult><Bucket>${escape(bucket)}</Bucket><IsTruncated>false</IsTruncated>${uploads.join('')}</ListMultipartUploadsResult>`);
      return;
    }
    return next();
  };
}
