import tls from 'node:tls';
import type { AuthErrorCode, AuthenticateError, Client, ConnectPacket } from 'aedes';
import type { Logger } from '#core/logger';
import type { DeviceAuthService, DeviceSession } from '#core/devices/device-auth.service';

/** CONNACK return codes of MQTT 3.1.1 (section 3.2.2.3). */
const IDENTIFIER_REJECTED = 2;
const SERVER_UNAVAILABLE = 3;
const BAD_USERNAME_OR_PASSWORD = 4;
const NOT_AUTHORIZED = 5;

function refusal(message: string, returnCode: number): AuthenticateError {
  // Aedes declares these codes as an ambient const enum (AuthErrorCode), whose members cannot be
  // referenced under isolatedModules: the numbers above are its members.
  // eslint-disable-next-line @typescript-eslint/no-unsafe-enum-assignment -- see the comment above
  const code: AuthErrorCode = returnCode;
  return Object.assign(new Error(message), { returnCode: code });
}

/** The certificate a device presented on a TLS connection, or null (plain TCP, WebSocket, none sent). */
function clientCertificate(client: Client): { raw: Buffer } | null {
  const conn: unknown = client.conn;
  if (!(conn instanceof tls.TLSSocket)) return null;
  // Not `detailed`: only the DER is read, and the detailed form walks the issuer chain. Null once
  // the socket is destroyed (Node's types leave that out), empty when the device sent none.
  const peer = conn.getPeerCertificate(false) as tls.PeerCertificate | null;
  return peer && Buffer.isBuffer(peer.raw) && peer.raw.length > 0 ? { raw: peer.raw } : null;
}

/** Clients whose CONNECT carried an empty client id (Aedes 1.2 would invent one and accept it). */
const emptyIds = new WeakSet<Client>();

/**
 * Remembers an empty client id for `authenticate` to refuse with CONNACK 2 (identifier
 * rejected) [MQTT-3.1.3-8]. Aedes 1.2 accepts an empty id with `clean: false`, generating one.
 */
export function makePreConnect() {
  return (client: Client, packet: ConnectPacket, callback: (error: Error | null, success: boolean) => void): void => {
    if (!packet.clientId) emptyIds.add(client);
    callback(null, true);
  };
}

/**
 * Client id = username = a claimed serial, password checked against its SHA-256 (see
 * DeviceAuthService). Calls back as soon as the one lookup answered; nothing else runs here.
 */
export function makeAuthenticate(input: {
  auth: Pick<DeviceAuthService, 'authenticate' | 'authenticateCertificate'>;
  onAuthenticated: (client: Client, session: DeviceSession) => void;
  onRefused: (client: Client, reason: string, serial: string | undefined) => void;
  logger: Logger;
}) {
  return (
    client: Client,
    username: Readonly<string | undefined>,
    password: Readonly<Buffer | undefined>,
    done: (error: AuthenticateError | null, success: boolean | null) => void,
  ): void => {
    if (emptyIds.has(client)) {
      input.onRefused(client, 'empty_client_id', undefined);
      done(refusal('identifier rejected', IDENTIFIER_REJECTED), false);
      return;
    }
    // MQTTS: a device that presents a client certificate and no password is authenticated by
    // the certificate; with a password, the password decides (both work side by side).
    const certificate = password === undefined ? clientCertificate(client) : null;
    const attempt = certificate
      ? input.auth.authenticateCertificate({ clientId: client.id, username, certificate })
      : input.auth.authenticate({ clientId: client.id, username, password });
    attempt
      .then((result) => {
        if (result.ok) {
          input.onAuthenticated(client, result.session);
          done(null, true);
          return;
        }
        const serial = result.reason === 'invalid_client' ? undefined : client.id;
        input.onRefused(client, result.reason, serial);
        if (result.reason === 'invalid_client') done(refusal('identifier rejected', IDENTIFIER_REJECTED), false);
        // Not claimed (or unclaimed since): no secret of the device will do, so it backs off long
        // instead of trying its other secrets. Whether a serial is claimed is no secret: a claim
        // answers `already_claimed` to any account. docs/device-protocol.md "CONNACK codes".
        else if (result.reason === 'unknown_serial') done(refusal('not authorized', NOT_AUTHORIZED), false);
        // This password or certificate is not (or no longer) valid: the device may try the other
        // secret it holds (the one before a rotation, or its password after a certificate).
        else done(refusal('bad user name or password', BAD_USERNAME_OR_PASSWORD), false);
      })
      .catch((err: unknown) => {
        input.logger.error({ err, serial: client.id }, 'device authentication failed (database?)');
        input.onRefused(client, 'server_unavailable', client.id);
        done(refusal('server unavailable', SERVER_UNAVAILABLE), false);
      });
  };
}
