import { reactive } from 'vue';
import { ApiError, problemToError } from './api/rest';

export type Role = 'admin' | 'viewer';

interface SessionBody {
  user: { id: string; email: string; role: Role };
  account_id: string;
  csrf_token: string;
  expires_at: string;
}

/**
 * The logged-in portal user. The session itself is an httpOnly cookie the page cannot read;
 * this keeps what the page needs: who, which role, and the CSRF token for writes.
 */
export const session = reactive({
  loaded: false,
  user: null as SessionBody['user'] | null,
  accountId: '',
  csrfToken: '',
  /** Set when a request found the session gone; the router sends the user to the login page. */
  expired: false,
  get isAdmin(): boolean {
    return this.user?.role === 'admin';
  },
  expire(): void {
    if (!this.user) return;
    this.user = null;
    this.csrfToken = '';
    this.expired = true;
    for (const listener of expiryListeners) listener();
  },
});

const expiryListeners = new Set<() => void>();
export function onSessionExpired(listener: () => void): () => void {
  expiryListeners.add(listener);
  return () => expiryListeners.delete(listener);
}

function apply(body: SessionBody): void {
  session.user = body.user;
  session.accountId = body.account_id;
  session.csrfToken = body.csrf_token;
  session.expired = false;
}

/** Reads the current session once (page load); false when not logged in. */
export async function loadSession(): Promise<boolean> {
  try {
    const response = await fetch('/api/v1/session', {
      credentials: 'same-origin',
      headers: { accept: 'application/json' },
    });
    if (response.ok) apply((await response.json()) as SessionBody);
    else session.user = null;
  } catch {
    session.user = null;
  }
  session.loaded = true;
  return session.user !== null;
}

/** Logs in; throws the API's message (same for unknown email and wrong password). */
export async function login(email: string, password: string): Promise<void> {
  let response: Response;
  try {
    response = await fetch('/api/v1/session', {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'content-type': 'application/json', accept: 'application/json' },
      body: JSON.stringify({ email, password }),
    });
  } catch {
    throw new ApiError('The service cannot be reached. Check your connection and try again.', 0, 'network_error');
  }
  if (!response.ok) throw await problemToError(response);
  apply((await response.json()) as SessionBody);
  session.loaded = true;
}

export async function logout(): Promise<void> {
  await fetch('/api/v1/session', {
    method: 'DELETE',
    credentials: 'same-origin',
    headers: { 'x-csrf-token': session.csrfToken },
  }).catch(() => undefined);
  session.user = null;
  session.csrfToken = '';
  session.expired = false;
}
