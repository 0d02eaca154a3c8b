import { useEffect, useRef } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { chartDate } from '../time.ts';
import { useZone } from './zone.tsx';

export interface Line {
  label: string;
  values: Array<number | null>;
  color: string;
  /** Dashes tell lines apart without their colour. */
  dash?: number[];
}

/**
 * A line chart over time (uPlot) in a figure with its caption; it follows its container's
 * width. `times`: instants in ms; `unit` is added to the values in the legend.
 */
export function TimeChart(props: { title: string; summary: string; times: number[]; lines: Line[]; unit?: string; max?: number }) {
  const holder = useRef<HTMLDivElement>(null);
  const zone = useZone();
  useEffect(() => {
    const target = holder.current;
    if (!target) return;
    const width = () => Math.max(280, target.clientWidth);
    const unit = props.unit ?? '';
    const chart = new uPlot(
      {
        width: width(),
        height: 240,
        tzDate: (seconds) => chartDate(seconds, zone),
        scales: { x: { time: true }, y: props.max === undefined ? { range: (_u, _min, max) => [0, Math.max(1, max)] } : { range: [0, props.max] } },
        series: [
          {},
          ...props.lines.map((line) => ({
            label: line.label,
            stroke: line.color,
            width: 2,
            dash: line.dash,
            points: { show: true, size: 5 },
            value: (_u: uPlot, v: number | null) => (v === null ? '—' : `${Number.isInteger(v) ? v : v.toFixed(1)}${unit}`),
          })),
        ],
        axes: [{}, { values: (_u, ticks) => ticks.map((t) => `${t}${unit}`), size: 56 }],
      },
      [props.times.map((t) => t / 1000), ...props.lines.map((line) => line.values)],
      target,
    );
    const resize = new ResizeObserver(() => chart.setSize({ width: width(), height: 240 }));
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
