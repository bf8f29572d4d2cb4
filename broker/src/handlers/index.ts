import type { DevicePublishKind } from '#protocol/topics';
import type { TopicHandler } from './context';
import { handleHeartbeat } from './heartbeat';
import { handleStatus } from './status';
import { handleOtaProgress } from './ota-progress';
import { handleConfigReported } from './config-reported';
import { handleCredentialsAck } from './credentials-ack';
import { handleCsr } from './csr';
import { handleLuminaire } from './luminaire';
import { handleOtaLock } from './ota-lock';

/** One handler per device-to-service topic (Aedes style: one file per kind behind one table). */
export const HANDLERS: Record<DevicePublishKind, TopicHandler> = {
  heartbeat: handleHeartbeat,
  status: handleStatus,
  'ota/progress': handleOtaProgress,
  'config/reported': handleConfigReported,
  'credentials/ack': handleCredentialsAck,
  csr: handleCsr,
  luminaire: handleLuminaire,
  'ota/lock': handleOtaLock,
};
