/**
 * Sends `count` mails of `megabytes` of short lines at once to `to` on 127.0.0.1:`port`, as a
 * sender would put them on the wire (no line starts with a dot, so none needs stuffing), and
 * prints the answers to their data as a JSON array of codes. Run as a process of its own:
 * `node raw-mails.ts <port> <to> <count> <megabytes>`.
 */
import { connect } from 'node:net';

const [port, to, count, megabytes] = process.argv.slice(2);
const data = Buffer.concat([
  Buffer.from('Subject: big\r\n\r\n'),
  Buffer.alloc(Number(megabytes) * 1024 * 1024, 'x\r\n'),
  Buffer.from('\r\n.\r\n'),
]);

/** The code of the answer to the mail's data; rejects if the connection ends before it. */
function mail(): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1');
    let answers = '';
    let step = 0;
    socket.on('error', reject);
    socket.on('close', () => reject(new Error('the connection ended before the answer')));
    socket.on('data', (chunk: Buffer) => {
      answers += chunk.toString();
      const codes = answers.match(/^\d{3} /gm) ?? [];
      // The greeting, then EHLO's, MAIL's, RCPT's and DATA's answers, then the data's.
      if (step === 0 && codes.length >= 1) {
        step = 1;
        socket.write(`EHLO sender.example\r\nMAIL FROM:<>\r\nRCPT TO:<${to}>\r\nDATA\r\n`);
      } else if (step === 1 && codes.length >= 5) {
        step = 2;
        socket.write(data);
      } else if (step === 2 && codes.length >= 6) {
        resolve(codes[5].trim());
        socket.destroy();
      }
    });
  });
}

console.log(JSON.stringify(await Promise.all(Array.from({ length: Number(count) }, mail))));
