import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  headers: http.IncomingHttpHeaders;
  body: string;
  // Parsed event bodies are asserted field by field.
  json: any;
}

/** A webhook receiver on a free port whose behaviour the test switches: up, down (500), hang, redirect. */
export async function startReceiver() {
  let mode: 'up' | 'down' | 'hang' | 'redirect' = 'up';
  const received: ReceivedRequest[] = [];
  const failed: ReceivedRequest[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const entry = { headers: req.headers, body, json: JSON.parse(body) };
      if (mode === 'hang') return; // never answers
      if (mode === 'redirect') {
        failed.push(entry);
        res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data' }).end();
        return;
      }
      if (mode === 'down') {
        failed.push(entry);
        res.writeHead(500).end('down');
        return;
      }
      received.push(entry);
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hooks`,
    port,
    received,
    failed,
    setMode(next: typeof mode) {
      mode = next;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
