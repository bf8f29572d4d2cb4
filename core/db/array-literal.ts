/**
 * A PostgreSQL array literal (`{"a","b",NULL}`) of text, numbers or times, for a statement that
 * takes whole columns as array parameters (`unnest(?::uuid[], ?::timestamptz[], ...)`). It is the
 * text node-postgres would make of the same JavaScript array (each element quoted and escaped as
 * its `arrayString` does, NULL for null), but built in one pass: node-postgres formats each element
 * through its generic `prepareValue` (a Date as local time, piece by piece), which for a heartbeat
 * flush of a few hundred rows took several milliseconds of the event loop per flush. A time is
 * written as an ISO 8601 UTC instant, the same instant node-postgres writes in local time: meant
 * for `timestamptz[]` parameters. Same text on PostgreSQL and PGlite; the luminaire batch writes
 * use it too, where it replaced one JSON document per statement (jsonb_to_recordset), which cost
 * PostgreSQL more per row than the arrays' input functions (bench/luminaire-ingest.bench.ts).
 */
export function arrayLiteral(values: ReadonlyArray<string | number | boolean | Date | null | undefined>): string {
  const parts = new Array<string>(values.length);
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    if (value === null || value === undefined) parts[i] = 'NULL';
    else if (typeof value === 'number' || typeof value === 'boolean') parts[i] = `"${value}"`;
    else if (value instanceof Date) parts[i] = `"${value.toISOString()}"`;
    else parts[i] = `"${value.includes('\\') || value.includes('"') ? value.replace(/[\\"]/g, '\\$&') : value}"`;
  }
  return `{${parts.join(',')}}`;
}

/**
 * `arrayLiteral`, or null where no value is set: for a column of a multi-argument `unnest`, which
 * pads a shorter array (and a null one) with nulls up to the longest, so a null parameter there
 * reads as a column of nulls. A column no row of a batch sets then costs neither its text nor the
 * database's parsing of it: in a heartbeat flush most columns (refusals, applied configuration,
 * connects) are unset, and parsing the arrays was a quarter of the statement in the embedded
 * database. Only where another array of the same `unnest` always carries every row.
 */
export function sparseArrayLiteral(
  values: ReadonlyArray<string | number | boolean | Date | null | undefined>,
): string | null {
  return values.some((value) => value !== null && value !== undefined) ? arrayLiteral(values) : null;
}
