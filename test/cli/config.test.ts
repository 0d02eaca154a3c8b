import assert from 'node:assert/strict';
import { availableParallelism } from 'node:os';
import { it } from 'node:test';
import { ConfigError, loadConfig } from '../../src/config.ts';

it('defaults to SQLite under ./data, the sandbox-free settings and loopback', () => {
  const config = loadConfig({});
  assert.equal(config.databaseUrl, 'sqlite:./data/herald.db');
  assert.equal(config.port, 8080);
  assert.equal(config.host, '127.0.0.1');
  assert.equal(config.workerPort, 8081);
  assert.equal(config.publicUrl, 'http://localhost:8080');
  assert.equal(config.adminToken, undefined);
  assert.equal(config.webhookAllowPrivate, false);
  assert.equal(config.shutdownGraceSeconds, 30);
  assert.equal(config.retentionDays, 30);
});

it(
  'takes BOUNCE_DOMAIN as DEFAULT_EMAIL_DOMAIN unless set, and leaves the inbound SMTP listener off unless ' +
    'INBOUND_SMTP_PORT is set',
  () => {
    assert.equal(loadConfig({ DEFAULT_EMAIL_DOMAIN: 'Mail.Example.com' }).bounceDomain, 'mail.example.com');
    assert.equal(loadConfig({ BOUNCE_DOMAIN: 'Bounces.Example.com' }).bounceDomain, 'bounces.example.com');
    assert.equal(loadConfig({}).inboundSmtpPort, undefined);
    assert.equal(loadConfig({ INBOUND_SMTP_PORT: '2525' }).inboundSmtpPort, 2525);
  },
);

it(
  "renders email on one thread a core but the event loop's, one to four, unless EMAIL_RENDER_THREADS says how " +
    'many',
  () => {
    assert.equal(loadConfig({}).emailRenderThreads, Math.max(1, Math.min(4, availableParallelism() - 1)));
    assert.equal(loadConfig({ EMAIL_RENDER_THREADS: '1' }).emailRenderThreads, 1);
  },
);

it('takes RETENTION_DAYS as a whole number of days from 1', () => {
  assert.equal(loadConfig({ RETENTION_DAYS: '1' }).retentionDays, 1);
  assert.equal(loadConfig({ RETENTION_DAYS: '365' }).retentionDays, 365);
});

it('defaults PUBLIC_URL to where the listener answers: localhost at PORT, or HOST when it names one address', () => {
  const publicUrl = (env: Record<string, string>) => loadConfig(env).publicUrl;
  assert.equal(publicUrl({ PORT: '3000' }), 'http://localhost:3000');
  assert.equal(publicUrl({ HOST: '0.0.0.0', PORT: '9000' }), 'http://localhost:9000');
  assert.equal(publicUrl({ HOST: '::' }), 'http://localhost:8080');
  assert.equal(publicUrl({ HOST: '::1', PORT: '8443' }), 'http://localhost:8443');
  assert.equal(publicUrl({ HOST: '10.1.2.3', PORT: '3000' }), 'http://10.1.2.3:3000');
  assert.equal(publicUrl({ HOST: '2001:db8::5' }), 'http://[2001:db8::5]:8080');
  assert.equal(publicUrl({ HOST: 'herald.internal', PORT: '80' }), 'http://herald.internal:80');
  assert.equal(publicUrl({ HOST: '10.1.2.3', PUBLIC_URL: 'https://herald.example/' }), 'https://herald.example');
});

it("takes TRUST_PROXY as true, false, or the proxies' addresses and CIDRs", () => {
  assert.equal(loadConfig({}).trustProxy, false);
  assert.equal(loadConfig({ TRUST_PROXY: 'TRUE' }).trustProxy, true);
  const proxies = loadConfig({ TRUST_PROXY: 'loopback, 10.0.0.0/8,2001:db8::/32' }).trustProxy;
  assert.deepEqual(proxies, ['loopback', '10.0.0.0/8', '2001:db8::/32']);
});

