export * from './topics';
export * from './payloads';
