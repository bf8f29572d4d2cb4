import { describe, it, expect } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { configPayload, otaCommandPayload } from '#broker/device-messages';
import { DeviceConfig } from '#core/devices/device-config';
import { MAX_CONFIG_MESSAGE_BYTES, MAX_OTA_COMMAND_BYTES, MAX_OTA_URL_LENGTH } from '#protocol/payloads';
import { MAX_VERSION_LENGTH } from '#protocol/version';

const bytes = (payload: unknown) => Buffer.byteLength(JSON.stringify(payload));

/**
 * A module sizes its receive buffers from the maximum size of each message to it
 * (docs/device-protocol.md "Payloads"): the largest message the schemas allow stays under it,
 * with room for fields still to come, and the service refuses to send anything larger.
 */
describe('maximum sizes of the messages to a device', () => {
  it('the largest possible OTA command stays under MAX_OTA_COMMAND_BYTES, with room to spare', () => {
    const largest = otaCommandPayload({
      jobId: 'j'.repeat(64),
      version: `1.2.3.4-${'a'.repeat(MAX_VERSION_LENGTH - 8)}`,
      model: 'M'.repeat(64),
      url: `https://${'h'.repeat(MAX_OTA_URL_LENGTH - 'https://'.length - 2)}/x`,
      sha256: 'f'.repeat(64),
      size: Number.MAX_SAFE_INTEGER,
      signature: { value: `${'A'.repeat(86)}==`, keyId: 'f'.repeat(16) },
    });
    expect(largest.url).toHaveLength(MAX_OTA_URL_LENGTH);
    expect(largest.version).toHaveLength(MAX_VERSION_LENGTH);
    expect(bytes(largest)).toBeLessThanOrEqual(MAX_OTA_COMMAND_BYTES - 256);
  });

  it('the largest possible configuration message stays under MAX_CONFIG_MESSAGE_BYTES, with room to spare', () => {
    const timezone = DeviceConfig.shape.timezone.unwrap();
    const config = {
      heartbeat_interval_s: 3600,
      luminaire_interval_s: 86_400,
      dim_level: 100,
      power_on_level: 100,
      // Longer than any real zone name: the schema's own bound.
      timezone: 'Z'.repeat(timezone.maxLength ?? 64),
      maintenance_window: { start: '23:59', end: '00:00' },
    };
    // Every key of the configuration is in it.
    expect(Object.keys(config).sort()).toEqual(Object.keys(DeviceConfig.shape).sort());
    const largest = configPayload({ version: 2_147_483_647, config }, new Date('2026-12-31T23:59:59.999Z'));
    expect(bytes(largest)).toBeLessThanOrEqual(MAX_CONFIG_MESSAGE_BYTES / 2);
  });

  it('refuses to send a message over its limit instead of cutting it', () => {
    const config = { note: 'x'.repeat(MAX_CONFIG_MESSAGE_BYTES) };
    expect(() => configPayload({ version: 1, config })).toThrow(/over the protocol's limit/);
  });

  it('the device protocol states each limit', () => {
    const doc = fs.readFileSync(path.resolve(__dirname, '../../docs/device-protocol.md'), 'utf8');
    expect(doc).toContain(`| \`devices/{serial}/ota\` payload | **${MAX_OTA_COMMAND_BYTES} bytes**`);
    expect(doc).toContain(`| \`devices/{serial}/config\` payload | **${MAX_CONFIG_MESSAGE_BYTES} bytes**`);
  });
});
