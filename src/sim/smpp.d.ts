/**
 * The part of the `smpp` package (0.5.x, plain JavaScript without declarations) that Herald
 * uses. PDU fields keep the package's snake_case names, which are SMPP 3.4's.
 */
declare module 'smpp' {
  import type { EventEmitter } from 'node:events';
  import type { Server, Socket } from 'node:net';

  namespace smpp {
    /** A PDU's fields: mandatory parameters and TLVs by their SMPP names. */
    type Fields = Record<string, unknown>;

    /** A short_message or message_payload as the package decodes it. */
    interface DecodedMessage {
      udh?: Buffer[];
      message: string | Buffer;
    }

    class PDU {
      /**
       * A PDU to send. With a non-zero command_status the body is left out (SMPP 3.4 §3.3:
       * an error response carries the header only). A Buffer short_message goes out as is;
       * a string is encoded by data_coding, so always set it.
       */
      constructor(command: string, fields?: Fields);
      /** A PDU read from its bytes (header and body). */
      constructor(bytes: Buffer);
      /** The next PDU's command_length, read from the stream's first 4 bytes; false until they came. */
      static commandLength(stream: NodeJS.ReadableStream): number | false;
      /** The PDU whose command_length was read, once its other bytes came; false until then. */
      static fromStream(stream: NodeJS.ReadableStream, commandLength: number): PDU | false;
      command: string;
      command_id: number;
      command_status: number;
      sequence_number: number;
      message_id?: string;
      system_id?: string;
      source_addr?: string;
      source_addr_ton?: number;
      source_addr_npi?: number;
      destination_addr?: string;
      dest_addr_ton?: number;
      dest_addr_npi?: number;
      esm_class?: number;
      data_coding?: number;
      registered_delivery?: number;
      short_message?: DecodedMessage;
      message_payload?: DecodedMessage;
      receipted_message_id?: string;
      message_state?: number;
      isResponse(): boolean;
      response(fields?: Fields): PDU;
      toBuffer(): Buffer;
    }

    type ResponseCallback = (pdu: PDU) => void;

    class Session extends EventEmitter {
      socket: Socket;
      /** Stops reading PDUs (after the one being handled) until resume(). */
      pause(): void;
      /** Whether pause() stopped it. */
      readonly paused: boolean;
      resume(): void;
      send(pdu: PDU, onResponse?: ResponseCallback): boolean;
      close(onClose?: () => void): void;
      destroy(onClose?: () => void): void;
      bind_transceiver(fields: Fields, onResponse?: ResponseCallback): boolean;
      bind_transmitter(fields: Fields, onResponse?: ResponseCallback): boolean;
      bind_receiver(fields: Fields, onResponse?: ResponseCallback): boolean;
      submit_sm(fields: Fields, onResponse?: ResponseCallback): boolean;
      deliver_sm(fields: Fields, onResponse?: ResponseCallback): boolean;
      enquire_link(onResponse?: ResponseCallback): boolean;
      unbind(onResponse?: ResponseCallback): boolean;
    }

    interface ConnectOptions {
      host?: string;
      port: number;
      /** SMPP over TLS (tls.connect with these options). */
      tls?: boolean;
      /** With tls: the CAs (PEM) the server's certificate must chain to, in place of Node's own. */
      ca?: string;
      auto_enquire_link_period?: number;
    }

    function connect(options: ConnectOptions, onConnect?: () => void): Session;
    /** An SMSC's listener, each connection a Session (the tests' stand-in for SMSCs the simulator does not imitate). */
    function createServer(onSession: (session: Session) => void): Server;
    /** SMPP 3.4 §5.1.3 command_status values by name (ESME_ROK, ESME_RTHROTTLED, …). */
    const errors: Record<string, number>;
    /** The commands the package reads and writes, by name (submit_sm, submit_sm_resp, …). */
    const commands: Record<string, { id: number }>;
    const commandsById: Record<number, { command: string } | undefined>;
  }
  export = smpp;
}
