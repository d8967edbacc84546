import { encodePng } from '../../apps/sim-engine/src/png.js';
import { promptOfPng } from '../../apps/console/src/png-prompt.js';
import { explainBucket } from '../../apps/console/src/router-errors.js';
import { fieldsOf, inputFrom } from '../../apps/console/src/schema-form.js';
import { describeInput, imageInputs, invertImageWorkflow, nodesOf, parseWorkflow, withImage } from '../../apps/console/src/workflow.js';
import { ROUTER_BUCKETS } from '#libs/contracts';

// The console's logic that needs no browser: what it makes of pasted text, of a dropped PNG, of a
// model's input schema, and of a router error bucket. The pages themselves are driven in
// test/browser/console.e2e.test.ts.

const GRAPH = { '10': { class_type: 'SaveImage', inputs: { images: ['2', 0] } }, '2': { class_type: 'LoadImage', inputs: { image: 'a.png' }, _meta: { title: 'Photo' } } };

describe('reading a pasted workflow', () => {
  it('takes the graph, or a v2 or v1 request body carrying it', () => {
    for (const text of [JSON.stringify(GRAPH), JSON.stringify({ workflow: GRAPH }), JSON.stringify({ prompt: GRAPH, client_id: 'x' })]) {
      expect(parseWorkflow(text)).toEqual({ ok: true, workflow: GRAPH });
    }
  });

  it('refuses the editor\'s own format, text that is not JSON, and objects that are no graph, saying why', () => {
    const ui = parseWorkflow(JSON.stringify({ nodes: [], links: [], version: 0.4 }));
    expect(ui).toEqual({ ok: false, problem: expect.stringContaining('Export (API)') });
    expect(parseWorkflow('{"3": ')).toEqual({ ok: false, problem: expect.stringContaining('not JSON') });
    for (const text of ['{}', '[]', '42', '{"1": {"inputs": {}}}']) expect(parseWorkflow(text)).toEqual({ ok: false, problem: expect.stringContaining('class_type') });
  });

  it('lists the nodes in numeric id order and shows links, assets and values', () => {
    expect(nodesOf(GRAPH).map((n) => [n.id, n.classType, n.title])).toEqual([['2', 'LoadImage', 'Photo'], ['10', 'SaveImage', null]]);
    expect(describeInput(['2', 0])).toBe('← node 2, output 0');
    expect(describeInput({ __type: 'core/ASSET', info: { id: 'x', file_path: 'p.png' } })).toBe('asset p.png');
    expect(describeInput('a'.repeat(200))).toHaveLength(118);
  });

  it('finds the image inputs and fills one with an upload\'s name, leaving the original as it was', () => {
    expect(imageInputs(GRAPH)).toEqual(['2']);
    const filled = withImage(GRAPH, '2', 'b.png');
    expect(filled['2']!.inputs.image).toBe('b.png');
    expect(GRAPH['2'].inputs.image).toBe('a.png');
    expect(imageInputs(invertImageWorkflow('c.png'))).toEqual(['1']);
  });
});

describe('reading the prompt a ComfyUI PNG carries', () => {
  const pixels = { width: 2, height: 2, channels: 3 as const, data: new Uint8Array(12) };

  it('reads the prompt text chunk', () => {
    const png = encodePng(pixels, { text: [['prompt', JSON.stringify(GRAPH)], ['workflow', '{"nodes": []}']] });
    const read = promptOfPng(new Uint8Array(png));
    expect(read.ok && parseWorkflow(read.text)).toEqual({ ok: true, workflow: GRAPH });
  });

  it('says what is missing: a PNG with the editor\'s workflow only, one with nothing, and a file that is not a PNG', () => {
    expect(promptOfPng(new Uint8Array(encodePng(pixels, { text: [['workflow', '{}']] })))).toEqual({ ok: false, problem: expect.stringContaining('no API-format prompt') });
    expect(promptOfPng(new Uint8Array(encodePng(pixels)))).toEqual({ ok: false, problem: expect.stringContaining('carries no workflow') });
    expect(promptOfPng(new TextEncoder().encode('GIF89a and more'))).toEqual({ ok: false, problem: 'This file is not a PNG.' });
  });
});

describe('a form from a model\'s input schema', () => {
  const doc = {
    openapi: '3.1.0',
    paths: { '/v1/models/a/b': { post: { requestBody: { content: { 'application/json': { schema: { $ref: '#/components/schemas/In' } } } } } } },
    components: {
      schemas: {
        In: {
          type: 'object',
          required: ['prompt'],
          properties: {
            prompt: { type: 'string', maxLength: 2000, description: 'What to make.' },
            name: { type: 'string', maxLength: 40 },
            steps: { type: 'integer', minimum: 1, maximum: 8, default: 4 },
            scale: { type: 'number', multipleOf: 0.5 },
            format: { type: 'string', enum: ['png', 'jpeg'], default: 'png' },
            safe: { type: 'boolean' },
            size: { $ref: '#/components/schemas/Size' },
          },
        },
        Size: { type: 'object', properties: { w: { type: 'integer' } }, default: { w: 1 } },
      },
    },
  };

  it('makes one control per property, of the schema\'s kind, bounds and default', () => {
    expect(fieldsOf(doc).map((f) => [f.name, f.kind, f.required, f.min, f.max, f.step, f.initial])).toEqual([
      ['prompt', 'textarea', true, null, null, null, ''],
      ['name', 'text', false, null, null, null, ''],
      ['steps', 'integer', false, 1, 8, 1, '4'],
      ['scale', 'number', false, null, null, 0.5, ''],
      ['format', 'select', false, null, null, null, 'png'],
      ['safe', 'boolean', false, null, null, null, ''],
      ['size', 'json', false, null, null, null, '{"w":1}'],
    ]);
    expect(fieldsOf(doc)[0]!.description).toBe('What to make.');
    expect(fieldsOf({ paths: {} })).toEqual([]);
  });

  it('turns the values into the model input, leaving empty optional fields to the model', () => {
    const fields = fieldsOf(doc);
    expect(inputFrom(fields, { prompt: 'a cat', steps: '3', scale: '1.5', format: 'png', safe: true, size: '{"w": 2}', name: ' ' })).toEqual({
      input: { prompt: 'a cat', steps: 3, scale: 1.5, format: 'png', safe: true, size: { w: 2 } },
      problems: {},
    });
    expect(inputFrom(fields, { steps: '2.5', size: '{', scale: 'x' }).problems).toEqual({ prompt: 'Required.', steps: 'A whole number.', size: 'Not valid JSON.', scale: 'A number.' });
  });
});

describe('router error buckets', () => {
  it('explains every bucket of the contract, and an unknown one as internal_error', () => {
    const explained = ROUTER_BUCKETS.map((bucket) => explainBucket(bucket));
    expect(explained.map((e) => e.bucket)).toEqual([...ROUTER_BUCKETS]);
    // Each its own explanation: none falls back to internal_error's.
    expect(new Set(explained.map((e) => e.meaning)).size).toBe(ROUTER_BUCKETS.length);
    const { meaning, retry } = explainBucket('internal_error');
    expect(explainBucket('brand_new_bucket')).toEqual({ bucket: 'brand_new_bucket', meaning, retry });
    expect(explainBucket(null)).toEqual({ bucket: 'internal_error', meaning, retry });
  });
});
