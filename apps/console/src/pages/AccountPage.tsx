import { useEffect, useState } from 'preact/hooks';
import { account, type Account, type LedgerEntry } from '../api.js';
import { DataTable, Failure, PageTitle } from '../components.js';
import { shortId, when } from '../format.js';
import { href } from '../route.js';

function Usage({ label, used, limit }: { label: string; used: number; limit: number }) {
  const id = `usage-${label.replace(/\W+/g, '-').toLowerCase()}`;
  return (
    <tr>
      <th scope="row" id={id}>
        {label}
      </th>
      <td>
        {used} of {limit}
      </td>
      <td>
        <meter aria-labelledby={id} min={0} max={limit} value={used} high={limit * 0.8} />
      </td>
    </tr>
  );
}

function ChargeRef({ entry }: { entry: LedgerEntry }) {
  if (entry.reason === 'job' && entry.ref) {
    return (
      <a href={href(`jobs/${entry.ref}`)}>
        job <code>{shortId(entry.ref)}</code>
      </a>
    );
  }
  return entry.ref ? <code>{entry.ref}</code> : <span class="muted">—</span>;
}

export function AccountPage() {
  const [data, setData] = useState<Account | null>(null);
  const [charges, setCharges] = useState<LedgerEntry[]>([]);
  const [cursor, setCursor] = useState<string | undefined>();
  const [error, setError] = useState<unknown>(null);

  useEffect(() => {
    account.get().then(
      (a) => {
        setData(a);
        setCharges(a.charges.data);
        setCursor(a.charges.next_cursor);
      },
      setError,
    );
  }, []);

  async function more() {
    try {
      const a = await account.get({ cursor });
      setCharges((c) => [...c, ...a.charges.data]);
      setCursor(a.charges.next_cursor);
    } catch (err) {
      setError(err);
    }
  }

  if (!data) {
    return (
      <>
        <PageTitle title="Account">Account</PageTitle>
        {error ? <Failure error={error} /> : <p>Loading…</p>}
      </>
    );
  }
  const { limits, usage, router } = data;
  return (
    <>
      <PageTitle title="Account">Account</PageTitle>
      <dl class="facts">
        <dt>Name</dt>
        <dd>{data.name}</dd>
        <dt>Account id</dt>
        <dd>
          <code>{data.id}</code>
        </dd>
        <dt>Tier</dt>
        <dd>{data.tier}</dd>
        <dt>Credit balance</dt>
        <dd class="balance" data-testid="balance">
          {data.credit_balance.toLocaleString()} credits
        </dd>
      </dl>
      <section aria-labelledby="limits-h">
        <h2 id="limits-h">Limits and usage now</h2>
        <DataTable name="usage" columns={['Limit', 'In use', <span class="visually-hidden">Share</span>]}>
          <Usage label="Jobs running at once" used={usage.running_jobs} limit={limits.max_concurrent_jobs} />
          <Usage label="Jobs queued" used={usage.queued_jobs} limit={limits.max_queued_jobs} />
          <Usage label="Open event streams" used={usage.open_event_streams} limit={limits.max_event_streams} />
          <Usage label="Requests this minute" used={usage.requests_this_minute} limit={limits.requests_per_minute} />
        </DataTable>
        <p>
          Model router: {router.enabled ? `enabled; up to ${router.max_concurrent_calls} calls at once, ${router.window_calls} calls per ${router.window_seconds} s, at most ${router.spend_cap_cents} ¢ committed at a time.` : 'not enabled for this account.'}
        </p>
      </section>
      <section aria-labelledby="charges-h">
        <h2 id="charges-h">Recent charges and grants</h2>
        {charges.length === 0 ? <p>No entries yet.</p> : null}
        {charges.length ? (
          <DataTable name="charges" columns={['When', 'Amount', 'Reason', 'For']}>
            {charges.map((c) => (
              <tr key={c.id}>
                <td>{when(c.created_at)}</td>
                <td class={c.amount < 0 ? 'negative' : 'positive'}>{c.amount > 0 ? `+${c.amount}` : c.amount}</td>
                <td>{c.reason}</td>
                <td>
                  <ChargeRef entry={c} />
                </td>
              </tr>
            ))}
          </DataTable>
        ) : null}
        {cursor ? (
          <button type="button" onClick={more}>
            Load older entries
          </button>
        ) : null}
      </section>
      <Failure error={error} />
    </>
  );
}
