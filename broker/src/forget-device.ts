import type { Aedes, PublishPacket } from 'aedes';
import { topics } from '#protocol/topics';
import { sessionStoreOf } from './aedes-internals';

/**
 * Forgets what the broker keeps for an unclaimed serial: its persistent session (subscriptions
 * and queued messages) and its retained configuration. Without this, whoever claimed the serial
 * next received the previous owner's configuration, queued and retained, before its own
 * (test/broker/config.test.ts), and a device that keeps the highest version kept it.
 */
export async function forgetDevice(aedes: Aedes, serial: string): Promise<void> {
  const persistence = sessionStoreOf(aedes);
  const session = { id: serial };
  // Subscriptions first, so the deleting publish below is not queued for the old session.
  await persistence.cleanSubscriptions(session);
  // As Aedes does for a clean session: every queued message is taken out of the queue.
  for await (const packet of persistence.outgoingStream(session))
    await persistence.outgoingClearMessageId(session, packet);
  // An empty retained message deletes the retained one [MQTT-3.3.1-10].
  const clear: PublishPacket = {
    cmd: 'publish',
    topic: topics.config(serial),
    payload: Buffer.alloc(0),
    qos: 0,
    retain: true,
    dup: false,
  };
  await new Promise<void>((resolve, reject) => aedes.publish(clear, (err) => (err ? reject(err) : resolve())));
}
