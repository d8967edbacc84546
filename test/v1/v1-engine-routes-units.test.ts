import type { IncomingMessage } from 'node:http';
import { loadConfig } from '#libs/config';
import { decodePng } from '../../apps/api/src/v1/images/png.js';
import { logEntries } from '../../apps/api/src/v1/internal/tenant-logs.service.js';
import { mergeModelLists } from '../../apps/api/src/v1/models/model-lists.js';
import { DEFAULT_CHECKPOINT, textToImageWorkflow } from '../../apps/api/src/v1/templates/stock-workflows.js';
import { graphThumbnail } from '../../apps/api/src/v1/templates/thumbnail.js';
import { resolveUserPath, unquote } from '../../apps/api/src/v1/userdata/user-paths.js';
import { deploymentIdOf, requestUrlRewriter } from '../../apps/api/src/surface/request-scope.js';

describe('user folder names, resolved as the engine resolves them', () => {
  it.each([
    ['workflows/a.json', 'workflows/a.json'],
    ['a//b/./c.json', 'a/b/c.json'],
    ['a/../b.json', 'b.json'],
    ['workflows/', 'workflows'],
    ['.', ''],
    ['../default/x.json', 'x.json'],
    ['../../user/default/x.json', 'x.json'],
    ['a%2Fb.json', 'a/b.json'],
    ['100%.json', '100%.json'],
  ])('%s is %s', (name, path) => {
    expect(resolveUserPath(name)).toEqual({ ok: true, path });
  });

  it.each(['..', '../x', '../other/x', '/etc/passwd', 'a/../../x', '..%2Fx', '%2Fetc', '../../../../x', '../../user/other/x'])('%s leaves the folder', (name) => {
    expect(resolveUserPath(name)).toEqual({ ok: false, reason: 'outside' });
  });

  it.each(['a\u0000b', `${'x'.repeat(256)}.json`, `${'d/'.repeat(2100)}x`])('refuses a name no file can have', (name) => {
    expect(resolveUserPath(name)).toEqual({ ok: false, reason: 'invalid' });
  });

  it('decodes what is left encoded as Python unquote does', () => {
    expect(unquote('%41%c3%bc%ZZ%')).toBe('Aü%ZZ%');
    expect(unquote('%FF')).toBe('\uFFFD');
    expect(unquote('plain')).toBe('plain');
  });
});

describe('request URL rewriting', () => {
  const rewrite = (env: Record<string, string>, url: string, host = 'api.test') => {
    const req = { url, headers: { host } } as unknown as IncomingMessage;
    return { url: requestUrlRewriter(loadConfig({ NODE_ENV: 'test', ...env }))(req), deployment: deploymentIdOf({ raw: req }) };
  };

  it.each([
    ['/prompt', '/api/prompt'],
    ['/prompt?x=1', '/api/prompt?x=1'],
    ['/history/0f0f', '/api/history/0f0f'],
    ['/userdata/workflows%2Fa.json/move/b.json?overwrite=false', '/api/userdata/workflows%2Fa.json/move/b.json?overwrite=false'],
    ['/v2/userdata?path=x', '/api/v2/userdata?path=x'],
    ['/internal/logs/raw', '/api/internal/logs/raw'],
    ['/workflow_templates', '/api/workflow_templates'],
    ['/job/1/status', '/api/job/1/status'],
    ['/api/prompt', '/api/prompt'],
    ['/promptly', '/promptly'],
    ['/jobs', '/jobs'],
    ['/workflow', '/workflow'],
    ['/v1/models/acme/x', '/v1/models/acme/x'],
    ['/api/v2/jobs', '/api/v2/jobs'],
    ['/ws?clientId=a', '/ws?clientId=a'],
    ['/docs', '/docs'],
    ['/templates/index.json', '/templates/index.json'],
  ])('%s is served as %s', (url, served) => {
    expect(rewrite({}, url).url).toBe(served);
  });

  it('keeps BASE_PATH and strips the deployment prefix first', () => {
    expect(rewrite({ BASE_PATH: '/gw' }, '/gw/queue').url).toBe('/gw/api/queue');
    expect(rewrite({ BASE_PATH: '/gw' }, '/queue').url).toBe('/queue');
    expect(rewrite({ SURFACE: 'deployment' }, '/deployment/my-app/settings')).toEqual({ url: '/api/settings', deployment: 'my-app' });
    expect(rewrite({ SURFACE: 'deployment', BASE_PATH: '/gw' }, '/gw/deployment/my-app/workflow')).toEqual({ url: '/gw/workflow', deployment: 'my-app' });
    expect(rewrite({ SURFACE: 'deployment', DEPLOYMENT_DOMAIN: 'deploy.test' }, '/userdata?dir=.', 'my-app.deploy.test')).toEqual({ url: '/api/userdata?dir=.', deployment: 'my-app' });
  });
});

describe('model lists, logs and the stock template', () => {
  it('merges an account\'s own model entries after the engines\' ones, without repeats, in the engines\' folders only', () => {
    const engines = { embeddings: ['e1'], folders: { checkpoints: ['a.safetensors', 'b.safetensors'], loras: [] } };
    expect(mergeModelLists(engines)).toEqual({ embeddings: ['e1'], folders: { checkpoints: ['a.safetensors', 'b.safetensors'], loras: [] } });
    expect(mergeModelLists(engines, { folders: { checkpoints: ['mine.safetensors', 'a.safetensors'], upscale_models: ['x.pth'] }, embeddings: ['e1', 'e2'] })).toEqual({
      embeddings: ['e1', 'e2'],
      // No engine has an upscale_models folder: a file there could not be loaded, so it is not listed.
      folders: { checkpoints: ['a.safetensors', 'b.safetensors', 'mine.safetensors'], loras: [] },
    });
  });

  it('turns a captured log into entries of one line each, keeping the text whole', () => {
    const at = new Date('2026-01-02T03:04:05.678Z');
    expect(logEntries('got prompt\nPrompt executed in 0.1 seconds\npartial', at)).toEqual([
      { t: at.toISOString(), m: 'got prompt\n' },
      { t: at.toISOString(), m: 'Prompt executed in 0.1 seconds\n' },
      { t: at.toISOString(), m: 'partial' },
    ]);
    expect(logEntries('', at)).toEqual([]);
  });

  it('links every slot of the stock graph consistently, and draws it', () => {
    const wf = textToImageWorkflow(DEFAULT_CHECKPOINT);
    for (const [id, from, fromSlot, to, toSlot, type] of wf.links) {
      const source = wf.nodes.find((n) => n.id === from)!;
      const target = wf.nodes.find((n) => n.id === to)!;
      expect(source.outputs[fromSlot]).toMatchObject({ type, links: expect.arrayContaining([id]) });
      expect(target.inputs[toSlot]).toMatchObject({ type, link: id });
    }
    const linked = wf.nodes.flatMap((n) => n.inputs.map((i) => i.link));
    expect(linked.sort()).toEqual(wf.links.map((l) => l[0]).sort());
    expect(wf.nodes.find((n) => n.type === 'CheckpointLoaderSimple')!.widgets_values).toEqual([DEFAULT_CHECKPOINT]);
    const picture = decodePng(graphThumbnail(wf));
    expect(picture.width).toBe(512);
    expect(picture.height).toBeGreaterThan(100);
  });
});
