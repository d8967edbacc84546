import { useEffect, useMemo, useState } from 'preact/hooks';
import { ApiFailure, router, type RouterModel, type RouterResult } from '../api.js';
import { Failure, PageTitle } from '../components.js';
import { MediaView, mediaKind } from '../media.js';
import { explainBucket } from '../router-errors.js';
import { href } from '../route.js';
import { fieldsOf, inputFrom, type Field } from '../schema-form.js';

/** Media URLs in a JSON result: shown in the page when the service serves them, else only linked. */
function urlsIn(value: unknown, out: string[] = []): string[] {
  if (typeof value === 'string' && /^(https?:\/\/|\/)/.test(value)) out.push(value);
  else if (Array.isArray(value)) value.forEach((v) => urlsIn(v, out));
  else if (value && typeof value === 'object') Object.values(value).forEach((v) => urlsIn(v, out));
  return out;
}

const sameOrigin = (url: string) => new URL(url, location.href).origin === location.origin;
/**
 * The media type a result URL serves: as its signature declares it (`ct` of the service's own
 * signed URLs, `response-content-type` of presigned S3 ones), else by its file name's extension.
 */
function guessType(url: string): string {
  const u = new URL(url, location.href);
  const declared = u.searchParams.get('ct') ?? u.searchParams.get('response-content-type');
  if (declared) return declared;
  const name = u.searchParams.get('name') ?? u.pathname;
  if (/\.(png|jpe?g|webp|gif)$/i.test(name)) return 'image/*';
  if (/\.(mp4|webm)$/i.test(name)) return 'video/*';
  if (/\.(mp3|wav|ogg)$/i.test(name)) return 'audio/*';
  return 'application/octet-stream';
}

