import type { ServiceDeps } from '../service-deps';
import { appendDeviceEvents } from './device-history';
import { appendEvents } from '../../events/outbox';

/**
 * A device reported on `config/reported` the configuration version it applied. Only the
 * current desired version is recorded (its content is the desired configuration of that
 * version); an older version is ignored, since the retained message will bring the newer one.
 */
export class DeviceConfigReportService {
  constructor(private readonly deps: ServiceDeps) {}

  async reportApplied(input: { deviceId: string; version: number }): Promise<'applied' | 'already' | 'stale'> {
    return this.deps.transaction(async (trx) => {
      const device = await trx('devices')
        .where({ id: input.deviceId })
        .first('id', 'account_id', 'serial', 'desired_config', 'desired_config_version', 'reported_config_version')
        .forUpdate();
      if (!device || Number(device.desired_config_version) !== input.version) return 'stale';
      if (device.reported_config_version !== null && Number(device.reported_config_version) === input.version) return 'already';
      const now = this.deps.clock.now();
      await trx('devices')
        .where({ id: input.deviceId })
        .update({ reported_config_version: input.version, reported_config: JSON.stringify(device.desired_config), updated_at: now });
      await appendDeviceEvents(trx, this.deps.clock, [
        { accountId: device.account_id, deviceId: device.id, type: 'config_applied', data: { version: input.version } },
      ]);
      await appendEvents(trx, this.deps.clock, [
        { accountId: device.account_id, type: 'device.config_applied', subject: device.serial, data: { device_id: device.id, serial: device.serial, version: input.version } },
      ]);
      return 'applied';
    });
  }
}
