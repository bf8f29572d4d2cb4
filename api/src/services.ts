import type { ServiceDeps } from './domain/service-deps';
import { ApiKeyService } from './domain/accounts/api-key.service';
import { UserService } from './domain/accounts/user.service';
import { AccountService } from './domain/accounts/account.service';
import { IdempotencyService } from './domain/shared/idempotency.service';
import { ModelService } from './domain/models/model.service';
import { EventLogService } from './events/event-log.service';

/**
 * The one set of domain services. REST routes, GraphQL resolvers and MQTT handlers are thin
 * adapters over these; each area adds its services here.
 */
export function createServices(deps: ServiceDeps) {
  const apiKeys = new ApiKeyService(deps);
  const users = new UserService(deps);
  const accounts = new AccountService(deps, apiKeys);
  const idempotency = new IdempotencyService(deps);
  const models = new ModelService(deps);
  const events = new EventLogService(deps);
  return { apiKeys, users, accounts, idempotency, models, events };
}

export type Services = ReturnType<typeof createServices>;
