import { parseArgs } from 'node:util';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import cliProgress from 'cli-progress';
import {
  Fleet,
  claimDevices,
  commonPrefix,
  countOnline,
  fetchDeviceEndpoints,
  loadCredentials,
  makeSerials,
  pickBrokerUrl,
  saveCredentials,
  type FleetStats,
} from './fleet';
import { loadDeviceCertificates, saveDeviceCertificates } from './device-certificates';
import { isValidVersion } from '#protocol/version';
import { trustSigningKey, type TrustedSigningKey } from './firmware-trust';

const USAGE = `Usage: npm run simulator -- --count N --api-url URL --api-key KEY --model M --firmware V [--broker-url URL]
         [--claim] [--serial-prefix P] [--heartbeat-s S] [--fail-rate R] [--download-kbps K]
         [--flap-rate R] [--duration S] [--credentials FILE] [--signing-key FILE]
         [--ca FILE] [--cert-dir DIR] [--images DIR] [--fail-delta] [--luminaire on|S]
         [--failing-drivers P%] [--bad-firmware V] [--verbose]

  --count N            virtual devices (1..10000 per process)
  --api-url URL        the service's HTTP(S) address: --claim uses it, the broker URL comes from it
                       (GET /api/v1/device-endpoints), and after connecting the simulator checks
                       there that the service sees its devices online
  --api-key KEY        an admin API key of the account (with --api-url)
  --broker-url URL     override the broker the service names: mqtt://host:1883, mqtts://host:8883,
                       ws://host:8080/mqtt or wss://...
  --model M            model of the devices (must be registered in the account); they refuse OTA
                       commands for another model (error_code wrong_model)
  --firmware V         version the devices run at start (and claim with)
  --claim              claim the serials first (REST batch claim, 1000 per request)
  --serial-prefix P    serials are P-000001...; default SIM-<random> with --claim
  --heartbeat-s S      heartbeat period in seconds (default: the device's configured interval, 60)
  --fail-rate R        probability 0..1 that an OTA update fails (default 0)
  --download-kbps K    firmware download speed in kilobits/s (default 0 = unthrottled)
  --flap-rate R        connection drops per device per minute (default 0)
  --duration S         stop after S seconds (default: until Ctrl-C)
  --credentials FILE   with --claim: save credentials there; without: read them from there
  --signing-key FILE   the firmware signing public key (PEM, Ed25519): install only images signed
                       with it, report others failed with error "signature_invalid: ..."
  --ca FILE            CA certificate (PEM) that signed the service's TLS certificate, for
                       mqtts://, wss:// and an https --api-url
  --cert-dir DIR       device certificates: with --claim, each device makes a key and CSR and
                       the claim signs them (DIR/<serial>.key and DIR/<serial>.pem); without,
                       devices with both files in DIR connect by certificate, no password
  --images DIR         firmware images DIR/<version>.bin (at least the --firmware one): devices
                       apply the delta of an OTA command to the image they run (BSDIFF40), check
                       the result's sha256 and signature, and keep every image they install
  --fail-delta         applying a delta fails (error_code delta_apply): the service must send
                       the full image instead
  --luminaire on|S     report D4i luminaire data (dimming schedule by local time, energy, temperatures,
                       counters, a driver replaced now and then): every configured luminaire_interval_s
                       (default 900 s) with "on", or every S seconds
  --failing-drivers P% with --luminaire: P percent of the devices (at least one when P > 0, the same
                       serials every run) have a driver that degrades over 48 readings: thermal
                       derating, a hotter gear, supply faults, thermal shutdowns, then a light
                       source failure (the fixture stays dark)
  --bad-firmware V     with --luminaire: devices running version V (from the start or after an OTA
                       update to it) report thermal derating and supply faults far more often
  --verbose            print every MQTT message (meant for --count 1)`;

function fail(message: string): never {
  console.error(`simulator: ${message}\n\n${USAGE}`);
  process.exit(2);
}

function numberOption(value: string | undefined, name: string, min: number, max: number): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n < min || n > max)
    fail(`--${name} must be a number from ${min} to ${max} (got "${value}")`);
  return n;
}

