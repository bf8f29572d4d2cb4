import { describe, it, expect } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import Ajv2020 from 'ajv/dist/2020.js';
import { protocolJsonSchemas } from '#protocol/json-schemas';
import { MAX_DEVICE_PAYLOAD_BYTES, FLOOD_RATE_PER_S, FLOOD_BURST } from '#protocol/payloads';

/** docs/device-protocol.md is what firmware engineers build against: it must match the code. */
describe('device protocol document', () => {
  const doc = fs.readFileSync(path.resolve(__dirname, '../../docs/device-protocol.md'), 'utf8');

  it('embeds exactly the JSON Schemas generated from the payload schemas', () => {
    for (const [name, schema] of Object.entries(protocolJsonSchemas())) {
      expect(doc, `schema ${name} is stale: regenerate with node --import tsx protocol/json-schemas.ts`).toContain(
        `#### ${name}\n\n\`\`\`json\n${JSON.stringify(schema, null, 2)}\n\`\`\``,
      );
    }
  });

  it('states the limits the broker enforces', () => {
    expect(MAX_DEVICE_PAYLOAD_BYTES).toBe(4096);
    expect(doc).toContain('**4 KB** (4096 bytes)');
    expect(doc).toContain(`**${FLOOD_RATE_PER_S} per second sustained, bursts of ${FLOOD_BURST}**`);
  });

  it('its schemas accept the examples of decisions.md and refuse bad values', () => {
    const ajv = new Ajv2020({ allErrors: true, strict: false, validateFormats: false });
    const schemas = protocolJsonSchemas();
    const valid = (name: string, value: unknown) => ajv.validate(schemas[name] as object, value);
    expect(valid('Heartbeat', { firmware: '1.4.2', ip: '10.0.4.17', uptime_s: 3600, rssi: -61 })).toBe(true);
    expect(valid('Heartbeat', { firmware: '1.4.2', ip: '10.0.4.300', uptime_s: 3600, rssi: -61 })).toBe(false);
    expect(valid('StatusMessage', { state: 'offline' })).toBe(true);
    expect(valid('OtaProgress', { job_id: 'a', state: 'downloading', progress: 42 })).toBe(true);
    expect(valid('OtaProgress', { job_id: 'a', state: 'exploded' })).toBe(false);
    expect(valid('ConfigMessage', { version: 7, config: { dim_level: 40 } })).toBe(true);
    expect(valid('ConfigReported', { version: 7 })).toBe(true);
    expect(
      valid('OtaCommand', { job_id: 'j', version: '1.5.0', url: 'https://x/fw', sha256: 'a'.repeat(64), size: 123456 }),
    ).toBe(true);
    const signed = {
      job_id: 'j',
      version: '1.5.0',
      url: 'https://x/fw',
      sha256: 'a'.repeat(64),
      size: 123456,
      signature: `${'A'.repeat(86)}==`,
      key_id: '0123456789abcdef',
    };
    expect(valid('OtaCommand', signed)).toBe(true);
    expect(valid('OtaCommand', { ...signed, key_id: undefined })).toBe(false);
    expect(valid('OtaCommand', { ...signed, signature: 'c2ln' })).toBe(false);
  });
});
