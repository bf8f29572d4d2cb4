import { loadConfig, portFallback } from '#core/config';
import { checkListenHost } from '#core/listen-errors';
import { createLogger } from '#core/logger';
import { startFleetService } from './app';
import { startBanner } from './start-banner';

/** `npm start`: one process serving everything; stops gracefully on SIGTERM/SIGINT. */
async function main(): Promise<void> {
  // Every setting is checked before the first log line: a bad one fails with one line that names it.
  const config = loadConfig();
  const fallback = portFallback();
  await checkListenHost(config.host);
  const logger = createLogger(config.logLevel);
  const service = await startFleetService({ config, logger, ...(fallback ? { portFallback: fallback } : {}) });

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

// One line per problem and no stack trace: a configuration error (core/config.ts
// ConfigurationError) names the variable, its value (secrets masked) and what is allowed.
main().catch((error: unknown) => {
  const message = error instanceof Error ? error.message : String(error);
  for (const line of message.split('\n')) process.stderr.write(`fleet service failed to start: ${line}\n`);
  process.exit(1);
});
