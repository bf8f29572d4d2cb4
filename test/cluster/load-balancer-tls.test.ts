import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { promisify } from 'node:util';
import fs from 'node:fs';
import path from 'node:path';
import mqtt from 'mqtt';
import { clusterAvailable, startTestCluster, type TestCluster } from '../helpers/cluster';
import { freePort, haproxyAvailable } from '../helpers/haproxy';
import { curlAvailable, makeTlsFiles, opensslAvailable, type TlsFiles } from '../helpers/tls';
import { ifStarted } from '../helpers/teardown';

const run = promisify(execFile);
const availability = await clusterAvailable();
const tools = haproxyAvailable() && opensslAvailable() && curlAvailable();
if (!availability.ok) console.log(`TLS load balancer tests skipped: ${availability.why}`);
else if (!tools) console.log('TLS load balancer tests skipped: they need haproxy, openssl and curl');

/**
 * docs/haproxy-tls.cfg as written (only addresses, ports and the certificate path replaced):
 * HAProxy terminates TLS for HTTPS and MQTTS in front of two processes that speak plain HTTP
 * and MQTT.
 */
describe.skipIf(!availability.ok || !tools)('two processes behind a TLS-terminating HAProxy', () => {
  let cluster: TestCluster;
  let files: TlsFiles;
  let haproxy: ChildProcess;
  let httpsPort: number;
  let mqttsPort: number;
  let apiKey: string;
  const admin = { email: `lbtls-${Date.now()}@example.test`, password: 'correct horse battery' };

  beforeAll(async () => {
    cluster = await startTestCluster(2);
    files = makeTlsFiles();
    const pem = path.join(files.dir, 'haproxy.pem');
    fs.writeFileSync(pem, Buffer.concat([fs.readFileSync(files.certFile), fs.readFileSync(files.keyFile)]));
    [httpsPort, mqttsPort] = [await freePort(), await freePort()];
    const [a, b] = cluster.nodes as [(typeof cluster.nodes)[0], (typeof cluster.nodes)[0]];
    const config = fs
      .readFileSync(path.resolve('docs/haproxy-tls.cfg'), 'utf8')
      .replaceAll('/etc/haproxy/fleet.pem', pem)
      .replace('maxconn 200000', 'maxconn 4000')
      .replace('bind *:443', `bind 127.0.0.1:${httpsPort}`)
      .replace('bind *:8883', `bind 127.0.0.1:${mqttsPort}`)
      .replaceAll('10.0.0.11:8080', `127.0.0.1:${a.httpPort}`)
      .replaceAll('10.0.0.12:8080', `127.0.0.1:${b.httpPort}`)
      .replaceAll('10.0.0.11:1883', `127.0.0.1:${a.mqttPort}`)
      .replaceAll('10.0.0.12:1883', `127.0.0.1:${b.mqttPort}`)
      .replaceAll('check port 8080', `check port ${a.httpPort}`);
    const file = path.join(files.dir, 'haproxy.cfg');
    fs.writeFileSync(file, config);
    haproxy = spawn('haproxy', ['-f', file, '-db'], { stdio: 'ignore' });
    const created = await a.services.accounts.create({
      name: 'LB TLS Co',
      quota: 100,
      budget: 1000,
      currency: 'EUR',
      unitPrice: 1,
      adminEmail: admin.email,
      adminPassword: admin.password,
    });
    apiKey = created.apiKey;
    // Ready once HAProxy answers and has seen a process healthy.
    for (let i = 0; i < 75; i++) {
      const code = (
        await run('curl', [
          '-s',
          '-o',
          '/dev/null',
          '-w',
          '%{http_code}',
          '--cacert',
          files.caFile,
          `https://127.0.0.1:${httpsPort}/readyz`,
        ]).catch(() => ({ stdout: '000' }))
      ).stdout;
      if (code === '200') break;
      await new Promise((r) => setTimeout(r, 200));
    }
  }, 120_000);
  afterAll(async () => {
    ifStarted(haproxy)?.kill('SIGTERM');
    await ifStarted(cluster)?.close();
  });

  it('answers REST over HTTPS through the proxy, and the processes see https (Secure cookie)', async () => {
    const { stdout } = await run('curl', [
      '-sS',
      '--cacert',
      files.caFile,
      '-H',
      `Authorization: Bearer ${apiKey}`,
      `https://127.0.0.1:${httpsPort}/api/v1/allocation`,
    ]);
    expect(JSON.parse(stdout).quota).toBe(100);
    const headers = (
      await run('curl', [
        '-sS',
        '-D',
        '-',
        '-o',
        '/dev/null',
        '--cacert',
        files.caFile,
        '-H',
        'Content-Type: application/json',
        '-d',
        JSON.stringify(admin),
        `https://127.0.0.1:${httpsPort}/api/v1/session`,
      ])
    ).stdout;
    expect(headers).toMatch(/^HTTP\/1\.1 201/);
    expect(headers).toMatch(/set-cookie: fleet_session=[^\r\n]*; Secure/i);
  });

  it('carries MQTT over TLS to the processes', async () => {
    const claimed = JSON.parse(
      (
        await run('curl', [
          '-sS',
          '--cacert',
          files.caFile,
          '-H',
          `Authorization: Bearer ${apiKey}`,
          '-H',
          'Content-Type: application/json',
          '-d',
          JSON.stringify({ name: 'LX-LB' }),
          `https://127.0.0.1:${httpsPort}/api/v1/models`,
        ])
      ).stdout,
    );
    expect(claimed.model.name).toBe('LX-LB');
    const res = JSON.parse(
      (
        await run('curl', [
          '-sS',
          '--cacert',
          files.caFile,
          '-H',
          `Authorization: Bearer ${apiKey}`,
          '-H',
          'Content-Type: application/json',
          '-d',
          JSON.stringify({ serials: ['LB-TLS-1'], model: 'LX-LB' }),
          `https://127.0.0.1:${httpsPort}/api/v1/devices/claim`,
        ])
      ).stdout,
    );
    const { username, password } = res.devices[0].credentials as { username: string; password: string };
    const device = await mqtt.connectAsync(`mqtts://127.0.0.1:${mqttsPort}`, {
      ca: fs.readFileSync(files.caFile),
      clientId: 'LB-TLS-1',
      username,
      password,
      clean: false,
      reconnectPeriod: 0,
    });
    expect(device.connected).toBe(true);
    await device.endAsync();
  });
});
