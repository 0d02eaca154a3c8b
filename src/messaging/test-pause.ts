/**
 * A hook for the crash tests (the SMS issue: "a test-only environment hook may pause it at a
 * named step, so the kill lands there"): with HERALD_TEST_PAUSE_AT set to a step's name, the
 * work stops there for good, after one line on stdout saying so, until the test kills the
 * process. Unset, it costs one comparison.
 */
export async function pauseForTest(step: string): Promise<void> {
  if (process.env.HERALD_TEST_PAUSE_AT !== step) return;
  process.stdout.write(`herald paused at ${step}\n`);
  await new Promise(() => {});
}
