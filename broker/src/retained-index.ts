import { Readable } from 'node:stream';
import memoryPersistence from 'aedes-persistence';
import { retainedStoreOf } from './aedes-internals';

/**
 * Aedes's in-memory persistence answers every SUBSCRIBE by scanning ALL retained messages with a
 * fresh topic matcher (`retainedMessagesByPattern`). With one retained configuration per device
 * that is O(devices) per subscription, O(devices²) for a reconnect storm: profiled here at 2,000
 * devices, it was the largest cost of the whole ramp. Devices may only subscribe to exact topics
 * (no wildcards: the ACL refuses them), so exact filters are answered from a topic index kept
 * beside the store; filters with wildcards still go to the original scan.
 */
export function createIndexedMemoryPersistence(): unknown {
  type Packet = { topic: string; payload: Buffer | string };
  const persistence = memoryPersistence();
  const store = retainedStoreOf(persistence);
  const byTopic = new Map<string, Packet>();
  const storeRetained = store.storeRetained.bind(store);
  const combi = store.createRetainedStreamCombi.bind(store);
  store.storeRetained = (packet, cb) => {
    // Same semantics as the store: an empty payload deletes the retained message [MQTT-3.3.1-10].
    if (packet.payload.length === 0) byTopic.delete(packet.topic);
    else byTopic.set(packet.topic, { ...packet });
    return storeRetained(packet, cb);
  };
  store.createRetainedStreamCombi = (patterns) => {
    if (patterns.some((p) => p.includes('+') || p.includes('#'))) return combi(patterns);
    const found = patterns.map((p) => byTopic.get(p)).filter((p): p is Packet => p !== undefined);
    return Readable.from(found);
  };
  return persistence;
}
