import { gql } from '@apollo/client';

export interface ApiKey {
  id: string;
  name: string;
  prefix: string;
  role: 'admin' | 'viewer';
  lastUsedAt: string | null;
  revokedAt: string | null;
  createdAt: string;
}
const API_KEY_FIELDS = 'id name prefix role lastUsedAt revokedAt createdAt';
export const API_KEYS = gql`query ApiKeys { apiKeys { ${API_KEY_FIELDS} } }`;
export const CREATE_API_KEY = gql`
  mutation CreateApiKey($input: CreateApiKeyInput!) { createApiKey(input: $input) { secret apiKey { ${API_KEY_FIELDS} } } }
`;
export const REVOKE_API_KEY = gql`mutation RevokeApiKey($id: ID!) { revokeApiKey(id: $id) { ${API_KEY_FIELDS} } }`;

export interface Webhook {
  id: string;
  url: string;
  eventTypes: string[];
  enabled: boolean;
  disabledReason: string | null;
  failingSince: string | null;
  secretPrefix: string;
  createdAt: string;
}
const WEBHOOK_FIELDS = 'id url eventTypes enabled disabledReason failingSince secretPrefix createdAt';
export const WEBHOOKS = gql`query Webhooks { webhooks { ${WEBHOOK_FIELDS} } webhookEventTypes }`;
export const CREATE_WEBHOOK = gql`
  mutation CreateWebhook($input: CreateWebhookInput!) { createWebhook(input: $input) { secret webhook { ${WEBHOOK_FIELDS} } } }
`;
export const UPDATE_WEBHOOK = gql`mutation UpdateWebhook($id: ID!, $input: UpdateWebhookInput!) { updateWebhook(id: $id, input: $input) { ${WEBHOOK_FIELDS} } }`;
export const DELETE_WEBHOOK = gql`
  mutation DeleteWebhook($id: ID!) {
    deleteWebhook(id: $id) {
      id
    }
  }
`;

export interface WebhookDelivery {
  id: string;
  eventId: string;
  eventType: string;
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  nextAttemptAt: string | null;
  lastStatusCode: number | null;
  lastError: string | null;
  lastDurationMs: number | null;
  deliveredAt: string | null;
  createdAt: string;
}
const DELIVERY_FIELDS =
  'id eventId eventType status attempts nextAttemptAt lastStatusCode lastError lastDurationMs deliveredAt createdAt';
export const WEBHOOK_DELIVERIES = gql`
  query WebhookDeliveries($webhookId: ID!, $first: Int!, $after: String, $status: WebhookDeliveryStatus) {
    webhookDeliveries(webhookId: $webhookId, first: $first, after: $after, status: $status) {
      edges { node { ${DELIVERY_FIELDS} } }
      pageInfo { hasNextPage endCursor }
    }
  }
`;
export const REDELIVER = gql`mutation Redeliver($id: ID!) { redeliverWebhookDelivery(id: $id) { ${DELIVERY_FIELDS} } }`;

export interface User {
  id: string;
  email: string;
  role: 'admin' | 'viewer';
  createdAt: string;
}
export const USERS = gql`
  query Users {
    users {
      id
      email
      role
      createdAt
    }
  }
`;
export const CREATE_USER = gql`
  mutation CreateUser($input: CreateUserInput!) {
    createUser(input: $input) {
      id
      email
      role
      createdAt
    }
  }
`;

export interface FirmwareSigningKey {
  keyId: string;
  algorithm: string;
  publicKey: string;
  createdAt: string;
  retiredAt: string | null;
}
export interface FirmwareSigningKeys {
  current: FirmwareSigningKey | null;
  retired: FirmwareSigningKey[];
}
const SIGNING_KEY_FIELDS = 'keyId algorithm publicKey createdAt retiredAt';
const SIGNING_KEYS_FIELDS = `current { ${SIGNING_KEY_FIELDS} } retired { ${SIGNING_KEY_FIELDS} }`;
export const FIRMWARE_SIGNING_KEYS = gql`query FirmwareSigningKeys { firmwareSigningKeys { ${SIGNING_KEYS_FIELDS} } }`;
export const REGISTER_FIRMWARE_SIGNING_KEY = gql`
  mutation RegisterFirmwareSigningKey($input: RegisterFirmwareSigningKeyInput!) { registerFirmwareSigningKey(input: $input) { ${SIGNING_KEYS_FIELDS} } }
`;
