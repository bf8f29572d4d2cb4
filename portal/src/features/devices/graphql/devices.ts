import { gql } from '@apollo/client';
import { DEVICE_ROW, type DeviceRow, type DeviceStatus } from '../../../shared/graphql/fragments';

export interface DeviceFilter {
  model?: string;
  status?: DeviceStatus;
  firmware?: string;
  text?: string;
}

export type DeviceOrderField = 'SERIAL' | 'NAME' | 'MODEL' | 'FIRMWARE' | 'STATUS' | 'LAST_SEEN' | 'IP';
export interface DeviceOrder {
  field: DeviceOrderField;
  direction: 'ASC' | 'DESC';
}

export interface DevicePageData {
  devices: {
    totalCount: number;
    quota: number;
    edges: { node: DeviceRow }[];
    pageInfo: { hasNextPage: boolean; endCursor: string | null };
  };
}

export const DEVICE_PAGE = gql`
  query DevicePage($first: Int!, $after: String, $filter: DeviceFilter, $orderBy: DeviceOrder) {
    devices(first: $first, after: $after, filter: $filter, orderBy: $orderBy) {
      totalCount
      quota
      edges {
        node {
          ...DeviceRow
        }
      }
      pageInfo {
        hasNextPage
        endCursor
      }
    }
  }
  ${DEVICE_ROW}
`;

export interface DeviceChangeData {
  deviceChanged: { type: string; occurredAt: string; device: DeviceRow };
}

export const DEVICE_CHANGED = gql`
  subscription DeviceChanged($filter: DeviceFilter) {
    deviceChanged(filter: $filter) {
      type
      occurredAt
      device {
        ...DeviceRow
      }
    }
  }
  ${DEVICE_ROW}
`;

/** Options of the filter menus: registered models and the versions installed in the fleet. */
export interface FilterOptionsData {
  models: { name: string }[];
  fleetSummary: { byFirmware: { firmware: string | null; count: number }[] };
}

export const FILTER_OPTIONS = gql`
  query DeviceFilterOptions {
    models {
      id
      name
    }
    fleetSummary {
      byFirmware {
        firmware
        count
      }
    }
  }
`;

export interface DeviceConfig {
  heartbeatIntervalS: number | null;
  dimLevel: number | null;
  powerOnLevel: number | null;
  timezone: string | null;
  maintenanceWindow: { start: string; end: string } | null;
}

export interface DeviceUpdate {
  jobId: string;
  deploymentId: string;
  fromVersion: string | null;
  targetVersion: string;
  state: string;
  progress: number;
  error: string | null;
  stateChangedAt: string;
}

export interface DeviceDetail extends DeviceRow {
  connectivity: 'online' | 'offline';
  tags: Record<string, string>;
  uptimeS: number | null;
  rssi: number | null;
  claimedAt: string;
  update: DeviceUpdate | null;
  config: {
    desired: DeviceConfig;
    desiredVersion: number;
    reported: DeviceConfig | null;
    reportedVersion: number | null;
    inSync: boolean;
  };
}

const CONFIG_FIELDS = `heartbeatIntervalS dimLevel powerOnLevel timezone maintenanceWindow { start end }`;

export const DEVICE_DETAIL_FIELDS = gql`
  fragment DeviceDetail on Device {
    ...DeviceRow
    connectivity
    tags
    uptimeS
    rssi
    claimedAt
    update { jobId deploymentId fromVersion targetVersion state progress error stateChangedAt }
    config {
      desired { ${CONFIG_FIELDS} }
      desiredVersion
      reported { ${CONFIG_FIELDS} }
      reportedVersion
      inSync
    }
  }
  ${DEVICE_ROW}
`;

export const DEVICE_DETAIL = gql`
  query DeviceDetail($serial: String!) {
    device(serial: $serial) {
      ...DeviceDetail
    }
  }
  ${DEVICE_DETAIL_FIELDS}
`;

export const DEVICE_DETAIL_CHANGED = gql`
  subscription DeviceDetailChanged($filter: DeviceFilter) {
    deviceChanged(filter: $filter) {
      type
      occurredAt
      device {
        ...DeviceDetail
      }
    }
  }
  ${DEVICE_DETAIL_FIELDS}
`;

export interface HistoryEvent {
  id: string;
  type: string;
  occurredAt: string;
  data: Record<string, unknown>;
}

export interface DeviceHistoryData {
  device: {
    serial: string;
    history: { edges: { node: HistoryEvent }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } };
  } | null;
}

export const DEVICE_HISTORY = gql`
  query DeviceHistory($serial: String!, $first: Int!, $after: String) {
    device(serial: $serial) {
      serial
      history(first: $first, after: $after) {
        edges {
          node {
            id
            type
            occurredAt
            data
          }
        }
        pageInfo {
          hasNextPage
          endCursor
        }
      }
    }
  }
`;

export const UPDATE_DEVICE = gql`
  mutation UpdateDevice($serial: String!, $input: UpdateDeviceInput!) {
    updateDevice(serial: $serial, input: $input) {
      ...DeviceDetail
    }
  }
  ${DEVICE_DETAIL_FIELDS}
`;

export const ROTATE_CREDENTIALS = gql`
  mutation RotateDeviceCredentials($serial: String!) {
    rotateDeviceCredentials(serial: $serial) {
      serial
      username
      password
    }
  }
`;

export interface DeviceCertificate {
  fingerprintSha256: string;
  keyAlgorithm: string;
  notAfter: string;
  createdAt: string;
  revokedAt: string | null;
  revokedReason: 'revoked' | 'unclaimed' | null;
}

const DEVICE_CERTIFICATE_FIELDS = 'fingerprintSha256 keyAlgorithm notAfter createdAt revokedAt revokedReason';

export const DEVICE_CERTIFICATES = gql`
  query DeviceCertificates($serial: String!) {
    device(serial: $serial) { serial certificates { ${DEVICE_CERTIFICATE_FIELDS} } }
  }
`;

export const REVOKE_DEVICE_CERTIFICATE = gql`
  mutation RevokeDeviceCertificate($serial: String!, $fingerprint: String!) {
    revokeDeviceCertificate(serial: $serial, fingerprint: $fingerprint) { ${DEVICE_CERTIFICATE_FIELDS} }
  }
`;