const bad: Array<[string, string]> = [
  ['TRUST_PROXY', 'yes'],
  ['TRUST_PROXY', '10.0.0.0/33'],
  ['TRUST_PROXY', 'proxy.example.com'],
  ['PORT', 'eighty'],
  ['PORT', '70000'],
  ['WORKER_PORT', 'eighty-one'],
  ['DATABASE_URL', 'mysql://localhost/herald'],
  ['REDIS_URL', 'localhost:6379'],
  ['PUBLIC_URL', 'ftp://example.com'],
  ['JWT_SECRET', 'too-short'],
  ['ADMIN_TOKEN', 'short'],
  ['WEBHOOK_ALLOW_PRIVATE', 'yes please'],
  ['DEFAULT_SENDER_NAME', 'WAY-TOO-LONG-NAME'],
  ['DEFAULT_EMAIL_DOMAIN', 'not a domain'],
  ['BOUNCE_DOMAIN', 'bounces@example.com'],
  ['INBOUND_SMTP_PORT', '25a'],
  ['EMAIL_RENDER_THREADS', '0'],
  ['EMAIL_RENDER_THREADS', 'all'],
  ['INBOUND_SMTP_PORT', '65536'],
  ['BODY_LIMIT_BYTES', '12'],
  ['LOG_LEVEL', 'loud'],
  ['SHUTDOWN_GRACE_SECONDS', 'soon'],
  ['ENCRYPTION_KEY', 'ab'.repeat(31)],
  ['ENCRYPTION_KEY', `${'ab'.repeat(32)}0`],
  ['ENCRYPTION_KEY', 'zz'.repeat(32)],
  ['RETENTION_DAYS', '0'],
  ['RETENTION_DAYS', '1.5'],
  ['RETENTION_DAYS', '-3'],
  ['RETENTION_DAYS', 'a month'],
];
for (const [variable, value] of bad) {
  it(`stops on ${variable}=${value} naming the variable`, () => {
    assert.throws(
      () => loadConfig({ [variable]: value }),
      (error: unknown) =>
        error instanceof ConfigError && error.variable === variable && error.message.startsWith(`invalid ${variable}:`),
    );
  });
}

it('names a URL it refuses without the password in it', () => {
  for (const [variable, value] of [
    ['DATABASE_URL', 'postgress://herald:S3cr/et@db/herald'],
    ['REDIS_URL', 'redis//:S3cr/et@cache:6379'],
    ['REDIS_URL', 'rediss://:S3cr/et@cache:6379 x'],
    ['DATABASE_URL', 'herald:S3cret@db/herald'],
    ['REDIS_URL', ':S3cret@cache:6379'],
    ['EMAIL_TRANSPORT', 'SMTP://mailer:Pa@S3cret@relay:25'],
    ['SMS_TRANSPORT', 'SMPP://sysid:Ab@S3cret@host:2775'],
    ['SMS_TRANSPORT', 'smpp://sysid:Ab@S3cret@host:2775?window=0'],
    ['DATABASE_URL', 'host=db user=herald password=S3cret dbname=herald'],
    ['DATABASE_URL', "host=db password = 'S3cret pw' dbname=herald"],
    ['DATABASE_URL', 'postgress://db/herald?sslmode=require&password=S3cret'],
  ]) {
    assert.throws(
      () => loadConfig({ [variable]: value }),
      (error: unknown) => error instanceof ConfigError && !error.message.includes('S3cr'),
      value,
    );
  }
});

it(
  'takes ENCRYPTION_KEY_PREVIOUS as keys separated by commas beside ENCRYPTION_KEY, and stops on a malformed one ' +
    'or one without ENCRYPTION_KEY',
  () => {
    const [current, old, older] = ['ab'.repeat(32), 'cd'.repeat(32), 'ef'.repeat(32)];
    const config = loadConfig({ ENCRYPTION_KEY: current, ENCRYPTION_KEY_PREVIOUS: `${old}, ${older}` });
    assert.deepEqual(
      config.previousEncryptionKeys.map((key) => key.export().toString('hex')),
      [old, older],
    );
    assert.deepEqual(loadConfig({ ENCRYPTION_KEY: current }).previousEncryptionKeys, []);
    const named = (error: unknown) =>
      error instanceof ConfigError &&
      error.message.includes('ENCRYPTION_KEY_PREVIOUS') &&
      !error.message.includes('cd'.repeat(8));
    assert.throws(
      () => loadConfig({ ENCRYPTION_KEY: current, ENCRYPTION_KEY_PREVIOUS: `${old},${'cd'.repeat(31)}` }),
      named,
    );
    assert.throws(() => loadConfig({ ENCRYPTION_KEY_PREVIOUS: old }), named);
  },
);

it('never repeats a malformed ENCRYPTION_KEY in its message: it is a secret, and messages land in logs', () => {
  const almost = `${'c0ffee'.repeat(10)}c0f`;
  assert.throws(
    () => loadConfig({ ENCRYPTION_KEY: almost }),
    (error: unknown) => error instanceof ConfigError && !error.message.includes('c0ffee'),
  );
});
