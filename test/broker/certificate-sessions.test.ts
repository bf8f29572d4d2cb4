import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { claimForMqtt, connectDevice, type DeviceCreds } from '../helpers/mqtt';
import { DeviceBroker } from '#broker/create-broker';
import { DeviceAuthService, type DeviceAuthResult } from '#core/devices/device-auth.service';
import { createMetrics } from '#core/metrics';
import { HeartbeatIngest } from '#core/devices/heartbeat-ingest';
import { ifStarted } from '../helpers/teardown';

const CERTIFICATE = 'c'.repeat(64);

/**
 * Sessions as the MQTTS listener will make them: authenticated, and marked with the certificate
 * they used. Until that listener exists the mark is added to password sessions here, which is
 * all the broker looks at when a revocation asks it to close "the sessions of certificate X".
 */
class CertificateMarkingAuth extends DeviceAuthService {
  override async authenticate(input: {
    clientId: string;
    username: string | undefined;
    password: Buffer | undefined;
  }): Promise<DeviceAuthResult> {
    const result = await super.authenticate(input);
    return result.ok ? { ok: true, session: { ...result.session, certificateFingerprint: CERTIFICATE } } : result;
  }
}

describe('closing the sessions of one certificate', () => {
  let server: TestServer;
  let account: TestAccount;
  let marked: DeviceBroker;
  let markedUrl: string;
  let creds: DeviceCreds[];

  beforeAll(async () => {
    server = await startTestServer();
    account = await server.createAccount();
    creds = await claimForMqtt(server, account, ['SESS-CERT', 'SESS-PASS'], { firmware: null });
    const { services, logger, clock, database } = server.service;
    const deps = { knex: database.knex, logger, clock };
    marked = await DeviceBroker.create({ metrics: createMetrics(), logger, reconcileAllOnStart: false });
    await marked.start({
      auth: new CertificateMarkingAuth(deps),
      presence: services.presence,
      ingest: new HeartbeatIngest({ presence: services.presence, clock, logger }),
      // This broker's devices need no OTA engine.
      otaListener: {
        onDeviceReady: () => Promise.resolve(),
        onDeviceHeard: () => Promise.resolve(),
        onProgress: () => Promise.resolve(),
        onFirmwareReported: () => Promise.resolve(),
      },
    });
    markedUrl = `mqtt://127.0.0.1:${await marked.listenTcp(0, '127.0.0.1')}`;
  }, 180_000);
  afterAll(async () => {
    await ifStarted(marked)?.close();
    await ifStarted(server)?.close();
  });

  it('closes a session of that certificate, and leaves sessions of another certificate or of a password', async () => {
    const [certificateDevice, passwordDevice] = creds as [DeviceCreds, DeviceCreds];
    const byCertificate = await connectDevice(markedUrl, certificateDevice);
    await expect.poll(() => marked.isConnected('SESS-CERT')).toBe(true);
    const byPassword = await connectDevice(server.service.mqttUrl!, passwordDevice);
    await expect.poll(() => server.service.broker.isConnected('SESS-PASS')).toBe(true);

    marked.disconnect('SESS-CERT', 'certificate revoked', { certificateFingerprint: 'd'.repeat(64) });
    server.service.broker.disconnect('SESS-PASS', 'certificate revoked', { certificateFingerprint: CERTIFICATE });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(byCertificate.connected).toBe(true);
    expect(byPassword.connected).toBe(true);

    marked.disconnect('SESS-CERT', 'certificate revoked', { certificateFingerprint: CERTIFICATE });
    await expect.poll(() => byCertificate.connected).toBe(false);
    expect(byPassword.connected).toBe(true);
    // Without a fingerprint (rotation, unclaim) every session of the serial closes.
    server.service.broker.disconnect('SESS-PASS', 'credentials rotated');
    await expect.poll(() => byPassword.connected).toBe(false);
    byCertificate.end(true);
    byPassword.end(true);
  });
});
