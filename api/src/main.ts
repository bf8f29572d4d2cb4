import { loadConfig } from '#core/config';
import { createLogger } from '#core/logger';
import { startFleetService } from './app';
import { startBanner } from './start-banner';

/** `npm start`: one process serving everything; stops gracefully on SIGTERM/SIGINT. */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  const service = await startFleetService({ config, logger });

  process.stdout.write(startBanner({ service, dataDir: config.dataDir }));

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutdown requested');
    const force = setTimeout(() => {
      logger.error('shutdown took longer than 15 s; exiting');
      process.exit(1);
    }, 15_000);
    force.unref();
    service.stop().then(
      () => process.exit(0),
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

main().catch((error: unknown) => {
  process.stderr.write(`fleet service failed to start: ${(error as Error).message}\n`);
  process.exit(1);
});
