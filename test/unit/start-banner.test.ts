import { describe, expect, it } from 'vitest';
import { loadConfig } from '#core/config';
import { startBanner } from '#api/start-banner';

describe('configuration of the listeners', () => {
  it('defaults: HTTP 8080, MQTT 1883, MQTTS 8883; MQTT_PORT=off turns plain MQTT off; 0 means any free port', () => {
    const defaults = loadConfig({});
    expect({ port: defaults.port, mqttPort: defaults.mqttPort, mqttsPort: defaults.mqttsPort }).toEqual({
      port: 8080,
      mqttPort: 1883,
      mqttsPort: 8883,
    });
    expect(loadConfig({ MQTT_PORT: 'off' }).mqttPort).toBe('off');
    expect(loadConfig({ MQTTS_PORT: '0' }).mqttsPort).toBe(0);
    expect(() => loadConfig({ MQTTS_PORT: '70000' })).toThrow(/MQTTS_PORT|mqttsPort/);
  });
});

describe('start banner', () => {
  const service = {
    tlsCertificate: '-----BEGIN CERTIFICATE-----',
    httpUrl: 'https://127.0.0.1:8443',
    mqttUrl: null,
    mqttsUrl: 'mqtts://127.0.0.1:8883',
    demo: null,
    database: { kind: 'postgres' as const },
  };

  it('prints every listener actually bound, the TLS ones included, and no plain MQTT when it is off', () => {
    const text = startBanner({ service, dataDir: './data' });
    expect(text).toContain('HTTPS (portal, REST /api/v1, GraphQL /graphql): https://127.0.0.1:8443');
    expect(text).toContain('MQTT over TLS for devices: mqtts://127.0.0.1:8883');
    expect(text).toContain('MQTT over WebSocket: wss://127.0.0.1:8443/mqtt');
    expect(text).not.toContain('MQTT for devices:');
  });

  it('prints the plain listeners without TLS, and the demo login with its key only when just created', () => {
    const plain = {
      ...service,
      tlsCertificate: null,
      httpUrl: 'http://127.0.0.1:41234',
      mqttUrl: 'mqtt://127.0.0.1:41235',
      mqttsUrl: null,
      database: { kind: 'embedded' as const },
    };
    const created = startBanner({
      service: {
        ...plain,
        demo: { kind: 'created', email: 'demo@fleet.local', password: 'demo-password', apiKey: 'flk_x' },
      },
      dataDir: './data',
    });
    expect(created).toContain('HTTP (portal, REST /api/v1, GraphQL /graphql): http://127.0.0.1:41234');
    expect(created).toContain('MQTT for devices: mqtt://127.0.0.1:41235');
    expect(created).not.toContain('MQTT over TLS');
    expect(created).toContain('admin API key (shown once): flk_x');
  });
});
