import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { withStartupSetting } from '#core/db/database';

/** What node-postgres parsed from a config (its connection parameters). */
interface ConnectionParameters {
  user: string;
  password: string;
  host: string;
  port: number;
  database: string;
  options: string;
}

/** What node-postgres will connect with (nothing is opened). */
function connectsWith(config: pg.ClientConfig): ConnectionParameters {
  const { connectionParameters } = new pg.Client(config) as unknown as { connectionParameters: ConnectionParameters };
  const { user, password, host, port, database, options } = connectionParameters;
  return { user, password, host, port, database, options };
}

const SETTING = 'plan_cache_mode=force_generic_plan';

describe('withStartupSetting', () => {
  it('adds the setting to the options the connections start with, the rest as the URL says', () => {
    const url = 'postgres://fleet:s%40cret@db.example:5433/fleet';
    expect(connectsWith(withStartupSetting(url, SETTING))).toEqual({
      ...connectsWith({ connectionString: url }),
      options: `-c ${SETTING}`,
    });
    expect(connectsWith({ connectionString: url }).password).toBe('s@cret');
  });

  it('reads a password that is not percent-encoded as node-postgres always did', () => {
    const url = 'postgres://fleet:50%off@db.example/fleet';
    expect(connectsWith(withStartupSetting(url, SETTING))).toEqual({
      ...connectsWith({ connectionString: url }),
      options: `-c ${SETTING}`,
    });
  });

  it("keeps the URL's own options", () => {
    const url = 'postgresql://fleet@db.example/fleet?sslmode=disable&options=-c%20work_mem%3D8MB';
    expect(connectsWith(withStartupSetting(url, SETTING))).toEqual({
      ...connectsWith({ connectionString: url }),
      options: `-c work_mem=8MB -c ${SETTING}`,
    });
  });
});
