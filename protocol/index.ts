export * from './topics';
export * from './payloads';
export * from './version';
