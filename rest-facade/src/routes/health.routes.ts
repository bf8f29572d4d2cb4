import { defineRoute, type RouteDef } from '../route';
import type { Services } from '#core/services';
import { IdParams } from '../schemas/common';
import { SerialParams } from '../schemas/devices.schemas';
import {
  FixtureGateSchema,
  MaintenanceQuery,
  MaintenanceSchema,
  ModelNameParams,
  ModelThresholdsBody,
  ModelThresholdsSchema,
  VersionRatesQuery,
  VersionRatesSchema,
  WarrantyReportSchema,
} from '../schemas/health.schemas';
import {
  maintenanceCsv,
  presentFixtureGate,
  presentMaintenanceItem,
  presentModelThresholds,
  presentVersionRates,
  presentWarrantyReport,
} from '../presenters/health.presenter';

/** Fixture health (docs/fixture-health.md) and the rollout gate's evidence (docs/ota.md "Health gate"). */
export function healthRoutes(services: Services): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/maintenance',
      operationId: 'getMaintenanceList',
      summary:
        'Devices whose health is not `ok`, most urgent first (failed, replace soon, watch; then how far past its limit), with the reasons in words. `Accept: text/csv` answers the same list as CSV.',
      tag: 'Fixture health',
      query: MaintenanceQuery,
      responses: {
        200: {
          description: 'The maintenance list (JSON; text/csv on request)',
          schema: MaintenanceSchema,
          contentType: 'text/csv',
        },
      },
      handler: async ({ actor, query: q, req, res }) => {
        const eq = q.tag?.indexOf('=') ?? -1;
        const items = await services.health.maintenance(actor, {
          ...(q.model !== undefined ? { model: q.model } : {}),
          ...(q.tag !== undefined ? { tag: { key: q.tag.slice(0, eq), value: q.tag.slice(eq + 1) } } : {}),
          ...(q.site !== undefined ? { siteId: q.site } : {}),
          ...(q.limit !== undefined ? { limit: q.limit } : {}),
        });
        if (req.accepts(['application/json', 'text/csv']) === 'text/csv') {
          res
            .status(200)
            .type('text/csv; charset=utf-8')
            .setHeader('Content-Disposition', 'attachment; filename="maintenance.csv"');
          res.send(maintenanceCsv(items));
          return;
        }
        return {
          status: 200,
          body: { counts: await services.health.countsByState(actor), items: items.map(presentMaintenanceItem) },
        };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/devices/:serial/warranty-report',
      operationId: 'getWarrantyReport',
      summary:
        "A device's warranty evidence: serial, model, claim dates, firmware history with dates, operating hours, lifetime energy and fault counters per month, from the days this account owned it. Kept for the warranty period (default 5 years) after an unclaim. 404 for serials this account never owned.",
      tag: 'Fixture health',
      params: SerialParams,
      responses: { 200: { description: 'The evidence pack', schema: WarrantyReportSchema } },
      handler: async ({ actor, params }) => ({
        status: 200,
        body: presentWarrantyReport(await services.warranty.report(actor, { serial: params.serial })),
      }),
    }),
    defineRoute({
      method: 'get',
      path: '/firmware-rates',
      operationId: 'getFirmwareRates',
      summary:
        'Per model and firmware version: fixture events (thermal derating, thermal shutdowns, supply faults, light source failures) per 1,000 device-days, from the daily roll-ups (attributed to the version the device ran that day), and unexpected reboots and reconnects per 1,000 days the devices were heard.',
      tag: 'Fixture health',
      query: VersionRatesQuery,
      responses: { 200: { description: 'Rates per version', schema: VersionRatesSchema } },
      handler: async ({ actor, query: q }) => {
        const to = q.to !== undefined ? new Date(q.to) : new Date();
        const from = q.from !== undefined ? new Date(q.from) : new Date(to.getTime() - 30 * 86_400_000);
        const versions = await services.health.versionRates(actor, {
          from,
          to,
          ...(q.model !== undefined ? { model: q.model } : {}),
        });
        return {
          status: 200,
          body: { from: from.toISOString(), to: to.toISOString(), versions: versions.map(presentVersionRates) },
        };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/deployments/:id/fixture-gate',
      operationId: 'getDeploymentFixtureGate',
      summary:
        "Canary against control: the deployment's updated devices against the model's not-yet-updated devices (or the model before the deployment), per fixture signal, with the gate's decision now and as last recorded.",
      tag: 'Fixture health',
      params: IdParams,
      responses: { 200: { description: 'Canary against control', schema: FixtureGateSchema } },
      handler: async ({ actor, params }) => ({
        status: 200,
        body: presentFixtureGate(await services.fixtureGate.view(actor, { deploymentId: params.id })),
      }),
    }),
    defineRoute({
      method: 'get',
      path: '/models/:name/health-thresholds',
      operationId: 'getModelHealthThresholds',
      summary:
        "A model's health rule thresholds: its overrides and the defaults with them on top (404 for unknown models)",
      tag: 'Fixture health',
      params: ModelNameParams,
      responses: { 200: { description: 'The thresholds', schema: ModelThresholdsSchema } },
      handler: async ({ actor, params }) => ({
        status: 200,
        body: presentModelThresholds(await services.health.modelThresholds(actor, { model: params.name })),
      }),
    }),
    defineRoute({
      method: 'patch',
      path: '/models/:name',
      operationId: 'updateModel',
      summary:
        "Set a model's health thresholds (admin): the overrides replace the previous ones, a watch level above its replace level is 422; the account's devices are judged again at once",
      tag: 'Fixture health',
      params: ModelNameParams,
      body: ModelThresholdsBody,
      responses: { 200: { description: 'The thresholds now', schema: ModelThresholdsSchema } },
      handler: async ({ actor, params, body }) => ({
        status: 200,
        body: presentModelThresholds(
          await services.health.setModelThresholds(actor, {
            model: params.name,
            overrides: body.health_thresholds ?? {},
          }),
        ),
      }),
    }),
  ];
}
