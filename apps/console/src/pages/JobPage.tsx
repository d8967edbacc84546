import { useEffect, useRef, useState } from 'preact/hooks';
import { isTerminal, jobs, type Job, type Output, type Progress } from '../api.js';
import { Failure, PageTitle, StatusBadge } from '../components.js';
import { ms, percent, when } from '../format.js';
import { OutputGallery } from '../media.js';
import { href } from '../route.js';

const POLL_MS = 2000;

/** Saves JSON as a file through a blob: URL the page makes itself (nothing leaves the page). */
function downloadJson(name: string, value: unknown): void {
  const url = URL.createObjectURL(new Blob([JSON.stringify(value, null, 2)], { type: 'application/json' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = name;
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

function ProgressBar({ progress, status }: { progress: Progress | null; status: string }) {
  const value = progress?.value ?? (status === 'succeeded' ? 1 : 0);
  const detail = progress
    ? [
        `${progress.nodes_done} of ${progress.nodes_total} nodes`,
        progress.current_node_class ? `now ${progress.current_node_class}${progress.current_node ? ` (node ${progress.current_node})` : ''}` : null,
        progress.step !== null && progress.step !== undefined && progress.steps ? `step ${progress.step} of ${progress.steps}` : null,
      ]
        .filter(Boolean)
        .join(', ')
    : 'No progress reported yet.';
  return (
    <div class="progress">
      <label for="job-progress">
        Progress <strong data-testid="progress-text">{percent(value)}</strong>
      </label>
      <progress id="job-progress" max={1} value={value} aria-describedby="progress-detail" />
      <p id="progress-detail" class="muted">
        {detail}
      </p>
    </div>
  );
}

function WorkflowView({ job }: { job: Job }) {
  const [workflow, setWorkflow] = useState<Record<string, unknown> | null>(null);
  const [error, setError] = useState<unknown>(null);
  const load = async () => {
    if (workflow) return workflow;
    try {
      const w = (await jobs.workflow(job)).workflow;
      setWorkflow(w);
      return w;
    } catch (err) {
      setError(err);
      return null;
    }
  };
  return (
    <section aria-labelledby="workflow-h">
      <h2 id="workflow-h">Workflow</h2>
      <details onToggle={(e) => (e.currentTarget as HTMLDetailsElement).open && void load()}>
        <summary>Show the workflow this job ran</summary>
        {workflow ? <pre class="code">{JSON.stringify(workflow, null, 2)}</pre> : <p class="muted">Loading…</p>}
      </details>
      <button
        type="button"
        onClick={async () => {
          const w = await load();
          if (w) downloadJson(`workflow-${job.id}.json`, w);
        }}
      >
        Download workflow (API format)
      </button>
      <Failure error={error} />
    </section>
  );
}

function LogView({ job }: { job: Job }) {
  const [log, setLog] = useState<{ text: string; truncated: boolean } | null | undefined>(undefined);
  const [error, setError] = useState<unknown>(null);
  const ended = isTerminal(job.status);
  useEffect(() => {
    if (!ended || !job.urls.logs) return;
    jobs.log(job).then(setLog, setError);
  }, [ended, job.id]);
  let body;
  if (!job.urls.logs) body = <p class="muted">This server captures no logs.</p>;
  else if (!ended) body = <p class="muted">The log is readable once the job has ended.</p>;
  else if (log === undefined) body = <p class="muted">Loading…</p>;
  else if (log === null) body = <p class="muted">Nothing was captured for this job.</p>;
  else
    body = (
      <>
        <pre class="code log">{log.text}</pre>
        {log.truncated ? <p class="muted">The log was cut at its size limit.</p> : null}
      </>
    );
  return (
    <section aria-labelledby="log-h">
      <h2 id="log-h">Log</h2>
      {body}
      <Failure error={error} />
    </section>
  );
}

export function JobPage({ id }: { id: string }) {
  const [job, setJob] = useState<Job | null>(null);
  const [preview, setPreview] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [canceling, setCanceling] = useState(false);
  const live = useRef(true);

  useEffect(() => {
    live.current = true;
    const stop = new AbortController();
    // The job as last shown: the stream's events apply to it one after another.
    let current = null as Job | null;
    const update = (next: Job | ((j: Job) => Job)) => {
      if (!live.current) return;
      current = typeof next === 'function' ? (current ? next(current) : current) : next;
      setJob(current);
    };
    const refresh = async () => update(await jobs.get(id));
    const sleep = (n: number) => new Promise((r) => setTimeout(r, n));

    // Follow the event stream; whenever it ends or fails, poll the job (the source of truth) and,
    // while the job is not over, follow the stream again from the last event seen.
    (async () => {
      let lastEventId: string | undefined;
      try {
        await refresh();
      } catch (err) {
        setError(err);
        return;
      }
      while (live.current && current && !isTerminal(current.status)) {
        try {
          lastEventId = await jobs.events(
            current,
            (name, data) => {
              if (name === 'progress') update((j) => ({ ...j, progress: data as Progress }));
              else if (name === 'preview') {
                const p = data as { content_type?: string; data_base64?: string };
                if (p.data_base64) setPreview(`data:${p.content_type ?? 'image/jpeg'};base64,${p.data_base64}`);
              } else if (name === 'output') update((j) => (j.outputs.some((o) => o.id === (data as Output).id) ? j : { ...j, outputs: [...j.outputs, data as Output] }));
              else if (name === 'status') {
                const s = data as { status: Job['status']; queue_position?: number | null };
                update((j) => ({ ...j, status: s.status, queue_position: s.queue_position ?? null }));
              }
            },
            stop.signal,
            lastEventId,
          );
        } catch (err) {
          if (stop.signal.aborted) return;
          await sleep(POLL_MS);
        }
        try {
          await refresh();
          setError(null);
        } catch (err) {
          setError(err);
          await sleep(POLL_MS);
        }
      }
    })();
    return () => {
      live.current = false;
      stop.abort();
    };
  }, [id]);

  async function cancel() {
    if (!job) return;
    setCanceling(true);
    try {
      const canceled = await jobs.cancel(job);
      setJob((j) => (j && isTerminal(j.status) ? j : canceled));
    } catch (err) {
      setError(err);
    } finally {
      setCanceling(false);
    }
  }

  if (!job) {
    return (
      <>
        <PageTitle title="Job">Job</PageTitle>
        {error ? <Failure error={error} /> : <p>Loading…</p>}
        <p>
          <a href={href('jobs')}>Back to the jobs</a>
        </p>
      </>
    );
  }
  const ended = isTerminal(job.status);
  return (
    <>
      <PageTitle title={`Job ${job.id.slice(0, 8)}`}>
        Job <code>{job.id}</code>
      </PageTitle>
      <div class="toolbar">
        <p role="status" aria-live="polite" class="job-status">
          Status: <StatusBadge status={job.status} />
          {job.queue_position !== null && !ended ? <span class="muted"> ({job.queue_position} jobs before it)</span> : null}
        </p>
        {!ended ? (
          <button type="button" class="danger" onClick={cancel} disabled={canceling || job.status === 'canceling'}>
            {job.status === 'canceling' ? 'Canceling…' : 'Cancel job'}
          </button>
        ) : null}
      </div>
      <Failure error={error} />
      <ProgressBar progress={job.progress} status={job.status} />
      {preview && !ended ? (
        <section aria-labelledby="preview-h">
          <h2 id="preview-h">Live preview</h2>
          <img class="preview" src={preview} alt="The sampler's latest preview" />
        </section>
      ) : null}
      {job.error ? (
        <section aria-labelledby="error-h" class="notice error">
          <h2 id="error-h">Error</h2>
          <p>
            <code>{job.error.code}</code> {job.error.message}
          </p>
          {job.error.node_id ? (
            <p>
              At node {job.error.node_id}
              {job.error.class_type ? ` (${job.error.class_type})` : ''}
            </p>
          ) : null}
          {job.error.traceback ? <pre class="code">{job.error.traceback}</pre> : null}
        </section>
      ) : null}
      <section aria-labelledby="outputs-h">
        <h2 id="outputs-h">Outputs</h2>
        <OutputGallery outputs={job.outputs} />
      </section>
      <section aria-labelledby="metrics-h">
        <h2 id="metrics-h">Times</h2>
        <dl class="facts">
          <dt>Created</dt>
          <dd>{when(job.created_at)}</dd>
          <dt>Started</dt>
          <dd>{when(job.started_at)}</dd>
          <dt>Completed</dt>
          <dd>{when(job.completed_at)}</dd>
          <dt>Waited in the queue</dt>
          <dd>{ms(job.metrics?.queue_ms)}</dd>
          <dt>Ran for</dt>
          <dd>{ms(job.metrics?.execution_ms)}</dd>
          <dt>Kept until</dt>
          <dd>{when(job.expires_at)}</dd>
        </dl>
      </section>
      <LogView job={job} />
      <WorkflowView job={job} />
    </>
  );
}
