import { Transform, type TransformCallback } from 'node:stream';
import { pngChunk, PNG_SIGNATURE as SIGNATURE } from '#libs/png';

// A text chunk larger than this is not one the engine wrote; it passes through untouched.
const MAX_TEXT_CHUNK = 64 * 1024 * 1024;

function textChunk(keyword: string, text: string): Buffer {
  return pngChunk('tEXt', Buffer.concat([Buffer.from(keyword, 'latin1'), Buffer.from([0]), Buffer.from(text, 'latin1')]));
}

/** The keyword of a tEXt or iTXt chunk's data (up to its NUL), or null. */
function keywordOf(data: Buffer): string | null {
  const end = data.indexOf(0);
  return end > 0 && end < 80 ? data.subarray(0, end).toString('latin1') : null;
}

/**
 * Rewrites the text chunks of a PNG that carry the prompt (`prompt`, as the engine's SaveImage
 * embeds it) to `promptText`, passing every other byte through as it comes: the image data is
 * never held whole. The engine embeds the prompt it ran, which holds the worker's staged file
 * names and its cache scope; a tenant's file carries the workflow the tenant sent instead. Bytes
 * that are not a PNG pass through unchanged.
 *
 * Custom on purpose: a PNG library (pngjs, sharp) decodes the whole image and encodes it again;
 * this changes one chunk as the bytes pass, so an output of any size passes in bounded memory and
 * its image data stays byte for byte what the engine wrote.
 */
class PromptChunkEditor {
  private pending: Buffer = Buffer.alloc(0);
  private state: 'signature' | 'header' | 'text' | 'copy' | 'passthrough' = 'signature';
  /** Bytes of the current chunk still to copy (data and CRC), in the `copy` state. */
  private copyLeft = 0;
  private textLength = 0;

  constructor(
    private readonly promptText: string,
    private readonly emit: (bytes: Buffer) => void,
  ) {}

  /** The next piece of the file: emits what can be decided so far. */
  feed(chunk: Buffer): void {
    this.pending = this.pending.length > 0 ? Buffer.concat([this.pending, chunk]) : chunk;
    this.drain();
  }

  /** The end of the file: whatever is left (a truncated chunk) passes as it is. */
  end(): void {
    if (this.pending.length > 0) this.emit(this.pending);
    this.pending = Buffer.alloc(0);
  }

  private shift(n: number): Buffer {
    const out = this.pending.subarray(0, n);
    this.pending = this.pending.subarray(n);
    return out;
  }

  private drain(): void {
    for (;;) {
      if (this.state === 'passthrough') {
        if (this.pending.length > 0) this.emit(this.shift(this.pending.length));
        return;
      }
      if (this.state === 'signature') {
        if (this.pending.length < SIGNATURE.length) return;
        const sig = this.shift(SIGNATURE.length);
        this.emit(sig);
        this.state = sig.equals(SIGNATURE) ? 'header' : 'passthrough';
        continue;
      }
      if (this.state === 'copy') {
        if (this.pending.length === 0) return;
        const n = Math.min(this.copyLeft, this.pending.length);
        this.emit(this.shift(n));
        this.copyLeft -= n;
        if (this.copyLeft === 0) this.state = 'header';
        continue;
      }
      if (this.state === 'header') {
        if (this.pending.length < 8) return;
        const length = this.pending.readUInt32BE(0);
        const type = this.pending.toString('latin1', 4, 8);
        if ((type === 'tEXt' || type === 'iTXt') && length <= MAX_TEXT_CHUNK) {
          this.textLength = length;
          this.state = 'text';
          continue;
        }
        this.emit(this.shift(8));
        this.copyLeft = length + 4;
        this.state = this.copyLeft > 0 ? 'copy' : 'header';
        continue;
      }
      // state 'text': the whole chunk (header, data, CRC) is needed to decide.
      if (this.pending.length < 12 + this.textLength) return;
      const whole = this.shift(12 + this.textLength);
      const keyword = keywordOf(whole.subarray(8, 8 + this.textLength));
      this.emit(keyword === 'prompt' ? textChunk('prompt', this.promptText) : whole);
      this.state = 'header';
    }
  }
}

/** PromptChunkEditor on a stream of the file. */
export class PngPromptRewriter extends Transform {
  private readonly editor: PromptChunkEditor;

  constructor(promptText: string) {
    super();
    this.editor = new PromptChunkEditor(promptText, (bytes) => this.push(bytes));
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    try {
      this.editor.feed(chunk);
      done();
    } catch (err) {
      done(err as Error);
    }
  }

  override _flush(done: TransformCallback): void {
    this.editor.end();
    done();
  }
}

/** PromptChunkEditor on a whole file in memory (a small output). */
export function rewritePngPrompt(file: Buffer, promptText: string): Buffer {
  const out: Buffer[] = [];
  const editor = new PromptChunkEditor(promptText, (bytes) => out.push(bytes));
  editor.feed(file);
  editor.end();
  return out.length === 1 ? out[0]! : Buffer.concat(out);
}
