import { readFile, rename, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';

/** The file in DATA_DIR that remembers the MQTT port a zero-configuration start moved to. */
export const PORTS_FILE = 'ports.json';

/**
 * What a zero-configuration start did about its MQTT port, for the start banner; null when it
 * listens on the default port as usual.
 * - `moved`: the default port was taken; a free port was picked and remembered.
 * - `remembered`: the port an earlier start moved to, used again.
 * - `moved-again`: the remembered port and the default one were both taken; a new one was picked.
 * - `back-to-default`: the remembered port was taken, the default one was free; the memory is gone.
 */
export type MqttPortFallback =
  | { kind: 'moved'; port: number; defaultPort: number; file: string }
  | { kind: 'remembered'; port: number; defaultPort: number; file: string }
  | { kind: 'moved-again'; port: number; previous: number; defaultPort: number; file: string }
  | { kind: 'back-to-default'; port: number; previous: number; file: string };

/**
 * Binds MQTT for a zero-configuration start (core/config.ts CONFIGURED_BY): the port remembered
 * in DATA_DIR/ports.json first, else the default port; when that is taken (EADDRINUSE), any free
 * port, written to ports.json so that the next start, and every command a user has edited
 * since, keeps it. The remembered port wins over a default port that became free again: the
 * port does not change under a user unless it has to. Errors other than a taken port end the start.
 */
export async function listenWithFallback(input: {
  /** Binds MQTT on `port` (0 = any free port) and resolves with the bound port. */
  listen: (port: number) => Promise<number>;
  dataDir: string;
  defaultPort: number;
}): Promise<{ port: number; fallback: MqttPortFallback | null }> {
  const file = path.join(input.dataDir, PORTS_FILE);
  const remembered = await readRememberedPort(file);
  if (remembered !== null && remembered !== input.defaultPort) {
    const port = await tryListen(input.listen, remembered);
    if (port !== null) return { port, fallback: { kind: 'remembered', port, defaultPort: input.defaultPort, file } };
  }
  const atDefault = await tryListen(input.listen, input.defaultPort);
  if (atDefault !== null) {
    if (remembered === null || remembered === input.defaultPort) return { port: atDefault, fallback: null };
    await rm(file, { force: true });
    return { port: atDefault, fallback: { kind: 'back-to-default', port: atDefault, previous: remembered, file } };
  }
  const port = await input.listen(0);
  await rememberPort(file, { mqtt: port, defaultPort: input.defaultPort });
  return {
    port,
    fallback:
      remembered === null || remembered === input.defaultPort
        ? { kind: 'moved', port, defaultPort: input.defaultPort, file }
        : { kind: 'moved-again', port, previous: remembered, defaultPort: input.defaultPort, file },
  };
}

/** The bound port, or null when `port` is taken. */
async function tryListen(listen: (port: number) => Promise<number>, port: number): Promise<number | null> {
  try {
    return await listen(port);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EADDRINUSE') return null;
    throw error;
  }
}

/** The remembered MQTT port; null when there is none, or the file is not one we wrote (it is then written anew). */
async function readRememberedPort(file: string): Promise<number | null> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw error;
  }
  try {
    const port = (JSON.parse(text) as { mqtt?: unknown }).mqtt;
    return typeof port === 'number' && Number.isInteger(port) && port > 0 && port < 65536 ? port : null;
  } catch {
    return null;
  }
}

/** Written to a temporary file and renamed: a start killed half-way leaves the old file or the new one. */
async function rememberPort(file: string, ports: { mqtt: number; defaultPort: number }): Promise<void> {
  const body = {
    mqtt: ports.mqtt,
    why: `MQTT port ${ports.defaultPort} was taken when the service started without MQTT_PORT; later starts use this port again. Delete this file to try ${ports.defaultPort} first, or set MQTT_PORT.`,
  };
  const temp = `${file}.${process.pid}.tmp`;
  await writeFile(temp, JSON.stringify(body, null, 2) + '\n');
  await rename(temp, file);
}
