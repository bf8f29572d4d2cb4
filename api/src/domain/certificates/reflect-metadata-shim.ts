/**
 * @peculiar/x509 registers its algorithm providers through tsyringe, which refuses to load
 * unless a Reflect metadata API exists (it reads constructor parameter types with
 * `Reflect.getMetadata`). The package that normally provides it (reflect-metadata) is not a
 * dependency here, so this installs the three functions tsyringe calls, backed by a WeakMap.
 * It steps aside when a real implementation was loaded first. Import it before
 * `@peculiar/x509` (x509.ts does).
 */
type MetadataTarget = object;

interface ReflectMetadata {
  getMetadata?: (key: unknown, target: MetadataTarget) => unknown;
  getOwnMetadata?: (key: unknown, target: MetadataTarget) => unknown;
  defineMetadata?: (key: unknown, value: unknown, target: MetadataTarget) => void;
}

const reflect = Reflect as typeof Reflect & ReflectMetadata;
if (typeof reflect.getMetadata !== 'function') {
  const store = new WeakMap<MetadataTarget, Map<unknown, unknown>>();
  reflect.getOwnMetadata = (key, target) => store.get(target)?.get(key);
  // Metadata is inherited along the prototype chain, as reflect-metadata's getMetadata does.
  reflect.getMetadata = (key, target) => {
    for (let current: MetadataTarget | null = target; current; current = Object.getPrototypeOf(current) as MetadataTarget | null) {
      const own = store.get(current);
      if (own?.has(key)) return own.get(key);
    }
    return undefined;
  };
  reflect.defineMetadata = (key, value, target) => {
    let own = store.get(target);
    if (!own) store.set(target, (own = new Map()));
    own.set(key, value);
  };
}

export {};
