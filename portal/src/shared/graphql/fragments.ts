import { gql } from '@apollo/client';

export interface Money {
  amount: number;
  currency: string;
}

export type DeviceStatus = 'online' | 'offline' | 'updating';

export interface DeviceRow {
  serial: string;
  name: string;
  model: string;
  firmware: string | null;
  status: DeviceStatus;
  lastSeen: string | null;
  ip: string | null;
}

/** The columns of Fleet > Devices; also what deviceChanged pushes, so rows update live. */
export const DEVICE_ROW = gql`
  fragment DeviceRow on Device {
    serial
    name
    model
    firmware
    status
    lastSeen
    ip
  }
`;

export interface DeploymentCounts {
  queued: number;
  sent: number;
  downloading: number;
  installing: number;
  rebooting: number;
  succeeded: number;
  failed: number;
  timedOut: number;
  cancelled: number;
  rolledBack: number;
  superseded: number;
}

export type DeploymentStatus =
  'scheduled' | 'running' | 'paused' | 'completed' | 'completed_with_failures' | 'cancelled';

export interface DeploymentSummary {
  id: string;
  kind: 'deploy' | 'claim' | 'rollback' | 'retry';
  model: string;
  targetVersion: string;
  status: DeploymentStatus;
  targetCount: number;
  progress: number;
  currentBatch: number;
  pausedReason: string | null;
  createdAt: string;
  finishedAt: string | null;
  counts: DeploymentCounts;
}

export const DEPLOYMENT_SUMMARY = gql`
  fragment DeploymentSummary on Deployment {
    id
    kind
    model
    targetVersion
    status
    targetCount
    progress
    currentBatch
    pausedReason
    createdAt
    finishedAt
    counts {
      queued
      sent
      downloading
      installing
      rebooting
      succeeded
      failed
      timedOut
      cancelled
      rolledBack
      superseded
    }
  }
`;

export const ACTIVE_DEPLOYMENT_STATUSES: DeploymentStatus[] = ['scheduled', 'running', 'paused'];

export interface FleetEvent {
  id: string;
  type: string;
  subject: string | null;
  occurredAt: string;
  data: Record<string, unknown>;
}
