import { describe, it, expect } from 'vitest';
import {
  afterAttempt,
  failureRun,
  fanOut,
  pickForAttempt,
  redelivered,
  type AttemptOutcome,
  type Subscriber,
} from '#core/webhooks/delivery-rules';
import { DISABLE_AFTER_MS, RETRY_WINDOW_MS } from '#core/webhooks/backoff';
import type { SendResult } from '#core/webhooks/webhook-sender';
import type { DeliveryStatus } from '#core/webhooks/webhook-types';
import type { DomainEvent, EventType } from '#core/events/event-types';

const now = new Date('2026-11-25T08:00:00Z');
const ago = (ms: number) => new Date(now.getTime() - ms);
const later = (ms: number) => new Date(now.getTime() + ms);
const ok: SendResult = { statusCode: 204, durationMs: 12, error: null };
const http500: SendResult = { statusCode: 500, durationMs: 40, error: 'HTTP 500' };
const timeout: SendResult = { statusCode: null, durationMs: 10_000, error: 'timed out after 10000 ms' };

describe('webhook delivery rules', () => {
  describe('a pending delivery after an attempt', () => {
    // random = 0: the backoff is its fixed half (2.5 s after the first failure, 5 s after the second, ...).
    const cases: Array<[string, { attemptsBefore: number; createdAt: Date; result: SendResult }, AttemptOutcome]> = [
      [
        'delivered on the first attempt',
        { attemptsBefore: 0, createdAt: now, result: ok },
        {
          outcome: 'delivered',
          delivery: {
            attempts: 1,
            lastStatusCode: 204,
            lastError: null,
            lastDurationMs: 12,
            status: 'delivered',
            deliveredAt: now,
          },
        },
      ],
      [
        'delivered on a retry',
        { attemptsBefore: 5, createdAt: ago(RETRY_WINDOW_MS - 1), result: ok },
        {
          outcome: 'delivered',
          delivery: {
            attempts: 6,
            lastStatusCode: 204,
            lastError: null,
            lastDurationMs: 12,
            status: 'delivered',
            deliveredAt: now,
          },
        },
      ],
      [
        'delivered even after the retry window (a redelivery, or a late attempt)',
        { attemptsBefore: 9, createdAt: ago(RETRY_WINDOW_MS + 1), result: ok },
        {
          outcome: 'delivered',
          delivery: {
            attempts: 10,
            lastStatusCode: 204,
            lastError: null,
            lastDurationMs: 12,
            status: 'delivered',
            deliveredAt: now,
          },
        },
      ],
      [
        'a first failure: pending, retried after the backoff',
        { attemptsBefore: 0, createdAt: now, result: http500 },
        {
          outcome: 'failed',
          delivery: {
            attempts: 1,
            lastStatusCode: 500,
            lastError: 'HTTP 500',
            lastDurationMs: 40,
            status: 'pending',
            nextAttemptAt: later(2_500),
          },
        },
      ],
      [
        'a third failure without a response',
        { attemptsBefore: 2, createdAt: ago(60_000), result: timeout },
        {
          outcome: 'failed',
          delivery: {
            attempts: 3,
            lastStatusCode: null,
            lastError: 'timed out after 10000 ms',
            lastDurationMs: 10_000,
            status: 'pending',
            nextAttemptAt: later(10_000),
          },
        },
      ],
      [
        'a failure just inside the retry window',
        { attemptsBefore: 20, createdAt: ago(RETRY_WINDOW_MS - 1), result: http500 },
        {
          outcome: 'failed',
          delivery: {
            attempts: 21,
            lastStatusCode: 500,
            lastError: 'HTTP 500',
            lastDurationMs: 40,
            status: 'pending',
            nextAttemptAt: later(3 * 60 * 60_000),
          },
        },
      ],
      [
        'a failure at the end of the retry window: failed for good',
        { attemptsBefore: 20, createdAt: ago(RETRY_WINDOW_MS), result: http500 },
        {
          outcome: 'gave_up',
          delivery: {
            attempts: 21,
            lastStatusCode: 500,
            lastError: 'HTTP 500',
            lastDurationMs: 40,
            status: 'failed',
            nextAttemptAt: later(3 * 60 * 60_000),
          },
        },
      ],
    ];
    it.each(cases)('%s', (_, input, expected) => {
      expect(afterAttempt({ ...input, now, random: () => 0 })).toEqual(expected);
    });

    it('keeps 500 characters of an error', () => {
      const outcome = afterAttempt({
        attemptsBefore: 0,
        createdAt: now,
        now,
        result: { statusCode: null, durationMs: 1, error: 'x'.repeat(2000) },
        random: () => 0,
      });
      expect(outcome.delivery.lastError).toHaveLength(500);
    });
  });

  describe("the endpoint's failure run after a failed attempt", () => {
    it.each([
      ['the first failure starts it', null, { failingSince: now, disabledReason: null }],
      ['a run of a day goes on', ago(24 * 60 * 60_000), { failingSince: ago(24 * 60 * 60_000), disabledReason: null }],
      [
        'just under the limit goes on',
        ago(DISABLE_AFTER_MS - 1),
        { failingSince: ago(DISABLE_AFTER_MS - 1), disabledReason: null },
      ],
      [
        'at the limit the endpoint is disabled, saying since when',
        ago(DISABLE_AFTER_MS),
        {
          failingSince: ago(DISABLE_AFTER_MS),
          disabledReason: 'every delivery failed since 2026-11-22T08:00:00.000Z (disabled after 3 days)',
        },
      ],
    ] as const)('%s', (_, failingSince, expected) => {
      expect(failureRun({ failingSince, now })).toEqual(expected);
    });
  });

  describe('a redelivery', () => {
    it.each<[string, DeliveryStatus, Date, Date]>([
      ['a pending delivery keeps its retry window', 'pending', ago(60_000), ago(60_000)],
      ['a delivered one starts a new window', 'delivered', ago(60_000), now],
      ['a failed one starts a new window', 'failed', ago(RETRY_WINDOW_MS), now],
    ])('is due now: %s', (_, status, createdAt, newCreatedAt) => {
      expect(redelivered({ status, createdAt }, now)).toEqual({
        status: 'pending',
        nextAttemptAt: now,
        createdAt: newCreatedAt,
      });
    });
  });

  describe('which due deliveries are attempted', () => {
    const due = (...hooks: string[]) => hooks.map((webhookId, i) => ({ id: `d${i}`, webhookId }));
    it.each([
      ['all, when few', due('a', 'b', 'a'), { perEndpoint: 4, total: 8 }, ['d0', 'd1', 'd2']],
      [
        'at most 4 per endpoint, in due order',
        due('a', 'a', 'a', 'a', 'a', 'b', 'a'),
        { perEndpoint: 4, total: 8 },
        ['d0', 'd1', 'd2', 'd3', 'd5'],
      ],
      [
        'at most the concurrency in all',
        due('a', 'b', 'c', 'd', 'e'),
        { perEndpoint: 4, total: 3 },
        ['d0', 'd1', 'd2'],
      ],
      [
        'a hanging endpoint does not take the slots of others',
        due('a', 'a', 'a', 'a', 'a', 'a', 'b', 'c'),
        { perEndpoint: 4, total: 8 },
        ['d0', 'd1', 'd2', 'd3', 'd6', 'd7'],
      ],
      ['none', due(), { perEndpoint: 4, total: 8 }, []],
    ] as const)('%s', (_, rows, limits, ids) => {
      expect(pickForAttempt(rows, limits).map((r) => r.id)).toEqual(ids);
    });
  });

  describe('fan-out of events to endpoints', () => {
    const event = (seq: number, accountId: string, type: EventType): DomainEvent => ({
      id: `e${seq}`,
      seq,
      accountId,
      type,
      subject: 'SN-1',
      occurredAt: now.toISOString(),
      data: {},
    });
    const hooks: Subscriber[] = [
      { webhookId: 'h1', accountId: 'A', eventTypes: ['device.online', 'device.offline'] },
      { webhookId: 'h2', accountId: 'A', eventTypes: ['device.online'] },
      { webhookId: 'h3', accountId: 'B', eventTypes: ['device.online', 'deployment.updated'] },
    ];
    it.each([
      [
        'to every endpoint of the account subscribed to the type',
        [event(1, 'A', 'device.online')],
        [
          ['e1', 'h1'],
          ['e1', 'h2'],
        ],
      ],
      ['not to endpoints of other accounts', [event(1, 'B', 'device.offline')], []],
      [
        'in event order, then endpoint order',
        [event(2, 'A', 'device.offline'), event(3, 'A', 'device.online'), event(4, 'B', 'device.online')],
        [
          ['e2', 'h1'],
          ['e3', 'h1'],
          ['e3', 'h2'],
          ['e4', 'h3'],
        ],
      ],
      ['never internal event types, even when listed', [event(5, 'B', 'deployment.updated')], []],
      ['nothing for no events', [], []],
    ] as const)('%s', (_, events, pairs) => {
      expect(fanOut([...events], hooks).map((d) => [d.event.id, d.webhookId])).toEqual(pairs);
    });
  });
});
