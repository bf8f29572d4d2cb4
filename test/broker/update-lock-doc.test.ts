import { describe, it, expect } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import Ajv2020 from 'ajv/dist/2020.js';
import { protocolJsonSchemas } from '#protocol/json-schemas';
import { EMERGENCY_RECHARGE_S, MAX_UPDATE_LOCK_S, UPDATE_LOCK_REASONS, UpdateLock } from '#protocol/lock-payloads';
import { DEVICE_PUBLISH_KINDS } from '#protocol/topics';

/** docs/device-protocol.md "Update locks" is what firmware engineers build against: it must match the code. */
describe('update lock protocol document', () => {
  const doc = fs.readFileSync(path.resolve(__dirname, '../../docs/device-protocol.md'), 'utf8');
  const ota = fs.readFileSync(path.resolve(__dirname, '../../docs/ota.md'), 'utf8');

  it('documents the topic, its ACL, the cap and the emergency rule', () => {
    expect(DEVICE_PUBLISH_KINDS).toContain('ota/lock');
    expect(doc).toContain('| `devices/{serial}/ota/lock` | device to service |');
    expect(doc).toContain('### Update locks');
    expect(MAX_UPDATE_LOCK_S).toBe(86_400);
    expect(EMERGENCY_RECHARGE_S).toBe(86_400);
    expect(doc).toContain('**86400 s (24 h)**');
    expect(doc).toContain('**cut to 24 h**');
    for (const reason of UPDATE_LOCK_REASONS) expect(doc).toContain(`\`${reason}\``);
    expect(ota).toContain('## Update locks');
    expect(ota).toContain('`site_frozen`');
  });

  it('embeds the generated UpdateLock JSON Schema', () => {
    const schema = protocolJsonSchemas().UpdateLock;
    expect(doc).toContain(`#### UpdateLock\n\n\`\`\`json\n${JSON.stringify(schema, null, 2)}\n\`\`\``);
  });

  it('its JSON Schema and the zod schema agree on the documented examples and refusals', () => {
    const ajv = new Ajv2020({ allErrors: true, strict: false, validateFormats: false });
    const schema = protocolJsonSchemas().UpdateLock as object;
    const accepted = [
      { for_s: 5400, reason: 'occupied' },
      { for_s: 3600, reason: 'emergency_test', duration_test_ended_s_ago: 0 },
      { release: true },
      { for_s: 10 * 86_400, reason: 'other' },
    ];
    for (const m of accepted) {
      expect(ajv.validate(schema, m), JSON.stringify(m)).toBe(true);
      expect(UpdateLock.safeParse(m).success, JSON.stringify(m)).toBe(true);
    }
    const refused = [
      { for_s: 60, reason: 'lunch' },
      { for_s: 0, reason: 'other' },
      { for_s: 1.5, reason: 'other' },
      { release: false },
      { reason: 'occupied' },
      {},
    ];
    for (const m of refused) {
      expect(ajv.validate(schema, m), JSON.stringify(m)).toBe(false);
      expect(UpdateLock.safeParse(m).success, JSON.stringify(m)).toBe(false);
    }
    // A refinement JSON Schema cannot say: the duration test comes only with emergency_test.
    expect(UpdateLock.safeParse({ for_s: 60, reason: 'occupied', duration_test_ended_s_ago: 5 }).success).toBe(false);
  });
});
