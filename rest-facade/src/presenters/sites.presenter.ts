import type { Site } from '#core/sites/site-types';

/** Domain site -> wire format (snake_case). */
export const presentSite = (s: Site) => ({
  id: s.id,
  name: s.name,
  time_zone: s.timeZone,
  address: s.address,
  customer_ref: s.customerRef,
  maintenance_window: s.maintenanceWindow,
  freezes: s.freezes,
  device_count: s.deviceCount,
  created_at: s.createdAt,
  updated_at: s.updatedAt,
});
