import { useEffect, useMemo, useState } from 'preact/hooks';
import { ApiFailure, assets, jobs, type Asset, type NodeErrors } from '../api.js';
import { DropZone, Failure, PageTitle } from '../components.js';
import { promptOfPng } from '../png-prompt.js';
import { describeInput, imageInputs, invertImageWorkflow, nodesOf, parseWorkflow, withImage, type Workflow } from '../workflow.js';
import { navigate } from '../route.js';

function NodeList({ workflow, errors, uploads, onPick }: { workflow: Workflow; errors: NodeErrors | null; uploads: Asset[]; onPick: (node: string, fileName: string) => void }) {
  const pickable = new Set(imageInputs(workflow));
  return (
    <ol class="nodes" aria-label="The workflow's nodes">
      {nodesOf(workflow).map((n) => {
        const problems = errors?.[n.id] ?? [];
        return (
          <li key={n.id} class={problems.length ? 'node has-errors' : 'node'} data-node-id={n.id} aria-describedby={problems.length ? `node-errors-${n.id}` : undefined}>
            <div class="node-head">
              <code>#{n.id}</code> <strong>{n.classType}</strong>
              {n.title && n.title !== n.classType ? <span class="muted"> “{n.title}”</span> : null}
            </div>
            <dl class="inputs">
              {n.inputs.map(([k, v]) => (
                <div key={k}>
                  <dt>{k}</dt>
                  <dd>{describeInput(v)}</dd>
                </div>
              ))}
            </dl>
            {pickable.has(n.id) && uploads.length > 0 ? (
              <p>
                <label for={`pick-${n.id}`}>Image from your uploads </label>
                <select id={`pick-${n.id}`} value="" onChange={(e) => onPick(n.id, (e.currentTarget as HTMLSelectElement).value)}>
                  <option value="">Choose…</option>
                  {uploads.map((a) => (
                    <option key={a.id} value={a.file_path}>
                      {a.file_path}
                    </option>
                  ))}
                </select>
              </p>
            ) : null}
            {problems.length ? (
              <ul class="node-errors" id={`node-errors-${n.id}`} role="alert">
                {problems.map((p, i) => (
                  <li key={i}>
                    {p.field ? <code>{p.field}</code> : null} {p.reason}
                  </li>
                ))}
              </ul>
            ) : null}
          </li>
        );
      })}
    </ol>
  );
}

export function Submit({ imageName }: { imageName: string | null }) {
  const [text, setText] = useState(() => (imageName ? JSON.stringify(invertImageWorkflow(imageName), null, 2) : ''));
  const [busy, setBusy] = useState(false);
  const [failure, setFailure] = useState<unknown>(null);
  const [note, setNote] = useState<string | null>(null);
  const [uploads, setUploads] = useState<Asset[]>([]);
  const parsed = useMemo(() => (text.trim() ? parseWorkflow(text) : null), [text]);
  const nodeErrors = failure instanceof ApiFailure ? failure.nodeErrors : null;
  const needsImages = parsed?.ok === true && imageInputs(parsed.workflow).length > 0;

  useEffect(() => {
    if (!needsImages || uploads.length > 0) return;
    assets.list({ kind: 'upload', limit: 100 }).then((p) => setUploads(p.data), () => undefined);
  }, [needsImages]);

  async function fromPng(files: File[]) {
    const file = files[0]!;
    const read = promptOfPng(new Uint8Array(await file.arrayBuffer()));
    setFailure(null);
    if (!read.ok) {
      setNote(`${file.name}: ${read.problem}`);
      return;
    }
    const p = parseWorkflow(read.text);
    setText(p.ok ? JSON.stringify(p.workflow, null, 2) : read.text);
    setNote(`Read the workflow embedded in ${file.name}.`);
  }

  async function submit(e: Event) {
    e.preventDefault();
    if (!parsed?.ok) return;
    setBusy(true);
    setFailure(null);
    try {
      const job = await jobs.submit(parsed.workflow);
      navigate(`jobs/${job.id}`);
    } catch (err) {
      setFailure(err);
    } finally {
      setBusy(false);
    }
  }

  return (
    <>
      <PageTitle title="Submit">Submit a workflow</PageTitle>
      <form onSubmit={submit} class="submit">
        <label for="workflow-text">Workflow in the API format (JSON)</label>
        <textarea
          id="workflow-text"
          rows={14}
          spellcheck={false}
          value={text}
          onInput={(e) => {
            setText((e.currentTarget as HTMLTextAreaElement).value);
            setFailure(null);
          }}
          aria-describedby="workflow-help"
          aria-invalid={parsed?.ok === false}
        />
        <p id="workflow-help" class="muted">
          Paste a workflow exported with “Export (API)”, or drop a PNG that ComfyUI saved: the workflow it embeds is read here in the page.
        </p>
        <DropZone label="Choose a PNG saved by ComfyUI" accept="image/png" onFiles={fromPng} hint="Drop a PNG saved by ComfyUI here, or" />
        {note ? (
          <p class="notice" role="status">
            {note}
          </p>
        ) : null}
        {parsed?.ok === false ? (
          <p class="notice error" role="alert">
            {parsed.problem}
          </p>
        ) : null}
        <button type="submit" disabled={busy || parsed?.ok !== true}>
          {busy ? 'Submitting…' : 'Submit'}
        </button>
      </form>
      <Failure error={failure} title="Not submitted:" />
      {parsed?.ok ? (
        <section aria-labelledby="nodes-h">
          <h2 id="nodes-h">Nodes</h2>
          {nodeErrors ? <p class="muted">The problems the service found are shown under the nodes they concern.</p> : null}
          <NodeList workflow={parsed.workflow} errors={nodeErrors} uploads={uploads} onPick={(node, name) => name && setText(JSON.stringify(withImage(parsed.workflow, node, name), null, 2))} />
        </section>
      ) : null}
    </>
  );
}
