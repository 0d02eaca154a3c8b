import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import assert from 'node:assert/strict';
import { after, afterEach, before } from 'node:test';
import { chromium, type BrowserContext, type Locator, type Page } from 'playwright-core';
import type { DialectName } from '../../src/db/database.ts';
import { startApiTest, type ApiClient, type ApiTest, type ApiTestOptions } from '../support/client.ts';

/** Debian's Chromium, which .ci/run installs; playwright-core brings no browser of its own. */
export const CHROMIUM = '/usr/bin/chromium';

const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Where the test run leaves its screenshots for a reviewer (gitignored). */
export const SCREENSHOTS = new URL('../../test-output/console/', import.meta.url);

/** axe-core's script, evaluated in the page through the DevTools protocol, which the page's CSP does not govern. */
const AXE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export interface BrowserError {
  text: string;
  /** The resource that failed to load, or the page that logged the error. */
  url: string;
}

export interface Browser {
  context: BrowserContext;
  page: Page;
  /** Messages the page logged as errors (a CSP refusal, a failed load among them), with what each concerns. */
  errors: BrowserError[];
  /** Writes the page's screenshot and fails on what axe-core finds against WCAG 2.1 A and AA there. */
  look(name: string): Promise<void>;
  close(): Promise<void>;
}

async function accessibilityViolations(page: Page): Promise<string[]> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE);
  return page.evaluate(async () => {
    const axe = (
      window as unknown as {
        axe: {
          run(
            context: unknown,
            options: unknown,
          ): Promise<{ violations: Array<{ id: string; help: string; nodes: Array<{ target: unknown[] }> }> }>;
        };
      }
    ).axe;
    const { violations } = await axe.run(document, {
      runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] },
    });
    return violations.map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`);
  });
}

/** Chromium headless with a fresh profile, one page open; `prefix` starts each screenshot's name. */
export async function launchBrowser(prefix: string): Promise<Browser> {
  if (!existsSync(CHROMIUM)) {
    const install = 'install it with `apt-get install -y chromium` (.ci/run does)';
    throw new Error(`The console's browser test needs Chromium at ${CHROMIUM}: ${install}.`);
  }
  if (!existsSync(new URL('../../web/dist/index.html', import.meta.url))) {
    throw new Error('The console is not built: `npm ci` builds it (its prepare script runs `vite build web`).');
  }
  const profile = mkdtempSync(join(tmpdir(), 'herald-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ARGS,
    acceptDownloads: true,
    viewport: { width: 1280, height: 900 },
  });
  // Well under node:test's own limits, so a missing element fails with its locator named.
  context.setDefaultTimeout(10_000);
  const page = context.pages()[0] ?? (await context.newPage());
  const errors: BrowserError[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push({ text: message.text(), url: message.location().url });
  });
  page.on('pageerror', (error) => errors.push({ text: error.message, url: page.url() }));
  mkdirSync(SCREENSHOTS, { recursive: true });
  return {
    context,
    page,
    errors,
    async look(name) {
      await page.screenshot({ path: new URL(`${prefix}-${name}.png`, SCREENSHOTS).pathname, fullPage: true });
      const violations = await accessibilityViolations(page);
      if (violations.length > 0) throw new Error(`The ${name} page breaks WCAG 2.1 AA:\n${violations.join('\n')}`);
    },
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/**
 * Fails on what the page logged as errors since the last call, but the failed loads of the
 * paths (`refused`, under `base`) the test itself had answered with an error.
 */
export function assertNoUnaskedErrors(browser: Browser, base: string, refused: readonly string[]): void {
  const asked = refused.map((path) => `${base}${path}`);
  const askedFor = (error: BrowserError) =>
    error.text.startsWith('Failed to load resource') && asked.includes(error.url);
  const unasked = browser.errors.splice(0).filter((error) => !askedFor(error));
  assert.deepEqual(unasked, [], 'no script error, CSP refusal or failed load');
}

/** The console's locators by role, on the page and at the base the suite's `before` sets. */
export function consoleLocators(page: () => Page, base: () => string) {
  const heading = (name: string) => page().getByRole('heading', { name, exact: true, level: 1 });
  /**
   * Waits for the page titled `title` and for any part of it loaded after it: a part that loads
   * while a button below it is clicked moves the button between the press and the release, and
   * the click is lost.
   */
  const shown = async (title: string) => {
    await heading(title).waitFor();
    await page()
      .getByRole('status')
      .filter({ hasText: /^Loading/ })
      .first()
      .waitFor({ state: 'detached' });
  };
  return {
    heading,
    shown,
    table: (name: string) => page().getByRole('table', { name, exact: true }),
    row: (of: Locator, text: string) => of.getByRole('row').filter({ hasText: text }),
    async open(path: string, title: string) {
      await page().goto(`${base()}/console${path}`);
      await shown(title);
    },
  };
}

/** What a console suite's tests read and do through `consoleSession`, once its `before` has run. */
export interface ConsoleSession extends ReturnType<typeof consoleLocators> {
  readonly api: ApiTest;
  /** Where the console's listener is, `http://127.0.0.1:<port>`. */
  readonly base: string;
  /** The account the browser signs in as. */
  readonly alice: ApiClient;
  readonly browser: Browser;
  readonly page: Page;
  /** Lets the running test's page fail to load these paths (under `base`): the test asked for the error. */
  refuse(...paths: string[]): void;
  /** Signs Alice in at the sign-in page, letting its read of the session (made before she is signed in) fail. */
  signIn(): Promise<void>;
}

/**
 * A console suite's set-up, its hooks registered in the calling `describe` (a `forEachDatabase`
 * body): before its tests, the API on a fresh database listening on a free port, Alice's account
 * and Chromium (screenshots named from `screenshotPrefix`); after each test, a failure on what the
 * page logged as errors but the refusals it asked for with `refuse`; after them all, both closed.
 * A suite's own set-up goes in a `before` of its own, registered after this call: node:test runs
 * it after this one, once `api` and `alice` exist.
 */
export function consoleSession(
  dialect: DialectName,
  screenshotPrefix: string,
  options: ApiTestOptions,
): ConsoleSession {
  let api: ApiTest | undefined;
  let base: string | undefined;
  let alice: ApiClient | undefined;
  let browser: Browser | undefined;
  /** Paths the running test is refused on purpose (a wrong password, a 409): the browser logs each. */
  let refused: string[] = [];

  before(async () => {
    api = await startApiTest(dialect, options);
    await api.t.app.listen({ host: '127.0.0.1', port: 0 });
    base = `http://127.0.0.1:${(api.t.app.server.address() as AddressInfo).port}`;
    alice = await api.client();
    browser = await launchBrowser(screenshotPrefix);
  });
  afterEach(() => {
    assertNoUnaskedErrors(session.browser, session.base, refused);
    refused = [];
  });
  after(async () => {
    await browser?.close();
    await api?.close();
  });

  const session: ConsoleSession = {
    ...consoleLocators(
      () => session.page,
      () => session.base,
    ),
    get api() {
      return setUp(api, 'api');
    },
    get base() {
      return setUp(base, 'base');
    },
    get alice() {
      return setUp(alice, 'alice');
    },
    get browser() {
      return setUp(browser, 'browser');
    },
    get page() {
      return session.browser.page;
    },
    refuse(...paths: string[]) {
      refused.push(...paths);
    },
    async signIn() {
      session.refuse('/console/session');
      const { page } = session;
      const { account } = session.alice;
      await page.goto(`${session.base}/console/`);
      await page.getByLabel('User name').fill(account.userName);
      await page.getByLabel('Password').fill(account.password);
      await page.getByLabel('Private token').fill(account.privateToken);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await session.heading('Overview').waitFor();
    },
  };
  return session;
}

/** A value `consoleSession`'s `before` sets, read too early (at the suite's top level) with its name. */
function setUp<T>(value: T | undefined, name: string): T {
  if (value === undefined) throw new Error(`The console session's ${name} exists once its \`before\` has run.`);
  return value;
}
