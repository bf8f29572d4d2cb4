import type { Logger } from '#core/logger';

/** A part of the running service: started in its place in the list, stopped in reverse. */
export interface Component {
  name: string;
  /** Absent for parts that run from their construction and only need stopping. */
  start?(): Promise<void> | void;
  /** Must also undo a start that failed half-way (its start may have thrown). */
  stop?(): Promise<void> | void;
}

/**
 * Starts components in order and stops them in reverse: the one teardown, for a stop and for a
 * start that fails (the component that failed and those before it are stopped, last first).
 * A stop that fails is logged and the others still stop.
 */
export class Lifecycle {
  private readonly begun: Component[] = [];
  private stopping: Promise<void> | undefined;

  constructor(
    private readonly components: readonly Component[],
    private readonly logger: Logger,
  ) {}

  async start(): Promise<void> {
    for (const component of this.components) {
      this.begun.push(component);
      try {
        await component.start?.();
      } catch (error) {
        await this.stop();
        throw error;
      }
    }
  }

  /** Stops what was started (or began starting), last first; once, however often it is called. */
  stop(): Promise<void> {
    return (this.stopping ??= (async () => {
      for (const component of [...this.begun].reverse()) {
        if (!component.stop) continue;
        this.logger.debug({ component: component.name }, `stopping ${component.name}`);
        try {
          await component.stop();
        } catch (error) {
          this.logger.error({ err: error, component: component.name }, `${component.name} stop failed`);
        }
      }
    })());
  }
}
