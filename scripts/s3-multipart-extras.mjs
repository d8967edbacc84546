// The multipart-upload calls s3rver 3.7.1 lacks and resumable uploads (@tus/s3-store) make:
// ListParts (how much of an upload arrived), AbortMultipartUpload and ListMultipartUploads; and
// UploadPartCopy, which the blob store uses to copy a blob larger than one CopyObject may be. It
// also refuses a CopyObject whose source is larger than S3 allows (5 GiB, or S3RVER_MAX_COPY_BYTES),
// as S3 does, so that a test can see which way a copy went. They
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

const MAX_COPY_BYTES = Number(process.env.S3RVER_MAX_COPY_BYTES ?? 5 * 1024 ** 3);

function copySource(ctx) {
  const [bucket, ...key] = decodeURIComponent(String(ctx.headers['x-amz-copy-source'])).replace(/^\//, '').split('/');
  return { bucket, key: key.join('/') };
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
    if (ctx.method === 'PUT' && bucket && key && uploadId && ctx.query.partNumber !== undefined && ctx.headers['x-amz-copy-source']) {
      // UploadPartCopy: a byte range of an object stored, as one part of the upload.
      const dir = path.join(uploadsDir(bucket), uploadId);
      if (!(await stat(dir).catch(() => null))) return noSuchUpload(ctx, uploadId);
      const src = copySource(ctx);
      const range = /^bytes=(\d+)-(\d+)$/.exec(String(ctx.headers['x-amz-copy-source-range'] ?? ''));
      const source = await server.store.getObject(src.bucket, src.key, range ? { start: Number(range[1]), end: Number(range[2]) } : undefined);
      if (!source?.content) {
        ctx.status = 404;
        ctx.type = 'application/xml';
        ctx.body = xml(`<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message><Key>${escape(src.key)}</Key></Error>`);
        return;
      }
      const { md5 } = await server.store.putPart(bucket, uploadId, Number(ctx.query.partNumber), source.content);
      ctx.type = 'application/xml';
      ctx.body = xml(`<CopyPartResult><LastModified>${new Date().toISOString()}</LastModified><ETag>"${md5}"</ETag></CopyPartResult>`);
      return;
    }
    if (ctx.method === 'PUT' && bucket && key && !uploadId && ctx.headers['x-amz-copy-source']) {
      const src = copySource(ctx);
      const size = Number((await server.store.getMetadata(src.bucket, src.key).catch(() => null))?.['content-length'] ?? 0);
      if (size > MAX_COPY_BYTES) {
        ctx.status = 400;
        ctx.type = 'application/xml';
        ctx.body = xml(`<Error><Code>InvalidRequest</Code><Message>The specified copy source is larger than the maximum allowable size for a copy source: ${MAX_COPY_BYTES}</Message></Error>`);
        return;
      }
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
