import { describe, it, expect } from 'vitest';
import { authenticateCaller, credentialsToRecheck, readCookie, requireCsrfFor, type CallerDeps } from '#edge/caller';
import { DomainError } from '#core/shared/errors';

const keyActor = { accountId: 'a1', role: 'admin' as const, principal: 'api_key:k1', apiKeyId: 'k1' };
const userActor = { accountId: 'a1', role: 'viewer' as const, principal: 'user:u1' };
const user = { id: 'u1', accountId: 'a1', email: 'u@example.test', role: 'viewer' as const };

const deps: CallerDeps = {
  apiKeys: {
    authenticate: (secret) =>
      Promise.resolve(secret === 'flk_good' ? { actor: keyActor, rateLimitPerMinute: 100 } : null),
  },
  users: {
    authenticateSession: (token) =>
      Promise.resolve(token === 'fls_good' ? { actor: userActor, user, csrfToken: 'csrf-1' } : null),
  } as CallerDeps['users'],
};

const code = async (work: Promise<unknown>) => {
  try {
    await work;
    return 'ok';
  } catch (error) {
    return error instanceof DomainError ? error.code : 'unexpected';
  }
};

describe('the caller at the HTTP edge', () => {
  it.each([
    ['a Bearer API key', { authorization: 'Bearer flk_good' }, 'ok'],
    ['a lower-case bearer scheme', { authorization: 'bearer flk_good' }, 'ok'],
    ['an unknown key', { authorization: 'Bearer flk_bad' }, 'unauthenticated'],
    [
      'another scheme, even with a good cookie',
      { authorization: 'Basic abc', cookie: 'fleet_session=fls_good' },
      'unauthenticated',
    ],
    ['an empty Authorization with a good cookie', { authorization: '', cookie: 'fleet_session=fls_good' }, 'ok'],
    ['a session cookie', { cookie: 'theme=dark; fleet_session=fls_good' }, 'ok'],
    ['an expired session', { cookie: 'fleet_session=fls_old' }, 'unauthenticated'],
    ['a cookie that is not percent-encoding', { cookie: 'fleet_session=%E0%A4%A' }, 'unauthenticated'],
    ['nothing', {}, 'unauthenticated'],
  ])('%s', async (_name, credentials, expected) => {
    expect(await code(authenticateCaller(credentials, deps))).toBe(expected);
  });

  it('keeps what each surface needs of the caller', async () => {
    const key = await authenticateCaller({ authorization: 'Bearer flk_good' }, deps);
    expect(key).toMatchObject({ actor: keyActor, rateLimitPerMinute: 100, csrfValid: true });
    expect(credentialsToRecheck(key)).toEqual({ authorization: 'Bearer flk_good' });
    const session = await authenticateCaller({ cookie: 'fleet_session=fls_good', csrfToken: 'csrf-1' }, deps);
    expect(session).toMatchObject({ actor: userActor, user, csrfValid: true });
    expect(session.rateLimitPerMinute).toBeUndefined();
    expect(await authenticateCaller(credentialsToRecheck(session), deps)).toMatchObject({ actor: userActor });
  });

  it.each([
    ['GET', false, 'ok'],
    ['HEAD', false, 'ok'],
    ['POST', false, 'csrf_failed'],
    ['DELETE', false, 'csrf_failed'],
    ['POST', true, 'ok'],
  ])('%s with a CSRF token that is valid: %s', async (method, csrfValid, expected) => {
    expect(await code(Promise.resolve().then(() => requireCsrfFor(method, { actor: userActor, csrfValid })))).toBe(
      expected,
    );
  });

  it('reads one cookie out of many', () => {
    expect(readCookie('a=1; fleet_session=x%20y; b=2', 'fleet_session')).toBe('x y');
    expect(readCookie('a=1', 'fleet_session')).toBeUndefined();
    expect(readCookie(undefined, 'fleet_session')).toBeUndefined();
  });
});
