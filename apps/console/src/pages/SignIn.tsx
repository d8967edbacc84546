import { useState } from 'preact/hooks';
import { ApiFailure, checkKey, session } from '../api.js';
import { Failure, PageTitle } from '../components.js';

export function SignIn({ onSignedIn, reason }: { onSignedIn: () => void; reason: string | null }) {
  const [key, setKey] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);

  async function submit(e: Event) {
    e.preventDefault();
    setBusy(true);
    setError(null);
    const trimmed = key.trim();
    try {
      await checkKey(trimmed);
      session.signIn(trimmed);
      onSignedIn();
    } catch (err) {
      setError(err instanceof ApiFailure && err.status === 401 ? new Error(trimmed ? 'The service did not accept this API key.' : 'This server needs an API key.') : err);
    } finally {
      setBusy(false);
    }
  }

  return (
    <main id="main" class="signin">
      <PageTitle title="Sign in">Comfy Cloud console</PageTitle>
      {reason ? (
        <p class="notice" role="status">
          {reason}
        </p>
      ) : null}
      <form onSubmit={submit}>
        <label for="api-key">API key</label>
        <input
          id="api-key"
          name="api-key"
          type="password"
          autocomplete="off"
          spellcheck={false}
          placeholder="cck_…"
          value={key}
          onInput={(e) => setKey((e.currentTarget as HTMLInputElement).value)}
          aria-describedby="key-help"
        />
        <p id="key-help" class="muted">
          The key stays in this browser tab only (its session storage): closing the tab or signing out forgets it. A self-hosted server without a token takes an empty key.
        </p>
        <button type="submit" disabled={busy}>
          {busy ? 'Checking…' : 'Sign in'}
        </button>
      </form>
      <Failure error={error} />
    </main>
  );
}
