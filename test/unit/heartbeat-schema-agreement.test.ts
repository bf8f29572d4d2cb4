import { describe, it, expect } from 'vitest';
import Ajv2020 from 'ajv/dist/2020.js';
import { protocolJsonSchemas } from '#protocol/json-schemas';
import { Heartbeat } from '#protocol/payloads';

/**
 * The JSON Schema a firmware team validates its heartbeats with (docs/device-protocol.md, generated
 * by protocol/json-schemas.ts) must say exactly what the service's zod schema says: a sample is
 * valid for one iff it is valid for the other. Formats are not validated (ajv's `format` needs a
 * plugin many tools lack), so the schema's `pattern`s must carry the rules by themselves.
 */
describe('Heartbeat: the published JSON Schema and the zod schema agree', () => {
  const ajv = new Ajv2020({ strict: false, validateFormats: false });
  const validate = ajv.compile(protocolJsonSchemas().Heartbeat as object);

  // [sample, valid]: what both must answer.
  const samples: Array<[unknown, boolean]> = [
    [{}, true],
    [{ firmware: '1.4.2', ip: '10.0.4.17', uptime_s: 3600, rssi: -61 }, true],
    [{ firmware: '1.4' }, true],
    [{ firmware: '1.4.2.7' }, true],
    [{ firmware: '2.0.0-rc.1' }, true],
    [{ firmware: '2.0.0-rc.1+build.7' }, true],
    [{ firmware: 'v1.4.0' }, false],
    [{ firmware: '1.2.3.4.5' }, false],
    [{ firmware: '1..2' }, false],
    [{ firmware: '' }, false],
    [{ firmware: '1.0 ' }, false],
    [{ firmware: `1.${'1'.repeat(70)}` }, false],
    [{ firmware: 140 }, false],
    [{ ip: '10.0.4.300' }, false],
    [{ ip: '010.0.0.1' }, false],
    [{ ip: '::' }, true],
    [{ ip: '::1' }, true],
    [{ ip: 'fe80::1' }, true],
    [{ ip: '2001:db8::8a2e:370:7334' }, true],
    [{ ip: '2001:0db8:0000:0000:0000:ff00:0042:8329' }, true],
    [{ ip: 'FE80::A' }, true],
    [{ ip: '::ffff:10.0.0.1' }, true],
    [{ ip: '1:2:3:4:5:6:1.2.3.4' }, true],
    [{ ip: '1:2:3:4:5:6:7::' }, true],
    [{ ip: '::01.2.3.4' }, false],
    [{ ip: 'fe80::1%eth0' }, false],
    [{ ip: '1:2:3:4:5:6:7:8:9' }, false],
    [{ ip: '1::2::3' }, false],
    [{ ip: '[::1]' }, false],
    [{ ip: '::1\n' }, false],
    [{ ip: 'localhost' }, false],
    [{ uptime_s: 0 }, true],
    [{ uptime_s: 2_147_483_647 }, true],
    [{ uptime_s: 2_147_483_648 }, false],
    [{ uptime_s: -1 }, false],
    [{ uptime_s: 1.5 }, false],
    [{ uptime_s: '3600' }, false],
    [{ rssi: -61 }, true],
    [{ rssi: -61.5 }, true],
    [{ rssi: 0 }, true],
    [{ rssi: -150 }, true],
    [{ rssi: -150.5 }, false],
    [{ rssi: 3 }, false],
    [{ rssi: null }, false],
    [{ rssi: '-61' }, false],
    [{ firmware: '1.4.2', extra_telemetry: { temp_c: 41 } }, true],
    [[], false],
    ['1.4.2', false],
    [null, false],
    [42, false],
  ];

  it.each(samples)('%j: valid = %s for both', (sample, valid) => {
    expect(validate(sample), `JSON Schema on ${JSON.stringify(sample)}`).toBe(valid);
    expect(Heartbeat.safeParse(sample).success, `zod on ${JSON.stringify(sample)}`).toBe(valid);
  });

  it('publishes the version grammar as a pattern of `firmware`', () => {
    const schema = protocolJsonSchemas().Heartbeat as { $defs: { Heartbeat: { properties: Record<string, object> } } };
    expect(schema.$defs.Heartbeat.properties.firmware).toHaveProperty('pattern');
  });
});
