export * from './topics';
export * from './payloads';
export * from './credential-payloads';
export * from './version';
export * from './lock-payloads';
export * from './luminaire-fields';
