import type { ServiceDeps } from '../service-deps';
import type { Db } from '../db/db';
import { requireAdmin, type Actor } from '../shared/actor';
import { DomainError, notFound } from '../shared/errors';
import { isUuid, newId } from '../shared/ids';
import { jsonCursor, keysetPage } from '../shared/cursor';
import {
  CreateSiteInput,
  ListSitesInput,
  SiteReference,
  UpdateSiteInput,
  SITE_LIMITS,
  type Site,
  type SiteRef,
} from './site-types';
import * as sites from './store/sites.store';

export const MAX_SITES_PER_ACCOUNT = 10_000;

/** A page ends at its last row's (name, id), written as a JSON pair. */
const siteCursor = jsonCursor<[string, string]>({
  read: (value) =>
    Array.isArray(value) &&
    value.length === 2 &&
    typeof value[0] === 'string' &&
    value[0].length <= SITE_LIMITS.name &&
    isUuid(value[1])
      ? [value[0], value[1]]
      : null,
});

/** Empty text clears an optional field, like null. */
const blankToNull = (value: string | null | undefined): string | null | undefined =>
  value === undefined ? undefined : value === null || value === '' ? null : value;

function nameTaken(name: string): DomainError {
  return new DomainError('already_exists', `A site named "${name}" already exists in this account.`, {
    errors: [{ field: 'name', message: 'is already the name of a site (names are unique, ignoring case)' }],
  });
}

const isNameConflict = (error: unknown): boolean =>
  typeof error === 'object' && error !== null && (error as { code?: string }).code === '23505';

/** A `site` reference that names no site of the account: the same answer for another account's. */
export function siteNotFound(ref: string, field = 'site'): DomainError {
  return new DomainError('not_found', `Site "${ref}" not found.`, {
    errors: [{ field, message: 'is not a site of this account (give its id or name)' }],
  });
}

/**
 * Sites (buildings) of an account: name, IANA zone, address, customer reference, local
 * maintenance window and update freezes (docs/ota.md "Sites"). Another account's site is "not
 * found", exactly like one that does not exist, and can never be assigned.
 */
export class SiteService {
  constructor(private readonly deps: ServiceDeps) {}

  async create(actor: Actor, raw: CreateSiteInput): Promise<Site> {
    requireAdmin(actor);
    const input = CreateSiteInput.parse(raw);
    try {
      return await this.deps.transaction(async (trx) => {
        const count = await sites.countSites(trx, { accountId: actor.accountId, q: null });
        if (count >= MAX_SITES_PER_ACCOUNT)
          throw new DomainError('conflict', `An account can have at most ${MAX_SITES_PER_ACCOUNT} sites.`);
        return sites.insertSite(trx, {
          id: newId(),
          accountId: actor.accountId,
          now: this.deps.clock.now(),
          site: {
            name: input.name,
            timeZone: input.timeZone,
            address: blankToNull(input.address) ?? null,
            customerRef: blankToNull(input.customerRef) ?? null,
            maintenanceWindow: input.maintenanceWindow ?? null,
            freezes: input.freezes ?? [],
          },
        });
      });
    } catch (error) {
      if (isNameConflict(error)) throw nameTaken(input.name);
      throw error;
    }
  }

  async get(actor: Actor, id: string): Promise<Site> {
    if (!isUuid(id)) throw notFound('Site');
    const site = await sites.selectSite(this.deps.knex, { accountId: actor.accountId, id });
    if (!site) throw notFound('Site');
    return site;
  }

  /** A page in name order; `total` counts every match. */
  async list(
    actor: Actor,
    raw: ListSitesInput = {},
  ): Promise<{ sites: Site[]; cursors: string[]; nextCursor: string | null; total: number }> {
    const input = ListSitesInput.parse(raw);
    const keys = input.cursor === undefined ? null : siteCursor.decode(input.cursor);
    const after = keys === null ? null : { name: keys[0], id: keys[1] };
    const q = input.q ?? null;
    const [rows, total] = await Promise.all([
      sites.selectSitePage(this.deps.knex, { accountId: actor.accountId, after, limit: input.limit + 1, q }),
      sites.countSites(this.deps.knex, { accountId: actor.accountId, q }),
    ]);
    const page = keysetPage(rows, input.limit, (s) => siteCursor.encode([s.name, s.id]));
    return { sites: page.items, cursors: page.cursors, nextCursor: page.nextCursor, total };
  }

  /** Merge semantics: absent fields stay, null clears; `freezes` replaces the list. */
  async update(actor: Actor, id: string, raw: UpdateSiteInput): Promise<Site> {
    requireAdmin(actor);
    const input = UpdateSiteInput.parse(raw);
    if (!isUuid(id)) throw notFound('Site');
    const patch: Partial<sites.SiteColumns> = {};
    if (input.name !== undefined) patch.name = input.name;
    if (input.timeZone !== undefined) patch.timeZone = input.timeZone;
    const address = blankToNull(input.address);
    if (address !== undefined) patch.address = address;
    const customerRef = blankToNull(input.customerRef);
    if (customerRef !== undefined) patch.customerRef = customerRef;
    if (input.maintenanceWindow !== undefined) patch.maintenanceWindow = input.maintenanceWindow;
    if (input.freezes !== undefined) patch.freezes = input.freezes;
    let updated: Site | null;
    try {
      updated = await sites.updateSite(this.deps.knex, {
        accountId: actor.accountId,
        id,
        now: this.deps.clock.now(),
        patch,
      });
    } catch (error) {
      if (isNameConflict(error) && input.name !== undefined) throw nameTaken(input.name);
      throw error;
    }
    if (!updated) throw notFound('Site');
    return updated;
  }

  /** Deletes the site; its devices stay, unassigned (and lose its window). */
  async delete(actor: Actor, id: string): Promise<Site> {
    requireAdmin(actor);
    if (!isUuid(id)) throw notFound('Site');
    const deleted = await this.deps.transaction((trx) => sites.deleteSite(trx, { accountId: actor.accountId, id }));
    if (!deleted) throw notFound('Site');
    return deleted;
  }

  /**
   * The account's site a `site` reference names: an id, or else a name (case-insensitive).
   * `not_found` (with the field) for anything else, another account's id included.
   */
  async resolve(
    actor: Pick<Actor, 'accountId'>,
    ref: string,
    options: { db?: Db; field?: string } = {},
  ): Promise<SiteRef> {
    return resolveSiteRef(options.db ?? this.deps.knex, actor.accountId, ref, options.field);
  }
}

/** {@link SiteService.resolve} for services that hold a transaction of their own. */
export async function resolveSiteRef(db: Db, accountId: string, raw: string, field = 'site'): Promise<SiteRef> {
  const parsed = SiteReference.safeParse(raw);
  if (!parsed.success) throw siteNotFound(raw, field);
  const ref = parsed.data;
  const found = await sites.selectSiteRef(db, { accountId, id: isUuid(ref) ? ref : null, name: ref });
  if (!found) throw siteNotFound(ref, field);
  return found;
}
