import { useMemo } from 'preact/hooks';
import { get, withQuery } from '../api.ts';
import { useLoad } from '../load.ts';
import { Link } from '../router.tsx';
import { addDays, localDate } from '../time.ts';
import type { StatsPoint } from '../types.ts';
import { TimeChart, type Line } from '../components/chart.tsx';
import { EMAIL_COLOUR, SMS_COLOUR } from '../components/colours.ts';
import { Page, Part } from '../components/page.tsx';
import { Show } from '../components/states.tsx';
import { Table } from '../components/table.tsx';
import { useNumber, useZone } from '../components/zone.tsx';
import { EmailBatchRow, emailBatchesPage } from './email.tsx';
import { SmsSendRow, smsSendsPage } from './sms.tsx';
import { SEND_COLUMNS } from '../components/send.tsx';
import { DELIVERY_COLUMNS, DeliveryCells, deliveriesPage } from './webhooks.tsx';

const DAYS = 30;
const LATEST = 5;
const FAILURES = 10;

const stats = (channel: 'sms' | 'email', from: string, to: string) =>
  get<{ points: StatsPoint[] }>(withQuery('/stats', { from, to, channel, interval: 'day' })).then(
    (body) => body.points,
  );

const rate = (p: StatsPoint) => (p.sent === 0 ? null : (p.delivered / p.sent) * 100);
const sum = (points: StatsPoint[], key: 'sent' | 'delivered') => points.reduce((n, p) => n + p[key], 0);
/** Email's line is dashed: the channels apart without their colour. */
const dash = [6, 4];

function Charts(props: { sms: StatsPoint[]; email: StatsPoint[] }) {
  const { sms, email } = props;
  const number = useNumber();
  const times = useMemo(() => sms.map((p) => Date.parse(p.start)), [sms]);
  const overall = (points: StatsPoint[]) =>
    sum(points, 'sent') === 0 ? 'none sent' : `${Math.round((sum(points, 'delivered') / sum(points, 'sent')) * 100)}%`;
  const sent = (points: StatsPoint[]) => number(sum(points, 'sent'));
  const sends: Line[] = useMemo(
    () => [
      { label: 'SMS sent', values: sms.map((p) => p.sent), color: SMS_COLOUR, overall: sent(sms) },
      { label: 'Emails sent', values: email.map((p) => p.sent), color: EMAIL_COLOUR, dash, overall: sent(email) },
    ],
    [sms, email],
  );
  const rates: Line[] = useMemo(
    () => [
      { label: 'SMS delivered', values: sms.map(rate), color: SMS_COLOUR, overall: overall(sms) },
      { label: 'Emails delivered', values: email.map(rate), color: EMAIL_COLOUR, dash, overall: overall(email) },
    ],
    [sms, email],
  );
  const span = `all ${DAYS} days`;
  return (
    <div class="charts">
      <TimeChart
        title="Messages sent per day"
        summary={`${sent(sms)} SMS and ${sent(email)} emails sent in ${DAYS} days`}
        span={span}
        times={times}
        lines={sends}
      />
      <TimeChart
        title="Delivery rate per day"
        summary={`SMS ${overall(sms)} delivered, email ${overall(email)} delivered`}
        span={span}
        times={times}
        lines={rates}
        unit="%"
        max={100}
      />
    </div>
  );
}

export function Overview() {
  const zone = useZone();
  const to = localDate(Date.now(), zone);
  const from = addDays(to, -(DAYS - 1));
  const charts = useLoad(() => Promise.all([stats('sms', from, to), stats('email', from, to)]), from);
  const latest = useLoad(
    () => Promise.all([smsSendsPage(undefined, LATEST), emailBatchesPage(undefined, LATEST)]),
    'latest',
  );
  // What went wrong lately: the newest deliveries whose last attempt failed.
  const failures = useLoad(() => deliveriesPage(undefined, FAILURES, true).then((page) => page.items), 'failures');
  return (
    <Page title="Overview">
      <Part title={`The last ${DAYS} days`} id="trend">
        <Show loaded={charts}>{([sms, email]) => <Charts sms={sms} email={email} />}</Show>
      </Part>
      <Show loaded={latest}>
        {([sms, email]) => (
          <>
            <Part title="Latest SMS sends" id="latest-sms">
              <Table caption="Latest SMS sends" head={SEND_COLUMNS} rows={sms.items.length} empty="No SMS sent yet.">
                {sms.items.map((send) => (
                  <SmsSendRow key={send.queueId} send={send} />
                ))}
              </Table>
              <p>
                <Link href="/sms">All SMS sends</Link>
              </p>
            </Part>
            <Part title="Latest email batches" id="latest-email">
              <Table
                caption="Latest email batches"
                head={SEND_COLUMNS}
                rows={email.items.length}
                empty="No email sent yet."
              >
                {email.items.map((batch) => (
                  <EmailBatchRow key={batch.batchId} batch={batch} />
                ))}
              </Table>
              <p>
                <Link href="/email">All email batches</Link>
              </p>
            </Part>
          </>
        )}
      </Show>
      <Part title="Webhook failures" id="webhook-failures">
        <Show loaded={failures}>
          {(failed) => (
            <Table
              caption="Failing webhook deliveries, newest first"
              head={DELIVERY_COLUMNS}
              rows={failed.length}
              empty="None: every delivery's last attempt went through."
            >
              {failed.map((d) => (
                <tr key={d.id}>
                  <DeliveryCells delivery={d} />
                </tr>
              ))}
            </Table>
          )}
        </Show>
        <p>
          <Link href="/webhooks">All deliveries</Link>
        </p>
      </Part>
    </Page>
  );
}