const { values } = (() => {
  try {
    return parseArgs({
      options: {
        count: { type: 'string' },
        'broker-url': { type: 'string' },
        'api-url': { type: 'string' },
        'api-key': { type: 'string' },
        model: { type: 'string' },
        firmware: { type: 'string' },
        images: { type: 'string' },
        'fail-delta': { type: 'boolean' },
        luminaire: { type: 'string' },
        'failing-drivers': { type: 'string' },
        'bad-firmware': { type: 'string' },
        claim: { type: 'boolean', default: false },
        'serial-prefix': { type: 'string' },
        'heartbeat-s': { type: 'string' },
        'fail-rate': { type: 'string' },
        'download-kbps': { type: 'string' },
        'flap-rate': { type: 'string' },
        duration: { type: 'string' },
        credentials: { type: 'string' },
        'signing-key': { type: 'string' },
        ca: { type: 'string' },
        'cert-dir': { type: 'string' },
        verbose: { type: 'boolean', default: false },
        help: { type: 'boolean', default: false },
      },
      strict: true,
    });
  } catch (err) {
    fail((err as Error).message);
  }
})();

if (values.help) {
  console.log(USAGE);
  process.exit(0);
}

const count = numberOption(values.count, 'count', 1, 10_000) ?? fail('--count is required');
if (!Number.isInteger(count)) fail('--count must be a whole number');
const brokerUrlOption = values['broker-url'];
if (brokerUrlOption !== undefined && !/^(mqtt|ws|wss|mqtts|tcp):\/\//.test(brokerUrlOption))
  fail('--broker-url must start with mqtt:// or ws:// (wss://, mqtts:// also work)');
// The service's API, when given: where the broker is, and whether the service sees the devices.
const api =
  values['api-url'] !== undefined && values['api-key'] !== undefined
    ? { apiUrl: values['api-url'], apiKey: values['api-key'] }
    : undefined;
if (brokerUrlOption === undefined && !api)
  fail('--api-url and --api-key are required to ask the service for its broker (or give --broker-url)');
const firmware = values.firmware ?? fail('--firmware is required');
if (!isValidVersion(firmware)) fail(`--firmware "${firmware}" is not a dotted version such as 1.4.2`);
const heartbeatS = numberOption(values['heartbeat-s'], 'heartbeat-s', 0.05, 3600);
const failRate = numberOption(values['fail-rate'], 'fail-rate', 0, 1) ?? 0;
const downloadKbps = numberOption(values['download-kbps'], 'download-kbps', 0, 10_000_000) ?? 0;
const flapRate = numberOption(values['flap-rate'], 'flap-rate', 0, 60) ?? 0;
const duration = numberOption(values.duration, 'duration', 1, 365 * 24 * 3600);
const signingKey = values['signing-key'] === undefined ? undefined : readSigningKey(values['signing-key']);
const ca = values.ca === undefined ? undefined : readText(values.ca, '--ca');
const certDir = values['cert-dir'];
const images = values.images === undefined ? undefined : readImages(values.images);
const failingDrivers =
  values['failing-drivers'] === undefined
    ? undefined
    : numberOption(values['failing-drivers'].replace(/%$/, ''), 'failing-drivers', 0, 100)! / 100;
const badFirmware = values['bad-firmware'];
if (badFirmware !== undefined && !isValidVersion(badFirmware))
  fail(`--bad-firmware "${badFirmware}" is not a dotted version such as 1.4.2`);
// The faults are in the luminaire readings: without them the options would silently do nothing.
if ((failingDrivers !== undefined || badFirmware !== undefined) && values.luminaire === undefined)
  fail('--failing-drivers and --bad-firmware change the luminaire readings: add --luminaire on (or --luminaire S)');

/** DIR/<version>.bin, by version: the images the simulated modules hold in flash. */
function readImages(dir: string): Map<string, Uint8Array> {
  const found = new Map<string, Uint8Array>();
  try {
    for (const name of readdirSync(dir)) {
      const version = name.endsWith('.bin') ? name.slice(0, -4) : '';
      if (isValidVersion(version)) found.set(version, readFileSync(join(dir, name)));
    }
  } catch (err) {
    fail(`--images ${dir}: ${(err as Error).message}`);
  }
  return found;
}

function readText(file: string, option: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    fail(`${option} ${file} cannot be read (${(err as Error).message})`);
  }
}

function readSigningKey(file: string): TrustedSigningKey {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    fail(`--signing-key ${file} cannot be read (${(err as Error).message})`);
  }
  try {
    return trustSigningKey(text);
  } catch (err) {
    fail(`--signing-key ${file}: ${(err as Error).message}`);
  }
}

