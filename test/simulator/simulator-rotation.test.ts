import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { SimulatedDevice, type DeviceCredentials } from '#simulator/simulated-device';
import { startTestServer, type TestServer, type TestAccount } from '../helpers/test-server';
import { claimForMqtt, refusalCode } from '../helpers/mqtt';
import { makeCsr } from '../helpers/certificates';
import { ifStarted } from '../helpers/teardown';

/**
 * The reference device follows a planned rotation (docs/device-protocol.md "Credentials
 * rotation"): it stores the new password, acknowledges it, reconnects with it, and on a
 * CONNACK 4 with a new password falls back to the previous one once. It renews its certificate
 * from a CSR of its own.
 */
describe('simulated device and credential rotation', () => {
  let server: TestServer;
  let account: TestAccount;
  let url: string;
  const devices: SimulatedDevice[] = [];

  beforeAll(async () => {
    server = await startTestServer();
    account = await server.createAccount();
    url = server.service.mqttUrl!;
  }, 180_000);
  afterAll(async () => {
    for (const d of devices) await d.stop();
    await ifStarted(server)?.close();
  });

  const start = async (credentials: DeviceCredentials, saved?: DeviceCredentials[]) => {
    const device = new SimulatedDevice({
      credentials,
      brokerUrl: url,
      firmware: '1.0.0',
      heartbeatS: 3600,
      ...(saved ? { onCredentialsChange: (c: DeviceCredentials) => saved.push({ ...c }) } : {}),
    });
    devices.push(device);
    await device.start();
    return device;
  };
  const history = async (serial: string) =>
    (await account.api.get(`/api/v1/devices/${serial}/history`)).body.events as Array<{
      type: string;
      data: Record<string, unknown>;
    }>;

  it('stores the new password, acknowledges it and reconnects with it; the old one is refused afterwards', async () => {
    const [claimed] = await claimForMqtt(server, account, ['SIMROT-1'], { firmware: null });
    const original = { ...claimed! };
    const saved: DeviceCredentials[] = [];
    const device = await start({ ...claimed! }, saved);
    expect((await account.api.post('/api/v1/devices/SIMROT-1/credentials', { mode: 'in_band' })).status).toBe(202);

    await expect.poll(async () => (await history('SIMROT-1')).map((e) => e.type)).toContain('credentials_rotated');
    const rotated = (await history('SIMROT-1')).find((e) => e.type === 'credentials_rotated')!;
    expect(rotated.data.outcome).toBe('acknowledged');
    const current = device.secrets.credentials.password;
    expect(current).not.toBe(original.password);
    // Saved as soon as it arrived (a module writes it to flash before acknowledging).
    expect(saved.at(-1)?.password).toBe(current);
    // Back online with the new password.
    await expect.poll(() => device.connected).toBe(true);
    expect(await refusalCode(url, original)).toBe(4);
  });

  it('falls back to the previous password once when the new one is refused with CONNACK 4', async () => {
    const [claimed] = await claimForMqtt(server, account, ['SIMROT-2'], { firmware: null });
    const device = new SimulatedDevice({
      credentials: { ...claimed! },
      brokerUrl: url,
      firmware: '1.0.0',
      heartbeatS: 3600,
    });
    devices.push(device);
    // It stored a password the service never took (its rotation was replaced, say).
    const stored = device.secrets.receive(
      Buffer.from(
        JSON.stringify({
          type: 'password',
          rotation_id: '6f1c1a3e-1c1e-4f43-9d55-2f8a2b0e0a11',
          username: 'SIMROT-2',
          password: 'a-password-the-service-never-issued',
          grace_ends_at: '2026-12-04T10:00:00.000Z',
          a_field_from_a_newer_service: true,
        }),
      ),
    );
    expect(stored?.reconnect).toBe(true);
    await device.start();
    expect(device.connected).toBe(true);
    expect(device.secrets.credentials.password).toBe(claimed!.password);
  });

  it('renews its certificate from a CSR of its own and uses the new one', async () => {
    const [claimed] = await claimForMqtt(server, account, ['SIMROT-3'], { firmware: null });
    const enrolled = await account.api.post('/api/v1/devices/SIMROT-3/certificates', {
      csr: (await makeCsr({ commonName: 'SIMROT-3' })).pem,
    });
    expect(enrolled.status).toBe(201);
    // Over plain MQTT the device connects with its password; it holds a certificate all the same
    // (its key stays out of this test: without one the module connects by password).
    const device = await start({ ...claimed!, certificate: enrolled.body.certificate as string });
    expect(await device.renewCertificate()).toBe(true);
    await expect
      .poll(async () => (await account.api.get('/api/v1/devices/SIMROT-3/certificates')).body.certificates.length)
      .toBe(2);
    await expect.poll(() => device.secrets.credentials.certificate).not.toBe(enrolled.body.certificate);
    const certificates = (await account.api.get('/api/v1/devices/SIMROT-3/certificates')).body.certificates as Array<{
      certificate: string;
    }>;
    expect(certificates.map((c) => c.certificate)).toContain(device.secrets.credentials.certificate);
  });
});
