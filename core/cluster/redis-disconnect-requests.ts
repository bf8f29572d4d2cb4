import type { Redis } from 'ioredis';
import { z } from 'zod';
import type { Logger } from '../logger';
import {
  InProcessDisconnectRequests,
  type DisconnectHandler,
  type DisconnectRequest,
  type DisconnectRequests,
} from '../devices/disconnect-requests';

const Message = z.object({
  serial: z.string().min(1).max(64),
  reason: z.string().max(200),
  certificateFingerprint: z
    .string()
    .regex(/^[0-9a-f]{64}$/)
    .optional(),
  action: z.enum(['close', 'offer_credentials']).optional(),
});

/**
 * Cluster mode: disconnect requests travel on their own Redis pub/sub channel, so the process
 * a device is connected to closes its session whichever process rotated, unclaimed or revoked.
 * Every process (the publisher included) receives each request once, from Redis. Pub/sub keeps
 * nothing: a process cut off from Redis at that moment misses the request, which is why
 * authentication never trusts a cache (the next connection is refused anyway).
 */
export class RedisDisconnectRequests implements DisconnectRequests {
  private readonly local: InProcessDisconnectRequests;
  private readonly ready: Promise<unknown>;

  constructor(
    private readonly publisher: Redis,
    subscriber: Redis,
    private readonly logger: Logger,
    private readonly channel: string,
  ) {
    this.local = new InProcessDisconnectRequests(logger);
    subscriber.on('message', (from: string, message: string) => {
      if (from !== this.channel) return;
      let request: DisconnectRequest;
      try {
        request = Message.parse(JSON.parse(message));
      } catch (error) {
        this.logger.error({ err: error }, 'unreadable disconnect request from redis');
        return;
      }
      this.local.deliver(request);
    });
    this.ready = subscriber
      .subscribe(this.channel)
      .catch((error: unknown) => this.logger.error({ err: error }, 'subscribing to disconnect requests failed'));
  }

  async publish(request: DisconnectRequest): Promise<void> {
    await this.ready;
    try {
      await this.publisher.publish(this.channel, JSON.stringify(request));
    } catch (error) {
      // Redis down: at least the session on this process closes.
      this.logger.warn(
        { err: error, serial: request.serial },
        'redis publish of a disconnect request failed; closing on this process only',
      );
      this.local.deliver(request);
    }
  }

  subscribe(handler: DisconnectHandler): () => void {
    return this.local.subscribe(handler);
  }
}
