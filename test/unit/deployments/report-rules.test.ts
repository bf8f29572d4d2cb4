import { describe, expect, it } from 'vitest';
import {
  decideReport,
  foldReports,
  matchHeartbeats,
  type ActiveUpdate,
  type ProgressItem,
  type ReportDecision,
  type ReportedState,
  type ReportedUpdate,
} from '#core/deployments/report-rules';
import { UPDATE_STATES, type UpdateState } from '#core/deployments/deployment-types';
import { versionKey } from '#core/shared/version';
import type { OtaErrorCode } from '#protocol/payloads';

const REPORTED: ReportedState[] = ['downloading', 'installing', 'rebooting', 'succeeded', 'failed', 'rolled_back'];

/** The transition table (docs/ota.md), one row per current state, one column per report. */
const TABLE: Record<UpdateState, Record<ReportedState, ReportDecision>> = (() => {
  const finished = { kind: 'ignore', reason: 'finished' } as const;
  const notSent = { kind: 'ignore', reason: 'not_sent' } as const;
  const late = { kind: 'ignore', reason: 'out_of_order' } as const;
  const step = (state: 'downloading' | 'installing' | 'rebooting') => ({ kind: 'step', state }) as const;
  const success = { kind: 'reported_success' } as const;
  const failed = { kind: 'final', state: 'failed' } as const;
  const rolledBack = { kind: 'final', state: 'rolled_back' } as const;
  const all = (d: ReportDecision) => ({
    downloading: d,
    installing: d,
    rebooting: d,
    succeeded: d,
    failed: d,
    rolled_back: d,
  });
  return {
    queued: all(notSent),
    sent: {
      downloading: step('downloading'),
      installing: step('installing'),
      rebooting: step('rebooting'),
      succeeded: success,
      failed,
      rolled_back: rolledBack,
    },
    downloading: {
      downloading: step('downloading'),
      installing: step('installing'),
      rebooting: step('rebooting'),
      succeeded: success,
      failed,
      rolled_back: rolledBack,
    },
    installing: {
      downloading: late,
      installing: step('installing'),
      rebooting: step('rebooting'),
      succeeded: success,
      failed,
      rolled_back: rolledBack,
    },
    rebooting: {
      downloading: late,
      installing: late,
      rebooting: step('rebooting'),
      succeeded: success,
      failed,
      rolled_back: rolledBack,
    },
    succeeded: all(finished),
    failed: all(finished),
    timed_out: all(finished),
    cancelled: all(finished),
    rolled_back: all(finished),
  };
})();

describe('decideReport: the state machine of progress reports', () => {
  it.each(
    UPDATE_STATES.flatMap((current) =>
      REPORTED.map((reported) => [current, reported, TABLE[current][reported]] as const),
    ),
  )('%s + reported %s', (current, reported, decision) => {
    expect(decideReport(current, reported)).toEqual(decision);
  });
});

let n = 0;
function update(over: Partial<ReportedUpdate> = {}): ReportedUpdate {
  n++;
  return {
    id: `job-${n}`,
    accountId: 'acc',
    deviceId: `dev-${n}`,
    deploymentId: 'dep',
    serial: `SN-${n}`,
    targetVersion: '2.0.0',
    fromVersion: '1.0.0',
    state: 'sent',
    firmwareKey: versionKey('1.0.0'),
    ...over,
  };
}
const report = (
  u: ReportedUpdate,
  state: ReportedState,
  extra: { progress?: number; error?: string; errorCode?: OtaErrorCode } = {},
): ProgressItem => ({ accountId: u.accountId, deviceId: u.deviceId, report: { jobId: u.id, state, ...extra } });

const NOW = new Date('2024-01-15T12:00:00Z');
const timing = { stepTimeoutMs: 60_000, bootTimeoutMs: 600_000 };
const after = (ms: number) => new Date(NOW.getTime() + ms);

