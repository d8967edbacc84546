import { useEffect, useState } from 'preact/hooks';
import { session, whenUnauthorized } from './api.js';
import { AccountPage } from './pages/AccountPage.js';
import { Assets } from './pages/Assets.js';
import { JobPage } from './pages/JobPage.js';
import { Jobs } from './pages/Jobs.js';
import { RouterPage } from './pages/RouterPage.js';
import { SignIn } from './pages/SignIn.js';
import { Submit } from './pages/Submit.js';
import { href, navigate, useRoute } from './route.js';

const NAV: [string, string][] = [
  ['jobs', 'Jobs'],
  ['submit', 'Submit'],
  ['assets', 'Assets'],
  ['account', 'Account'],
  ['router', 'Model router'],
];

export function App() {
  const route = useRoute();
  const [signedIn, setSignedIn] = useState(() => session.key() !== null);
  const [reason, setReason] = useState<string | null>(null);

  useEffect(() => {
    whenUnauthorized(() => {
      session.signOut();
      setReason('The service no longer accepts the API key of this tab: sign in again.');
      setSignedIn(false);
    });
  }, []);

  if (!signedIn) {
    return (
      <SignIn
        reason={reason}
        onSignedIn={() => {
          setReason(null);
          setSignedIn(true);
        }}
      />
    );
  }

  const [section = 'jobs', ...rest] = route.parts;
  let page;
  if (section === 'jobs' && rest[0]) page = <JobPage key={rest[0]} id={rest[0]} />;
  else if (section === 'submit') page = <Submit key={route.params.get('image') ?? ''} imageName={route.params.get('image')} />;
  else if (section === 'assets') page = <Assets kind={route.params.get('kind') ?? ''} />;
  else if (section === 'account') page = <AccountPage />;
  else if (section === 'router') page = <RouterPage model={rest.length === 2 ? rest.join('/') : null} />;
  else page = <Jobs status={route.params.get('status') ?? ''} />;

  return (
    <>
      <a class="skip" href="#main" onClick={(e) => {
        e.preventDefault();
        document.getElementById('main')?.focus();
      }}>
        Skip to the content
      </a>
      <header class="top">
        <span class="brand">Comfy Cloud</span>
        <nav aria-label="Console">
          <ul>
            {NAV.map(([path, label]) => (
              <li key={path}>
                <a href={href(path)} aria-current={section === path ? 'page' : undefined}>
                  {label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <button
          type="button"
          class="signout"
          onClick={() => {
            session.signOut();
            // The next one to sign in starts on the jobs, not on a page of the last account.
            navigate('jobs');
            setReason('Signed out: this tab no longer holds your API key.');
            setSignedIn(false);
          }}
        >
          Sign out
        </button>
      </header>
      <main id="main" tabIndex={-1}>
        {page}
      </main>
    </>
  );
}
