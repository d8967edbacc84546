// Providers that take multipart/form-data (Stability, Ideogram) are called with the fields of the
// caller's JSON body: text as text parts, lists as repeated parts, objects as JSON text, and the
// fields that carry files as data URIs (`data:image/png;base64,...`) become file parts.

const DATA_URI = /^data:([a-z0-9.+-]+\/[a-z0-9.+-]+);base64,([A-Za-z0-9+/]*={0,2})$/i;

/** The type and bytes of a base64 data URI, or null when it is not one. */
export function decodeDataUri(value: unknown): { type: string; bytes: Buffer } | null {
  if (typeof value !== 'string') return null;
  const m = DATA_URI.exec(value);
  return m ? { type: m[1]!.toLowerCase(), bytes: Buffer.from(m[2]!, 'base64') } : null;
}

export async function formBody(fields: Record<string, unknown>, fileFields: ReadonlySet<string>): Promise<{ body: Buffer; contentType: string }> {
  const form = new FormData();
  for (const [name, value] of Object.entries(fields)) {
    if (value === undefined || value === null) continue;
    for (const item of Array.isArray(value) ? value : [value]) {
      const file = fileFields.has(name) ? decodeDataUri(item) : null;
      if (file) form.append(name, new Blob([new Uint8Array(file.bytes)], { type: file.type }), `${name}.${file.type.split('/')[1] ?? 'bin'}`);
      else form.append(name, typeof item === 'object' ? JSON.stringify(item) : String(item));
    }
  }
  const encoded = new Response(form);
  return { body: Buffer.from(await encoded.arrayBuffer()), contentType: encoded.headers.get('content-type') ?? 'multipart/form-data' };
}
