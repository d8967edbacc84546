import type { BinaryFrame, EngineMessage } from '#libs/engine-protocol';
import type { ReportedOutput } from './output-kinds.js';
import { RunContext, type RunHooks } from './run-context.js';

// Images a node sends only over the socket are its outputs once it is done; previews of other
// nodes never are, nor what a node sent before the prompt failed in it.

const PROMPT = 'p-1';
const workflow = {
  '1': { class_type: 'EmptyImage', inputs: { width: 8, height: 8, batch_size: 2, color: 0 } },
  '2': { class_type: 'ImageBlur', inputs: { image: ['1', 0], blur_radius: 1, sigma: 1 } },
  '3': { class_type: 'SaveImageWebsocket', inputs: { images: ['2', 0] } },
};

function run() {
  const outputs: Array<{ nodeId: string; outputs: ReportedOutput[]; message: EngineMessage | null }> = [];
  const forwarded: string[] = [];
  const hooks: RunHooks = {
    progress: () => undefined,
    preview: () => undefined,
    outputs: (nodeId, reported, message) => outputs.push({ nodeId, outputs: reported, message }),
    forward: (m) => forwarded.push(m.type),
    progressText: () => undefined,
  };
  const ctx = new RunContext(PROMPT, workflow, 1024, hooks);
  const msg = (type: string, data: Record<string, unknown> = {}) => ctx.onMessage({ type, data: { prompt_id: PROMPT, ...data } });
  const frame = (image: Buffer, mimeType = 'image/png'): BinaryFrame => ({ kind: 'preview_image', eventType: 1, imageFormat: mimeType === 'image/png' ? 2 : 1, mimeType, image });
  return { ctx, outputs, forwarded, msg, frame };
}

describe('RunContext and images sent over the socket', () => {
  it('hands on the images of a sink node that ended without executed, in order, and keeps no one else\'s previews', () => {
    const { ctx, outputs, msg, frame } = run();
    msg('execution_start');
    msg('executing', { node: '2' });
    ctx.onBinary(frame(Buffer.from('preview of node 2'), 'image/jpeg'));
    msg('executing', { node: '3' });
    ctx.onBinary(frame(Buffer.from('first')));
    ctx.onBinary(frame(Buffer.from('second')));
    expect(outputs).toEqual([]);
    msg('execution_success');
    expect(outputs).toHaveLength(1);
    expect(outputs[0]!.nodeId).toBe('3');
    expect(outputs[0]!.message).toBeNull();
    expect(outputs[0]!.outputs.map((o) => (o.kind === 'bytes' ? [o.key, o.index, o.contentType, o.data.toString()] : null))).toEqual([
      ['images', 0, 'image/png', 'first'],
      ['images', 1, 'image/png', 'second'],
    ]);
  });

  it('keeps nothing a node sent before the prompt failed in it, nor frames of a node that reported its outputs', () => {
    const failed = run();
    failed.msg('execution_start');
    failed.msg('executing', { node: '3' });
    failed.ctx.onBinary(failed.frame(Buffer.from('half')));
    failed.msg('execution_error', { node_id: '3', exception_type: 'RuntimeError', exception_message: 'boom' });
    expect(failed.outputs).toEqual([]);

    const reporting = run();
    reporting.msg('execution_start');
    reporting.msg('executing', { node: '3' });
    reporting.ctx.onBinary(reporting.frame(Buffer.from('a preview')));
    reporting.msg('executed', { node: '3', output: { images: [{ filename: 'x.png', subfolder: '', type: 'output' }] } });
    reporting.msg('execution_success');
    expect(reporting.outputs.map((o) => [o.nodeId, o.outputs.map((x) => x.kind)])).toEqual([['3', ['file']]]);
  });

  it('records the history messages it forwards, in order', () => {
    const { ctx, msg } = run();
    msg('execution_start', { timestamp: 1 });
    msg('execution_cached', { nodes: ['1'], timestamp: 2 });
    msg('executing', { node: '2' });
    msg('execution_success', { timestamp: 3 });
    expect(ctx.historyMessages.map((m) => [m.type, (m.data as { timestamp: number }).timestamp])).toEqual([
      ['execution_start', 1],
      ['execution_cached', 2],
      ['execution_success', 3],
    ]);
  });
});
