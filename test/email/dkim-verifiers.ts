import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';

// Verifiers of DKIM signatures we did not write, each given the record Herald says to publish.

/** A DKIM record as Herald answers it (GET /admin/dkim, a sender domain's): the TXT record to publish. */
export interface DkimRecord {
  selector: string;
  recordName: string;
  recordValue: string;
}

/**
 * The verdict of mailauth (a verifier we did not write) with `record` as the only TXT record in
 * DNS, following RFC 6376 to the letter (strict: its lenient mode calls a body that does not
 * match its hash neutral, not fail).
 */
export async function mailauthVerdict(
  raw: string,
  record: DkimRecord,
): Promise<{ status: string; domain: string; selector: string; signedHeaders: string[] }> {
  const { results } = await dkimVerify(Buffer.from(raw), {
    strict: true,
    resolver: async (name: string, type: string) => {
      if (type !== 'TXT' || name !== record.recordName)
        throw Object.assign(new Error(`no ${type} record at ${name}`), { code: 'ENOTFOUND' });
      return [[record.recordValue]];
    },
  });
  assert.equal(results.length, 1, 'one DKIM-Signature');
  const [{ status, signingDomain, selector, signingHeaders }] = results;
  assert.ok(signingDomain && selector && signingHeaders, 'a signature mailauth could read');
  return {
    status: status.result,
    domain: signingDomain,
    selector,
    signedHeaders: signingHeaders.keys.split(':').map((k) => k.trim().toLowerCase()),
  };
}

/**
 * The verdict of Debian's python3-dkim (dkimpy), a second verifier we did not write, given the
 * record: "pass" or "fail". Its DNS function answers only the record's own name.
 */
export async function dkimpyVerdict(raw: string, record: DkimRecord): Promise<string> {
  const script = `
import sys, dkim
name, value = sys.argv[1].encode(), sys.argv[2].encode()
def txt(query, timeout=5):
    return value if query.rstrip(b'.') == name else None
print('pass' if dkim.verify(sys.stdin.buffer.read(), dnsfunc=txt) else 'fail')
`;
  const child = promisify(execFile)('/usr/bin/python3', ['-c', script, record.recordName, record.recordValue]);
  child.child.stdin!.end(raw);
  return (await child).stdout.trim();
}
