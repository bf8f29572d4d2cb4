import { createHash, type KeyObject } from 'node:crypto';
import type { OtaCommand, OtaErrorCode, OtaProgress } from '#protocol/payloads';
import { keyIdOf, signatureVerifies } from './firmware-trust';
import { downloadImage, SizeMismatch } from './image-download';
import { bspatch, DeltaApplyError } from './bspatch';
import { pick, sleep } from './sim-helpers';

export type OtaOutcome = 'succeeded' | 'failed' | 'rolled_back';

/** Realistic failures of a lighting module's update (what a field engineer would read), with their error_code. */
const INSTALL_ERRORS: Array<{ code: OtaErrorCode; error: string }> = [
  { code: 'flash_write', error: 'flash write failed: bank B sector 12 verify error' },
  { code: 'low_power', error: 'install refused: supply voltage 9.8 V below 10.5 V minimum for flashing' },
];
/** The new image would not boot: the module went back to the previous one. */
const BOOT_ERRORS = [
  'new image failed to boot: watchdog reset 3 times; reverted to previous image',
  'new image failed self-test: DALI driver init error; reverted',
];

/** What an OTA job needs of the device it runs on. */
export interface OtaJobHost {
  /** The version the device runs now. */
  firmware: () => string;
  /** The MQTT connection is up. */
  canPublish: () => boolean;
  /** The device was stopped: a download gives up. */
  isStopped: () => boolean;
  random: () => number;
  /** Publishes a progress report; `true` once the broker acknowledged it. */
  publishReport: (payload: string) => Promise<boolean>;
  /** Disconnects, boots for a moment and reconnects running `version`. */
  reboot: (version: string) => Promise<void>;
  trace: (direction: string, topic: string, payload: string) => void;
  /** `updating` changed (the fleet's counters). */
  changed: () => void;
}

export interface OtaJobOptions {
  /** Probability (0..1) that an update fails. Default 0. */
  failRate?: number | undefined;
  /** Download speed in kilobits per second; 0 = as fast as possible. Default 0. */
  downloadKbps?: number | undefined;
  /** Awaited after a command is accepted and before the download starts (Fleet.holdDownloads). */
  downloadGate?: (() => Promise<void>) | undefined;
  /** The firmware signing public key the module trusts; unset, no signature is checked. */
  signingKey?: KeyObject | undefined;
  /** The module's own model: a command for another model is refused (`wrong_model`). Unset: not checked. */
  model?: string | undefined;
  /**
   * The images the module has in flash, by version (shared by a fleet: the same bytes for every
   * device on a version). Given, the module applies a command's `delta` when it holds the image of
   * `delta.from`, and keeps every image it installs; unset, it ignores deltas (full images only).
   */
  images?: Map<string, Uint8Array> | undefined;
  /** Applying a delta fails (`delta_apply`), to exercise the service's fallback to the full image. Default false. */
  failDeltaApply?: boolean | undefined;
}

/** What a download produced: the image's digest, and its bytes when the module keeps images. */
type Fetched = { digest: string; bytes: Uint8Array | null } | { failed: OtaOutcome };

/**
 * A module's OTA updates, carried out for real: download at the given speed, sha256 and signature
 * checks, install, reboot on the new version, and every step reported. It remembers each job's
 * last state (a redelivered command is answered, never carried out twice) and the last report the
 * service did not acknowledge, as module firmware keeps its OTA state in flash.
 */
export class OtaJobRunner {
  /** An OTA job is running. */
  updating = false;
  readonly outcomes: Record<OtaOutcome, number> = { succeeded: 0, failed: 0, rolled_back: 0 };
  /** job_id -> last report: a redelivered command is not applied twice. */
  private readonly jobs = new Map<string, { state: OtaProgress['state']; payload: string; deltaFailed?: boolean }>();
  /**
   * The latest progress report the service has not acknowledged: made while the connection was
   * down (a broker process died under it, Wi-Fi dropped), or sent on a connection that closed
   * before its PUBACK (the service acknowledges a report only once it stored it). Sent again
   * after the next CONNACK, as module firmware keeps its last OTA state in flash. Without it a
   * `failed` said during an outage is lost and the update waits for its deadline.
   */
  private unacknowledgedReport: string | null = null;
  private readonly trusted: { key: KeyObject; keyId: string } | null;

