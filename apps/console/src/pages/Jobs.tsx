import { useCallback, useEffect, useState } from 'preact/hooks';
import { JOB_STATUSES, isTerminal, jobs, type Job } from '../api.js';
import { DataTable, Failure, PageTitle, StatusBadge, usePolling } from '../components.js';
import { percent, shortId, when } from '../format.js';
import { href, navigate } from '../route.js';

const REFRESH_MS = 2000;

/** The newest page again, merged into what is shown: new jobs on top, known ones updated in place. */
function merge(shown: Job[], fresh: Job[]): Job[] {
  const byId = new Map(fresh.map((j) => [j.id, j]));
  const known = new Set(shown.map((j) => j.id));
  return [...fresh.filter((j) => !known.has(j.id)), ...shown.map((j) => byId.get(j.id) ?? j)];
}

export function Jobs({ status }: { status: string }) {
  const [list, setList] = useState<Job[]>([]);
  const [cursor, setCursor] = useState<string | undefined>();
  const [loaded, setLoaded] = useState(false);
  const [error, setError] = useState<unknown>(null);

  const load = useCallback(async () => {
    try {
      const page = await jobs.list({ status: status || undefined });
      setList(page.data);
      setCursor(page.next_cursor);
      setLoaded(true);
      setError(null);
    } catch (err) {
      setError(err);
    }
  }, [status]);

  useEffect(() => {
    setLoaded(false);
    void load();
  }, [load]);

  // Live: the newest page is read again every two seconds while the page is open.
  usePolling(
    async () => {
      try {
        const page = await jobs.list({ status: status || undefined });
        setList((shown) => merge(shown, page.data));
        setError(null);
      } catch (err) {
        setError(err);
      }
    },
    REFRESH_MS,
    loaded,
    [status],
  );

  async function more() {
    try {
      const page = await jobs.list({ status: status || undefined, cursor });
      setList((shown) => [...shown, ...page.data.filter((j) => !shown.some((s) => s.id === j.id))]);
      setCursor(page.next_cursor);
    } catch (err) {
      setError(err);
    }
  }

  return (
    <>
      <PageTitle title="Jobs">Jobs</PageTitle>
      <div class="toolbar">
        <label for="status-filter">Status</label>
        <select id="status-filter" value={status} onChange={(e) => navigate(`jobs${(e.currentTarget as HTMLSelectElement).value ? `?status=${(e.currentTarget as HTMLSelectElement).value}` : ''}`)}>
          <option value="">All</option>
          {JOB_STATUSES.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
        <a class="button" href={href('submit')}>
          Submit a workflow
        </a>
      </div>
      <Failure error={error} />
      {loaded && list.length === 0 ? <p>No jobs{status ? ` with status ${status}` : ''} yet.</p> : null}
      {list.length > 0 ? (
        <DataTable name="jobs" caption="Your jobs, newest first; updated every two seconds" columns={['Job', 'Status', 'Progress', 'Outputs', 'Created']}>
          {list.map((j) => (
            <tr key={j.id} data-job-id={j.id}>
              <td>
                <a href={href(`jobs/${j.id}`)}>
                  <code>{shortId(j.id)}</code>
                  <span class="visually-hidden"> (job {j.id})</span>
                </a>
              </td>
              <td>
                <StatusBadge status={j.status} />
                {j.queue_position !== null && !isTerminal(j.status) ? <span class="muted"> #{j.queue_position + 1} in line</span> : null}
              </td>
              <td>{j.progress ? percent(j.progress.value) : '—'}</td>
              <td>{j.outputs.length}</td>
              <td>{when(j.created_at)}</td>
            </tr>
          ))}
        </DataTable>
      ) : null}
      {cursor ? (
        <button type="button" onClick={more}>
          Load older jobs
        </button>
      ) : null}
    </>
  );
}
