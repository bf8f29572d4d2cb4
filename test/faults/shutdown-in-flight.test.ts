import { describe, it, expect } from 'vitest';
import http from 'node:http';
import { startTestServer } from '../helpers/test-server';
import { ifStarted } from '../helpers/teardown';

/**
 * A stop drains HTTP: a request already under way when the stop begins is answered normally.
 * GraphQL used to stop before that drain, so a GraphQL request whose body was still arriving
 * got "Cannot execute GraphQL operations after the server has stopped" instead of its data
 * (seen in bench/graphql-devices.bench.ts, whose last requests overlapped the stop).
 */
describe('stop: a GraphQL request under way is served during the drain', () => {
  it('answers a request whose body arrives after the stop began', { timeout: 60_000 }, async () => {
    const server = await startTestServer();
    let stopping: Promise<void> | undefined;
    try {
      const account = await server.createAccount();
      const body = JSON.stringify({ query: '{ devices(first: 1) { totalCount } }' });
      const half = Math.floor(body.length / 2);
      const answer = new Promise<{ status: number; text: string }>((resolve, reject) => {
        const req = http.request(
          {
            host: '127.0.0.1',
            port: server.service.httpPort,
            path: '/graphql',
            method: 'POST',
            headers: {
              authorization: `Bearer ${account.apiKey}`,
              'content-type': 'application/json',
              'content-length': Buffer.byteLength(body),
            },
          },
          (res) => {
            let text = '';
            res.setEncoding('utf8');
            res.on('data', (chunk: string) => (text += chunk));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
          },
        );
        req.on('error', reject);
        req.write(body.slice(0, half));
        // The rest once the stop is under way (its steps before the HTTP drain take well under 1 s).
        setTimeout(() => {
          stopping = server.service.stop();
          setTimeout(() => req.end(body.slice(half)), 500);
        }, 300);
      });
      const { status, text } = await answer;
      expect({ status, body: JSON.parse(text) as unknown }).toEqual({
        status: 200,
        body: { data: { devices: { totalCount: 0 } } },
      });
    } finally {
      await (stopping ?? ifStarted(server)?.service.stop());
      await server.db.drop();
    }
  });
});
