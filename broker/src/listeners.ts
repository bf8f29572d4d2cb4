import net from 'node:net';
import tls from 'node:tls';
import type http from 'node:http';
import type { Duplex } from 'node:stream';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, createWebSocketStream } from 'ws';
import type { Logger } from '#core/logger';
import { LISTEN_BACKLOG } from '#core/listen-backlog';
import { listenFailure } from '#core/listen-errors';
import { MAX_MQTT_PACKET_BYTES } from './packet-size-guard';

export interface DeviceListenersInput {
  logger: Logger;
  /** False before the broker started and once it is closing: a new connection is dropped at once. */
  accepting: () => boolean;
  /** Hands a new connection, whatever its transport, to the MQTT broker. */
  handle: (stream: Duplex, req?: http.IncomingMessage) => void;
}

/**
 * The ways devices reach the broker: plain MQTT on TCP, MQTT over TLS, and MQTT over WebSocket
 * (on the HTTP server's `/mqtt`). Keeps every open socket, so a close can end the connections
 * Aedes does not know of yet.
 */
export class DeviceListeners {
  /** The TCP and TLS listeners (MQTT over WebSocket rides on the HTTP server). */
  private readonly servers: net.Server[] = [];
  /** Open TCP and TLS sockets, with or without an MQTT session yet (close() ends the stragglers). */
  private readonly sockets = new Set<net.Socket>();
  private readonly wss = new WebSocketServer({ noServer: true, maxPayload: MAX_MQTT_PACKET_BYTES });

  constructor(private readonly input: DeviceListenersInput) {}

  /** Plain MQTT on `port` (MQTT_PORT). Resolves with the bound port. */
  listenTcp(port: number, host: string): Promise<number> {
    return this.listen(
      net.createServer((socket) => this.accept(socket)),
      { port, host, what: 'MQTT', setting: 'MQTT_PORT' },
    );
  }

  /**
   * MQTT over TLS on `port` (MQTTS_PORT). A client that does not complete a TLS handshake (plain
   * MQTT sent to this port, say) never reaches Aedes. `credentials.attach` keeps the listener on
   * a renewed certificate. Devices may present a client certificate (not required: passwords
   * work here too).
   */
  listenTls(
    port: number,
    host: string,
    credentials: { serverOptions(): tls.TlsOptions; attach(server: tls.Server): void },
  ): Promise<number> {
    const server = tls.createServer(
      { ...credentials.serverOptions(), requestCert: true, rejectUnauthorized: false },
      (socket) => this.accept(socket),
    );
    // A failed handshake is the client's problem (wrong CA, plain text, a scanner): not an error of ours.
    server.on('tlsClientError', (err) => this.input.logger.debug({ err: err.message }, 'MQTTS handshake failed'));
    credentials.attach(server);
    return this.listen(server, { port, host, what: 'MQTTS', setting: 'MQTTS_PORT' });
  }

  /** For the HTTP server's upgrade dispatcher: MQTT over WebSocket on `/mqtt`. */
  readonly handleUpgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer): void => {
    if (!this.input.accepting()) {
      socket.destroy();
      return;
    }
    this.wss.handleUpgrade(req, socket, head, (ws) => {
      const stream = createWebSocketStream(ws);
      stream.on('error', (err) => this.input.logger.debug({ err }, 'MQTT WebSocket stream error'));
      this.input.handle(stream, req);
    });
  };

  /** Every TCP and TLS listener is listening. */
  get listening(): boolean {
    return this.servers.every((server) => server.listening);
  }

  /** Takes no new connection; resolves once every listener closed (after its open sockets ended). */
  stopListening(): Promise<void> {
    return Promise.all(
      this.servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))),
    ).then(() => undefined);
  }

  /** Ends every socket still open, with or without an MQTT session. */
  endConnections(): void {
    for (const socket of this.sockets) socket.destroy();
    for (const ws of this.wss.clients) ws.terminate();
    this.wss.close();
  }

  private accept(socket: net.Socket): void {
    if (!this.input.accepting()) {
      socket.destroy();
      return;
    }
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    socket.setNoDelay(true);
    this.input.handle(socket);
  }

  private listen(
    server: net.Server,
    at: { port: number; host: string; what: string; setting: string },
  ): Promise<number> {
    this.servers.push(server);
    return new Promise((resolve, reject) => {
      const onError = (error: NodeJS.ErrnoException) => {
        // A listener that never bound is no part of `listening` (a zero-configuration start
        // tries another port after EADDRINUSE).
        this.servers.splice(this.servers.indexOf(server), 1);
        reject(listenFailure(error, at));
      };
      server.once('error', onError);
      server.listen(at.port, at.host, LISTEN_BACKLOG, () => {
        server.off('error', onError);
        server.on('error', (err) => this.input.logger.error({ err }, `${at.what} listener error`));
        resolve((server.address() as AddressInfo).port);
      });
    });
  }
}
