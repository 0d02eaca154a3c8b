/**
 * What a submit_sm_resp's command_status (SMPP 3.4 §5.1.3) means for the message: the SMSC
 * asks Herald to slow down (the part is sent again on the same terms), refuses it for now (the
 * queue tries the message again later), or refuses it for good (the message is Failed).
 */
export type Refusal = 'slow down' | 'for now' | 'for good';

export const ESME_ROK = 0x00;
const ESME_RMSGQFUL = 0x14;
const ESME_RTHROTTLED = 0x58;

/** Statuses a later try can get past: the SMSC's state, not the message's. Any other refusal is for good. */
const FOR_NOW = new Set([
  0x04, // ESME_RINVBNDSTS: the bind is not in a state to submit (it is being rebuilt)
  0x08, // ESME_RSYSERR
  0x45, // ESME_RSUBMITFAIL
  0x64, // ESME_RX_T_APPN: temporary application error
  0xfe, // ESME_RDELIVERYFAILURE (SMPP 3.4 §5.1.3: "transaction delivery failure")
  0xff, // ESME_RUNKNOWNERR
]);

export function refusalOf(status: number): Refusal {
  if (status === ESME_RTHROTTLED || status === ESME_RMSGQFUL) return 'slow down';
  return FOR_NOW.has(status) ? 'for now' : 'for good';
}

/** How a status reads in an error code: 0x0000000B, as SMPP 3.4 writes them. */
export const statusCode = (status: number) => `0x${status.toString(16).toUpperCase().padStart(8, '0')}`;

/**
 * The temporary application error a deliver_sm is answered with when its receipt could not be kept:
 * the SMSC offers it again.
 */
export const ESME_RX_T_APPN = 0x64;
