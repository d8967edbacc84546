/**
 * Any answer the API gave that is not a success, in one shape whatever the surface: v2's
 * ErrorEnvelope `{error: {code, message, details}}` and the router's `{detail, error_type}` alike.
 */
export class ComfyCloudError extends Error {
  override readonly name = 'ComfyCloudError';

  constructor(
    readonly status: number,
    /** v2 `error.code`, or the router's bucket (`error_type`); `http_<status>` when the answer says neither. */
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> | null,
    /** The parsed body as received. */
    readonly body: unknown,
    readonly headers: Headers,
  ) {
    super(message);
  }

  /** Seconds from `Retry-After`, when the answer carried one. */
  get retryAfterSeconds(): number | null {
    const value = Number(this.headers.get('retry-after'));
    return Number.isFinite(value) && value > 0 ? value : null;
  }

  static from(response: Response, body: unknown): ComfyCloudError {
    const b = (body && typeof body === 'object' ? body : {}) as { error?: { code?: unknown; message?: unknown; details?: Record<string, unknown> | null }; error_type?: unknown; detail?: unknown };
    const envelope = b.error && typeof b.error === 'object' ? b.error : undefined;
    if (envelope && typeof envelope.code === 'string') {
      return new ComfyCloudError(response.status, envelope.code, String(envelope.message ?? envelope.code), envelope.details ?? null, body, response.headers);
    }
    // The router names its bucket in the body and in X-Service-Error-Type; a validation refusal
    // (`{detail: [...]}`, the provider's own shape) only in the header.
    const bucket = typeof b.error_type === 'string' ? b.error_type : response.headers.get('x-service-error-type');
    if (bucket) {
      const detail = typeof b.detail === 'string' ? b.detail : JSON.stringify(b.detail ?? body);
      return new ComfyCloudError(response.status, bucket, detail, null, body, response.headers);
    }
    const text = typeof body === 'string' && body ? body.slice(0, 200) : response.statusText;
    return new ComfyCloudError(response.status, `http_${response.status}`, `HTTP ${response.status}: ${text}`, null, body, response.headers);
  }
}

/** Reads an error answer's body (JSON when it says so) into a ComfyCloudError. */
export async function errorOf(response: Response): Promise<ComfyCloudError> {
  const text = await response.text().catch(() => '');
  let body: unknown = text;
  if ((response.headers.get('content-type') ?? '').includes('json') && text) {
    try {
      body = JSON.parse(text);
    } catch {
      // keep the text
    }
  }
  return ComfyCloudError.from(response, body);
}
