import { REPORT_BYTES_READ } from './mail-reports.ts';

/**
 * The first REPORT_BYTES_READ of a mail, copied into one buffer that doubles as it fills from
 * 64 KiB. smtp-server hands on each line it unescapes (`..`) as a chunk of its own: kept as a
 * view of each, a megabyte of `.` lines held 350,000 buffers, some 40 MB of heap a mail, and
 * ten connections of them ran the process out of memory.
 */
export class MailHead {
  private buffer = Buffer.allocUnsafe(64 * 1024);
  private kept = 0;

  add(chunk: Buffer): void {
    const taken = Math.min(chunk.length, REPORT_BYTES_READ - this.kept);
    if (taken <= 0) return;
    if (this.kept + taken > this.buffer.length) {
      const size = Math.min(REPORT_BYTES_READ, Math.max(this.buffer.length * 2, this.kept + taken));
      const grown = Buffer.allocUnsafe(size);
      this.buffer.copy(grown, 0, 0, this.kept);
      this.buffer = grown;
    }
    chunk.copy(this.buffer, this.kept, 0, taken);
    this.kept += taken;
  }

  bytes(): Buffer {
    return this.buffer.subarray(0, this.kept);
  }
}
