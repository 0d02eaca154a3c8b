import { useMemo, useState } from 'preact/hooks';
import { get, withQuery } from '../api.ts';
import { useLoad } from '../load.ts';
import { navigate, useLocation } from '../router.tsx';
import { addDays, dayStart, localDate } from '../time.ts';
import type { EmailUsage, Money, SmsUsage, Usage as UsageBody } from '../types.ts';
import { formatMoney } from '../numbers.ts';
import { Page } from '../components/page.tsx';
import { Show } from '../components/states.tsx';
import { Table } from '../components/table.tsx';
import { TimeChart, type Line } from '../components/chart.tsx';
import { EMAIL_COLOUR, SMS_COLOUR } from '../components/colours.ts';
import { useNumber, useZone } from '../components/zone.tsx';

function Cells(props: { sms: SmsUsage; email: EmailUsage; cost: Money[] }) {
  const { sms, email, cost } = props;
  const number = useNumber();
  const words = (statuses: Record<string, number>) =>
    Object.entries(statuses)
      .map(([word, n]) => `${word} ${number(n)}`)
      .join(' · ') || '—';
  return (
    <>
      <td class="num">{number(sms.messages)}</td>
      <td class="num">{number(sms.parts.gsm7)}</td>
      <td class="num">{number(sms.parts.ucs2)}</td>
      <td class="num">{number(email.messages)}</td>
      <td class="num">{formatMoney(cost)}</td>
      <td>{words(sms.statuses)}</td>
      <td>{words(email.statuses)}</td>
    </>
  );
}

const parts = (sms: SmsUsage) => sms.parts.gsm7 + sms.parts.ucs2;

type DayUsage = { sms: SmsUsage; email: EmailUsage };

/** The billed SMS parts and emails of each day, as bars: the table's figures at a glance. */
function UsageChart(props: { usage: UsageBody }) {
  const { days, totals } = props.usage;
  const zone = useZone();
  const number = useNumber();
  const times = useMemo(() => days.map((day) => dayStart(day.date, zone)), [days, zone]);
  const lines = useMemo(() => {
    const line = (label: string, color: string, count: (usage: DayUsage) => number): Line => ({
      label,
      color,
      values: days.map(count),
      overall: number(count(totals)),
    });
    return [
      line('SMS parts', SMS_COLOUR, (usage) => parts(usage.sms)),
      line('Emails', EMAIL_COLOUR, (usage) => usage.email.messages),
    ];
  }, [days, totals]);
  const span = `${props.usage.from} to ${props.usage.to}`;
  const summary = `${number(parts(totals.sms))} SMS parts and ${number(totals.email.messages)} emails billed, ${span}`;
  return <TimeChart title="Billed per day" summary={summary} span={span} times={times} lines={lines} bars />;
}

/** Billed messages per day of the account's offset, both ends included; the span is in the URL. */
export function Usage() {
  const zone = useZone();
  const { query } = useLocation();
  const today = localDate(Date.now(), zone);
  const to = query.get('to') ?? today;
  const from = query.get('from') ?? addDays(to, -29);
  const [fromInput, setFrom] = useState(from);
  const [toInput, setTo] = useState(to);
  const usage = useLoad(() => get<UsageBody>(withQuery('/usage', { from, to })), `${from}|${to}`);

  const show = (event: Event) => {
    event.preventDefault();
    navigate(withQuery('/usage', { from: fromInput, to: toInput }));
  };
  return (
    <Page title="Usage">
      <form class="inline-form" onSubmit={show} aria-label="Usage span">
        <label>
          From
          <input
            type="date"
            name="from"
            required
            value={fromInput}
            max={toInput}
            onInput={(e) => setFrom(e.currentTarget.value)}
          />
        </label>
        <label>
          To
          <input
            type="date"
            name="to"
            required
            value={toInput}
            min={fromInput}
            onInput={(e) => setTo(e.currentTarget.value)}
          />
        </label>
        <button type="submit">Show</button>
        <a
          class="button"
          href={withQuery('/usage', { from, to, format: 'csv' })}
          download={`herald-usage-${from}-${to}.csv`}
        >
          Download CSV
        </a>
      </form>
      <p class="muted">
        Days in your account's time zone ({zone.label}). SMS are billed once the operator accepts them, each part as a
        message, and cost what their route's price per part was then; emails are billed once handed over for sending.
      </p>
      <Show loaded={usage}>
        {(data) => (
          <>
            <UsageChart usage={data} />
            <Table
              caption={`Usage per day, ${data.from} to ${data.to}`}
              head={[
                'Date',
                'SMS',
                'SMS parts GSM-7',
                'SMS parts UCS-2',
                'Emails',
                'SMS cost',
                'SMS statuses',
                'Email statuses',
              ]}
              rows={data.days.length}
              foot={
                <tfoot>
                  <tr>
                    <th scope="row">Total</th>
                    <Cells sms={data.totals.sms} email={data.totals.email} cost={data.totals.cost} />
                  </tr>
                </tfoot>
              }
            >
              {data.days.map((day) => (
                <tr key={day.date}>
                  <th scope="row">{day.date}</th>
                  <Cells sms={day.sms} email={day.email} cost={day.cost} />
                </tr>
              ))}
            </Table>
          </>
        )}
      </Show>
    </Page>
  );
}
