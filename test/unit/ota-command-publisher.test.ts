import { describe, expect, it } from 'vitest';
import { OtaCommandPublisher, type CommandJob } from '#core/deployments/ota-command-publisher';
import type { DeviceGateway } from '#core/devices/device-gateway';
import { DownloadLinkSigner } from '#core/firmware/download-links';
import { createLogger } from '#core/logger';

/** A broker that takes a publish after a few milliseconds and records how many it held at once. */
function slowGateway(window: number) {
  const seen = { inFlight: 0, most: 0, published: [] as string[] };
  const gateway = {
    publishWindow: window,
    async publishOta(serial: string): Promise<void> {
      seen.inFlight++;
      seen.most = Math.max(seen.most, seen.inFlight);
      await new Promise((r) => setTimeout(r, 2 + Math.random() * 3));
      if (serial === 'REFUSED-1') {
        seen.inFlight--;
        throw new Error('no session');
      }
      seen.published.push(serial);
      seen.inFlight--;
    },
  } as unknown as DeviceGateway;
  return { gateway, seen };
}

const rows = (prefix: string, n: number): CommandJob[] =>
  Array.from({ length: n }, (_, i) => ({
    id: `${prefix}-job-${i}`,
    deviceId: `${prefix}-dev-${i}`,
    serial: `${prefix}-${i}`,
    targetVersion: '2.0.0',
    firmwareVersionId: 'fw',
    model: 'LX-200',
    sha256: 'ab',
    size: 10,
  }));

describe('OTA command publisher', () => {
  it('keeps one window for the whole process however many pages are published at once', async () => {
    const { gateway, seen } = slowGateway(3);
    const publisher = new OtaCommandPublisher({
      gateway,
      links: new DownloadLinkSigner(Buffer.alloc(32, 1)),
      logger: createLogger('silent'),
      now: () => new Date(),
      linkTtlMs: () => 60_000,
    });
    // Overlapping pages, as the dispatch loops of two deployments produce them.
    await Promise.all([
      publisher.publish(rows('A', 20)),
      publisher.publish(rows('B', 7)),
      publisher.publish(rows('C', 1)),
    ]);
    expect(seen.most).toBe(3);
    expect(seen.published).toHaveLength(28);
    expect(new Set(seen.published).size).toBe(28);
  });

  it('a publish the broker never confirms gives its place back after the timeout', async () => {
    let taken = 0;
    const gateway = {
      publishWindow: 1,
      publishOta: (serial: string) => {
        if (serial === 'STUCK-0') return new Promise<void>(() => undefined);
        taken++;
        return Promise.resolve();
      },
    } as unknown as DeviceGateway;
    const publisher = new OtaCommandPublisher({
      gateway,
      links: new DownloadLinkSigner(Buffer.alloc(32, 1)),
      logger: createLogger('silent'),
      now: () => new Date(),
      linkTtlMs: () => 60_000,
      publishTimeoutMs: 50,
    });
    await Promise.all([publisher.publish(rows('STUCK', 1)), publisher.publish(rows('E', 3))]);
    expect(taken).toBe(3);
  });

  it('resolves each call when its own commands are through, a refused one included', async () => {
    const { gateway, seen } = slowGateway(2);
    const publisher = new OtaCommandPublisher({
      gateway,
      links: new DownloadLinkSigner(Buffer.alloc(32, 1)),
      logger: createLogger('silent'),
      now: () => new Date(),
      linkTtlMs: () => 60_000,
    });
    const first = publisher.publish([...rows('REFUSED', 2)]);
    const second = publisher.publish(rows('D', 4));
    await first;
    expect(seen.published).toContain('REFUSED-0');
    expect(seen.published).not.toContain('REFUSED-1');
    await second;
    expect(seen.published.filter((s) => s.startsWith('D-'))).toHaveLength(4);
    expect(seen.most).toBe(2);
  });
});
