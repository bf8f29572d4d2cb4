import type { Actor } from '#core/shared/actor';
import { DomainError } from '#core/shared/errors';
import { EVENT_TYPES, type DomainEvent } from '#core/events/event-types';
import type { LiveEventHub } from '#core/events/live-hub';
import { PushQueue } from '#core/events/push-queue';
import { Coalescer } from '#core/events/coalesce';
import type { Logger } from '#core/logger';
import type { Device } from '#core/devices/device-types';
import type { Deployment } from '#core/deployments/deployment-types';
import type { FleetSummary } from '../generated/resolvers-types';

/** What `deviceChanged` pushes: the device as it is now, re-read after the event. */
export interface DeviceChange {
  type: string;
  occurredAt: string;
  device: Device;
}

export interface DeviceFilterInput {
  model?: string | null;
  status?: string | null;
  firmware?: string | null;
  text?: string | null;
  site?: string | null;
}

/**
 * How live views re-read state after an event, with the reading actor's permissions: the same
 * service calls the queries use, presented alike (resolvers/index.ts).
 */
export interface LiveReaders {
  /** Devices of the actor's account among these ids (device events carry `data.device_id`). */
  devices: (actor: Actor, ids: string[]) => Promise<Device[]>;
  fleetSummary: (actor: Actor) => Promise<FleetSummary>;
  /** null when the deployment does not exist for this actor's account. */
  deployment: (actor: Actor, id: string) => Promise<Deployment | null>;
}

/** Most recent items a slow subscriber may fall behind before the oldest are dropped. */
const QUEUE_MAX = 1000;
/** Device re-reads are batched over this window (ms): one query for a burst of events. */
const DEVICE_BATCH_MS = 25;
/** At most one fleet summary / deployment progress per this many ms per account (coalesced). */
export const SUMMARY_INTERVAL_MS = 500;

const DEVICE_EVENT = /^(device\.|firmware\.update\.)/;
const SUMMARY_EVENT = /^(device\.|firmware\.update\.|deployment\.|allocation\.)/;

export const matchesDeviceFilter = (device: Device, filter: DeviceFilterInput | null | undefined): boolean => {
  if (!filter) return true;
  if (filter.model && device.model !== filter.model) return false;
  if (filter.status && device.status !== filter.status) return false;
  if (filter.firmware && device.firmware !== filter.firmware) return false;
  if (filter.site) {
    const site = filter.site.toLowerCase();
    if (!device.site || (device.site.id !== filter.site && device.site.name.toLowerCase() !== site)) return false;
  }
  if (filter.text) {
    const text = filter.text.toLowerCase();
    if (!device.serial.toLowerCase().includes(text) && !device.name.toLowerCase().includes(text)) return false;
  }
  return true;
};

function deviceIdOf(event: DomainEvent): string | null {
  const id = event.data.device_id ?? event.data.deviceId;
  return typeof id === 'string' ? id : null;
}

function deploymentIdOf(event: DomainEvent): string | null {
  const d = event.data.deployment_id ?? event.data.deploymentId;
  if (typeof d === 'string') return d;
  return event.type.startsWith('deployment.') ? event.subject : null;
}

/** Reading actor of live views: least privilege inside the account (both roles read everything). */
const liveActor = (accountId: string): Actor => ({ accountId, role: 'viewer', principal: 'system:live' });

interface DeviceSubscriber {
  filter: DeviceFilterInput | null | undefined;
  queue: PushQueue<DeviceChange>;
}

interface AccountViews {
  deviceSubscribers: Set<DeviceSubscriber>;
  /** Device id -> its events of this batch window, one per type (a repeated type keeps the latest). */
  pendingDevices: Map<string, Map<string, DomainEvent>>;
  deviceTimer: NodeJS.Timeout | undefined;
  summarySubscribers: Set<PushQueue<FleetSummary>>;
  summary: Coalescer | undefined;
  deployments: Map<string, { subscribers: Set<PushQueue<Deployment>>; coalescer: Coalescer }>;
  unsubscribe: () => void;
}

/**
 * The subscriptions' shared work per account: one hub listener, one batched device re-read per
 * burst and one coalesced summary per interval, fanned out to every subscriber of that account.
 * 200 portals watching one fleet cost one re-read per change, not 200.
 */
export class LiveViews {
  private readonly accounts = new Map<string, AccountViews>();
  constructor(
    private readonly hub: LiveEventHub,
    private readonly readers: LiveReaders,
    private readonly logger: Logger,
    private readonly onDrop: () => void = () => undefined,
  ) {}

  /** `events(types)`: the account's events as they are dispatched. */
  events(actor: Actor, types: string[] | null | undefined): PushQueue<DomainEvent> {
    if (types) {
      const unknown = types.filter((t) => !(EVENT_TYPES as readonly string[]).includes(t));
      if (unknown.length) {
        throw new DomainError('validation_failed', `Unknown event types: ${unknown.join(', ')}.`, {
          errors: unknown.map((t) => ({ field: 'types', message: `${t} is not an event type` })),
        });
      }
    }
    const wanted = types && types.length ? new Set<string>(types) : null;
    let unsubscribe: () => void = () => undefined;
    const queue = new PushQueue<DomainEvent>({ max: QUEUE_MAX, onEnd: () => unsubscribe(), onDrop: this.onDrop });
    unsubscribe = this.hub.subscribe(actor.accountId, (event) => {
      if (!wanted || wanted.has(event.type)) queue.push(event);
    });
    return queue;
  }

