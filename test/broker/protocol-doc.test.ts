import { describe, it, expect } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import Ajv2020 from 'ajv/dist/2020.js';
import { protocolJsonSchemas } from '#protocol/json-schemas';
import {
  MAX_DEVICE_PAYLOAD_BYTES,
  FLOOD_RATE_PER_S,
  FLOOD_BURST,
  KEEPALIVE_MAX_S,
  KEEPALIVE_MIN_S,
  REFUSED_PUBLISH_LIMIT,
  REFUSED_PUBLISH_WINDOW_S,
} from '#protocol/payloads';

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
    expect(doc).toContain(`**${KEEPALIVE_MIN_S} to ${KEEPALIVE_MAX_S} s** accepted`);
    expect(doc).toContain(`**${KEEPALIVE_MAX_S} s**: a connection silent for ${KEEPALIVE_MAX_S * 1.5} s is closed`);
    expect(doc).toContain(`more than **${REFUSED_PUBLISH_LIMIT} in any ${REFUSED_PUBLISH_WINDOW_S} s window**`);
  });

  it('documents the credentials rotation: its topics, and schemas that take what the service sends and the device answers', () => {
    for (const topic of ['devices/{serial}/credentials', 'devices/{serial}/credentials/ack', 'devices/{serial}/csr'])
      expect(doc).toContain(`| \`${topic}\` |`);
    expect(doc).toContain('### Credentials rotation');
    expect(doc).toContain('default 7 days (604800 s), from 1 hour (3600 s) to 30 days');
    const ajv = new Ajv2020({ allErrors: true, strict: false, validateFormats: false });
    const schemas = protocolJsonSchemas();
    const valid = (name: string, value: unknown) => ajv.validate(schemas[name] as object, value);
    const rotationId = '6f1c1a3e-1c1e-4f43-9d55-2f8a2b0e0a11';
    const password = {
      type: 'password',
      rotation_id: rotationId,
      username: 'LX200-000001',
      password: 'q8V0yY1c3mA6rY0JZcXk2pQd9fG7hB5nT1uE4wL2sR8',
      grace_ends_at: '2026-12-04T10:00:00.000Z',
    };
    expect(valid('CredentialsMessage', password)).toBe(true);
    expect(valid('CredentialsMessage', { ...password, type: 'token' })).toBe(false);
    const certificate = {
      type: 'certificate',
      rotation_id: rotationId,
      certificate: '-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n',
      fingerprint_sha256: 'a'.repeat(64),
      not_after: '2036-11-23T11:00:00.000Z',
      grace_ends_at: '2026-12-04T10:00:00.000Z',
    };
    expect(valid('CredentialsMessage', certificate)).toBe(true);
    expect(valid('CredentialsAck', { rotation_id: rotationId })).toBe(true);
    expect(valid('CredentialsAck', { rotation_id: 'latest' })).toBe(false);
    expect(valid('CertificateRequest', { csr: '-----BEGIN CERTIFICATE REQUEST-----' })).toBe(true);
    expect(valid('CertificateRequest', { csr: 'x'.repeat(4001) })).toBe(false);
  });

  it('its schemas accept the documented examples and refuse bad values', () => {
    const ajv = new Ajv2020({ allErrors: true, strict: false, validateFormats: false });
    const schemas = protocolJsonSchemas();
    const valid = (name: string, value: unknown) => ajv.validate(schemas[name] as object, value);
    expect(valid('Heartbeat', { firmware: '1.4.2', ip: '10.0.4.17', uptime_s: 3600, rssi: -61 })).toBe(true);
    expect(valid('Heartbeat', { firmware: '1.4.2', ip: '10.0.4.300', uptime_s: 3600, rssi: -61 })).toBe(false);
    // The rest of the Heartbeat's table is test/unit/heartbeat-schema-agreement.test.ts.
    expect(valid('Heartbeat', { firmware: 'v1.4.0' })).toBe(false);
    expect(valid('Heartbeat', { ip: '2001:db8::17', rssi: -61.5 })).toBe(true);
    expect(valid('StatusMessage', { state: 'offline' })).toBe(true);
    expect(valid('OtaProgress', { job_id: 'a', state: 'downloading', progress: 42 })).toBe(true);
    expect(valid('OtaProgress', { job_id: 'a', state: 'exploded' })).toBe(false);
    const serverTime = '2026-11-27T03:00:00.123Z';
    expect(valid('ConfigMessage', { version: 7, config: { dim_level: 40 }, server_time: serverTime })).toBe(true);
    expect(valid('ConfigMessage', { version: 7, config: { dim_level: 40 } })).toBe(false);
    expect(valid('ConfigReported', { version: 7 })).toBe(true);
    // The same version range in both directions.
    for (const name of ['ConfigMessage', 'ConfigReported'])
      expect(valid(name, { version: 2_147_483_648, config: {}, server_time: serverTime }), name).toBe(false);
    expect(valid('OtaProgress', { job_id: 'a', state: 'failed', error: 'x', error_code: 'digest_mismatch' })).toBe(
      true,
    );
    const command = {
      job_id: 'j',
      version: '1.5.0',
      model: 'LX-200',
      url: 'https://x/fw',
      sha256: 'a'.repeat(64),
      size: 123456,
    };
    expect(valid('OtaCommand', command)).toBe(true);
    expect(valid('OtaCommand', { ...command, model: undefined })).toBe(false);
    // Messages to the device may grow: a field the device does not know does not make them invalid.
    expect(valid('OtaCommand', { ...command, rollout_hint: 'later' })).toBe(true);
    expect(valid('ConfigMessage', { version: 7, config: { new_key: 1 }, server_time: serverTime, more: true })).toBe(
      true,
    );
    const signed = {
      job_id: 'j',
      version: '1.5.0',
      model: 'LX-200',
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
