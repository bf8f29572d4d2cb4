import { readdirSync } from 'node:fs';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * CI's benchmark smoke run: every `bench/*.bench.ts` once with `--smoke` (tiny sizes, a few
 * seconds each) to prove the benchmarks still work. Figures of a smoke run are not recorded.
 */
const here = path.dirname(fileURLToPath(import.meta.url));
const benches = readdirSync(here)
  .filter((f) => f.endsWith('.bench.ts'))
  .sort();
let failed = 0;
for (const file of benches) {
  const started = Date.now();
  const result = spawnSync(process.execPath, ['--import', 'tsx', path.join(here, file), '--smoke'], {
    stdio: 'inherit',
    timeout: 5 * 60_000,
    env: { ...process.env, LOG_LEVEL: 'warn' },
  });
  const ok = result.status === 0;
  if (!ok) failed += 1;
  console.log(
    `bench smoke ${file}: ${ok ? 'ok' : `FAILED (exit ${result.status ?? result.signal})`} in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
}
console.log(`${benches.length - failed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
