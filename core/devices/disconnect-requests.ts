import type { Logger } from '../logger';

/**
 * Closing a device's session wherever it is connected. A device holds one MQTT connection to
 * one process; the service call that must end it (credential rotation, unclaim, certificate
 * revocation) may run on any process. Requests therefore go to every process, the caller's
 * included, and each closes what it holds. The same way, a planned rotation asks the process
 * holding the session to deliver what is pending (`action: 'offer_credentials'`).
 */

export interface DisconnectRequest {
  serial: string;
  /** Logged by the process that closes the session. */
  reason: string;
  /**
   * Close only sessions that authenticated with this certificate (SHA-256 of its DER, lowercase
   * hex); absent: every session of the serial.
   */
  certificateFingerprint?: string;
  /**
   * `offer_credentials`: close nothing; the process holding the device's session delivers the
   * new credentials of a planned rotation to it (the secret itself never travels here: that
   * process reads it from the database). Absent: close.
   */
  action?: 'close' | 'offer_credentials';
}

export type DisconnectHandler = (request: DisconnectRequest) => void;

/** How disconnect requests reach every process: in memory (one process) or Redis (cluster). */
export interface DisconnectRequests {
  /** Delivers to every process's handlers, this one's included. Never rejects. */
  publish(request: DisconnectRequest): Promise<void>;
  /** Returns the unsubscribe function. */
  subscribe(handler: DisconnectHandler): () => void;
}

/** One process: requests go straight to its own handlers. */
export class InProcessDisconnectRequests implements DisconnectRequests {
  private readonly handlers = new Set<DisconnectHandler>();

  constructor(private readonly logger?: Logger) {}

  publish(request: DisconnectRequest): Promise<void> {
    this.deliver(request);
    return Promise.resolve();
  }

  subscribe(handler: DisconnectHandler): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  /** Runs every handler; one that throws does not stop the others. */
  deliver(request: DisconnectRequest): void {
    for (const handler of this.handlers) {
      try {
        handler(request);
      } catch (err) {
        this.logger?.error({ err, serial: request.serial }, 'closing a device session failed');
      }
    }
  }
}
