import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { freePort } from './haproxy';

/**
 * The service as a real OS process (`npm start`'s entry point), for fault tests and cluster
 * benchmarks that kill processes with SIGKILL. Ports are chosen up front so a restarted
 * process comes back on the same ones.
 */
export class ServiceProcess {
  private child: ChildProcess | undefined;
  private output = '';
  httpPort = 0;
  mqttPort = 0;

  constructor(private readonly env: Record<string, string>) {}

  get httpUrl(): string {
    return `http://127.0.0.1:${this.httpPort}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Starts the process and resolves when /readyz answers 200. */
  async start(timeoutMs = 60_000): Promise<void> {
    if (!this.httpPort) this.httpPort = await freePort();
    if (!this.mqttPort) this.mqttPort = await freePort();
    const entry = path.resolve('api/src/main.ts');
    this.output = '';
    this.child = spawn(process.execPath, ['--import', 'tsx', entry], {
      env: {
        ...process.env,
        PORT: String(this.httpPort),
        MQTT_PORT: String(this.mqttPort),
        HOST: '127.0.0.1',
        LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'warn',
        DEMO_ACCOUNT: 'false',
        ...this.env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout?.on('data', (d: Buffer) => (this.output = (this.output + d.toString()).slice(-20_000)));
    this.child.stderr?.on('data', (d: Buffer) => (this.output = (this.output + d.toString()).slice(-20_000)));
    const until = Date.now() + timeoutMs;
    while (Date.now() < until) {
      if (this.child.exitCode !== null)
        throw new Error(`service process exited (${this.child.exitCode}):\n${this.output}`);
      try {
        const res = await fetch(`${this.httpUrl}/readyz`);
        if (res.status === 200) return;
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error(`service process not ready within ${timeoutMs} ms:\n${this.output}`);
  }

  /** SIGKILL: no shutdown hooks, no flush (a crash). */
  async kill(): Promise<void> {
    await this.signal('SIGKILL');
  }

  /** SIGTERM: graceful shutdown. */
  async stop(): Promise<void> {
    await this.signal('SIGTERM');
  }

  /** SIGTERM, and how the process ended: its exit code and how long it took. */
  async terminate(): Promise<{ code: number | null; ms: number }> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return { code: child?.exitCode ?? null, ms: 0 };
    const started = Date.now();
    const code = new Promise<number | null>((resolve) => child.once('exit', (exitCode) => resolve(exitCode)));
    child.kill('SIGTERM');
    return { code: await code, ms: Date.now() - started };
  }

  logs(): string {
    return this.output;
  }

  private async signal(signal: NodeJS.Signals): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill(signal);
    await exited;
  }
}
