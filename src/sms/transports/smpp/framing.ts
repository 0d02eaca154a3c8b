import smpp from 'smpp';

type Pdu = InstanceType<typeof smpp.PDU>;

/** A PDU whose header was read but not its body: what the SMSC sent cannot be decoded as its command. */
export interface UndecodablePdu extends Pdu {
  undecodable: { reason: string; firstBytes: string };
}

export const isUndecodable = (pdu: Pdu): pdu is UndecodablePdu => 'undecodable' in pdu;

const HEADER_BYTES = 16;

/**
 * The `smpp` package, given a PDU it cannot decode, emits an error and reads nothing more from
 * the connection, and given a command_length under a header's 16 bytes, reads a length of 0 as
 * "not yet" and waits for ever. Either way the bind had to go, and every submit on it was sent
 * again on the next one, which met the same PDU (an SMSC offers an unanswered deliver_sm again):
 * one message went out dozens of times. Installed once, for every session of the process:
 * a length under 16 is an error (the link goes, as it cannot be framed); a body that does not
 * decode, its framing intact, becomes a PDU of its header alone, which the bind answers with an
 * error and the link stays.
 */
function readPdusTolerantly(): void {
  const commandLength = smpp.PDU.commandLength;
  smpp.PDU.commandLength = (stream) => {
    const length = commandLength(stream);
    if (length !== false && length < HEADER_BYTES)
      throw new Error(`PDU length was too small (${length}; a header alone is ${HEADER_BYTES})`);
    return length;
  };
  smpp.PDU.fromStream = (stream, length) => {
    const rest = stream.read(length - 4) as Buffer | null;
    if (!rest) return false;
    const head = Buffer.alloc(4);
    head.writeUInt32BE(length);
    const bytes = Buffer.concat([head, rest]);
    try {
      return new smpp.PDU(bytes);
    } catch (error) {
      const pdu = Object.create(smpp.PDU.prototype) as UndecodablePdu;
      pdu.command_id = bytes.readUInt32BE(4);
      pdu.command_status = bytes.readUInt32BE(8);
      pdu.sequence_number = bytes.readUInt32BE(12);
      pdu.command = smpp.commandsById[pdu.command_id]?.command ?? 'unknown';
      pdu.undecodable = { reason: (error as Error).message, firstBytes: bytes.subarray(0, 64).toString('hex') };
      return pdu;
    }
  };
}

readPdusTolerantly();
