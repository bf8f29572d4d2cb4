import { loadConfig } from './config';
import { createLogger } from './logger';
import { startFleetService } from './app';

/** `npm start`: one process serving everything; stops gracefully on SIGTERM/SIGINT. */
async function main(): Promise<void> {
  const config = loadConfig();
  const logger = createLogger(config.logLevel);
  const service = await startFleetService({ config, logger });

  const lines = [
    '',
    '  Fleet service is running',
    `  ${service.tlsCertificate ? 'HTTPS' : 'HTTP'} (portal, REST /api/v1, GraphQL /graphql): ${service.httpUrl}`,
    ...(service.mqttUrl ? [`  MQTT for devices: ${service.mqttUrl}`] : []),
    ...(service.mqttsUrl ? [`  MQTT over TLS for devices: ${service.mqttsUrl}`] : []),
    `  MQTT over WebSocket: ${service.httpUrl.replace('http', 'ws')}/mqtt`,
    `  Database: ${service.database.kind === 'embedded' ? `embedded (${config.dataDir})` : 'PostgreSQL'}`,
    `  OpenAPI: ${service.httpUrl}/api/v1/openapi.json`,
  ];
  const demo = service.demo;
  if (demo?.kind === 'created') {
    lines.push(
      '',
      '  Demo account created (first start of this data folder):',
      `    portal login: ${demo.email} / ${demo.password}`,
      `    admin API key (shown once): ${demo.apiKey}`,
    );
  } else if (demo?.kind === 'unused') {
    lines.push(
      '',
      '  Demo account (created by an earlier start; its API key has never been used):',
      `    portal login: ${demo.email} / ${demo.password}`,
      '    its API key was shown once at that start; for a new one, stop the service and run:',
      `    DATA_DIR=${config.dataDir} npx fleet api-key create --account ${demo.accountId} --name demo --role admin`,
      '    or create one in the portal under Settings > API keys.',
    );
  }
  process.stdout.write(lines.join('\n') + '\n\n');

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
