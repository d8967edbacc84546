import { encodeExtended } from 'content-disposition';

/**
 * The Content-Disposition a download carries. A header value must be ASCII, so the name goes in
 * twice (RFC 6266): an ASCII stand-in for old clients, and `filename*` with the UTF-8 original,
 * encoded by the `content-disposition` package (RFC 8187). Its `create()` is not used whole: it
 * leaves out `filename*` for ASCII names and the quotes around names that are tokens, and stands
 * `?` for what is not ASCII; every download here has the one form, both names, the first quoted.
 */
export function contentDisposition(fileName: string, disposition: 'inline' | 'attachment' = 'inline'): string {
  const base = fileName.split('/').pop() || 'file';
  const ascii = base.replace(/[^\x20-\x7e]|["\\]/g, '_');
  return `${disposition}; filename="${ascii}"; filename*=${encodeExtended(base)}`;
}

// Media a browser shows without running anything in it. SVG is an image that runs scripts.
const SHOWN_INERT = /^(image\/(png|jpeg|gif|webp|avif|bmp)|video\/[\w.+-]+|audio\/[\w.+-]+|text\/plain|application\/(json|octet-stream))\s*(;|$)/i;

/**
 * Where a download cannot carry our own protective headers (a bucket's signed URL: no
 * Content-Security-Policy, no nosniff), only inert media are shown in the browser; anything else
 * a tenant uploaded (HTML, SVG, XML, scripts) is a download, so it never runs at the bucket's origin.
 */
export function dispositionFor(contentType: string): 'inline' | 'attachment' {
  return SHOWN_INERT.test(contentType) ? 'inline' : 'attachment';
}