describe('foldReports: a batch of reports in arrival order', () => {
  it('follows the steps of one update through the batch: one write, every state passed, the last progress', () => {
    const u = update();
    const folded = foldReports(
      [u],
      [
        report(u, 'downloading', { progress: 10 }),
        report(u, 'downloading', { progress: 60 }),
        report(u, 'installing'),
        report(u, 'downloading'),
      ],
      { now: NOW, timing },
    );
    expect(folded.ignored).toEqual(['out_of_order']);
    expect(folded.finals).toEqual([]);
    expect(folded.steps).toEqual([
      {
        row: u,
        state: 'installing',
        progress: 60,
        transitions: ['downloading', 'installing'],
        reportedSuccess: false,
        deadline: after(timing.stepTimeoutMs),
      },
    ]);
  });

  it('a reported success waits for the boot on the target version: rebooting, progress 100, the boot timeout', () => {
    const u = update({ state: 'installing' });
    const folded = foldReports([u], [report(u, 'succeeded')], { now: NOW, timing });
    expect(folded.steps).toEqual([
      {
        row: u,
        state: 'rebooting',
        progress: 100,
        transitions: ['rebooting'],
        reportedSuccess: true,
        deadline: after(timing.bootTimeoutMs),
      },
    ]);
    expect(folded.finals).toEqual([]);
  });

  it('a reported success completes the update when the device already runs the target', () => {
    const u = update({ state: 'rebooting', firmwareKey: versionKey('2.0') });
    expect(foldReports([u], [report(u, 'downloading'), report(u, 'succeeded')], { now: NOW, timing })).toEqual({
      ignored: ['out_of_order'],
      steps: [],
      finals: [{ state: 'succeeded', error: null, errorCode: null, ids: [u.id] }],
    });
  });

  it.each([
    [
      'failed with the device error and code',
      'failed',
      { error: 'flash write error', errorCode: 'flash_write' },
      { state: 'failed', error: 'flash write error', errorCode: 'flash_write' },
    ],
    ['failed without either', 'failed', {}, { state: 'failed', error: 'failed', errorCode: null }],
    [
      'rolled back with a code but no error',
      'rolled_back',
      { errorCode: 'boot_failed' },
      { state: 'rolled_back', error: 'rolled back by the device', errorCode: 'boot_failed' },
    ],
  ] as const)('a final report ends the update: %s', (_, state, extra, final) => {
    const u = update({ state: 'downloading' });
    const folded = foldReports([u], [report(u, 'installing'), report(u, state, extra), report(u, 'rebooting')], {
      now: NOW,
      timing,
    });
    expect(folded.steps).toEqual([]);
    expect(folded.finals).toEqual([{ ...final, ids: [u.id] }]);
    // Once final, the later report of the same batch is too late.
    expect(folded.ignored).toEqual(['finished']);
  });

  it.each([
    [
      'an unknown job',
      (u: ReportedUpdate) => ({
        accountId: u.accountId,
        deviceId: u.deviceId,
        report: { jobId: 'no-such-job', state: 'downloading' as const },
      }),
    ],
    ['another device’s job', (u: ReportedUpdate) => ({ ...report(u, 'downloading'), deviceId: 'dev-other' })],
    ['another account’s job', (u: ReportedUpdate) => ({ ...report(u, 'downloading'), accountId: 'acc-other' })],
  ])('ignores %s as unknown_job', (_, item) => {
    const u = update();
    expect(foldReports([u], [item(u)], { now: NOW, timing })).toEqual({
      ignored: ['unknown_job'],
      steps: [],
      finals: [],
    });
  });

  it.each([
    ['queued', 'not_sent'],
    ['succeeded', 'finished'],
    ['timed_out', 'finished'],
    ['cancelled', 'finished'],
  ] as const)('ignores a report of a %s update (%s)', (state, reason) => {
    const u = update({ state });
    expect(foldReports([u], [report(u, 'failed')], { now: NOW, timing })).toEqual({
      ignored: [reason],
      steps: [],
      finals: [],
    });
  });

  it('groups the updates that end by outcome, message and code: one write per group', () => {
    const [a, b, c, d, e] = [update(), update(), update(), update({ firmwareKey: versionKey('2.0.0') }), update()];
    const folded = foldReports(
      [a, b, c, d, e],
      [
        report(a, 'failed', { error: 'e1', errorCode: 'download' }),
        report(b, 'failed', { error: 'e1', errorCode: 'download' }),
        report(c, 'failed', { error: 'e2' }),
        report(d, 'succeeded'),
        report(e, 'failed', { error: 'e1', errorCode: 'timeout' }),
      ],
      { now: NOW, timing },
    );
    expect(folded.finals).toEqual([
      { state: 'failed', error: 'e1', errorCode: 'download', ids: [a.id, b.id] },
      { state: 'failed', error: 'e2', errorCode: null, ids: [c.id] },
      { state: 'succeeded', error: null, errorCode: null, ids: [d.id] },
      { state: 'failed', error: 'e1', errorCode: 'timeout', ids: [e.id] },
    ]);
  });

  it('the same step again updates only the progress (no new transition)', () => {
    const u = update({ state: 'downloading' });
    const folded = foldReports([u], [report(u, 'downloading', { progress: 40 })], { now: NOW, timing });
    expect(folded.steps).toEqual([
      {
        row: u,
        state: 'downloading',
        progress: 40,
        transitions: [],
        reportedSuccess: false,
        deadline: after(timing.stepTimeoutMs),
      },
    ]);
  });
});