  constructor(
    private readonly host: OtaJobHost,
    private readonly options: OtaJobOptions,
  ) {
    this.trusted = options.signingKey ? { key: options.signingKey, keyId: keyIdOf(options.signingKey) } : null;
  }

  /** After a CONNACK: the report the service has not acknowledged yet goes again. */
  resendUnacknowledged(): void {
    if (this.unacknowledgedReport !== null) void this.sendReport(this.unacknowledgedReport);
  }

  /**
   * Performs one OTA job for real. Deduplicated by job id (the protocol requires it): a command
   * received again (QoS 1 redelivery, a re-send after a reconnect) is never carried out twice;
   * once the job is over its final report is repeated.
   */
  async run(command: OtaCommand): Promise<OtaOutcome | 'duplicate'> {
    const previous = this.jobs.get(command.job_id);
    // The one exception to "never twice": after `delta_apply` the service sends the same job
    // again without a delta (docs/device-protocol.md "Delta images"), and that is carried out.
    if (previous?.deltaFailed && !command.delta) this.jobs.delete(command.job_id);
    else if (previous) {
      // Already handled: repeat the final word, never the work.
      if (previous.state === 'succeeded' || previous.state === 'failed' || previous.state === 'rolled_back')
        void this.sendReport(previous.payload);
      return 'duplicate';
    }
    if (this.updating) return 'duplicate';
    // An image built for another model must never be flashed: refused before anything is downloaded.
    if (this.options.model !== undefined && command.model !== this.options.model) {
      void this.report(command.job_id, 'failed', {
        error: `wrong model: the image is for ${command.model}, this module is ${this.options.model}`,
        error_code: 'wrong_model',
      });
      this.outcomes.failed += 1;
      return 'failed';
    }
    this.updating = true;
    this.host.changed();
    try {
      return await this.perform(command);
    } finally {
      this.updating = false;
      this.host.changed();
    }
  }

  private report(
    job: string,
    state: OtaProgress['state'],
    extra: { progress?: number; error?: string; error_code?: OtaErrorCode } = {},
  ): Promise<void> {
    const payload = JSON.stringify({ job_id: job, state, ...extra });
    this.jobs.set(job, { state, payload, deltaFailed: extra.error_code === 'delta_apply' });
    return this.sendReport(payload);
  }

  /** Kept as the unacknowledged report until the broker acknowledges it (or a newer report replaces it). */
  private async sendReport(payload: string): Promise<void> {
    this.unacknowledgedReport = payload;
    if (!this.host.canPublish()) return;
    const acked = await this.host.publishReport(payload);
    if (acked && this.unacknowledgedReport === payload) this.unacknowledgedReport = null;
  }

  private async perform(command: OtaCommand): Promise<OtaOutcome> {
    const { host } = this;
    const job = command.job_id;
    const failing = host.random() < (this.options.failRate ?? 0);
    const failAt = failing ? (['download', 'install', 'boot'] as const)[Math.floor(host.random() * 3)]! : null;
    const fail = (code: OtaErrorCode, error: string): OtaOutcome => {
      void this.report(job, 'failed', { error, error_code: code });
      this.outcomes.failed += 1;
      return 'failed';
    };
    if (this.options.downloadGate) await this.options.downloadGate();
    void this.report(job, 'downloading', { progress: 0 });
    const old = command.delta?.from === host.firmware() ? this.options.images?.get(command.delta.from) : undefined;
    const fetched = await (command.delta?.format === 'bsdiff40' && old
      ? this.fetchDelta(command, old, fail)
      : this.fetchImage(command, failAt === 'download', fail));
    if ('failed' in fetched) return fetched.failed;
    const { digest } = fetched;
    if (digest !== command.sha256)
      return fail(
        'digest_mismatch',
        `sha256 mismatch: expected ${command.sha256.slice(0, 12)}…, got ${digest.slice(0, 12)}…; image discarded`,
      );
    const untrusted = this.signatureProblem(command, digest);
    if (untrusted) return fail('signature', `signature_invalid: ${untrusted}; image discarded`);
    void this.report(job, 'installing', { progress: 0 });
    await sleep(100 + host.random() * 200);
    if (failAt === 'install') {
      const { code, error } = pick(INSTALL_ERRORS, host.random);
      return fail(code, error);
    }
    void this.report(job, 'installing', { progress: 100 });
    // Acknowledged before the connection goes down for the reboot.
    await this.report(job, 'rebooting');
    const from = host.firmware();
    await host.reboot(failAt === 'boot' ? from : command.version);
    if (failAt === 'boot') {
      void this.report(job, 'rolled_back', { error: pick(BOOT_ERRORS, host.random), error_code: 'boot_failed' });
      this.outcomes.rolled_back += 1;
      return 'rolled_back';
    }
    if (fetched.bytes) this.options.images?.set(command.version, fetched.bytes);
    void this.report(job, 'succeeded');
    this.outcomes.succeeded += 1;
    return 'succeeded';
  }

