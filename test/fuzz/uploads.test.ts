import fc from 'fast-check';
import { describe, it, expect, beforeAll, afterAll } from 'vitest';
import { FuzzService } from './harness/service-child';
import { FuzzRunner, fuzzSeed, judgeHttp, type CaseResult } from './harness/fuzz';
import { exchange, parseHttp, request } from './harness/wire';
import { asWire, nastyString, sometimes } from './harness/arbitraries';
import { ifStarted } from '../helpers/teardown';

/**
 * Fuzzes the one multipart route, POST /api/v1/firmware/versions (busboy, admin key): forms of
 * text fields and file parts in any order, cut at every boundary position (before, inside and
 * after each delimiter, the part headers and the closing delimiter) and sent three ways: as a
 * complete request whose Content-Length says the body ends there, as a connection the client
 * drops after those bytes, and chunked. Each is a 4xx (or, when complete, a 201/409/422), never
 * a 5xx or a dead process, and no `.tmp-*` file or descriptor of the upload stays behind.
 * MAX_FIRMWARE_BYTES is small here so that the size limit races with the cuts too.
 */

const MAX_FIRMWARE_BYTES = 2048;

interface Part {
  name: string;
  filename: string | null;
  contentType: string | null;
  disposition: 'normal' | 'missing' | 'unquoted' | 'star';
  content: string;
}

interface Form {
  boundary: string;
  parts: Part[];
  closing: 'normal' | 'missing' | 'no-crlf' | 'epilogue';
  preamble: string;
}

type Mode = 'declared-end' | 'hang-up' | 'hang-up-late' | 'chunked';

interface UploadCase {
  form: Form;
  /** Which cut position (an index into `cutPositions`), or null for the whole body. */
  cut: number | null;
  mode: Mode;
  auth: 'admin' | 'none' | 'garbage';
}

const versionArb = fc.oneof(
  fc.tuple(fc.nat(20), fc.nat(20), fc.nat(99)).map(([a, b, c]) => `${a}.${b}.${c}`),
  nastyString(20),
);

const fileContent = fc.oneof(
  { arbitrary: fc.uint8Array({ maxLength: 600 }).map((b) => Buffer.from(b).toString('latin1')), weight: 4 },
  { arbitrary: fc.integer({ min: 1500, max: 4000 }).map((n) => 'F'.repeat(n)), weight: 1 },
  { arbitrary: fc.constant(''), weight: 1 },
);

function partArb(): fc.Arbitrary<Part> {
  const text = (name: fc.Arbitrary<string>, value: fc.Arbitrary<string>) =>
    fc.record({
      name,
      filename: fc.constant(null),
      contentType: sometimes(fc.constantFrom('text/plain', 'text/plain; charset=utf-16', 'application/json'), 0.2),
      disposition: fc.constantFrom<Part['disposition']>('normal', 'normal', 'normal', 'normal', 'unquoted', 'star'),
      content: value.map(asWire),
    });
  return fc.oneof(
    { arbitrary: text(fc.constant('model'), fc.oneof(fc.constant('LX-200'), nastyString(20))), weight: 3 },
    { arbitrary: text(fc.constant('version'), versionArb), weight: 3 },
    { arbitrary: text(fc.constantFrom('release_notes', 'changelog'), nastyString(60)), weight: 2 },
    { arbitrary: text(fc.constant('signature'), nastyString(60)), weight: 1 },
    {
      arbitrary: text(
        fc.oneof(fc.constantFrom('extra', '__proto__', 'constructor', 'file', ''), nastyString(10)),
        nastyString(20),
      ),
      weight: 1,
    },
    {
      arbitrary: fc.record({
        name: fc.constantFrom('file', 'file', 'file', 'file', 'file', 'file', 'file', 'file', 'binary', '__proto__'),
        filename: fc.oneof(
          fc.constant('fw.bin'),
          fc.constantFrom('', '../../../etc/passwd', 'a"b.bin', 'C:\\fw.bin', '\u0000.bin'),
          nastyString(20).map(asWire),
        ),
        contentType: sometimes(
          fc.constantFrom('application/octet-stream', 'text/plain', 'multipart/mixed; boundary=x'),
          0.8,
        ),
        disposition: fc.constantFrom<Part['disposition']>(
          'normal',
          'normal',
          'normal',
          'normal',
          'normal',
          'normal',
          'missing',
          'star',
        ),
        content: fileContent,
      }),
      weight: 5,
    },
  );
}

