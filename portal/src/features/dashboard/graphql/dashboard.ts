import { gql } from '@apollo/client';
import {
  DEPLOYMENT_SUMMARY,
  type DeploymentSummary,
  type FleetEvent,
  type Money,
} from '../../../shared/graphql/fragments';

export interface FleetSummary {
  total: number;
  online: number;
  offline: number;
  updating: number;
  provisioned: number;
  quota: number;
  byModel: { model: string; count: number }[];
  budget: Money;
  spent: Money;
}

const SUMMARY_FIELDS = `
  total
  online
  offline
  updating
  provisioned
  quota
  byModel { model count }
  budget { amount currency }
  spent { amount currency }
`;

export interface DashboardData {
  fleetSummary: FleetSummary;
  allocation: {
    thresholds: number[];
    unitPrice: Money;
    remaining: number;
    thresholdsReached: { kind: string; percent: number; reachedAt: string }[];
  };
  deployments: { edges: { node: DeploymentSummary }[] };
  events: FleetEvent[];
}

export const DASHBOARD = gql`
  query Dashboard {
    fleetSummary { ${SUMMARY_FIELDS} }
    allocation {
      thresholds
      remaining
      unitPrice { amount currency }
      thresholdsReached { kind percent reachedAt }
    }
    deployments(first: 20) { edges { node { ...DeploymentSummary } } }
    events(first: 12) { id type subject occurredAt data }
  }
  ${DEPLOYMENT_SUMMARY}
`;

export const FLEET_SUMMARY_CHANGED = gql`
  subscription FleetSummaryChanged {
    fleetSummaryChanged { ${SUMMARY_FIELDS} }
  }
`;

export const EVENTS_SUBSCRIPTION = gql`
  subscription RecentEvents {
    events {
      id
      type
      subject
      occurredAt
      data
    }
  }
`;

export const DEPLOYMENT_PROGRESS = gql`
  subscription DeploymentProgress($id: ID!) {
    deploymentProgress(id: $id) {
      ...DeploymentSummary
    }
  }
  ${DEPLOYMENT_SUMMARY}
`;
