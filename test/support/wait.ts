/** Polls `probe` every 10 ms until it gives a value, for at most 10 s (then fails naming `what`). */
export async function waitFor<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
  const until = Date.now() + 10_000;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
