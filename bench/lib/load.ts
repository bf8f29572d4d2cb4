import autocannon from 'autocannon';

export interface LoadResult {
  requests: number;
  requestsPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  non2xx: number;
  errors: number;
}

/** Fixed-concurrency HTTP load with autocannon (HTTP/1.1 keep-alive, `connections` in flight). */
export async function runLoad(input: {
  url: string;
  headers: Record<string, string>;
  connections?: number;
  durationSeconds: number;
}): Promise<LoadResult> {
  const result = await autocannon({
    url: input.url,
    headers: input.headers,
    connections: input.connections ?? 32,
    duration: input.durationSeconds,
  });
  return {
    requests: result.requests.total,
    requestsPerSecond: result.requests.average,
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
  };
}
