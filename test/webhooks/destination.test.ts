import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  alwaysRefused,
  blockedCategory,
  patientResolver,
  RefusedDestination,
  rememberedRefusals,
  vetDestination,
  webhookUrlRefusal,
  type Resolver,
} from '../../src/webhooks/destination.ts';

const ONLY_PUBLIC = '; webhooks are only posted to public addresses (unless the service sets WEBHOOK_ALLOW_PRIVATE)';

const resolveTo =
  (...addresses: string[]): Resolver =>
  async () =>
    addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));

describe('the server-side request forgery guard', () => {
  const refused: Array<[string, string]> = [
    ['127.0.0.1', 'loopback'],
    ['127.255.0.9', 'loopback'],
    ['::1', 'loopback'],
    ['0.0.0.0', '"this network"'],
    ['::', '"this network"'],
    ['10.0.0.1', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.254', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'carrier-grade NAT'],
    ['169.254.169.254', 'link-local'],
    ['fe80::1', 'link-local'],
    ['fd12:3456::1', 'unique-local'],
    ['224.0.0.1', 'multicast'],
    ['ff02::1', 'multicast'],
    ['255.255.255.255', 'broadcast'],
    ['240.0.0.1', 'reserved'],
    ['198.18.0.1', 'reserved'], // RFC 2544 benchmarking
    ['198.19.255.254', 'reserved'],
    ['192.0.2.1', 'reserved'], // RFC 5737 documentation
    ['fec0::1', 'site-local'],
    ['64:ff9b::7f00:1', 'NAT64'], // RFC 6052: 127.0.0.1 through a NAT64 gateway
    ['64:ff9b:1::a00:1', 'NAT64'], // RFC 8215
    ['2002:7f00:1::1', '6to4'], // RFC 3056: 127.0.0.1 behind a 6to4 relay
    ['::7f00:1', 'IPv4-compatible'], // RFC 4291: 127.0.0.1, unwrapped by an automatic tunnel
    ['::a00:1', 'IPv4-compatible'],
    ['2001::a9fe:a9fe', 'Teredo'],
    ['2001:db8::1', 'reserved'],
    ['2001:2::1', 'benchmarking'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:a9fe:a9fe', 'link-local'],
    ['::ffff:10.0.0.1', 'private'],
  ];
  for (const [address, category] of refused) {
    it(`refuses ${address} as ${category}`, () => assert.equal(blockedCategory(address), category));
  }

  for (const address of [
    '93.184.215.14',
    '172.32.0.1',
    '100.128.0.1',
    '198.20.0.1',
    '8.8.8.8',
    '2606:4700:4700::1111',
    '::ffff:8.8.8.8',
    '2a00:1450:4001::1',
  ]) {
    it(`lets the public address ${address} through`, () => assert.equal(blockedCategory(address), undefined));
  }

  it('refuses a host name when any one of its addresses is not public', async () => {
    await assert.rejects(
      vetDestination('https://hooks.example.com/in', {
        allowPrivate: false,
        resolve: resolveTo('93.184.215.14', '10.0.0.1'),
      }),
      (error: Error) =>
        error instanceof RefusedDestination &&
        /hooks\.example\.com resolves to 10\.0\.0\.1, which is a private address/.test(error.message),
    );
  });

  it('refuses literal addresses, bracketed IPv6 included, without asking DNS', async () => {
    const resolve: Resolver = async () => assert.fail('a literal address must not be resolved');
    for (const url of [
      'http://127.0.0.1:8080/',
      'http://[::1]/',
      'http://169.254.169.254/latest/meta-data/',
      'http://[::ffff:127.0.0.1]/',
    ]) {
      await assert.rejects(vetDestination(url, { allowPrivate: false, resolve }), RefusedDestination, url);
    }
  });

  it('refuses URLs that are not http or https', async () => {
    for (const url of ['ftp://example.com/', 'file:///etc/passwd', 'not a url']) {
      await assert.rejects(
        vetDestination(url, { allowPrivate: false, resolve: resolveTo('93.184.215.14') }),
        RefusedDestination,
        url,
      );
    }
  });

  it('returns every vetted address, and allows private ones when told to', async () => {
    const publicOnes = await vetDestination('https://hooks.example.com/', {
      allowPrivate: false,
      resolve: resolveTo('93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'),
    });
    assert.deepEqual(
      publicOnes.addresses.map((a) => a.address),
      ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'],
    );
    const privateOnes = await vetDestination('http://localhost:9/', {
      allowPrivate: true,
      resolve: resolveTo('127.0.0.1'),
    });
    assert.deepEqual(privateOnes.addresses, [{ address: '127.0.0.1', family: 4 }]);
  });

  describe('cloud metadata services, refused even with WEBHOOK_ALLOW_PRIVATE=true', () => {
    const metadata = [
      '169.254.169.254',
      '169.254.0.1',
      'fe80::1',
      'fd00:ec2::254',
      '100.100.100.200',
      '::ffff:169.254.169.254',
      '::ffff:100.100.100.200',
      '64:ff9b::a9fe:a9fe',
      '64:ff9b:1::a9fe:a9fe',
      '::a9fe:a9fe',
      '2002:a9fe:a9fe::1',
      '::ffff:0:a9fe:a9fe',
      '2001:0:4136:e378:8000:63bf:5601:5601',
    ];
    for (const address of metadata) it(`never posts to ${address}`, () => assert.ok(alwaysRefused(address), address));
    for (const address of ['10.0.0.1', '127.0.0.1', '::1', 'fd12:3456::1', '100.64.0.1', '8.8.8.8']) {
      it(`leaves ${address} to the public-address rule`, () => assert.equal(alwaysRefused(address), undefined));
    }

    const allowPrivate = { allowPrivate: true, resolve: resolveTo('10.0.0.1') };
    it('refuses the literal addresses, a name resolving to one, and metadata.google.internal unresolved', async () => {
      const literals = ['http://169.254.169.254/', 'http://[fd00:ec2::254]/', 'http://100.100.100.200/'];
      const never = /never posted there, whatever WEBHOOK_ALLOW_PRIVATE says/;
      for (const url of [...literals, 'http://[::ffff:a9fe:a9fe]/']) {
        await assert.rejects(vetDestination(url, allowPrivate), never, url);
      }
      await assert.rejects(
        vetDestination('http://imds.example/', { ...allowPrivate, resolve: resolveTo('10.0.0.1', '169.254.169.254') }),
        /imds\.example resolves to 169\.254\.169\.254, which is a link-local address/,
      );
      const unresolved: Resolver = async () => assert.fail('metadata.google.internal must not be resolved');
      for (const url of ['http://metadata.google.internal/computeMetadata/v1/', 'http://METADATA.google.internal./']) {
        const refused = /metadata\.google\.internal\.? is a cloud metadata service/;
        await assert.rejects(vetDestination(url, { allowPrivate: true, resolve: unresolved }), refused, url);
      }
      const [allowed] = (await vetDestination('http://10.0.0.1/', allowPrivate)).addresses;
      assert.equal(allowed.address, '10.0.0.1', 'other private addresses are allowed');
    });
  });

  describe('checked when a request names the URL', () => {
    const options = { allowPrivate: false, resolve: resolveTo('93.184.215.14') };

    it('names what is refused: loopback, localhost, metadata service, hexadecimal IPv4', async () => {
      assert.equal(
        await webhookUrlRefusal('http://127.0.0.1/in', options),
        `127.0.0.1 is a loopback address${ONLY_PUBLIC}`,
      );
      assert.match((await webhookUrlRefusal('http://[::1]:8080/', options))!, /::1 is a loopback address/);
      assert.match((await webhookUrlRefusal('http://169.254.169.254/latest/', options))!, /link-local/);
      // The WHATWG URL parser reads 0x7f000001 as 127.0.0.1, as a connection would.
      assert.match((await webhookUrlRefusal('http://0x7f000001/', options))!, /127\.0\.0\.1 is a loopback address/);
      const localhost = await webhookUrlRefusal('http://localhost:9/', {
        allowPrivate: false,
        resolve: resolveTo('127.0.0.1', '::1'),
      });
      assert.match(localhost!, /localhost resolves to 127\.0\.0\.1, which is a loopback address/);
    });

    it('lets a public URL through, and a private one when private addresses are allowed', async () => {
      assert.equal(await webhookUrlRefusal('https://hooks.example.com/in', options), undefined);
      assert.equal(await webhookUrlRefusal('http://127.0.0.1:9/', { ...options, allowPrivate: true }), undefined);
    });

    it('refuses a name with no address, but leaves a lookup that failed for another reason to delivery', async () => {
      const failing =
        (code: string): Resolver =>
        async () => {
          throw Object.assign(new Error(code), { code });
        };
      assert.equal(
        await webhookUrlRefusal('https://nowhere.example/', { allowPrivate: false, resolve: failing('ENOTFOUND') }),
        'nowhere.example has no address in DNS',
      );
      assert.equal(
        await webhookUrlRefusal('https://slow.example/', { allowPrivate: false, resolve: failing('EAI_AGAIN') }),
        undefined,
      );
    });

    it("remembers a request's verdict on a host for 30 s, not beyond", async () => {
      const asked: string[] = [];
      let answer = '93.184.215.14';
      const resolve: Resolver = async (host) => {
        asked.push(host);
        return [{ address: answer, family: 4 }];
      };
      let now = 0;
      const refusal = rememberedRefusals({ allowPrivate: false, resolve }, () => now);
      assert.equal(await refusal('https://hooks.example/a'), undefined);
      answer = '10.0.0.1';
      assert.equal(
        await refusal('https://hooks.example/b?c=1'),
        undefined,
        'the same host within 30 s: not asked again',
      );
      assert.equal(
        await refusal('https://other.example/'),
        `other.example resolves to 10.0.0.1, which is a private address${ONLY_PUBLIC}`,
      );
      now = 30_000;
      assert.equal(
        await refusal('https://hooks.example/a'),
        `hooks.example resolves to 10.0.0.1, which is a private address${ONLY_PUBLIC}`,
      );
      assert.deepEqual(asked, ['hooks.example', 'other.example', 'hooks.example']);
    });
  });
});

describe('a webhook host whose DNS does not answer', () => {
  it('is given up on after the patience, and its URL passes the request’s check to be tried at delivery', async () => {
    const silent = patientResolver(() => new Promise(() => {}), 50);
    const started = performance.now();
    await assert.rejects(silent('hooks.example.com'), (error: NodeJS.ErrnoException) => error.code === 'ETIMEOUT');
    assert.ok(performance.now() - started < 1_000);
    assert.equal(
      await webhookUrlRefusal('https://hooks.example.com/in', { allowPrivate: false, resolve: silent }),
      undefined,
    );
    const answering = patientResolver(async () => [{ address: '93.184.215.14', family: 4 }], 50);
    assert.deepEqual(await answering('hooks.example.com'), [{ address: '93.184.215.14', family: 4 }]);
  });
});
