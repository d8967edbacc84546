import { describe, expect, test } from '@jest/globals';
import { TenantView } from './tenant-view.js';

describe('TenantView', () => {
  const view = new TenantView(new Map([['cloud-abc/0123.png', 'photo.png']]), 'cloud-abc');

  test('rewrites engine paths of staged files to the names the tenant used', () => {
    expect(view.text("cannot identify image file '/opt/ComfyUI/input/cloud-abc/0123.png'")).toBe("cannot identify image file 'photo.png'");
    expect(view.text('C:\\ComfyUI\\input\\cloud-abc\\0123.png missing')).toBe('photo.png missing');
    expect(view.text('Invalid image file: cloud-abc/0123.png')).toBe('Invalid image file: photo.png');
    expect(view.text('listed /srv/input/cloud-abc/other.png')).toBe('listed other.png');
  });

  test('takes the cache scope out of every object and rewrites strings deep inside', () => {
    const message = { type: 'execution_error', data: { current_inputs: { image: ['cloud-abc/0123.png'], cloud_cache_scope: ['s'] }, exception_message: '/x/cloud-abc/0123.png' } };
    expect(view.value(message)).toEqual({ type: 'execution_error', data: { current_inputs: { image: ['photo.png'] }, exception_message: 'photo.png' } });
  });

  test('rewrites a model file given to the engine, and an embedding named without its extension', () => {
    const models = new TenantView(
      new Map([
        ['cloud-abc/0123456789abcdef/styles/ink.safetensors', 'styles/ink.safetensors'],
        ['cloud-abc/fedcba9876543210/glow.safetensors', 'glow.safetensors'],
        ['cloud-abc/fedcba9876543210/glow', 'glow'],
      ]),
      'cloud-abc',
    );
    expect(models.text("Error while deserializing header in '/opt/ComfyUI/models/loras/cloud-abc/0123456789abcdef/styles/ink.safetensors'")).toBe("Error while deserializing header in 'styles/ink.safetensors'");
    expect(models.text('warning, embedding:cloud-abc/fedcba9876543210/glow does not exist')).toBe('warning, embedding:glow does not exist');
    expect(models.value({ lora_name: ['cloud-abc/0123456789abcdef/styles/ink.safetensors'] })).toEqual({ lora_name: ['styles/ink.safetensors'] });
  });

  test('without staged files it only drops the cache scope', () => {
    const plain = new TenantView(new Map(), null);
    expect(plain.text('/opt/ComfyUI/models/x.safetensors')).toBe('/opt/ComfyUI/models/x.safetensors');
    expect(plain.value({ a: { cloud_cache_scope: 1, b: 2 } })).toEqual({ a: { b: 2 } });
  });
});
