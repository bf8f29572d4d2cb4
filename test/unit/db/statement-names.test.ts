import { describe, expect, it } from 'vitest';
import { StatementNames } from '#core/db/prepared';

describe('StatementNames', () => {
  it('names one text once, the same name for every caller, derived from the text', () => {
    const names = new StatementNames(10, 2, 0);
    const first = names.nameOf('SELECT 1', 'account-a');
    expect(first).toMatch(/^fleet_[0-9a-f]{24}$/);
    expect(names.nameOf('SELECT 1', 'account-b')).toBe(first);
    expect(names.nameOf('SELECT 1')).toBe(first);
    expect(names.nameOf('SELECT 2')).not.toBe(first);
  });

  it("bounds what one caller introduces, so one account's texts cannot use up the others' names", () => {
    const names = new StatementNames(10, 2, 0);
    // An account walking its list with every page size: two texts named, the rest run unprepared.
    const attempts = Array.from({ length: 8 }, (_, i) => names.nameOf(`SELECT * FROM devices LIMIT ${i + 1}`, 'a'));
    expect(attempts.filter((n) => n !== undefined)).toHaveLength(2);
    // Another account's page still gets a name of its own, and shares the ones a named.
    expect(names.nameOf('SELECT * FROM devices LIMIT 101', 'b')).toBeDefined();
    expect(names.nameOf('SELECT * FROM devices LIMIT 1', 'b')).toBe(attempts[0]);
  });

  it('runs new texts unprepared once the process has named its most', () => {
    const names = new StatementNames(3, 10, 0);
    for (let i = 0; i < 3; i++) expect(names.nameOf(`SELECT ${i}`)).toBeDefined();
    expect(names.nameOf('SELECT 3')).toBeUndefined();
    expect(names.nameOf('SELECT 3', 'a')).toBeUndefined();
    // Named texts keep their names.
    expect(names.nameOf('SELECT 0')).toBeDefined();
  });

  it("keeps names for the service's own statements that callers cannot take", () => {
    const names = new StatementNames(6, 2, 2);
    // Two accounts take the four names callers may introduce; a third gets none.
    for (const caller of ['a', 'b'])
      for (let i = 0; i < 2; i++) expect(names.nameOf(`SELECT '${caller}' LIMIT ${i + 1}`, caller)).toBeDefined();
    expect(names.nameOf('SELECT 1', 'c')).toBeUndefined();
    // The service's own statements still get the two kept for them.
    expect(names.nameOf('SELECT id FROM devices WHERE id = $1')).toBeDefined();
    expect(names.nameOf('SELECT id FROM sites WHERE id = $1')).toBeDefined();
    expect(names.nameOf('SELECT id FROM models WHERE id = $1')).toBeUndefined();
  });
});
