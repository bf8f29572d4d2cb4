import { topics } from '#protocol/topics';
import { LuminaireModel } from './luminaire-model';
import { LuminaireFaults, type LuminaireFaultOptions } from './luminaire-faults';

/** Default reporting interval when the configuration has no `luminaire_interval_s` (docs/device-protocol.md). */
export const DEFAULT_LUMINAIRE_INTERVAL_S = 900;

export interface LuminaireReporterInput {
  serial: string;
  /** The configuration the device applied last (`luminaire_interval_s`, `timezone`). */
  config: () => Record<string, unknown>;
  /** Publishes at QoS 1; resolves whether the service acknowledged it. */
  publish: (topic: string, payload: string) => Promise<boolean>;
  random: () => number;
  /** Overrides the configured interval (seconds; load tests). */
  intervalS?: number | undefined;
  /** The version the device runs now (`--bad-firmware` raises the fault rate of one version). */
  firmware?: () => string;
  /** Faults added to the readings (`--failing-drivers`, `--bad-firmware`). */
  faults?: LuminaireFaultOptions | undefined;
}

/**
 * Sends the luminaire's readings every `luminaire_interval_s` while connected, like the heartbeat:
 * jittered start, each reading due one interval after the previous was due. A reading the
 * service did not acknowledge (connection lost) is kept and sent again first on the next
 * connection (at most 100 kept), as a D4i gateway buffering its readings would.
 */
export class LuminaireReporter {
  readonly model: LuminaireModel;
  readonly faults: LuminaireFaults;
  private timer: NodeJS.Timeout | undefined;
  private readonly unsent: string[] = [];
  sent = 0;
  acked = 0;

  constructor(private readonly input: LuminaireReporterInput) {
    this.faults = new LuminaireFaults(input.faults ?? {}, input.random);
    this.model = new LuminaireModel({
      random: input.random,
      sourceFailed: () => this.faults.sourceFailed(),
      timeZone: typeof input.config().timezone === 'string' ? (input.config().timezone as string) : 'UTC',
    });
  }

  /** A reporter when `option` asks for one (true: the configured interval; a number: that many seconds). */
  static of(
    option: boolean | number | undefined,
    input: Omit<LuminaireReporterInput, 'intervalS'>,
  ): LuminaireReporter | null {
    if (!option) return null;
    return new LuminaireReporter({ ...input, intervalS: typeof option === 'number' ? option : undefined });
  }

  intervalMs(): number {
    const configured = this.input.config().luminaire_interval_s;
    return (
      (this.input.intervalS ?? (typeof configured === 'number' ? configured : DEFAULT_LUMINAIRE_INTERVAL_S)) * 1000
    );
  }

  start(): void {
    this.stop();
    for (const payload of this.unsent.splice(0)) void this.send(payload);
    let due = performance.now() + this.input.random() * this.intervalMs();
    const tick = () => {
      this.report();
      const now = performance.now();
      // Read each time: a new `luminaire_interval_s` applies from the next reading on.
      const period = this.intervalMs();
      due += period;
      if (due < now - period) due = now + period;
      this.timer = setTimeout(tick, Math.max(0, due - now));
    };
    this.timer = setTimeout(tick, Math.max(0, due - performance.now()));
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  report(): void {
    const reading = this.faults.apply(this.model.read(new Date()), this.input.firmware?.() ?? '');
    void this.send(JSON.stringify(reading));
  }

  private async send(payload: string): Promise<void> {
    this.sent += 1;
    if (await this.input.publish(topics.luminaire(this.input.serial), payload)) this.acked += 1;
    else if (this.unsent.length < 100) this.unsent.push(payload);
  }
}
