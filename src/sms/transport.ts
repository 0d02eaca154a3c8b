import type { Receipt } from './receipts.ts';
import type { Segmented } from './segments.ts';

/** The name of SMS_TRANSPORT's connection, or of the sandbox when it is unset (sms/routing/). */
export const DEFAULT_SMSC = 'default';

/** One recipient's message, rendered and segmented, as a transport takes it. */
export interface OutgoingSms {
  accountId: string;
  sendId: string;
  /** Herald's id of the message (a UUID). */
  messageId: string;
  /** E.164 digits. */
  recipient: string;
  sender: string;
  segmented: Segmented;
  /**
   * The text is a secret (isBodyEncrypted): submitted as it is, but kept only sealed wherever
   * the transport keeps it (sealed.ts), and never logged.
   */
  sensitive: boolean;
  /** A code Herald made (Verify): the sandbox keeps it sealed, and its read opens it for the account. */
  opensInSandbox?: boolean;
  /** When its code expires (Verify, epoch ms): from then on it is refused for good, not submitted. */
  validUntil?: number;
  /** Characters smart encoding replaced in its text (sms/smart-encoding.ts), recorded with it. */
  replacedCharacters?: number;
}

/**
 * What became of one message: every part taken (the operator's id of each), or refused —
 * for good (`permanent`, the message is Failed) or for now (it is tried again later).
 */
export type SubmitResult =
  /**
   * `receipts`: any the operator gave with its answer, applied with the result. `smsc`: the
   * connection that took each part, where the transport knows (sms/routing/); else `default`.
   * `pricePerPart`: its route's, in micro-units, where it has one (sms/transports/routed.ts).
   * `submittedAt`: when a part was first submitted (epoch ms), where an earlier try did it; else
   * the submit of this page (its receipts' matching starts then: sms/receipts.ts).
   */
  | {
      accepted: true;
      operatorMessageIds: string[];
      receipts?: Receipt[];
      smsc?: string[];
      pricePerPart?: { micros: number; currency: string };
      submittedAt?: number;
    }
  /**
   * `taken`: parts an SMSC took (answered OK) before another part was refused, each with its
   * number (from 1), the operator's id and the connection; they are billed, the message Failed
   * (docs/sms.md). `pricePerPart`: its route's, as for a message taken whole.
   */
  | {
      accepted: false;
      permanent: boolean;
      error: string;
      errorCode: string | null;
      taken?: Array<{ part: number; operatorMessageId: string; smsc: string }>;
      pricePerPart?: { micros: number; currency: string };
    };

export interface SubmitOptions {
  /** One-time passcodes: sent ahead of campaigns, on the share of the transport's window and rate held for them. */
  urgent?: boolean;
  /**
   * How long the parts wait for a bind while the transport has none up before they are refused
   * for now: a route's connection with another after it gives way sooner (sms/transports/routed.ts).
   */
  noBindPatienceMs?: number;
}

/**
 * A way out for SMS (MESSAGING.md: the pipeline never knows which one it drives). `submit`
 * takes a page of messages and answers a result for each, in order. A transport that keeps
 * what it took is given the database when it is made.
 */
export interface SmsTransport {
  submit(messages: OutgoingSms[], signal: AbortSignal, options?: SubmitOptions): Promise<SubmitResult[]>;
  /** Binds up now, for a transport that binds (GET /admin/smsc shows them); undefined for one that does not. */
  bindsUp?(): number;
  /**
   * True for a transport that records each part's answer as it comes and, given a message again
   * after a crash, submits only the parts never answered (SMPP's journal): what a crash resends
   * is then bounded by what was in flight, not by the pages handed over.
   */
  skipsAnswered?(): boolean;
  close(): Promise<void>;
}

/** A message from a handset, as a transport that receives them hands it over. */
export interface InboundSms {
  /** The handset's number. */
  from: string;
  /** The number (or sender name) it wrote to. */
  to: string;
  text: string;
  /** Epoch ms it was received. */
  at: number;
}

/**
 * Keeps a message from a handset (sms/inbound.ts), given to a transport that receives them when
 * it is made: answers the account it routed to, or null when it routes to none.
 */
export type ReceiveInboundSms = (mo: InboundSms) => Promise<{ accountId: string } | null>;