const formArb: fc.Arbitrary<Form> = fc.record({
  boundary: fc.oneof(
    { arbitrary: fc.stringMatching(/^[A-Za-z0-9'()+_,./:=?-]{1,40}$/), weight: 6 },
    {
      arbitrary: fc.constantFrom('x', '----WebKitFormBoundary7MA4YWxkTrZu0gW', 'a'.repeat(70), 'a'.repeat(200)),
      weight: 2,
    },
  ),
  parts: fc.array(partArb(), { minLength: 0, maxLength: 7 }),
  closing: fc.constantFrom<Form['closing']>('normal', 'normal', 'normal', 'normal', 'missing', 'no-crlf', 'epilogue'),
  preamble: fc.constantFrom('', '', '', 'preamble\r\n', '\r\n'),
});

function dispositionOf(p: Part): string | null {
  const file = p.filename !== null ? `; filename="${p.filename}"` : '';
  switch (p.disposition) {
    case 'normal':
      return `Content-Disposition: form-data; name="${p.name}"${file}`;
    case 'unquoted':
      return `Content-Disposition: form-data; name=${p.name}${p.filename !== null ? `; filename=${p.filename}` : ''}`;
    case 'star':
      return `Content-Disposition: form-data; name="${p.name}"; filename*=UTF-8''${encodeURIComponent(p.filename ?? 'x')}`;
    case 'missing':
      return null;
  }
}

/** The whole multipart body (latin1), and the positions around every delimiter and part-header end. */
function renderForm(form: Form): { body: string; cuts: number[] } {
  let body = form.preamble;
  for (const p of form.parts) {
    const headers = [dispositionOf(p), p.contentType !== null ? `Content-Type: ${p.contentType}` : null].filter(
      (h): h is string => h !== null,
    );
    body += `--${form.boundary}\r\n${headers.map((h) => `${h}\r\n`).join('')}\r\n${p.content}\r\n`;
  }
  if (form.closing === 'normal') body += `--${form.boundary}--\r\n`;
  else if (form.closing === 'no-crlf') body += `--${form.boundary}--`;
  else if (form.closing === 'epilogue') body += `--${form.boundary}--\r\nepilogue`;
  const cuts = new Set<number>([0, body.length]);
  const mark = (at: number, len: number) => {
    for (const d of [-2, -1, 0, 1, Math.floor(len / 2), len - 1, len, len + 1, len + 2, len + 4])
      if (at + d >= 0 && at + d <= body.length) cuts.add(at + d);
  };
  for (let at = body.indexOf(`--${form.boundary}`); at >= 0; at = body.indexOf(`--${form.boundary}`, at + 1))
    mark(at, form.boundary.length + 2);
  for (let at = body.indexOf('\r\n\r\n'); at >= 0; at = body.indexOf('\r\n\r\n', at + 1)) mark(at, 4);
  return { body, cuts: [...cuts].sort((a, b) => a - b) };
}

function render(
  c: UploadCase,
  apiKey: string,
): { head: string; sent: string; declared: number; hangUp: boolean; lateMs: number } {
  const { body, cuts } = renderForm(c.form);
  const end = c.cut === null ? body.length : cuts[c.cut % cuts.length]!;
  const part = body.slice(0, end);
  const auth =
    c.auth === 'admin'
      ? `Authorization: Bearer ${apiKey}\r\n`
      : c.auth === 'garbage'
        ? 'Authorization: Bearer flk_nope\r\n'
        : '';
  // RFC 2046 allows ( ) + , / : = ? in a boundary; in the header they need quotes (RFC 2045).
  const param = /^[A-Za-z0-9_.'-]+$/.test(c.form.boundary) ? c.form.boundary : `"${c.form.boundary}"`;
  const type = `Content-Type: multipart/form-data; boundary=${param}\r\n`;
  const start = `POST /api/v1/firmware/versions HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n${auth}${type}`;
  switch (c.mode) {
    case 'declared-end':
      return {
        head: `${start}Content-Length: ${part.length}\r\n\r\n`,
        sent: part,
        declared: part.length,
        hangUp: false,
        lateMs: 0,
      };
    case 'hang-up':
    case 'hang-up-late':
      return {
        head: `${start}Content-Length: ${body.length}\r\n\r\n`,
        sent: part,
        declared: body.length,
        hangUp: part.length < body.length,
        lateMs: c.mode === 'hang-up-late' ? 60 : 0,
      };
    case 'chunked': {
      const chunk = part.length > 0 ? `${part.length.toString(16)}\r\n${part}\r\n` : '';
      return {
        head: `${start}Transfer-Encoding: chunked\r\n\r\n`,
        sent: `${chunk}0\r\n\r\n`,
        declared: -1,
        hangUp: false,
        lateMs: 0,
      };
    }
  }
}

const show = (c: UploadCase, apiKey: string): string => {
  const r = render(c, apiKey);
  const how = r.hangUp
    ? `then the client drops the connection${r.lateMs ? ` ${r.lateMs} ms later` : ''} (declared ${r.declared} bytes, sent ${r.sent.length})`
    : 'then the client waits for the answer';
  return `raw request (latin1) ${JSON.stringify(r.head + r.sent)}, ${how}`;
};

async function sendUpload(port: number, c: UploadCase, apiKey: string): Promise<CaseResult> {
  const r = render(c, apiKey);
  const raw = r.head + r.sent;
  const bytes = Buffer.from(raw, 'latin1');
  const ex = r.hangUp
    ? await exchange(port, bytes, { after: 'destroy', settleMs: r.lateMs })
    : await exchange(port, bytes, { after: 'end-when-idle', timeoutMs: 10_000 });
  const answer = parseHttp(ex.data);
  const problems = judgeHttp(answer, raw);
  if (!r.hangUp && ex.end === 'timeout')
    problems.push('no answer: the service held the connection for seconds after the client had sent everything');
  const outcome = r.hangUp
    ? 'dropped by client'
    : answer.status !== null
      ? String(answer.status)
      : 'closed without answer';
  return { problems, clientPorts: ex.localPort ? [ex.localPort] : [], outcome };
}

const uploadCaseArb: fc.Arbitrary<UploadCase> = fc.record({
  form: formArb,
  cut: sometimes(fc.nat(), 0.85),
  mode: fc.constantFrom<Mode>('declared-end', 'declared-end', 'declared-end', 'hang-up', 'hang-up-late', 'chunked'),
  auth: fc.constantFrom<UploadCase['auth']>('admin', 'admin', 'admin', 'admin', 'admin', 'admin', 'none', 'garbage'),
});

describe('fuzz: multipart firmware uploads cut anywhere', () => {
  let service: FuzzService;
  let runner: FuzzRunner;

  beforeAll(async () => {
    service = await FuzzService.start({ MAX_FIRMWARE_BYTES: String(MAX_FIRMWARE_BYTES) });
    runner = new FuzzRunner(service, fuzzSeed());
    const model = await request(service.httpPort, {
      method: 'POST',
      path: '/api/v1/models',
      headers: { authorization: `Bearer ${service.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'LX-200' }),
    });
    expect(model.status, model.body).toBe(201);
  }, 180_000);
  afterAll(async () => ifStarted(service)?.close());

  it('finds the boundary positions of a form', () => {
    const { body, cuts } = renderForm({
      boundary: 'b',
      preamble: '',
      closing: 'normal',
      parts: [{ name: 'model', filename: null, contentType: null, disposition: 'normal', content: 'LX' }],
    });
    expect(body).toBe('--b\r\nContent-Disposition: form-data; name="model"\r\n\r\nLX\r\n--b--\r\n');
    expect(cuts).toContain(0);
    expect(cuts).toContain(body.indexOf('--b--'));
    expect(cuts).toContain(body.length);
  });

  it('answers forms cut at a boundary position with a 4xx and leaves no temp file', { timeout: 600_000 }, async () => {
    await runner.run({
      name: 'multipart uploads cut at a boundary',
      runs: 400,
      batchSize: 50,
      arbitrary: uploadCaseArb,
      show: (c) => show(c, service.apiKey),
      send: (c) => sendUpload(service.httpPort, c, service.apiKey),
    });
  });

  it('survives one form cut at every one of its boundary positions in turn', { timeout: 600_000 }, async () => {
    await runner.run({
      name: 'multipart sweep over every boundary position',
      runs: 20,
      batchSize: 5,
      arbitrary: fc.record({
        form: formArb.filter((f) => f.parts.some((p) => p.name === 'file' && p.filename !== null)),
        mode: fc.constantFrom<Mode>('declared-end', 'hang-up', 'chunked'),
      }),
      show: ({ form, mode }) => `every cut of: ${show({ form, mode, cut: null, auth: 'admin' }, service.apiKey)}`,
      send: async ({ form, mode }) => {
        const { cuts } = renderForm(form);
        const results: CaseResult[] = [];
        for (let cut = 0; cut < cuts.length; cut++) {
          const c: UploadCase = { form, mode, cut, auth: 'admin' };
          const result = await sendUpload(service.httpPort, c, service.apiKey);
          results.push({ ...result, problems: result.problems.map((p) => `cut at byte ${cuts[cut]!}: ${p}`) });
          if (!service.isAlive()) {
            results.push({
              problems: [`the service ended right after the cut at byte ${cuts[cut]!}`],
              clientPorts: [],
              outcome: '',
            });
            break;
          }
        }
        return {
          problems: results.flatMap((r) => r.problems),
          clientPorts: results.flatMap((r) => r.clientPorts),
          outcome: `${mode}, ${results.length} cuts`,
        };
      },
    });
  });
});