async function credentials() {
  if (values.claim) {
    const apiUrl = values['api-url'] ?? fail('--api-url is required with --claim');
    const apiKey = values['api-key'] ?? fail('--api-key is required with --claim');
    const model = values.model ?? fail('--model is required with --claim');
    const prefix = values['serial-prefix'] ?? `SIM-${randomBytes(2).toString('hex').toUpperCase()}`;
    const serials = makeSerials(prefix, count);
    console.log(
      `claiming ${count} devices ${serials[0]}..${serials.at(-1)} (model ${model}, firmware ${firmware}) at ${apiUrl}`,
    );
    const creds = await claimDevices({
      apiUrl,
      apiKey,
      model,
      firmware,
      serials,
      certificates: certDir !== undefined,
      ...(ca !== undefined ? { ca } : {}),
      onBatch: (done) => console.log(`  claimed ${done}/${count}`),
      onNote: (m) => console.log(`  note: ${m}`),
    });
    if (values.credentials) {
      await saveCredentials(values.credentials, creds);
      console.log(`credentials saved to ${values.credentials} (keep it private: it holds the device passwords)`);
    }
    if (certDir !== undefined) {
      const certified = creds.flatMap((c) =>
        c.certificate && c.privateKey
          ? [{ serial: c.serial, certificate: c.certificate, privateKey: c.privateKey }]
          : [],
      );
      await saveDeviceCertificates(certDir, certified);
      console.log(
        `${certified.length} device keys and certificates saved in ${certDir} (the devices connect with them, no password)`,
      );
    }
    return creds;
  }
  if (!values.credentials)
    fail('without --claim, --credentials FILE must name the credentials saved by an earlier --claim run');
  const creds = (await loadCredentials(values.credentials)).slice(0, count);
  if (creds.length < count) fail(`${values.credentials} holds ${creds.length} devices, fewer than --count ${count}`);
  if (certDir === undefined) return creds;
  const certificates = await loadDeviceCertificates(
    certDir,
    creds.map((c) => c.serial),
  );
  console.log(`${certificates.size} of ${count} devices connect by certificate (from ${certDir})`);
  return creds.map((c) => ({ ...c, ...certificates.get(c.serial) }));
}

const line = (s: FleetStats) =>
  `connected ${s.connected}/${s.total} | online ${s.online} | updating ${s.updating} | succeeded ${s.succeeded} | failed ${s.failed + s.rolledBack} (rolled back ${s.rolledBack}) | heartbeats ${s.heartbeats}`;

/** Saves the credentials file again, one write at a time (rotations of many devices may come together). */
let saving: Promise<void> = Promise.resolve();
function persistCredentials(devices: Awaited<ReturnType<typeof credentials>>): Promise<void> {
  const file = values.credentials;
  if (file === undefined) return saving;
  saving = saving
    .then(() => saveCredentials(file, devices))
    .catch((err: unknown) => console.error(`saving ${file} failed: ${(err as Error).message}`));
  return saving;
}

/** --broker-url, or the URL the service gives devices (its MQTT port may not be 1883). */
async function brokerUrlToUse(): Promise<string> {
  if (brokerUrlOption !== undefined) return brokerUrlOption;
  const endpoints = await fetchDeviceEndpoints({ ...api!, ...(ca !== undefined ? { ca } : {}) });
  const url = pickBrokerUrl(endpoints, api!.apiUrl);
  console.log(`broker: ${url} (from ${api!.apiUrl}/api/v1/device-endpoints)`);
  return url;
}

/**
 * The devices connected to *a* broker: ask the service whether it sees them online (a broker
 * that accepts anyone, another one on 1883 say, would otherwise look like a working fleet).
 * Polls for up to 10 s; none seen is an error, fewer than connected a warning.
 */
