import { describe, expect, it } from 'vitest';
import { withCurrentFigures } from '#bench/lib/results';

const page = `# Benchmark results

<!-- current-figures:start -->
| measure | current figure | target | met | recorded (UTC) | CPU yardstick | command |
|---|---|---|---|---|---|---|
| A | 1 ms | <= 2 ms | met | 2026-11-24 10:00 | 400 ms | \`a\` |
<!-- current-figures:end -->

## History
`;

describe('the table of current benchmark figures', () => {
  const row = { date: '2026-11-25 18:00', yardstickMs: 350, command: 'node bench/x.ts' };

  it('replaces the row of the same measure and appends a new one, leaving the rest of the page', () => {
    const text = withCurrentFigures(page, [
      { id: 'A', figure: '3 ms', target: '<= 2 ms', met: false, ...row },
      { id: 'B | pipes', figure: '0.5 ms', target: '<= 1 ms', met: true, ...row },
    ]);
    const table = text
      .slice(text.indexOf('| measure'), text.indexOf('<!-- current-figures:end -->'))
      .trim()
      .split('\n');
    expect(table).toEqual([
      '| measure | current figure | target | met | recorded (UTC) | CPU yardstick | command |',
      '|---|---|---|---|---|---|---|',
      '| A | 3 ms | <= 2 ms | **not met** | 2026-11-25 18:00 | 350 ms | `node bench/x.ts` |',
      '| B \\| pipes | 0.5 ms | <= 1 ms | met | 2026-11-25 18:00 | 350 ms | `node bench/x.ts` |',
    ]);
    expect(text.startsWith('# Benchmark results\n')).toBe(true);
    expect(text.endsWith('<!-- current-figures:end -->\n\n## History\n')).toBe(true);
  });

  it('refuses a page without the table instead of losing the figures', () => {
    expect(() =>
      withCurrentFigures('# Benchmark results\n', [{ id: 'A', figure: '1', target: '1', met: true, ...row }]),
    ).toThrow(/current-figures/);
  });
});
