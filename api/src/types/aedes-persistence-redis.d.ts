// aedes-persistence-redis ships no types; only the factory is used (its result goes to Aedes,
// whose own `persistence` option is untyped).
declare module 'aedes-persistence-redis' {
  import type { Redis, RedisOptions } from 'ioredis';
  function aedesPersistenceRedis(
    options?: RedisOptions & { conn?: Redis; maxSessionDelivery?: number; packetTTL?: (packet: unknown) => number },
  ): unknown;
  export default aedesPersistenceRedis;
}
