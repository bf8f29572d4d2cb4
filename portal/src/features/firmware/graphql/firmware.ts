import { gql } from '@apollo/client';
import { DEPLOYMENT_SUMMARY, type DeploymentSummary, type DeploymentStatus } from '../../../shared/graphql/fragments';

export interface FirmwareVersion {
  id: string;
  model: string;
  version: string;
  releaseNotes: string;
  changelog: string;
  size: number;
  sha256: string;
  /** Uploaded with a signature by the account's signing key of the time. */
  signed: boolean;
  signingKeyId: string | null;
  createdAt: string;
}

export interface Model {
  id: string;
  name: string;
  description: string;
}

export const FIRMWARE_PAGE = gql`
  query FirmwarePage {
    models {
      id
      name
      description
    }
    firmwareVersions {
      id
      model
      version
      releaseNotes
      changelog
      size
      sha256
      signed
      signingKeyId
      createdAt
    }
    firmwareSigningKeys {
      current {
        keyId
      }
    }
  }
`;

export const REGISTER_MODEL = gql`
  mutation RegisterModel($input: RegisterModelInput!) {
    registerModel(input: $input) {
      id
      name
      description
    }
  }
`;

export interface DeploymentsData {
  deployments: {
    totalCount: number | null;
    edges: { node: DeploymentSummary }[];
    pageInfo: { hasNextPage: boolean; endCursor: string | null };
  };
}

export const DEPLOYMENTS = gql`
  query Deployments($first: Int!, $after: String, $status: DeploymentStatus) {
    deployments(first: $first, after: $after, status: $status) {
      totalCount
      edges {
        node {
          ...DeploymentSummary
        }
      }
      pageInfo {
        hasNextPage
        endCursor
      }
    }
  }
  ${DEPLOYMENT_SUMMARY}
`;

export interface DeploymentDetail extends DeploymentSummary {
  filter: { model: string | null; firmwareLt: string | null; status: string | null; serials: string[] | null };
  rollout: { batches: number[]; failureThresholdPercent: number | null; minBatchSuccessPercent: number } | null;
  respectMaintenanceWindow: boolean;
  parentDeploymentId: string | null;
  createdBy: string | null;
  startedAt: string | null;
  updatedAt: string;
}

const DEPLOYMENT_DETAIL_FIELDS = `
  ...DeploymentSummary
  filter { model firmwareLt status serials }
  rollout { batches failureThresholdPercent minBatchSuccessPercent }
  respectMaintenanceWindow
  parentDeploymentId
  createdBy
  startedAt
  updatedAt
`;

export const DEPLOYMENT = gql`
  query Deployment($id: ID!) {
    deployment(id: $id) { ${DEPLOYMENT_DETAIL_FIELDS} }
  }
  ${DEPLOYMENT_SUMMARY}
`;

export const DEPLOYMENT_PROGRESS_DETAIL = gql`
  subscription DeploymentProgressDetail($id: ID!) {
    deploymentProgress(id: $id) { ${DEPLOYMENT_DETAIL_FIELDS} }
  }
  ${DEPLOYMENT_SUMMARY}
`;

export interface UpdateRow {
  jobId: string;
  serial: string;
  fromVersion: string | null;
  targetVersion: string;
  state: string;
  progress: number;
  error: string | null;
  attempts: number;
  stateChangedAt: string;
}

export interface DeploymentUpdatesData {
  deployment: {
    id: string;
    updates: {
      totalCount: number;
      edges: { node: UpdateRow }[];
      pageInfo: { hasNextPage: boolean; endCursor: string | null };
    };
  } | null;
}

export const DEPLOYMENT_UPDATES = gql`
  query DeploymentUpdates($id: ID!, $first: Int!, $after: String, $state: UpdateState) {
    deployment(id: $id) {
      id
      updates(first: $first, after: $after, state: $state) {
        totalCount
        edges {
          node {
            jobId
            serial
            fromVersion
            targetVersion
            state
            progress
            error
            attempts
            stateChangedAt
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

const action = (name: string) => gql`
  mutation ${name[0]!.toUpperCase()}${name.slice(1)}($id: ID!) {
    ${name}(id: $id) { ${DEPLOYMENT_DETAIL_FIELDS} }
  }
  ${DEPLOYMENT_SUMMARY}
`;
export const DEPLOYMENT_ACTIONS = {
  pause: action('pauseDeployment'),
  resume: action('resumeDeployment'),
  cancel: action('cancelDeployment'),
  rollback: action('rollbackDeployment'),
  retry: action('retryFailedDeployment'),
};

export interface DeployInput {
  firmwareVersion: string;
  filter: { model?: string; firmwareLt?: string; status?: string; serials?: string[] };
  rollout?: { batches: number[]; failureThresholdPercent?: number };
  respectMaintenanceWindow: boolean;
}

export const DEPLOY_PREVIEW = gql`
  query DeployPreview($input: DeployFirmwareInput!) {
    deployPreview(input: $input) {
      targetCount
      model
      targetVersion
    }
  }
`;

export const DEPLOY_FIRMWARE = gql`
  mutation DeployFirmware($input: DeployFirmwareInput!) {
    deployFirmware(input: $input) { ${DEPLOYMENT_DETAIL_FIELDS} }
  }
  ${DEPLOYMENT_SUMMARY}
`;

export const DEPLOYMENT_STATUSES: DeploymentStatus[] = [
  'scheduled',
  'running',
  'paused',
  'completed',
  'completed_with_failures',
  'cancelled',
];
