import { get, withQuery } from '../api.ts';
import { useLoad } from '../load.ts';
import { addDays, localDate } from '../time.ts';
import type { VerifyStats } from '../types.ts';
import { Page, Part } from '../components/page.tsx';
import { Show } from '../components/states.tsx';
import { Table } from '../components/table.tsx';
import { useNumber, useZone } from '../components/zone.tsx';

const DAYS = 30;

/** What each of the fraud guard's refusals means, in the words of the account's `verify` settings. */
const REASONS: Array<{ key: keyof VerifyStats['blockedBy']; name: string; meaning: string }> = [
  {
    key: 'country',
    name: 'Country not allowed',
    meaning: "The number's country is not one of the account's allowedCountries.",
  },
  {
    key: 'prefix',
    name: 'Prefix limit',
    meaning:
      'Past prefixLimit: more new verifications in 10 minutes to numbers sharing their calling code and the ' +
      'first 4 digits of the national number, as when bots walk a range of numbers (SMS pumping).',
  },
];

function Totals(props: { stats: VerifyStats }) {
  const { stats } = props;
  const number = useNumber();
  return (
    <dl class="facts">
      <dt>Started</dt>
      <dd>{number(stats.started)}</dd>
      <dt>Approved</dt>
      <dd>{number(stats.approved)}</dd>
      <dt>Failed</dt>
      <dd>{number(stats.failed)}</dd>
      <dt>Expired</dt>
      <dd>{number(stats.expired)}</dd>
      <dt>Conversion rate</dt>
      <dd>{stats.started === 0 ? '—' : `${number(stats.conversionRate * 100)}%`}</dd>
    </dl>
  );
}

function Countries(props: { stats: VerifyStats }) {
  const number = useNumber();
  // None started has no rate (a country the fraud guard only blocked).
  const rate = (approved: number, started: number) => (started === 0 ? '—' : `${number((approved / started) * 100)}%`);
  const { byCountry } = props.stats;
  return (
    <Table
      caption="Conversion by country"
      head={['Country', 'Started', 'Approved', 'Conversion']}
      rows={byCountry.length}
      empty="No verification started in these days."
    >
      {byCountry.map((row) => (
        <tr key={row.country}>
          <th scope="row">{row.country}</th>
          <td class="num">{number(row.started)}</td>
          <td class="num">{number(row.approved)}</td>
          <td class="num">{rate(row.approved, row.started)}</td>
        </tr>
      ))}
    </Table>
  );
}

function Blocked(props: { stats: VerifyStats }) {
  const { stats } = props;
  const number = useNumber();
  return (
    <Table
      caption="Blocked attempts by reason"
      head={['Reason', 'Attempts', 'What it means']}
      rows={REASONS.length}
      foot={
        <tfoot>
          <tr>
            <th scope="row">Total</th>
            <td class="num">{number(stats.blocked)}</td>
            <td />
          </tr>
        </tfoot>
      }
    >
      {REASONS.map((reason) => (
        <tr key={reason.key}>
          <th scope="row">{reason.name}</th>
          <td class="num">{number(stats.blockedBy[reason.key])}</td>
          <td>{reason.meaning}</td>
        </tr>
      ))}
    </Table>
  );
}

/** Verify's figures over the last 30 days of the account's offset, both ends included (`GET /verify/stats`). */
export function Verify() {
  const zone = useZone();
  const to = localDate(Date.now(), zone);
  const from = addDays(to, -(DAYS - 1));
  const stats = useLoad(() => get<VerifyStats>(withQuery('/verify/stats', { from, to })), from);
  return (
    <Page title="Verify">
      <p class="muted">
        The last {DAYS} days, {from} to {to}, in your account's time zone ({zone.label}). A verification counts on the
        day it started, with how it ended; one still pending past its end counts as expired.
      </p>
      <Show loaded={stats}>
        {(data) => (
          <>
            <Part title="Verifications" id="verify-totals">
              <Totals stats={data} />
            </Part>
            <Part title="Conversion by country" id="verify-countries">
              <Countries stats={data} />
            </Part>
            <Part title="Blocked attempts" id="verify-blocked">
              <p>
                Numbers the fraud guard refused before a code was sent. Its limits are the account's verify settings,
                which <code>PATCH /account</code> changes.
              </p>
              <Blocked stats={data} />
            </Part>
          </>
        )}
      </Show>
    </Page>
  );
}