  deviceChanges(actor: Actor, filter: DeviceFilterInput | null | undefined): PushQueue<DeviceChange> {
    const views = this.views(actor.accountId);
    const entry: DeviceSubscriber = {
      filter,
      // onEnd runs once the subscriber leaves, long after `entry` is assigned.
      queue: new PushQueue<DeviceChange>({
        max: QUEUE_MAX,
        onDrop: this.onDrop,
        onEnd: () => {
          views.deviceSubscribers.delete(entry);
          this.release(actor.accountId);
        },
      }),
    };
    views.deviceSubscribers.add(entry);
    return entry.queue;
  }

  fleetSummary(actor: Actor): PushQueue<FleetSummary> {
    const read = this.readers.fleetSummary;
    const views = this.views(actor.accountId);
    views.summary ??= new Coalescer(
      async () => {
        if (views.summarySubscribers.size === 0) return;
        const summary = await read(liveActor(actor.accountId));
        for (const queue of views.summarySubscribers) queue.push(summary);
      },
      SUMMARY_INTERVAL_MS,
      (error) => this.logger.error({ err: error }, 'fleet summary refresh failed'),
    );
    const queue: PushQueue<FleetSummary> = new PushQueue<FleetSummary>({
      max: 10,
      onEnd: () => {
        views.summarySubscribers.delete(queue);
        this.release(actor.accountId);
      },
    });
    views.summarySubscribers.add(queue);
    return queue;
  }

  /** Throws not_found (like the query) when the deployment is not the actor's. */
  async deploymentProgress(actor: Actor, id: string): Promise<PushQueue<Deployment>> {
    const read = this.readers.deployment;
    if (!(await read(actor, id))) throw new DomainError('not_found', 'Deployment not found');
    const views = this.views(actor.accountId);
    let entry = views.deployments.get(id);
    if (!entry) {
      const subscribers = new Set<PushQueue<Deployment>>();
      const coalescer = new Coalescer(
        async () => {
          const deployment = await read(liveActor(actor.accountId), id);
          if (deployment) for (const queue of subscribers) queue.push(deployment);
        },
        SUMMARY_INTERVAL_MS,
        (error) => this.logger.error({ err: error }, 'deployment progress refresh failed'),
      );
      entry = { subscribers, coalescer };
      views.deployments.set(id, entry);
    }
    const current = entry;
    const queue: PushQueue<Deployment> = new PushQueue<Deployment>({
      max: 10,
      onEnd: () => {
        current.subscribers.delete(queue);
        if (current.subscribers.size === 0) {
          current.coalescer.close();
          views.deployments.delete(id);
        }
        this.release(actor.accountId);
      },
    });
    current.subscribers.add(queue);
    return queue;
  }

  private views(accountId: string): AccountViews {
    let views = this.accounts.get(accountId);
    if (views) return views;
    const created: AccountViews = {
      deviceSubscribers: new Set(),
      pendingDevices: new Map(),
      deviceTimer: undefined,
      summarySubscribers: new Set(),
      summary: undefined,
      deployments: new Map(),
      unsubscribe: () => undefined,
    };
    created.unsubscribe = this.hub.subscribe(accountId, (event) => this.onEvent(accountId, created, event));
    this.accounts.set(accountId, created);
    views = created;
    return views;
  }

  private onEvent(accountId: string, views: AccountViews, event: DomainEvent): void {
    if (views.deviceSubscribers.size > 0 && DEVICE_EVENT.test(event.type)) {
      const deviceId = deviceIdOf(event);
      if (deviceId) {
        // One re-read per device per window; every distinct event type is still reported.
        let byType = views.pendingDevices.get(deviceId);
        if (!byType) {
          byType = new Map();
          views.pendingDevices.set(deviceId, byType);
        }
        byType.delete(event.type);
        byType.set(event.type, event);
        if (!views.deviceTimer) {
          views.deviceTimer = setTimeout(() => void this.flushDevices(accountId, views), DEVICE_BATCH_MS);
          views.deviceTimer.unref();
        }
      }
    }
    if (views.summarySubscribers.size > 0 && SUMMARY_EVENT.test(event.type)) views.summary?.trigger();
    if (views.deployments.size > 0) {
      const id = deploymentIdOf(event);
      if (id) views.deployments.get(id)?.coalescer.trigger();
    }
  }

  private async flushDevices(accountId: string, views: AccountViews): Promise<void> {
    views.deviceTimer = undefined;
    const pending = new Map(views.pendingDevices);
    views.pendingDevices.clear();
    const read = this.readers.devices;
    if (views.deviceSubscribers.size === 0 || pending.size === 0) return;
    try {
      const devices = await read(liveActor(accountId), [...pending.keys()]);
      for (const device of devices) {
        const events = pending.get(device.id);
        if (!events) continue;
        for (const event of events.values()) {
          const change: DeviceChange = { type: event.type, occurredAt: event.occurredAt, device };
          for (const subscriber of views.deviceSubscribers) {
            if (matchesDeviceFilter(device, subscriber.filter)) subscriber.queue.push(change);
          }
        }
      }
    } catch (error) {
      this.logger.error({ err: error }, 'device change re-read failed');
    }
  }

  /** Drops an account's shared state once its last subscriber left. */
  private release(accountId: string): void {
    const views = this.accounts.get(accountId);
    if (!views) return;
    if (views.deviceSubscribers.size || views.summarySubscribers.size || views.deployments.size) return;
    views.unsubscribe();
    views.summary?.close();
    if (views.deviceTimer) clearTimeout(views.deviceTimer);
    this.accounts.delete(accountId);
  }

  close(): void {
    for (const [accountId, views] of this.accounts) {
      for (const s of views.deviceSubscribers) s.queue.end();
      for (const q of views.summarySubscribers) q.end();
      for (const d of views.deployments.values()) for (const q of d.subscribers) q.end();
      this.release(accountId);
    }
    this.accounts.clear();
  }
}
