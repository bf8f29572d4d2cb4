import path from 'node:path';
import type { FleetService } from './app';
import type { MqttPortFallback } from './port-fallback';

/**
 * What `npm start` prints once every listener is bound: the addresses actually bound (port 0
 * means any free port), and the way into the demo account while it is unused.
 */
export function startBanner(input: {
  service: Pick<FleetService, 'tlsCertificate' | 'httpUrl' | 'mqttUrl' | 'mqttsUrl' | 'demo'> &
    Partial<Pick<FleetService, 'mqttPortFallback'>> & {
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
    ...(service.mqttUrl && service.mqttPortFallback ? fallbackLines(service.mqttPortFallback, service.mqttUrl) : []),
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

/** Loud lines under the MQTT address when a zero-configuration start is not on the default port. */
function fallbackLines(fallback: MqttPortFallback, mqttUrl: string): string[] {
  const relative = path.relative(process.cwd(), fallback.file);
  const file = relative && !relative.startsWith('..') && !path.isAbsolute(relative) ? relative : fallback.file;
  switch (fallback.kind) {
    case 'moved':
      return [
        `  !! MQTT: port ${fallback.defaultPort} was taken (another broker?), listening on ${mqttUrl} instead.`,
        `  !! Remembered in ${file}: the next start uses port ${fallback.port} again. Devices and the simulator must use this URL.`,
      ];
    case 'remembered':
      return [
        `  !! MQTT: on port ${fallback.port}, remembered in ${file} (port ${fallback.defaultPort} was taken at an earlier start).`,
        `  !! Delete ${file} to try port ${fallback.defaultPort} first, or set MQTT_PORT.`,
      ];
    case 'moved-again':
      return [
        `  !! MQTT: the remembered port ${fallback.previous} and port ${fallback.defaultPort} were both taken, listening on ${mqttUrl} instead.`,
        `  !! Remembered in ${file}: the next start uses port ${fallback.port}. Devices and the simulator must use this new URL.`,
      ];
    case 'back-to-default':
      return [
        `  !! MQTT: the remembered port ${fallback.previous} was taken, back on the default port (${file} removed).`,
      ];
  }
}
