import type { ComponentChildren } from 'preact';
import { useEffect, useRef } from 'preact/hooks';
import { ApiFailure } from './api.js';

/** A failure as the page says it: the service's own message and code, and when to retry. */
export function Failure({ error, title }: { error: unknown; title?: string }) {
  if (!error) return null;
  const failure = error instanceof ApiFailure ? error : null;
  return (
    <div class="notice error" role="alert">
      {title ? <strong>{title} </strong> : null}
      {failure ? (
        <>
          {failure.message} <code>{failure.code}</code> <span class="muted">(HTTP {failure.status})</span>
          {failure.retryAfter !== null ? <span> Retry in {failure.retryAfter} s.</span> : null}
        </>
      ) : (
        String((error as Error)?.message ?? error)
      )}
    </div>
  );
}

/** A page's heading, focused when the page opens so that a screen reader announces it. */
export function PageTitle({ children, title }: { children: ComponentChildren; title: string }) {
  const ref = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    document.title = `${title} · Comfy Cloud console`;
    ref.current?.focus();
  }, [title]);
  return (
    <h1 tabIndex={-1} ref={ref}>
      {children}
    </h1>
  );
}

export function StatusBadge({ status }: { status: string }) {
  return <span class={`badge status-${status}`}>{status}</span>;
}

/** Calls `tick` now and every `ms` while `active`; stops when the component goes. */
export function usePolling(tick: () => void | Promise<void>, ms: number, active: boolean, deps: unknown[] = []): void {
  useEffect(() => {
    if (!active) return;
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const run = async () => {
      try {
        await tick();
      } finally {
        if (!stopped) timer = setTimeout(run, ms);
      }
    };
    timer = setTimeout(run, ms);
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [active, ms, ...deps]);
}

/** A drop target that is also a button opening the file chooser, so a keyboard reaches it too. */
export function DropZone({ label, accept, multiple, onFiles, hint }: { label: string; accept?: string; multiple?: boolean; onFiles: (files: File[]) => void; hint?: string }) {
  const input = useRef<HTMLInputElement>(null);
  const zone = useRef<HTMLDivElement>(null);
  const take = (list: FileList | null | undefined) => {
    const files = [...(list ?? [])];
    if (files.length > 0) onFiles(files);
  };
  return (
    <div
      ref={zone}
      class="dropzone"
      onDragOver={(e) => {
        e.preventDefault();
        zone.current?.classList.add('over');
      }}
      onDragLeave={() => zone.current?.classList.remove('over')}
      onDrop={(e) => {
        e.preventDefault();
        zone.current?.classList.remove('over');
        take(e.dataTransfer?.files);
      }}
    >
      <p>{hint ?? 'Drop files here, or'}</p>
      <button type="button" onClick={() => input.current?.click()}>
        {label}
      </button>
      <input
        ref={input}
        class="visually-hidden"
        type="file"
        aria-label={label}
        accept={accept}
        multiple={multiple}
        tabIndex={-1}
        onChange={(e) => {
          take((e.currentTarget as HTMLInputElement).files);
          (e.currentTarget as HTMLInputElement).value = '';
        }}
      />
    </div>
  );
}

/** A table that scrolls sideways on a narrow screen instead of widening the page. */
export function DataTable({ name, caption, columns, children }: { name: string; caption?: string; columns: ComponentChildren[]; children: ComponentChildren }) {
  return (
    <div class="table-wrap">
      <table class={name}>
        {caption ? <caption class="visually-hidden">{caption}</caption> : null}
        <thead>
          <tr>
            {columns.map((c, i) => (
              <th key={i} scope="col">
                {c}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>{children}</tbody>
      </table>
    </div>
  );
}
