import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { formatNumber } from '../numbers.ts';
import { chartDate, formatDay } from '../time.ts';
import { useZone } from './zone.tsx';

export interface Line {
  label: string;
  values: Array<number | null>;
  color: string;
  /** Dashes tell lines apart without their colour. */
  dash?: number[];
  /** What the legend shows while no day is pointed at: the span's total, or its overall rate. */
  overall: string;
}

const DAY_S = 86_400;
const HEIGHT = 240;
/** Room above the highest value, so a dot on it (100%, the busiest day) is drawn whole. */
const HEADROOM = 1.08;
/** Whole steps for an axis of counts: a chart of a few messages has no tick at 0.5. */
const COUNT_STEPS = Array.from({ length: 10 }, (_, power) => [1, 2, 5].map((m) => m * 10 ** power)).flat();

/**
 * A chart over days (uPlot) in a figure with its caption; it follows its container's width.
 * `times`: the days' first instants in ms; `unit` follows each value; `bars` draws the lines as
 * bars side by side. The first and last days sit half a day in from the edges, so their dots
 * and bars are whole with one or two days of data; the legend shows `span` and each line's
 * `overall` until a day is pointed at, then that day's values.
 */
export function TimeChart(props: {
  title: string;
  summary: string;
  span: string;
  times: number[];
  lines: Line[];
  unit?: string;
  max?: number;
  bars?: boolean;
}) {
  const holder = useRef<HTMLDivElement>(null);
  const zone = useZone();
  useEffect(() => {
    const target = holder.current;
    if (!target) return;
    const width = () => Math.max(280, target.clientWidth);
    const unit = props.unit ?? '';
    const shown = (n: number) => `${formatNumber(n, zone.locale)}${unit}`;
    const size: [number, number] = [0.8 / props.lines.length, 28];
    const bars = props.bars ? props.lines.map((_, i) => uPlot.paths.bars!({ size, align: i === 0 ? -1 : 1 })) : [];
    const chart = new uPlot(
      {
        width: width(),
        height: HEIGHT,
        tzDate: (seconds) => chartDate(seconds, zone),
        scales: {
          x: { time: true, range: (_u, min, max) => [min - DAY_S / 2, max + DAY_S / 2] },
          y: { range: (_u, _min, max) => [0, (props.max ?? Math.max(1, max)) * HEADROOM] },
        },
        series: [
          { label: 'Day', value: (_u, seconds) => (seconds === null ? props.span : formatDay(seconds * 1000, zone)) },
          ...props.lines.map((line, i) => ({
            label: line.label,
            stroke: line.color,
            fill: props.bars ? line.color : undefined,
            width: props.bars ? 0 : 2,
            dash: line.dash,
            paths: bars[i],
            points: { show: !props.bars, size: 6 },
            value: (_u: uPlot, v: number | null, _series: number, idx: number | null) =>
              idx === null ? line.overall : v === null ? '—' : shown(v),
          })),
        ],
        axes: [
          {},
          {
            values: (_u, ticks) => ticks.map(shown),
            size: 64,
            incrs: props.max === undefined ? COUNT_STEPS : undefined,
          },
        ],
      },
      [props.times.map((t) => t / 1000), ...props.lines.map((line) => line.values)],
      target,
    );
    const resize = new ResizeObserver(() => chart.setSize({ width: width(), height: HEIGHT }));
    resize.observe(target);
    return () => {
      resize.disconnect();
      chart.destroy();
    };
  }, [props.times, props.lines, zone]);
  return (
    <figure class="chart">
      <figcaption>{props.title}</figcaption>
      <div ref={holder} role="img" aria-label={`${props.title}: ${props.summary}`} />
    </figure>
  );
}
