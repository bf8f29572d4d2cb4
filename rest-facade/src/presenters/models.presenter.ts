import type { FixtureModel } from '#core/models/model.service';

/** Domain fixture model -> wire format (snake_case). */
export const presentModel = (m: FixtureModel) => ({
  id: m.id,
  name: m.name,
  description: m.description,
  created_at: m.createdAt,
});
