import { describe, expect, it } from 'vitest';
import { withStartupSetting } from '#core/db/database';

describe('withStartupSetting', () => {
  it('adds the setting to the options the connections start with', () => {
    const url = withStartupSetting(
      'postgres://fleet:s%40cret@db.example:5432/fleet',
      'plan_cache_mode=force_generic_plan',
    );
    const parsed = new URL(url);
    expect({
      user: parsed.username,
      password: decodeURIComponent(parsed.password),
      host: parsed.host,
      database: parsed.pathname,
      options: parsed.searchParams.get('options'),
    }).toEqual({
      user: 'fleet',
      password: 's@cret',
      host: 'db.example:5432',
      database: '/fleet',
      options: '-c plan_cache_mode=force_generic_plan',
    });
  });

  it("keeps the URL's own options and parameters", () => {
    const url = withStartupSetting(
      'postgresql://fleet@db.example/fleet?sslmode=require&options=-c%20work_mem%3D8MB',
      'plan_cache_mode=force_generic_plan',
    );
    const parsed = new URL(url);
    expect({ sslmode: parsed.searchParams.get('sslmode'), options: parsed.searchParams.get('options') }).toEqual({
      sslmode: 'require',
      options: '-c work_mem=8MB -c plan_cache_mode=force_generic_plan',
    });
  });
});
