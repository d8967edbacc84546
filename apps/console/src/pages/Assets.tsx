import { useCallback, useEffect, useState } from 'preact/hooks';
import { assets, type Asset } from '../api.js';
import { blake3OfFile } from '../blake3.js';
import { DropZone, Failure, PageTitle } from '../components.js';
import { bytes, shortId, when } from '../format.js';
import { MediaView } from '../media.js';
import { href } from '../route.js';

interface UploadRow {
  name: string;
  state: string;
  asset?: Asset;
  failed?: boolean;
}

/**
 * Hashes the file in the page, asks whether the service already holds those bytes for this
 * account, and records a new asset over them without sending a byte if so; else uploads it with
 * the hash it expects (the service refuses bytes that do not match).
 */
async function store(file: File, say: (state: string) => void): Promise<{ asset: Asset; sent: boolean }> {
  say('Computing its blake3 hash…');
  const hash = await blake3OfFile(file);
  say('Asking whether the service already has these bytes…');
  if (await assets.has(hash)) {
    say('Already stored: recording it without sending the bytes…');
    return { asset: await assets.fromHash(hash, file.name), sent: false };
  }
  say(`Uploading ${bytes(file.size)}…`);
  return { asset: await assets.upload(file, hash), sent: true };
}

export function Assets({ kind }: { kind: string }) {
  const [list, setList] = useState<Asset[]>([]);
  const [cursor, setCursor] = useState<string | undefined>();
  const [error, setError] = useState<unknown>(null);
  const [rows, setRows] = useState<UploadRow[]>([]);
  const filter = kind === 'upload' || kind === 'output' ? kind : undefined;

  const load = useCallback(async () => {
    try {
      const page = await assets.list({ kind: filter });
      setList(page.data);
      setCursor(page.next_cursor);
      setError(null);
    } catch (err) {
      setError(err);
    }
  }, [filter]);
  useEffect(() => void load(), [load]);

  async function more() {
    try {
      const page = await assets.list({ kind: filter, cursor });
      setList((shown) => [...shown, ...page.data]);
      setCursor(page.next_cursor);
    } catch (err) {
      setError(err);
    }
  }

  async function upload(files: File[]) {
    const start = rows.length;
    setRows((r) => [...r, ...files.map((f) => ({ name: f.name, state: 'Waiting…' }))]);
    const set = (i: number, patch: Partial<UploadRow>) => setRows((r) => r.map((row, j) => (j === start + i ? { ...row, ...patch } : row)));
    for (const [i, file] of files.entries()) {
      try {
        const { asset, sent } = await store(file, (state) => set(i, { state }));
        set(i, { asset, state: sent ? 'Uploaded.' : 'Already stored: recorded without uploading the bytes again.' });
      } catch (err) {
        set(i, { failed: true, state: `Failed: ${(err as Error).message}` });
      }
    }
    await load();
  }

  return (
    <>
      <PageTitle title="Assets">Assets</PageTitle>
      <DropZone label="Choose files to upload" multiple onFiles={upload} hint="Drop files here to upload them, or" />
      {rows.length ? (
        <ul class="uploads" aria-live="polite" aria-label="Uploads">
          {rows.map((r, i) => (
            <li key={i} class={r.failed ? 'error' : ''} data-upload={r.name}>
              <strong>{r.name}</strong>: <span class="upload-state">{r.state}</span>
              {r.asset && r.asset.content_type.startsWith('image/') ? (
                <>
                  {' '}
                  <a href={href(`submit?image=${encodeURIComponent(r.asset.file_path)}`)}>Use it in a new job</a>
                </>
              ) : null}
            </li>
          ))}
        </ul>
      ) : null}
      <div class="toolbar">
        <span id="kind-label">Show</span>
        <nav aria-labelledby="kind-label" class="tabs">
          <a href={href('assets')} aria-current={!filter ? 'page' : undefined}>
            All
          </a>
          <a href={href('assets?kind=upload')} aria-current={filter === 'upload' ? 'page' : undefined}>
            Uploads
          </a>
          <a href={href('assets?kind=output')} aria-current={filter === 'output' ? 'page' : undefined}>
            Outputs
          </a>
        </nav>
      </div>
      <Failure error={error} />
      {list.length === 0 && !error ? <p>No assets here yet.</p> : null}
      <ul class="asset-grid">
        {list.map((a) => (
          <li key={a.id} data-asset-id={a.id}>
            <MediaView name={a.file_path} url={a.url} contentType={a.content_type} size={a.size_bytes} />
            <p class="muted">
              {when(a.created_at)}
              {a.job_id ? (
                <>
                  {' · output of '}
                  <a href={href(`jobs/${a.job_id}`)}>
                    job <code>{shortId(a.job_id)}</code>
                  </a>
                </>
              ) : (
                ' · upload'
              )}
            </p>
            {!a.job_id && a.content_type.startsWith('image/') ? (
              <a href={href(`submit?image=${encodeURIComponent(a.file_path)}`)}>
                Use in a new job<span class="visually-hidden"> ({a.file_path})</span>
              </a>
            ) : null}
          </li>
        ))}
      </ul>
      {cursor ? (
        <button type="button" onClick={more}>
          Load older assets
        </button>
      ) : null}
    </>
  );
}
