const BASE_MS = 1000;
const CAP_MS = 60 * 60_000;

/**
 * The wait before attempt `attempt + 1` after attempt `attempt` failed: 1 s doubling to
 * at most an hour, then ±25 % jitter so that jobs which failed together (a dependency
 * down) do not come back together. A pure function of the attempt and a number in [0, 1).
 */
export function retryDelayMs(attempt: number, random: number): number {
  const exponential = Math.min(CAP_MS, BASE_MS * 2 ** Math.min(attempt - 1, 32));
  return Math.round(exponential * (0.75 + 0.5 * random));
}
