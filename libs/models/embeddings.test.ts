import { describe, expect, test } from '@jest/globals';
import { embeddingMentions, matchEmbedding, renameEmbeddings } from './embeddings.js';
import { embeddingName, modelPathProblem, parseModelPath } from './model-paths.js';

describe('embedding mentions, as the engine\'s tokenizer finds them', () => {
  test('at the start, after a space, a new line or a weight\'s parenthesis; not inside a word', () => {
    expect(embeddingMentions('embedding:a, b embedding:c\nembedding:d (embedding:e:1.2) x,embedding:f').map((m) => m.word)).toEqual(['a,', 'c', 'd', 'e:1.2']);
    expect(embeddingMentions('no embeddings here')).toEqual([]);
  });

  test('tries the word, then without trailing commas, then without a weight', () => {
    expect(embeddingMentions('embedding:ink,,')[0]!.candidates).toEqual(['ink,,', 'ink']);
    expect(embeddingMentions('(embedding:styles/ink:0.8)')[0]!.candidates).toEqual(['styles/ink:0.8', 'styles/ink']);
  });

  test('matches a name with or without its extension, in a subfolder too', () => {
    const names = ['styles/ink.safetensors', 'glow.pt', 'plain'];
    expect(matchEmbedding('ink', names)).toBe('styles/ink.safetensors');
    expect(matchEmbedding('styles/ink.safetensors', names)).toBe('styles/ink.safetensors');
    expect(matchEmbedding('glow', names)).toBe('glow.pt');
    expect(matchEmbedding('plain', names)).toBe('plain');
    expect(matchEmbedding('gl', names)).toBeNull();
  });

  test('renames what is mapped and keeps the rest of each word', () => {
    const renamed = renameEmbeddings('a embedding:ink, (embedding:ink:1.1) embedding:other', (c) => (c === 'ink' ? 'cloud-x/0/ink.safetensors' : null));
    expect(renamed).toBe('a embedding:cloud-x/0/ink.safetensors, (embedding:cloud-x/0/ink.safetensors:1.1) embedding:other');
  });
});

describe('model paths', () => {
  test('a folder and a name, subfolders kept', () => {
    expect(parseModelPath('models/loras/styles/ink.safetensors')).toEqual({ folder: 'loras', name: 'styles/ink.safetensors' });
    expect(parseModelPath('models/loras/')).toBeNull();
    expect(parseModelPath('models/loras')).toBeNull();
    expect(parseModelPath('photo.png')).toBeNull();
    expect(embeddingName('sub/glow.safetensors')).toBe('sub/glow');
    expect(embeddingName('sub.d/glow')).toBe('sub.d/glow');
  });

  test('only the engines\' folders, once they are known', () => {
    expect(modelPathProblem('models/loras/a.safetensors', ['loras'])).toBeNull();
    expect(modelPathProblem('models/lora/a.safetensors', ['loras'])).toContain('"lora" is not one of loras');
    expect(modelPathProblem('models/lora/a.safetensors', null)).toBeNull();
    expect(modelPathProblem('models/loras', ['loras'])).toContain('models/<folder>/<name>');
    expect(modelPathProblem('inputs/a.png', ['loras'])).toBeNull();
  });
});
