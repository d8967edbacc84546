// Embeddings (textual inversions) are named inside prompt text: `a cat, embedding:ink, detailed`.
// The engine's tokenizer (comfy/sd1_clip.py) splits a prompt at ` embedding:` and `\nembedding:`
// (and weights such as `(embedding:ink:1.2)` arrive there as their own segment), takes the next
// word as the name, tries it as a file of the embeddings folder or any folder below it, bare or
// with `.safetensors`, `.pt`, `.bin`, and once more without trailing commas. These helpers find
// the names a text uses in the same places, so the service can resolve them to a tenant's file
// and rewrite them to the name the engine has that file under.

const IDENTIFIER = 'embedding:';
/** Where the engine sees an embedding start: the text's start, a space, a new line, or a weight's parenthesis. */
const MENTION = /(^|[ \n(])embedding:([^\s()]+)/g;
const WEIGHT = /:-?\d+(?:\.\d+)?$/;
/** The extensions the engine tries after a bare name, in its order. */
export const EMBEDDING_EXTENSIONS = ['.safetensors', '.pt', '.bin'];

export interface EmbeddingMention {
  /** Where the name starts in the text (just after `embedding:`). */
  index: number;
  /** The word as written after `embedding:`, up to a space or a parenthesis. */
  word: string;
  /** Names to try, best first: the word, without trailing commas, without a `:1.2` weight. */
  candidates: string[];
}

function candidatesOf(word: string): string[] {
  const out = [word];
  const noCommas = word.replace(/,+$/, '');
  if (noCommas !== word && noCommas) out.push(noCommas);
  const noWeight = noCommas.replace(WEIGHT, '');
  if (noWeight !== noCommas && noWeight) out.push(noWeight);
  return out;
}

/** Every `embedding:<name>` the engine would try to load from this text. */
export function embeddingMentions(text: string): EmbeddingMention[] {
  if (!text.includes(IDENTIFIER)) return [];
  const found: EmbeddingMention[] = [];
  for (const m of text.matchAll(MENTION)) {
    const index = m.index + m[1]!.length + IDENTIFIER.length;
    found.push({ index, word: m[2]!, candidates: candidatesOf(m[2]!) });
  }
  return found;
}

/**
 * The file among `names` (embedding file names, subfolders kept) that the engine would load for
 * `candidate`: the name itself, the name plus one of its extensions, or either in a subfolder.
 */
export function matchEmbedding(candidate: string, names: readonly string[]): string | null {
  const forms = [candidate, ...EMBEDDING_EXTENSIONS.map((ext) => candidate + ext)];
  for (const form of forms) if (names.includes(form)) return form;
  for (const form of forms) {
    const nested = names.find((n) => n.endsWith(`/${form}`));
    if (nested) return nested;
  }
  return null;
}

/**
 * The text with each mention whose name `rename` maps replaced by the new name; whatever follows
 * the name in its word (a weight, commas) stays.
 */
export function renameEmbeddings(text: string, rename: (candidate: string) => string | null): string {
  const mentions = embeddingMentions(text);
  if (mentions.length === 0) return text;
  let out = '';
  let at = 0;
  for (const m of mentions) {
    for (const candidate of m.candidates) {
      const renamed = rename(candidate);
      if (renamed === null) continue;
      out += text.slice(at, m.index) + renamed;
      at = m.index + candidate.length;
      break;
    }
  }
  return out + text.slice(at);
}
