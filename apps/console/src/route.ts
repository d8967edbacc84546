import { useEffect, useState } from 'preact/hooks';

// Pages are addressed in the fragment (`#/jobs/<id>`): the server serves one page at /console/,
// whatever prefix it sits under, and no path of the app ever reaches it.

export interface Route {
  /** `#/jobs/abc?x=1` → ['jobs', 'abc'] */
  parts: string[];
  params: URLSearchParams;
}

export function currentRoute(hash = location.hash): Route {
  const raw = hash.replace(/^#\/?/, '');
  const [path = '', search = ''] = raw.split('?');
  return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), params: new URLSearchParams(search) };
}

export function useRoute(): Route {
  const [route, setRoute] = useState(currentRoute);
  useEffect(() => {
    const changed = () => setRoute(currentRoute());
    addEventListener('hashchange', changed);
    return () => removeEventListener('hashchange', changed);
  }, []);
  return route;
}

export const href = (path: string) => `#/${path.replace(/^\//, '')}`;

export function navigate(path: string): void {
  location.hash = href(path);
}
