import { z } from 'zod';
import { HOLD_REASONS } from '#core/deployments/update-locks';

/** Wire schemas of a device's update lock and the emergency-lighting flags (docs/ota.md "Update locks"). */

export const SetDeviceEmergencyBody = z
  .strictObject({
    emergency_lighting: z.boolean().nullable().describe("The device's own flag; null: its model's flag applies"),
  })
  .meta({ id: 'SetDeviceEmergencyLighting' });

export const SetModelEmergencyBody = z
  .strictObject({ emergency_lighting: z.boolean() })
  .meta({ id: 'SetModelEmergencyLighting' });

export const ModelNameParams = z.object({ name: z.string().min(1).max(64) });

export const DeviceUpdateLockSchema = z
  .object({
    serial: z.string(),
    lock: z
      .object({
        reason: z.enum(HOLD_REASONS),
        until: z.string(),
        requested_until: z.string().nullable().describe('What the device asked for, before the 24 h cap'),
        set_at: z.string().nullable(),
      })
      .nullable()
      .describe('The lock in force now; null when none'),
    last_duration_test_at: z.string().nullable(),
    emergency_lighting: z.object({
      device: z.boolean().nullable(),
      model: z.boolean(),
      effective: z.boolean(),
    }),
  })
  .meta({ id: 'DeviceUpdateLock' });

export const ModelEmergencySchema = z
  .object({ model: z.string(), emergency_lighting: z.boolean() })
  .meta({ id: 'ModelEmergencyLighting' });
