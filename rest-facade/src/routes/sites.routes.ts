import { z } from 'zod';
import { defineRoute, type RouteDef } from '../route';
import type { Services } from '#core/services';
import type { CreateSiteInput, UpdateSiteInput } from '#core/sites/site-types';
import { IdParams } from '../schemas/common';
import {
  CreateSiteBody,
  ListSitesQuery,
  SiteListSchema,
  SiteSchema,
  UpdateSiteBody,
  type UpdateSiteBody as UpdateBody,
} from '../schemas/sites.schemas';
import { presentSite } from '../presenters/sites.presenter';
import { withBodyFieldNames } from '../body-field-names';

const One = z.object({ site: SiteSchema });

function toUpdate(body: UpdateBody): UpdateSiteInput {
  return {
    ...(body.name !== undefined ? { name: body.name } : {}),
    ...(body.time_zone !== undefined ? { timeZone: body.time_zone } : {}),
    ...(body.address !== undefined ? { address: body.address } : {}),
    ...(body.customer_ref !== undefined ? { customerRef: body.customer_ref } : {}),
    ...(body.maintenance_window !== undefined ? { maintenanceWindow: body.maintenance_window } : {}),
    ...(body.freezes !== undefined ? { freezes: body.freezes } : {}),
  };
}

/**
 * Sites (buildings): their time zone, maintenance window and update freezes (docs/ota.md
 * "Sites"). Another account's site id answers 404 like an unknown one.
 */
export function siteRoutes(services: Services): RouteDef[] {
  return [
    defineRoute({
      method: 'get',
      path: '/sites',
      operationId: 'listSites',
      summary: 'List the sites of the account in name order (cursor pages)',
      tag: 'Sites',
      query: ListSitesQuery,
      responses: { 200: { description: 'A page of sites', schema: SiteListSchema } },
      handler: async ({ actor, query: q }) => {
        const page = await services.sites.list(actor, {
          limit: q.limit,
          ...(q.cursor !== undefined ? { cursor: q.cursor } : {}),
          ...(q.q !== undefined ? { q: q.q } : {}),
        });
        return {
          status: 200,
          body: { sites: page.sites.map(presentSite), total: page.total, next_cursor: page.nextCursor },
        };
      },
    }),
    defineRoute({
      method: 'post',
      path: '/sites',
      operationId: 'createSite',
      summary: 'Create a site: name, IANA time zone, optional address, customer reference, window and freezes',
      tag: 'Sites',
      body: CreateSiteBody,
      responses: { 201: { description: 'Created', schema: One } },
      handler: async ({ actor, body }) => {
        const input: CreateSiteInput = {
          name: body.name,
          timeZone: body.time_zone,
          ...(body.address !== undefined ? { address: body.address } : {}),
          ...(body.customer_ref !== undefined ? { customerRef: body.customer_ref } : {}),
          ...(body.maintenance_window !== undefined ? { maintenanceWindow: body.maintenance_window } : {}),
          ...(body.freezes !== undefined ? { freezes: body.freezes } : {}),
        };
        const site = await withBodyFieldNames(() => services.sites.create(actor, input));
        return { status: 201, body: { site: presentSite(site) } };
      },
    }),
    defineRoute({
      method: 'get',
      path: '/sites/:id',
      operationId: 'getSite',
      summary: 'One site',
      tag: 'Sites',
      params: IdParams,
      responses: { 200: { description: 'The site', schema: One } },
      handler: async ({ actor, params }) => ({
        status: 200,
        body: { site: presentSite(await services.sites.get(actor, params.id)) },
      }),
    }),
    defineRoute({
      method: 'patch',
      path: '/sites/:id',
      operationId: 'updateSite',
      summary: 'Change a site (merge: absent fields stay, null clears, freezes replaces the list)',
      tag: 'Sites',
      params: IdParams,
      body: UpdateSiteBody,
      responses: { 200: { description: 'Updated', schema: One } },
      handler: async ({ actor, params, body }) => {
        const site = await withBodyFieldNames(() => services.sites.update(actor, params.id, toUpdate(body)));
        return { status: 200, body: { site: presentSite(site) } };
      },
    }),
    defineRoute({
      method: 'delete',
      path: '/sites/:id',
      operationId: 'deleteSite',
      summary: 'Delete a site; its devices stay, unassigned',
      tag: 'Sites',
      params: IdParams,
      responses: { 204: { description: 'Deleted' } },
      handler: async ({ actor, params }) => {
        await services.sites.delete(actor, params.id);
        return { status: 204 };
      },
    }),
  ];
}
