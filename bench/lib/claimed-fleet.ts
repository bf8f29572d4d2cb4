import type { BenchAccount, BenchServer } from './bench-server';
import { claimDevices, makeSerials, type DeviceCredentials } from '#simulator/fleet';

/**
 * An account on the bench server with model Luma-100 and `count` devices claimed through REST
 * (serials `prefix` + number), as a production line would: their MQTT credentials.
 */
export async function claimBenchFleet(
  server: BenchServer,
  input: { prefix: string; count: number },
): Promise<{ account: BenchAccount; credentials: DeviceCredentials[] }> {
  const account = await server.createAccount({ quota: input.count + 10 });
  const res = await fetch(`${server.httpUrl}/api/v1/models`, {
    method: 'POST',
    headers: { ...account.headers, 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'Luma-100' }),
  });
  if (res.status !== 201) throw new Error(`model: ${res.status}`);
  const credentials = await claimDevices({
    apiUrl: server.httpUrl,
    apiKey: account.apiKey,
    model: 'Luma-100',
    firmware: '1.0.0',
    serials: makeSerials(input.prefix, input.count),
  });
  return { account, credentials };
}
