import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

export const haproxyAvailable = (): boolean => spawnSync('haproxy', ['-v']).status === 0;

export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * HAProxy in front of two nodes with docs/haproxy.cfg as written: only the addresses, the ports,
 * the open-file limit and the health-check pace (fast enough for a test) are replaced.
 */
export async function startHaproxy(
  nodes: Array<{ httpPort: number; mqttPort: number | null }>,
  ports: { httpPort?: number; mqttPort?: number } = {},
): Promise<{
  httpPort: number;
  mqttPort: number;
  stop(): Promise<void>;
}> {
  if (nodes.length !== 2) throw new Error('docs/haproxy.cfg describes two nodes');
  const httpPort = ports.httpPort ?? (await freePort());
  const mqttPort = ports.mqttPort ?? (await freePort());
  const documented = fs.readFileSync(path.resolve(__dirname, '../../docs/haproxy.cfg'), 'utf8');
  // This sandbox allows 20,000 open files per process: stay well below (2 fds per connection).
  let config = documented
    .replace('maxconn 200000', 'maxconn 4000')
    .replace('bind *:8080', `bind 127.0.0.1:${httpPort}`)
    .replace('bind *:1883', `bind 127.0.0.1:${mqttPort}`)
    .replaceAll('inter 2s fall 2 rise 2', 'inter 500ms fall 2 rise 1');
  nodes.forEach((n, i) => {
    const address = `10.0.0.1${i + 1}`;
    config = config
      .replace(`${address}:8080 check`, `127.0.0.1:${n.httpPort} check`)
      .replace(`${address}:1883 check port 8080`, `127.0.0.1:${n.mqttPort ?? 1} check port ${n.httpPort}`);
  });
  if (/10\.0\.0\.|\*:/.test(config)) throw new Error('docs/haproxy.cfg changed: the test cannot place it');
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'haproxy-')), 'haproxy.cfg');
  fs.writeFileSync(file, config);
  const child: ChildProcess = spawn('haproxy', ['-f', file, '-db'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  // Wait until it accepts connections.
  for (let i = 0; i < 50; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(httpPort, '127.0.0.1', () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) break;
    if (child.exitCode !== null) throw new Error(`haproxy exited: ${stderr}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    httpPort,
    mqttPort,
    async stop() {
      child.kill('SIGTERM');
      await new Promise((resolve) => (child.exitCode !== null ? resolve(null) : child.once('exit', resolve)));
    },
  };
}
