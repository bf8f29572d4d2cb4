import net from 'node:net';
import { ConfigurationError, SETTINGS, settingError } from './config';

/** Where a listener was to bind, and the setting that chose its port. */
export interface ListenTarget {
  /** `HTTP`, `MQTT`, `MQTTS`. */
  what: string;
  port: number;
  host: string;
  /** `PORT`, `MQTT_PORT`, `MQTTS_PORT`. */
  setting: string;
}

/**
 * A listener that could not bind, told by the setting to change: a taken port names its port
 * setting (and keeps the code EADDRINUSE, on which a zero-configuration start moves MQTT to
 * another port); a HOST that does not resolve or is no address of this machine names HOST.
 * Anything else is passed on as it is.
 */
export function listenFailure(error: NodeJS.ErrnoException, at: ListenTarget): Error {
  switch (error.code) {
    case 'EADDRINUSE':
      return Object.assign(
        new ConfigurationError([
          `${at.what} port ${at.port} on ${at.host} is already in use. Set ${at.setting} to a free port (0 picks any).`,
        ]),
        { code: error.code },
      );
    case 'EACCES':
      return new ConfigurationError([
        settingError(
          at.setting,
          String(at.port),
          `this process may not listen on port ${at.port} (ports below 1024 need privileges); expected a port from 1024 on, or 0 = any free port`,
        ),
      ]);
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
    case 'EAI_FAIL':
      return new ConfigurationError([
        settingError('HOST', at.host, `the name does not resolve (${error.code}); expected ${SETTINGS.host.allowed}`),
      ]);
    case 'EADDRNOTAVAIL':
      return new ConfigurationError([
        settingError(
          'HOST',
          at.host,
          `not an address of this machine (${error.code}); expected ${SETTINGS.host.allowed}`,
        ),
      ]);
    default:
      return error;
  }
}

/**
 * HOST is tried before anything starts (a listener on any free port, closed at once): a name
 * that does not resolve, or an address of no interface of this machine, fails the start with one
 * line that names HOST, before the database opens and before any log line, instead of
 * getaddrinfo's words once the listeners bind.
 */
export function checkListenHost(host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(listenFailure(error, { what: 'HTTP', port: 0, host, setting: 'PORT' })),
    );
    server.listen(0, host, () => server.close(() => resolve()));
  });
}
