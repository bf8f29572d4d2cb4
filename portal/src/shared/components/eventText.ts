import type { FleetEventFragment } from '../graphql/generated/operations';
import { jsonObject } from '../graphql/json';

/** One line a person understands for an event of the account. */
export function eventText(event: FleetEventFragment): string {
  const d = jsonObject(event.data);
  const subject = event.subject ?? '';
  const str = (v: unknown) => (typeof v === 'string' || typeof v === 'number' ? String(v) : '');
  switch (event.type) {
    case 'device.online':
      return `${subject} came online`;
    case 'device.offline':
      return `${subject} went offline`;
    case 'device.claimed':
      return `${subject || 'Devices'} claimed`;
    case 'device.updated':
      return `${subject} was changed`;
    case 'device.config_applied':
      return `${subject} applied its configuration`;
    case 'firmware.update.completed':
      return `${subject} updated to ${str(d.version ?? d.target_version ?? d.targetVersion)}`.trim();
    case 'firmware.update.failed':
      return `${subject} update failed${d.error ? `: ${str(d.error)}` : ''}`;
    case 'firmware.update.progress':
      return `${subject} update ${str(d.state)}`;
    case 'deployment.created':
      return `Deployment of ${str(d.target_version ?? d.targetVersion ?? d.version)} created`;
    case 'deployment.paused':
      return `Deployment paused${d.reason ? `: ${str(d.reason)}` : ''}`;
    case 'deployment.completed':
      return `Deployment finished (${str(d.status) || 'completed'})`;
    case 'allocation.threshold_reached':
      return `${str(d.kind) === 'budget' ? 'Budget' : 'Allowance'} reached ${str(d.percent)}%`;
    default:
      return `${event.type.replace(/[_.]/g, ' ')} ${subject}`.trim();
  }
}
