import { describe, it, expect } from 'vitest';
import path from 'node:path';
import { layerViolations, readSourceTree, type SourceFile } from '../architecture/layer-rules';

const root = path.resolve(__dirname, '../..');

/** A made-up file: `imports` maps each specifier to the repository path it resolves to (null: a package). */
const file = (p: string, imports: Record<string, string | null> = {}, text = ''): SourceFile => ({
  path: p,
  imports: Object.entries(imports).map(([spec, target]) => ({ spec, target })),
  text,
});

/**
 * The layers docs/architecture.md draws: the protocol depends on zod alone; the core on the
 * protocol and its migration list; adapters on the core, the protocol and (HTTP ones) the HTTP
 * edge, never on each other; the simulator on the protocol; SQL only in stores; an area never in
 * another area's store; no relative import out of its top-level folder. Each rule is shown to
 * fail on a tree that breaks it, then the real tree is held to all of them.
 */
describe('architecture: the layers', () => {
  const cases: Array<[string, SourceFile[], RegExp]> = [
    [
      'protocol imports a package other than zod',
      [file('protocol/topics.ts', { 'node:crypto': null })],
      /protocol imports only zod/,
    ],
    [
      'protocol imports the core',
      [file('protocol/payloads.ts', { '#core/shared/errors': 'core/shared/errors.ts' })],
      /protocol imports only zod/,
    ],
    [
      'core imports an adapter',
      [file('core/devices/device.service.ts', { '#broker/connections': 'broker/src/connections.ts' })],
      /core imports only/,
    ],
    [
      'core imports the HTTP edge',
      [file('core/devices/device.service.ts', { '#edge/problem': 'api/src/edge/problem.ts' })],
      /core imports only/,
    ],
    [
      'an adapter imports another adapter',
      [file('broker/src/create-broker.ts', { '#rest/router': 'rest-facade/src/router.ts' })],
      /adapters never import each other/,
    ],
    [
      'GraphQL imports the HTTP downloads',
      [file('api/src/graphql/server.ts', { '../http/firmware-download': 'api/src/http/firmware-download.ts' })],
      /adapters never import each other/,
    ],
    [
      'an adapter imports the composition root',
      [file('rest-facade/src/router.ts', { '#api/app': 'api/src/app.ts' })],
      /never import the composition root/,
    ],
    [
      'the broker uses the HTTP edge',
      [file('broker/src/hooks/authenticate.ts', { '#edge/caller': 'api/src/edge/caller.ts' })],
      /only the HTTP adapters use the HTTP edge/,
    ],
    [
      'the HTTP edge imports an adapter',
      [file('api/src/edge/caller.ts', { '#rest/route': 'rest-facade/src/route.ts' })],
      /the HTTP edge imports only/,
    ],
    [
      'the simulator imports the core',
      [file('simulator/src/cli.ts', { '#core/firmware/firmware-signature': 'core/firmware/firmware-signature.ts' })],
      /the simulator imports only the protocol/,
    ],
    [
      'SQL outside a store',
      [file('core/events/outbox.ts', {}, "await trx('events').whereNull('dispatched_at')")],
      /SQL only in a store/,
    ],
    [
      'a raw statement outside a store',
      [file('core/devices/device.service.ts', {}, 'await this.deps.knex.raw<Row>(`select 1`)')],
      /SQL only in a store/,
    ],
    [
      "an area reads another area's store",
      [
        file('core/fleet/fleet-read.service.ts', {
          '../devices/store/devices.store': 'core/devices/store/devices.store.ts',
        }),
      ],
      /another area's services, never its store/,
    ],
    [
      'a relative import leaves its top-level folder',
      [file('test/helpers/test-server.ts', { '../../core/config': 'core/config.ts' })],
      /relative import leaves test\//,
    ],
    [
      'a migration imports application code',
      [file('migrations/20261122000000_create_core_schema.ts', { '#core/shared/ids': 'core/shared/ids.ts' })],
      /migrations import no application code/,
    ],
  ];

  it.each(cases)('refuses a tree where %s', (_label, files, rule) => {
    const found = layerViolations(files);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatch(rule);
  });

  it('allows what the layers allow', () => {
    const allowed = [
      file('core/devices/claim.service.ts', {
        '../certificates/certificate-records': 'core/certificates/certificate-records.ts',
        '../shared/store/account-lock.store': 'core/shared/store/account-lock.store.ts',
        './store/devices.store': 'core/devices/store/devices.store.ts',
        '#protocol/version': 'protocol/version.ts',
        '#migrations/index': 'migrations/index.ts',
        knex: null,
      }),
      file('core/db/database-health.ts', {}, "await this.knex.raw('select 1')"),
      file('rest-facade/src/router.ts', {
        '#edge/caller': 'api/src/edge/caller.ts',
        '#core/services': 'core/services.ts',
      }),
      file('broker/src/connections.ts', { '#core/logger': 'core/logger.ts', '#protocol/topics': 'protocol/topics.ts' }),
      file('api/src/app.ts', {
        '#broker/create-broker': 'broker/src/create-broker.ts',
        '#rest/router': 'rest-facade/src/router.ts',
      }),
      file('simulator/src/cli.ts', { '#protocol/version': 'protocol/version.ts', '@peculiar/x509': null }),
      file('protocol/payloads.ts', { zod: null, './version': 'protocol/version.ts' }),
    ];
    expect(layerViolations(allowed)).toEqual([]);
  });

  it('holds the repository to every rule', () => {
    const tree = readSourceTree(root);
    expect(tree.filter((f) => f.path.startsWith('core/')).length).toBeGreaterThan(50);
    expect(tree.filter((f) => f.path.startsWith('protocol/')).length).toBeGreaterThan(0);
    expect(layerViolations(tree)).toEqual([]);
  });
});