  private download(target: { url: string; size: number }, job: string, failMidway: boolean, collect?: Buffer[]) {
    const { host } = this;
    return downloadImage(target, {
      downloadKbps: this.options.downloadKbps ?? 0,
      failMidway,
      random: host.random,
      isStopped: host.isStopped,
      trace: (message) => host.trace('!!', 'download', message),
      onProgress: (progress) => void this.report(job, 'downloading', { progress }),
      collect,
    });
  }

  /** The full image (`url`); kept in flash when the module keeps images. */
  private async fetchImage(
    command: OtaCommand,
    failMidway: boolean,
    fail: (code: OtaErrorCode, error: string) => OtaOutcome,
  ): Promise<Fetched> {
    const collect = this.options.images ? [] : undefined;
    try {
      const digest = await this.download(command, command.job_id, failMidway, collect);
      return { digest, bytes: collect ? Buffer.concat(collect) : null };
    } catch (err) {
      return { failed: fail(err instanceof SizeMismatch ? 'size_mismatch' : 'download', (err as Error).message) };
    }
  }

  /**
   * The delta (docs/device-protocol.md "Delta images"): downloaded and checked against its own
   * sha256, applied to the running image, and the result's digest returned for the same checks
   * as a full image (sha256, then signature). Anything wrong with the delta itself is
   * `delta_apply`, after which the service sends the same job with the full image only.
   */
  private async fetchDelta(
    command: OtaCommand,
    old: Uint8Array,
    fail: (code: OtaErrorCode, error: string) => OtaOutcome,
  ): Promise<Fetched> {
    const delta = command.delta!;
    const collect: Buffer[] = [];
    let deltaDigest: string;
    try {
      deltaDigest = await this.download(delta, command.job_id, false, collect);
    } catch (err) {
      return { failed: fail(err instanceof SizeMismatch ? 'delta_apply' : 'download', (err as Error).message) };
    }
    if (deltaDigest !== delta.sha256)
      return { failed: fail('delta_apply', `delta sha256 mismatch: expected ${delta.sha256.slice(0, 12)}…`) };
    if (this.options.failDeltaApply)
      return { failed: fail('delta_apply', 'delta apply failed: not enough RAM for the patch (simulated)') };
    let image: Uint8Array;
    try {
      image = bspatch(old, Buffer.concat(collect));
    } catch (err) {
      if (!(err instanceof DeltaApplyError)) throw err;
      return { failed: fail('delta_apply', `delta apply failed: ${err.message}`) };
    }
    const digest = createHash('sha256').update(image).digest('hex');
    if (digest !== command.sha256)
      return { failed: fail('delta_apply', `delta result sha256 mismatch: got ${digest.slice(0, 12)}…; discarded`) };
    return { digest, bytes: image };
  }

  /**
   * Why the image must not be installed, or null: what docs/device-protocol.md "Signed firmware"
   * asks of a module, so firmware engineers can watch the failure path against a real service.
   */
  private signatureProblem(command: OtaCommand, digest: string): string | null {
    if (!this.trusted) return null;
    if (command.signature === undefined || command.key_id === undefined)
      return 'the command carries no signature and this device installs signed images only';
    if (command.key_id !== this.trusted.keyId)
      return `signed with key ${command.key_id}, this device trusts key ${this.trusted.keyId}`;
    if (!signatureVerifies({ sha256: digest, signature: command.signature, key: this.trusted.key }))
      return `the signature does not verify with key ${this.trusted.keyId}`;
    return null;
  }
}