describe('matchHeartbeats: what a device running a version does to its unfinished updates', () => {
  let m = 0;
  const active = (over: Partial<ActiveUpdate>): ActiveUpdate => ({
    id: `u-${++m}`,
    deviceId: 'dev-1',
    accountId: 'acc',
    deploymentId: 'dep',
    state: 'sent',
    targetVersion: '2.0.0',
    ...over,
  });
  const beat = (firmware: string, over: { deviceId?: string; accountId?: string } = {}) => ({
    accountId: 'acc',
    deviceId: 'dev-1',
    firmware,
    ...over,
  });

  it.each([
    ['an in-flight update whose target it runs: boot confirmation', { state: 'rebooting' }, '2.0.0', 'confirm'],
    ['an in-flight update whose target it runs, spelled otherwise', { state: 'sent' }, '2.0', 'confirm'],
    ['an in-flight update of another version: nothing', { state: 'installing' }, '1.0.0', 'none'],
    ['a queued update whose target it runs: already installed', { state: 'queued' }, '2.0.0', 'already'],
    ['a queued update of another version: may be sent now', { state: 'queued' }, '1.0.0', 'waiting'],
    ['an update of another account: nothing', { state: 'queued', accountId: 'acc-other' }, '1.0.0', 'none'],
    [
      'an update of another account on its target: nothing',
      { state: 'rebooting', accountId: 'acc-other' },
      '2.0.0',
      'none',
    ],
  ] as const)('%s', (_, over, firmware, outcome) => {
    const u = active(over);
    const m = matchHeartbeats([u], [beat(firmware)]);
    const where = m.confirm.includes(u.id)
      ? 'confirm'
      : m.already.includes(u.id)
        ? 'already'
        : m.waiting.get('dep')?.includes(u.deviceId)
          ? 'waiting'
          : 'none';
    expect(where).toBe(outcome);
  });

  it('gathers the waiting devices per deployment, in order', () => {
    const updates = [
      active({ state: 'queued', deviceId: 'd1', deploymentId: 'p1' }),
      active({ state: 'queued', deviceId: 'd2', deploymentId: 'p2' }),
      active({ state: 'queued', deviceId: 'd3', deploymentId: 'p1' }),
    ];
    const m = matchHeartbeats(updates, [
      beat('1.0.0', { deviceId: 'd1' }),
      beat('1.0.0', { deviceId: 'd2' }),
      beat('1.0.0', { deviceId: 'd3' }),
    ]);
    expect([...m.waiting]).toEqual([
      ['p1', ['d1', 'd3']],
      ['p2', ['d2']],
    ]);
  });

  it('takes the last heartbeat of a device in the batch', () => {
    const u = active({ state: 'sent' });
    expect(matchHeartbeats([u], [beat('1.0.0'), beat('2.0.0')]).confirm).toEqual([u.id]);
  });
});
