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

/** HAProxy in TCP mode in front of the nodes, with the same settings as docs/haproxy.cfg. */
export async function startHaproxy(
  nodes: Array<{ httpPort: number; mqttPort: number | null }>,
  ports: { httpPort?: number; mqttPort?: number } = {},
): Promise<{
  httpPort: number;
  mqttPort: number;
  stop(): Promise<void>;
}> {
  const httpPort = ports.httpPort ?? (await freePort());
  const mqttPort = ports.mqttPort ?? (await freePort());
  const servers = (kind: 'http' | 'mqtt') =>
    nodes
      .map(
        (n, i) =>
          `    server node${i + 1} 127.0.0.1:${kind === 'http' ? n.httpPort : n.mqttPort} check port ${n.httpPort} inter 500ms fall 2 rise 1`,
      )
      .join('\n');
  // This sandbox allows 20,000 open files per process: stay well below (2 fds per connection).
  const config = `global
    maxconn 4000
defaults
    mode tcp
    timeout connect 5s
    timeout client 10m
    timeout server 10m
frontend fleet_http
    bind 127.0.0.1:${httpPort}
    default_backend fleet_http_nodes
backend fleet_http_nodes
    balance roundrobin
    option httpchk GET /readyz
    http-check expect status 200
${servers('http')}
frontend fleet_mqtt
    bind 127.0.0.1:${mqttPort}
    default_backend fleet_mqtt_nodes
backend fleet_mqtt_nodes
    balance leastconn
    option httpchk GET /readyz
    http-check expect status 200
${nodes.every((n) => n.mqttPort) ? servers('mqtt') : ''}
`;
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
