/**
 * A URL as a read may show it: any password replaced by `***`. An SMSC's URL or a webhook's may
 * carry one (`https://user:password@host/hook`), which a read-only key must not learn.
 */
export function shownUrl(raw: string): string {
  const url = URL.parse(raw);
  if (!url || url.password === '') return raw;
  url.password = '***';
  return url.href;
}
