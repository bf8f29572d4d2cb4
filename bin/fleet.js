#!/usr/bin/env node
// Package bin for the operator tool: runs the TypeScript source through tsx.
import { register } from 'tsx/esm/api';
register();
await import('#api/cli/fleet');
