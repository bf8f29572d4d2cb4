import type { FleetService } from './app';

/**
 * What `npm start` prints once every listener is bound: the addresses actually bound (port 0
 * means any free port), and the way into the demo account while it is unused.
 */
export function startBanner(input: {
  service: Pick<FleetService, 'tlsCertificate' | 'httpUrl' | 'mqttUrl' | 'mqttsUrl' | 'demo'> & {
    database: { kind: FleetService['database']['kind'] };
  };
  dataDir: string;
}): string {
  const { service, dataDir } = input;
  const lines = [
    '',
    '  Fleet service is running',
    `  ${service.tlsCertificate ? 'HTTPS' : 'HTTP'} (portal, REST /api/v1, GraphQL /graphql): ${service.httpUrl}`,
    ...(service.mqttUrl ? [`  MQTT for devices: ${service.mqttUrl}`] : []),
    ...(service.mqttsUrl ? [`  MQTT over TLS for devices: ${service.mqttsUrl}`] : []),
    `  MQTT over WebSocket: ${service.httpUrl.replace('http', 'ws')}/mqtt`,
    `  Database: ${service.database.kind === 'embedded' ? `embedded (${dataDir})` : 'PostgreSQL'}`,
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
      `    DATA_DIR=${dataDir} npx fleet api-key create --account ${demo.accountId} --name demo --role admin`,
      '    or create one in the portal under Settings > API keys.',
    );
  }
  return lines.join('\n') + '\n\n';
}