async function confirmOnline(
  devices: Array<{ serial: string }>,
  connected: number,
  brokerUrl: string,
): Promise<boolean> {
  if (!api) return true;
  const q = commonPrefix(devices.map((d) => d.serial));
  const deadline = Date.now() + 10_000;
  let seen: number;
  for (;;) {
    seen = Math.min(await countOnline({ ...api, ...(ca !== undefined ? { ca } : {}), q }), devices.length);
    if (seen >= connected || Date.now() >= deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  if (seen === 0) {
    console.error(
      `simulator: ${connected} connected to ${brokerUrl} but the service at ${api.apiUrl} sees 0 online: is that the right broker? ` +
        `(omit --broker-url to use the one the service names)`,
    );
    return false;
  }
  if (seen < connected)
    console.log(`warning: ${connected} connected to ${brokerUrl} but the service sees ${seen} of them online`);
  else console.log(`the service sees ${seen} online`);
  return true;
}

async function main(): Promise<void> {
  const brokerUrl = await brokerUrlToUse();
  const devices = await credentials();
  if (signingKey)
    console.log(
      `firmware signatures are checked with key ${signingKey.keyId}: unsigned or differently signed images fail with signature_invalid`,
    );
  const fleet = new Fleet({
    devices,
    brokerUrl,
    firmware,
    ...(heartbeatS !== undefined ? { heartbeatS } : {}),
    failRate,
    downloadKbps,
    flapRate,
    // The modules' own model: a command for another model is refused (wrong_model).
    ...(values.model !== undefined ? { model: values.model } : {}),
    ...(signingKey ? { signingKey: signingKey.key } : {}),
    ...(images ? { images } : {}),
    ...(values['fail-delta'] ? { failDeltaApply: true } : {}),
    // `--luminaire on`: D4i readings every configured luminaire_interval_s; `--luminaire S`: every S seconds.
    ...(values.luminaire !== undefined
      ? {
          luminaire:
            values.luminaire === 'on' ? true : (numberOption(values.luminaire, 'luminaire', 0.05, 86_400) ?? true),
        }
      : {}),
    ...(failingDrivers !== undefined ? { failingDrivers } : {}),
    ...(badFirmware !== undefined ? { luminaireFaults: { badFirmware } } : {}),
    ...(ca !== undefined ? { ca } : {}),
    ...(values.verbose ? { trace: (l: string) => console.log(l) } : {}),
    // A planned rotation gave a device a new password: the file must hold it, or the next run
    // would connect with one the service no longer takes.
    ...(values.credentials !== undefined ? { onCredentialsChange: () => void persistCredentials(devices) } : {}),
  });

  const failing = fleet.devices.filter((d) => d.luminaire?.faults.failingDriver).map((d) => d.serial);
  if (failing.length > 0) console.log(`failing drivers (--failing-drivers): ${failing.join(', ')}`);
  if (badFirmware !== undefined)
    console.log(`devices running ${badFirmware} report a raised fault rate (--bad-firmware)`);
  const tty = process.stdout.isTTY && !values.verbose;
  const bar = tty
    ? new cliProgress.SingleBar(
        {
          format:
            'devices [{bar}] {connected}/{total} connected | online {online} | updating {updating} | succeeded {succeeded} | failed {failed}',
          hideCursor: true,
          clearOnComplete: false,
        },
        cliProgress.Presets.shades_classic,
      )
    : null;
  const show = () => {
    const s = fleet.stats();
    if (bar) bar.update(s.connected, { ...s, failed: s.failed + s.rolledBack });
    else console.log(`${new Date().toISOString()} ${line(s)}`);
  };
  bar?.start(count, 0, { ...fleet.stats(), failed: 0 });
  const timer = setInterval(show, tty ? 250 : 10_000);

  let stopping = false;
  const finish = async (reason: string) => {
    if (stopping) return;
    stopping = true;
    clearInterval(timer);
    show();
    bar?.stop();
    console.log(`stopping (${reason}): disconnecting ${count} devices...`);
    const final = fleet.stats();
    await fleet.stop();
    console.log(`summary: ${line(final)}`);
    process.exit(0);
  };
  process.on('SIGINT', () => void finish('SIGINT'));
  process.on('SIGTERM', () => void finish('SIGTERM'));

  const ramp = await fleet.start();
  if (!bar)
    console.log(
      `connected ${ramp.connected}/${count} in ${ramp.seconds.toFixed(1)} s${ramp.failed ? ` (${ramp.failed} refused or failed: check credentials and broker URL)` : ''}`,
    );
  if (ramp.connected === 0) {
    clearInterval(timer);
    bar?.stop();
    console.error('simulator: no device could connect');
    await fleet.stop();
    process.exit(1);
  }
  if (!(await confirmOnline(devices, ramp.connected, brokerUrl))) {
    clearInterval(timer);
    bar?.stop();
    await fleet.stop();
    process.exit(1);
  }
  // From here, so that a short --duration never cuts the check short.
  if (duration) setTimeout(() => void finish(`--duration ${duration} s`), duration * 1000);
}

main().catch((err: unknown) => {
  console.error(`simulator: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
