import type { Actor } from '#core/shared/actor';
import type { Services } from '#core/services';
import type { User } from '#core/accounts/user.service';
import type { Loaders } from './loaders';
import type { LiveViews } from './live/live-views';

/** What every resolver gets: who is calling (scoped to one account), the services, per-request loaders. */
export interface GraphQLContext {
  actor: Actor;
  services: Services;
  loaders: Loaders;
  live: LiveViews;
  /** Set for portal users (session cookie). */
  user?: User;
  /** Session callers only: whether the request carried the right CSRF token (mutations need it). */
  csrfValid: boolean;
  /** API-key callers over HTTP: their requests per minute (mutation fields past the first cost more). */
  rateLimitPerMinute?: number;
}
