import { defineRoute, type RouteDef } from '../route';
import type { Services } from '#core/services';
import type { EnergyGrouping } from '#core/luminaire/luminaire-types';
import { SerialParams } from '../schemas/devices.schemas';
import { EnergyQuery, EnergySchema, LuminaireSeriesQuery, LuminaireSeriesSchema } from '../schemas/luminaire.schemas';
import { presentEnergy, presentSeries } from '../presenters/luminaire.presenter';

/** `group_by` as the query spells it (already checked by EnergyQuery). */
function grouping(groupBy: string | undefined): EnergyGrouping {
  if (groupBy?.startsWith('tag:')) return { by: 'tag', key: groupBy.slice(4) };
  return { by: (groupBy ?? 'model') as 'model' | 'firmware' | 'site' };
}

/** Luminaire data (docs/luminaire-data.md): a device's series and the fleet's energy per day. */
export function luminaireRoutes(services: Services): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/devices/:serial/luminaire',
      operationId: 'getDeviceLuminaireSeries',
      summary:
        "A device's luminaire series: every reading (`resolution=raw`), or hourly or daily roll-ups with energy and counters as deltas (never negative) and gauges as average and extremes. 404 for unknown serials and other accounts alike.",
      tag: 'Luminaire data',
      params: SerialParams,
      query: LuminaireSeriesQuery,
      responses: { 200: { description: 'The series, oldest first', schema: LuminaireSeriesSchema } },
      handler: async ({ actor, params, query: q }) => ({
        status: 200,
        body: presentSeries(
          await services.luminaire.series(actor, {
            serial: params.serial,
            from: q.from === undefined ? undefined : new Date(q.from),
            to: q.to === undefined ? undefined : new Date(q.to),
            resolution: q.resolution,
          }),
        ),
      }),
    }),
    defineRoute({
      method: 'get',
      path: '/energy',
      operationId: 'getFleetEnergy',
      summary:
        "The account's energy in kWh per UTC day, grouped by model, firmware version, site or a tag, each reading counted under what its device was when it was taken (a later upgrade does not move past energy). From the daily roll-ups, kept as long as the account.",
      tag: 'Luminaire data',
      query: EnergyQuery,
      responses: { 200: { description: 'kWh per day and group', schema: EnergySchema } },
      handler: async ({ actor, query: q }) => ({
        status: 200,
        body: presentEnergy(
          await services.luminaire.fleetEnergy(actor, { from: q.from, to: q.to, groupBy: grouping(q.group_by) }),
        ),
      }),
    }),
  ];
}