function Result({ result }: { result: RouterResult }) {
  const [text, setText] = useState<string | null>(null);
  const [url, setUrl] = useState<string | null>(null);
  const isJson = /json/.test(result.contentType);
  useEffect(() => {
    if (isJson || result.contentType.startsWith('text/')) {
      result.body.text().then(setText);
      return;
    }
    const made = URL.createObjectURL(result.body);
    setUrl(made);
    return () => URL.revokeObjectURL(made);
  }, [result]);

  if (!result.ok) {
    const explained = explainBucket(result.bucket);
    let parsed: unknown = null;
    try {
      parsed = text ? JSON.parse(text) : null;
    } catch {
      parsed = null;
    }
    const detail = (parsed as { detail?: unknown } | null)?.detail;
    return (
      <section class="notice error" role="alert" aria-labelledby="call-failed-h">
        <h2 id="call-failed-h">
          The call failed: <code>{explained.bucket}</code> (HTTP {result.status})
        </h2>
        <p>{explained.meaning}</p>
        <p>
          <strong>What to do:</strong> {explained.retry}
        </p>
        {typeof detail === 'string' ? <p>Service says: {detail}</p> : null}
        {Array.isArray(detail) ? (
          <ul>
            {detail.map((d: { loc?: unknown[]; msg?: string; type?: string }, i) => (
              <li key={i}>
                <code>{(d.loc ?? []).join('.')}</code> {d.msg} <span class="muted">({d.type})</span>
              </li>
            ))}
          </ul>
        ) : null}
        {result.requestId ? <p class="muted">Request id {result.requestId}</p> : null}
      </section>
    );
  }
  let json: unknown = undefined;
  if (isJson && text !== null) {
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
  }
  const links = json === undefined ? [] : [...new Set(urlsIn(json))];
  return (
    <section aria-labelledby="result-h">
      <h2 id="result-h">Result</h2>
      {url ? <MediaView name={`result (${result.contentType})`} url={url} contentType={result.contentType} type={mediaKind(null, result.contentType)} /> : null}
      {links.length ? (
        <ul class="result-links">
          {links.map((l) =>
            sameOrigin(l) ? (
              <li key={l}>
                <MediaView name={l} url={l} contentType={guessType(l)} />
              </li>
            ) : (
              <li key={l}>
                <a href={l} rel="noreferrer noopener" target="_blank">
                  {l}
                </a>{' '}
                <span class="muted">(on the provider's servers: the console loads nothing from there; open it yourself)</span>
              </li>
            ),
          )}
        </ul>
      ) : null}
      {text !== null ? <pre class="code">{json === undefined ? text : JSON.stringify(json, null, 2)}</pre> : null}
      {result.requestId ? <p class="muted">Request id {result.requestId}</p> : null}
    </section>
  );
}

function FieldControl({ field, value, problem, onChange }: { field: Field; value: string | boolean | undefined; problem?: string; onChange: (v: string | boolean) => void }) {
  const id = `field-${field.name}`;
  const described = [field.description ? `${id}-help` : null, problem ? `${id}-problem` : null].filter(Boolean).join(' ') || undefined;
  const common = { id, name: field.name, 'aria-describedby': described, 'aria-invalid': problem ? true : undefined, required: field.required };
  const text = typeof value === 'string' ? value : '';
  let control;
  if (field.kind === 'boolean') control = <input type="checkbox" {...common} required={false} checked={value === true} onChange={(e) => onChange((e.currentTarget as HTMLInputElement).checked)} />;
  else if (field.kind === 'select')
    control = (
      <select {...common} value={text} onChange={(e) => onChange((e.currentTarget as HTMLSelectElement).value)}>
        {field.required ? null : <option value="">(the model's default)</option>}
        {field.options.map((o) => (
          <option key={o} value={o}>
            {o}
          </option>
        ))}
      </select>
    );
  else if (field.kind === 'textarea' || field.kind === 'json') control = <textarea {...common} rows={field.kind === 'json' ? 4 : 3} value={text} onInput={(e) => onChange((e.currentTarget as HTMLTextAreaElement).value)} />;
  else if (field.kind === 'integer' || field.kind === 'number')
    control = <input type="number" {...common} min={field.min ?? undefined} max={field.max ?? undefined} step={field.step ?? 'any'} value={text} onInput={(e) => onChange((e.currentTarget as HTMLInputElement).value)} />;
  else control = <input type="text" {...common} value={text} onInput={(e) => onChange((e.currentTarget as HTMLInputElement).value)} />;
  return (
    <div class={`field field-${field.kind}`}>
      <label for={id}>
        {field.name}
        {field.required ? <span aria-hidden="true"> *</span> : null}
        {field.kind === 'json' ? <span class="muted"> (JSON)</span> : null}
      </label>
      {control}
      {field.description ? (
        <p id={`${id}-help`} class="muted">
          {field.description}
        </p>
      ) : null}
      {problem ? (
        <p id={`${id}-problem`} class="field-problem">
          {problem}
        </p>
      ) : null}
    </div>
  );
}

function ModelPage({ id }: { id: string }) {
  const [model, setModel] = useState<RouterModel | null>(null);
  const [fields, setFields] = useState<Field[] | null>(null);
  const [values, setValues] = useState<Record<string, string | boolean>>({});
  const [problems, setProblems] = useState<Record<string, string>>({});
  const [result, setResult] = useState<RouterResult | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);

  useEffect(() => {
    setModel(null);
    setFields(null);
    setResult(null);
    Promise.all([router.get(id), router.schema(id)]).then(([m, doc]) => {
      setModel(m);
      const f = fieldsOf(doc);
      setFields(f);
      setValues(Object.fromEntries(f.filter((x) => x.initial !== '').map((x) => [x.name, x.initial])));
    }, setError);
  }, [id]);

  async function call(e: Event) {
    e.preventDefault();
    if (!fields) return;
    const { input, problems: found } = inputFrom(fields, values);
    setProblems(found);
    if (Object.keys(found).length) return;
    setBusy(true);
    setResult(null);
    setError(null);
    try {
      setResult(await router.call(id, input));
    } catch (err) {
      setError(err);
    } finally {
      setBusy(false);
    }
  }

  return (
    <>
      <PageTitle title={id}>
        Model <code>{id}</code>
      </PageTitle>
      <p>
        <a href={href('router')}>All models</a>
      </p>
      {error instanceof ApiFailure ? (
        <div class="notice error" role="alert">
          <p>
            <code>{error.code}</code> {explainBucket(error.code).meaning} {error.message}
          </p>
        </div>
      ) : (
        <Failure error={error} />
      )}
      {model ? (
        <p class="muted">
          Provider {model.provider}. A call it refuses on content-policy grounds is {model.billing.charges_on_policy_rejection === 'yes' ? 'still charged' : model.billing.charges_on_policy_rejection === 'no' ? 'not charged' : `charged: ${model.billing.charges_on_policy_rejection}`}.
        </p>
      ) : null}
      {fields ? (
        <form onSubmit={call} class="model-form" aria-label={`Input for ${id}`}>
          {fields.map((f) => (
            <FieldControl key={f.name} field={f} value={values[f.name]} problem={problems[f.name]} onChange={(v) => setValues((x) => ({ ...x, [f.name]: v }))} />
          ))}
          <button type="submit" disabled={busy}>
            {busy ? 'Running…' : 'Run the model'}
          </button>
        </form>
      ) : null}
      {result ? <Result result={result} /> : null}
    </>
  );
}

function Catalog() {
  const [models, setModels] = useState<RouterModel[]>([]);
  const [cursor, setCursor] = useState<string | undefined>();
  const [loaded, setLoaded] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const load = async (after?: string) => {
    try {
      const page = await router.list(after);
      setModels((m) => (after ? [...m, ...page.data] : page.data));
      setCursor(page.has_more ? page.next_cursor : undefined);
      setLoaded(true);
    } catch (err) {
      setError(err);
    }
  };
  useEffect(() => void load(), []);
  const byProvider = useMemo(() => Object.groupBy(models, (m) => m.provider), [models]);
  return (
    <>
      <PageTitle title="Model router">Model router</PageTitle>
      <p>Partner models, run one call at a time. Pick a model: its form is made from the model's own input schema.</p>
      {error instanceof ApiFailure ? (
        <div class="notice error" role="alert">
          <p>
            <code>{error.code}</code> (HTTP {error.status}): {explainBucket(error.code).meaning} {explainBucket(error.code).retry}
          </p>
          <p class="muted">{error.message}</p>
        </div>
      ) : (
        <Failure error={error} />
      )}
      {loaded && models.length === 0 ? <p>No models are available to this account.</p> : null}
      {Object.entries(byProvider).map(([provider, list]) => (
        <section key={provider} aria-labelledby={`provider-${provider}`}>
          <h2 id={`provider-${provider}`}>{provider}</h2>
          <ul class="models">
            {(list ?? []).map((m) => (
              <li key={m.id}>
                <a href={href(`router/${m.id}`)}>{m.id}</a>
              </li>
            ))}
          </ul>
        </section>
      ))}
      {cursor ? (
        <button type="button" onClick={() => load(cursor)}>
          More models
        </button>
      ) : null}
    </>
  );
}

export function RouterPage({ model }: { model: string | null }) {
  return model ? <ModelPage id={model} /> : <Catalog />;
}
