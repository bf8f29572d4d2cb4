import { describe, it, expect } from 'vitest';
import { Lifecycle, type Component } from '#api/lifecycle';
import { createLogger } from '#core/logger';

const logger = createLogger('silent');

function parts(names: string[], fail: { start?: string; stop?: string } = {}) {
  const log: string[] = [];
  const components: Component[] = names.map((name) => ({
    name,
    start: () => {
      log.push(`start ${name}`);
      return fail.start === name ? Promise.reject(new Error(`${name} failed`)) : Promise.resolve();
    },
    stop: () => {
      log.push(`stop ${name}`);
      return fail.stop === name ? Promise.reject(new Error(`${name} stop failed`)) : Promise.resolve();
    },
  }));
  return { log, components };
}

describe('the lifecycle list', () => {
  it('starts in order and stops in reverse, once', async () => {
    const { log, components } = parts(['database', 'broker', 'http']);
    const lifecycle = new Lifecycle(components, logger);
    await lifecycle.start();
    await Promise.all([lifecycle.stop(), lifecycle.stop()]);
    expect(log).toEqual(['start database', 'start broker', 'start http', 'stop http', 'stop broker', 'stop database']);
  });

  it.each([
    ['the first', 'database', ['start database', 'stop database']],
    ['a middle one', 'broker', ['start database', 'start broker', 'stop broker', 'stop database']],
    ['the last', 'http', ['start database', 'start broker', 'start http', 'stop http', 'stop broker', 'stop database']],
  ])(
    'a start failing at %s component stops it and those before it, last first, and rethrows',
    async (_which, failing, expected) => {
      const { log, components } = parts(['database', 'broker', 'http'], { start: failing });
      await expect(new Lifecycle(components, logger).start()).rejects.toThrow(`${failing} failed`);
      expect(log).toEqual(expected);
    },
  );

  it('a stop that fails does not keep the others from stopping', async () => {
    const { log, components } = parts(['database', 'broker', 'http'], { stop: 'broker' });
    const lifecycle = new Lifecycle(components, logger);
    await lifecycle.start();
    await lifecycle.stop();
    expect(log.slice(3)).toEqual(['stop http', 'stop broker', 'stop database']);
  });

  it('takes parts that only start or only stop', async () => {
    const log: string[] = [];
    const lifecycle = new Lifecycle(
      [
        { name: 'tls', stop: () => void log.push('stop tls') },
        { name: 'ca', start: () => void log.push('start ca') },
        { name: 'intake' },
      ],
      logger,
    );
    await lifecycle.start();
    await lifecycle.stop();
    expect(log).toEqual(['start ca', 'stop tls']);
  });
});
